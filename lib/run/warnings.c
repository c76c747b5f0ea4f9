/*
 * warnings.c - the likely mistakes a run warns of (attn_run.h): the
 * table of their names, the cheap tests made on data the run reads anyway
 * (a mask's rows as they are read, the weights when they are loaded) and
 * on the plan, and their report once the run has succeeded.
 *
 * Legend: see run_state.h.
 */
#include "run/run_state.h"

#include "attn_ranks.h"

#include <assert.h>
#include <math.h>
#include <string.h>

const char *attn_warning_name(attn_warning_kind kind)
{
    static const char *const names[] = {
        [ATTN_WARN_MASK_HIDES_ALL] = "mask-hides-all",
        [ATTN_WARN_ZERO_WEIGHTS] = "zero-weights",
        [ATTN_WARN_SCALE_RECIPROCAL] = "scale-reciprocal",
        [ATTN_WARN_ROWS_SEE_NO_KEY] = "rows-see-no-key",
    };
    static_assert(sizeof names / sizeof names[0] == ATTN_WARN_COUNT,
                  "a name for every warning kind");
    return kind >= 0 && kind < ATTN_WARN_COUNT ? names[kind] : "";
}

size_t run_items_without_keys(const unsigned char *keep, size_t items, size_t m)
{
    size_t none = 0;
    for (size_t b = 0; b < items; b++)
        none += m > 0 && memchr(keep + b * m, 1, m) == NULL;
    return none;
}

size_t run_rows_without_keys(const run_state *st, const unsigned char *keep, size_t items)
{
    const attn_dims *d = &st->report->layout.dims;
    const attn_variant *v = &st->cfg.variant;
    size_t none = 0;
    for (size_t b = 0; b < items; b++) {
        const unsigned char *k = keep + b * d->m;
        if (!v->causal) {
            none += d->m > 0 && memchr(k, 1, d->m) == NULL ? d->n : 0;
            continue;
        }
        size_t last = SIZE_MAX;           /* the last key kept at or before q */
        for (size_t q = 0; q < d->n; q++) {
            if (q < d->m && k[q])
                last = q;
            none += last == SIZE_MAX || (v->window != 0 && q - last >= v->window);
        }
    }
    return none;
}

bool run_all_zero(attn_precision precision, const void *buf, size_t count)
{
    if (precision == ATTN_F64) {
        const double *v = buf;
        for (size_t i = 0; i < count; i++)
            if (v[i] != 0)
                return false;
    } else {
        const float *v = buf;
        for (size_t i = 0; i < count; i++)
            if (v[i] != 0)
                return false;
    }
    return count > 0;
}

/* Whether a projection weight is looked at for zeros. */
bool run_is_projection_weight(attn_input which)
{
    return which == ATTN_IN_WQ || which == ATTN_IN_WK || which == ATTN_IN_WV ||
           which == ATTN_IN_WO || which == ATTN_IN_WQKV;
}

/* Whether x is within a thousandth of target (a scale typed by hand,
 * rounded to a few digits, still matches). */
static bool near(double x, double target)
{
    return fabs(x - target) <= 1e-3 * target;
}

void run_report_warnings(const run_state *st)
{
    const attn_run_options *opt = st->opt;
    if (opt->warn == NULL || attn_rank() != 0)
        return;
    const attn_dims *d = &st->report->layout.dims;
    /* The plan's: a scale given as the reciprocal of the usual 1/sqrt(d_k)
     * (or of 1/d_k).  With d_k = 1 both are 1, a usual scale. */
    const double scale = opt->variant.scale, d_k = (double)d->d_k;
    if (scale != 0 && d->d_k > 1 && (near(scale, sqrt(d_k)) || near(scale, d_k))) {
        attn_warning w = {.kind = ATTN_WARN_SCALE_RECIPROCAL, .scale = scale, .d_k = d->d_k,
                          .squared = near(scale, d_k), .usual = 1.0 / sqrt(d_k)};
        opt->warn(&w, opt->warn_context);
    }
    if (opt->dry_run)                  /* no data read */
        return;
    if (st->hidden_items > 0) {
        attn_warning w = {.kind = ATTN_WARN_MASK_HIDES_ALL, .mask = st->info[ATTN_IN_MASK].name,
                          .inverted = opt->mask_invert, .items = st->hidden_items,
                          .batch = d->batch};
        opt->warn(&w, opt->warn_context);
    }
    const size_t total_rows = d->batch * d->n;
    if (st->blind_rows > total_rows / 2 && st->hidden_items == 0) {   /* else that one says it */
        attn_warning w = {.kind = ATTN_WARN_ROWS_SEE_NO_KEY, .mask = st->info[ATTN_IN_MASK].name,
                          .inverted = opt->mask_invert, .rows = st->blind_rows,
                          .total_rows = total_rows, .causal = st->cfg.variant.causal,
                          .batch = d->batch};
        opt->warn(&w, opt->warn_context);
    }
    if (st->zero_weights != 0) {
        attn_warning w = {.kind = ATTN_WARN_ZERO_WEIGHTS, .inputs = st->zero_weights};
        for (int i = 0; i < ATTN_IN_COUNT; i++)
            if ((st->zero_weights >> i) & 1u)
                w.names[i] = st->info[i].name;
        opt->warn(&w, opt->warn_context);
    }
}
