/*
 * warnings.c - the library's warnings (attn_run.h, attn_warning) as
 * attnrun words them: each kind with the option that fixes it, one line
 * `attnrun: warning: ...` each, kept while the run goes on and printed
 * when it has succeeded (docs/warnings.md lists them).
 */
#include "attnrun/attnrun.h"

#include <stdarg.h>
#include <stdio.h>

static void add_line(attnrun_warnings *all, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void add_line(attnrun_warnings *all, const char *format, ...)
{
    if (all->count >= ATTN_WARN_COUNT)
        return;
    va_list args;
    va_start(args, format);
    vsnprintf(all->lines[all->count++], sizeof all->lines[0], format, args);
    va_end(args);
}

/* "W_Q and W_K" or "--wq and --wk": the names (or the options) of the
 * weights the warning names, in the input table's order. */
static void list_weights(char *buf, size_t len, const attn_warning *w, bool options)
{
    size_t count = 0, shown = 0, used = 0;
    for (int i = 0; i < ATTN_IN_COUNT; i++)
        count += (w->inputs >> i) & 1u;
    buf[0] = '\0';
    for (int i = 0; i < ATTN_IN_COUNT && used < len; i++) {
        if (!((w->inputs >> i) & 1u))
            continue;
        const char *sep = shown == 0 ? "" : shown + 1 == count ? " and " : ", ";
        if (options)
            used += (size_t)snprintf(buf + used, len - used, "%s--%s", sep,
                                     attn_input_spec_of((attn_input)i)->key);
        else
            used += (size_t)snprintf(buf + used, len - used, "%s%s", sep,
                                     w->names[i] != NULL ? w->names[i] : "?");
        shown++;
    }
}

void attnrun_warn(const attn_warning *w, void *context)
{
    attnrun_warnings *all = context;
    char names[256], options[128];
    switch (w->kind) {
    case ATTN_WARN_MASK_HIDES_ALL:
        if (!w->inverted)
            add_line(all, "mask %s hides every key of %zu of %zu item%s, whose weights are all 0; "
                     "for a torch key_padding_mask (nonzero = padding) use --mask-invert",
                     w->mask, w->items, w->batch, w->batch == 1 ? "" : "s");
        else
            add_line(all, "mask %s, inverted by --mask-invert, hides every key of %zu of %zu "
                     "item%s, whose weights are all 0; for a mask whose nonzero entries are the "
                     "keys to attend (Hugging Face's attention_mask) drop --mask-invert",
                     w->mask, w->items, w->batch, w->batch == 1 ? "" : "s");
        break;
    case ATTN_WARN_ZERO_WEIGHTS: {
        const bool several = (w->inputs & (w->inputs - 1)) != 0;
        list_weights(names, sizeof names, w, false);
        list_weights(options, sizeof options, w, true);
        add_line(all, "weight%s %s %s all zeros (a failed export?); name the right dataset%s "
                 "with %s", several ? "s" : "", names, several ? "are" : "is", several ? "s" : "",
                 options);
        break;
    }
    case ATTN_WARN_SCALE_RECIPROCAL:
        if (w->squared)
            add_line(all, "--scale %.9g equals d_k = %zu; the usual scale is 1/sqrt(d_k) = %g (the "
                     "default without --scale)", w->scale, w->d_k, w->usual);
        else
            add_line(all, "--scale %.9g equals sqrt(d_k) = %g (d_k = %zu); the usual scale is "
                     "1/sqrt(d_k) = %g (the default without --scale)", w->scale,
                     1.0 / w->usual, w->d_k, w->usual);
        break;
    case ATTN_WARN_ROWS_SEE_NO_KEY:
        add_line(all, "mask %s%s%s leaves %zu of %zu query rows (%.0f%%) no key to attend, whose "
                 "weights are all 0; %s", w->mask, w->inverted ? ", inverted by --mask-invert," : "",
                 w->causal ? " with the causal mask" : "", w->rows, w->total_rows,
                 100.0 * (double)w->rows / (double)w->total_rows,
                 w->inverted ? "for a mask whose nonzero entries are the keys to attend (Hugging "
                               "Face's attention_mask) drop --mask-invert"
                             : "for a torch key_padding_mask (nonzero = padding) use --mask-invert");
        break;
    case ATTN_WARN_COUNT:
        break;
    }
}

int attnrun_print_warnings(FILE *out, const attnrun_warnings *all)
{
    for (size_t i = 0; i < all->count; i++)
        if (fprintf(out, "attnrun: warning: %s\n", all->lines[i]) < 0)
            return -1;
    return fflush(out);
}
