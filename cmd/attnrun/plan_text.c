/*
 * plan_text.c - the plan of a dry run as text: the shapes, the settings
 * the run uses (the settings table, attn_run.h), the work and its steps,
 * and the bytes of each output.
 *
 * Legend: B batch, H heads, n queries, m keys, D d_model.
 */
#include "attnrun/attnrun.h"

#include "attnrun/plan_json.h"

#include <stdio.h>

/* "name       value" for each setting of the text plan the run uses. */
static void print_settings(FILE *out, const attn_run_options *opt, const attn_run_report *rep)
{
    for (size_t i = 0; i < attn_setting_count(); i++) {
        const attn_setting *s = attn_setting_at(i);
        if (!(s->shown & ATTN_SHOWN_TEXT))
            continue;
        const attn_setting_value v = attn_setting_value_of(i, opt, rep);
        if (!v.used)
            continue;
        fprintf(out, "%-10s ", s->name);
        switch (s->kind) {
        case ATTN_SETTING_TEXT: fprintf(out, "%s\n", v.text); break;
        case ATTN_SETTING_INTEGER: fprintf(out, "%lld\n", v.integer); break;
        case ATTN_SETTING_REAL: fprintf(out, "%.9g\n", v.real); break;
        case ATTN_SETTING_FLAG: fprintf(out, "%s\n", v.integer ? "yes" : "no"); break;
        }
    }
}

/* Why the steps exceed the cap: the least step, what it holds. */
static void print_least(FILE *out, const attn_run_report *rep)
{
    const attn_dims *d = &rep->layout.dims;
    const double elem = rep->config.precision == ATTN_F64 ? 8 : 4;
    const double slots = d->batch > 1 ? 2 : 1;     /* the next item's X read beside */
    const double kv = (double)attn_kv_heads(d) * (double)(d->d_k + d->d_v);
    /* sliding keys: X's rows of the step of each parity and the q|k|v of
     * the keys held */
    const double keys = rep->slide_keys != 0
        ? elem * (double)rep->slide_keys *
              (2 * (double)d->d_model + (double)(d->heads * d->d_k) + kv)
        : elem * ((double)d->n * (double)d->d_model * slots +
                  (rep->layout.cross ? (double)d->m * (double)d->d_model * slots : 0) +
                  (double)d->m * kv);
    const double scratch = (double)rep->scratch_bytes;
    const double rows = (double)rep->least_bytes - keys - scratch;
    char total[32], a[32], b[32], c[32], cap[32];
    fprintf(out, "least      the least step, %s (%s), %zu query rows (%s) "
            "and the threads' scratch (%s), takes %s, over the cap of %s\n",
            rep->slide_keys != 0 ? "X's rows, K and V of the window's reach"
            : rep->layout.cross  ? "one item's X and --kv, K and V"
                                 : "one item's X, K and V",
            attn_format_bytes(a, sizeof a, keys),
            rep->least_rows, attn_format_bytes(b, sizeof b, rows > 0 ? rows : 0),
            attn_format_bytes(c, sizeof c, scratch),
            attn_format_bytes(total, sizeof total, (double)rep->least_bytes),
            attn_format_bytes(cap, sizeof cap, (double)rep->memory_cap));
}

void plan_text_print(FILE *out, const attn_run_options *opt, const attn_run_report *rep)
{
    const attn_dims *d = &rep->layout.dims;
    char h[32];
    fprintf(out, "input      %s\n", opt->input);
    fprintf(out, "batch      %zu%s\n", d->batch,
            rep->layout.batched ? "" : " (rank-2 X: no batch axis)");
    fprintf(out, "queries    n = %zu\nkeys       m = %zu%s\n", d->n, d->m,
            rep->layout.cross ? " (--kv)" : "");
    fprintf(out, "d_model    %zu\nheads      %zu (K/V heads %zu)\nd_k, d_v   %zu, %zu\n",
            d->d_model, d->heads, attn_kv_heads(d), d->d_k, d->d_v);
    print_settings(out, opt, rep);
    fprintf(out, "FLOPs      %.6g (%.3f GFLOP)\n", rep->flops, rep->flops / 1e9);
    fprintf(out, "slice      %zu batch items, %s of buffers a step\n", rep->slice_items,
            attn_format_bytes(h, sizeof h, (double)rep->slice_bytes));
    fprintf(out, "steps      %zu blocks each, %s held (two in flight, the threads' scratch), ",
            rep->step_blocks, attn_format_bytes(h, sizeof h, (double)rep->held_bytes));
    fprintf(out, "cap %s (--memory)\n", attn_format_bytes(h, sizeof h, (double)rep->memory_cap));
    if (rep->slice_rows < d->n)
        fprintf(out, "rows       query rows in blocks of %zu (one item does not fit the cap)\n",
                rep->slice_rows);
    if (rep->slide_keys != 0)
        fprintf(out, "keys       sliding: each block reads its rows of X and keeps the k and v "
                "of at most %zu keys, those its window reaches\n", rep->slide_keys);
    if (rep->least_bytes > rep->memory_cap)
        print_least(out, rep);
    fprintf(out, "softmax    %s\n",
            rep->online ? "online, no maps kept (no scores, weights, mean or norms saved)"
                        : "full rows (scores, weights, mean or norms saved)");
    fprintf(out, "threads    %zu\n", rep->threads);
    fprintf(out, "outputs in group %s:\n", opt->group);
    for (int i = 0; i < ATTN_OUT_COUNT; i++) {
        size_t dims[4];
        const char *labels[4];
        char shape[128];
        if (!((rep->save >> i) & 1u))
            continue;
        size_t rank = attn_output_shape(&rep->layout, (attn_output)i, dims, labels);
        fprintf(out, "  %-8s %-26s %-8s %zu bytes (%s)\n", attn_output_name((attn_output)i),
                attn_format_shape(shape, sizeof shape, dims, rank),
                plan_dtype_name(rep->output_store[i]), rep->output_bytes[i],
                attn_format_bytes(h, sizeof h, (double)rep->output_bytes[i]));
    }
    fprintf(out, "  %-8s %-26s %-8s %zu bytes (%s)\n", "total", "", "", rep->total_bytes,
            attn_format_bytes(h, sizeof h, (double)rep->total_bytes));
}
