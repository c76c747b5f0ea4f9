/*
 * params.c - the layer's parameters: read whole, checked finite, per-head
 * weights packed, and W_Q | W_K | W_V fused for one GEMM.
 *
 * Legend: see run_state.h.
 */
#include "run/run_state.h"

#include "attn_ranks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* malloc of count * size bytes, checked, or NULL with err filled. */
void *run_alloc(const run_state *st, size_t count, size_t size, const char *what,
                attn_error *err)
{
    size_t bytes;
    void *p = NULL;
    if (!attn_size_mul(&bytes, count, size))
        attn_fail(err, ATTN_ENOMEM, "%s: %s: %zu x %zu bytes overflow", st->opt->input, what,
                  count, size);
    else if ((p = attn_malloc(bytes)) == NULL)
        attn_fail(err, ATTN_ENOMEM, "%s: out of memory: %zu bytes for %s", st->opt->input, bytes,
                  what);
    return p;
}

/* Index of the first non-finite value of buf (count) in precision p. */
static size_t first_nonfinite(attn_precision p, const void *buf, size_t count)
{
    return p == ATTN_F64 ? attn_find_nonfinite_f64(buf, count)
                         : attn_find_nonfinite_f32(buf, count);
}

/*
 * Rejects a non-finite value in buf, which holds `count` values from rows
 * [first, ...) of dataset t; the message gives the value's index in t.
 */
int run_check_finite(const run_state *st, const attn_tensor_info *t, const void *buf,
                        size_t first, size_t count, attn_error *err)
{
    if (st->opt->allow_nonfinite)
        return ATTN_OK;
    size_t at = first_nonfinite(st->opt->precision, buf, count);
    if (at == count)
        return ATTN_OK;
    size_t idx[ATTN_MAX_RANK];
    char where[512];
    size_t used = 0;
    attn_unravel_index(at, t->dims, t->rank, idx);
    if (t->rank > 0)
        idx[0] += first;
    for (size_t i = 0; i < t->rank && used < sizeof where; i++)
        used += (size_t)snprintf(where + used, sizeof where - used, "%s%zu", i ? ", " : "[", idx[i]);
    if (used < sizeof where)
        snprintf(where + used, sizeof where - used, "]");
    double value = st->opt->precision == ATTN_F64 ? ((const double *)buf)[at]
                                                  : (double)((const float *)buf)[at];
    double stored;
    if (st->opt->precision == ATTN_F32 && isinf(value) &&
        attn_h5in_read_value(st->in, t->name, idx, t->rank, &stored, NULL) == ATTN_OK &&
        isfinite(stored))
        return attn_fail_hint(err, ATTN_EINPUT, ATTN_HINT_PRECISION,
                              "%s: dataset %s holds %g at %s, too large for float32",
                              st->opt->input, t->name, stored, where);
    return attn_fail_hint(err, ATTN_EINPUT, ATTN_HINT_NONFINITE,
                          "%s: dataset %s has a non-finite value (%s) at %s", st->opt->input,
                          t->name, isnan(value) ? "nan" : value > 0 ? "inf" : "-inf", where);
}

/* Reads a weight or bias whole, checks it, and packs 3-D (H, D, d)
 * projection weights into (D, H*d).  Absent inputs leave *packed NULL. */
static int load_parameter(run_state *st, attn_input which, void **packed, attn_error *err)
{
    const attn_tensor_info *t = &st->info[which];
    const size_t elem = attn_precision_size(st->opt->precision);
    char *raw = NULL, *repacked = NULL;
    size_t count;
    int status = ATTN_OK;
    *packed = NULL;
    if (!t->present)
        return ATTN_OK;
    attn_size_product(&count, t->dims, t->rank);       /* checked by the plan */
    if ((raw = run_alloc(st, count, elem, t->name, err)) == NULL) {
        status = ATTN_ENOMEM;
        goto out;
    }
    if ((status = attn_h5in_read_floats(st->in, t->name, st->opt->precision, 0, t->dims[0], raw, err)) != ATTN_OK ||
        (status = run_check_finite(st, t, raw, 0, count, err)) != ATTN_OK)
        goto out;
    if (st->opt->warn != NULL && run_is_projection_weight(which) &&
        run_all_zero(st->opt->precision, raw, count))
        st->zero_weights |= 1u << which;
    if (t->rank != 3 || which == ATTN_IN_WO) {    /* (H, d_v, D) is packed already */
        *packed = raw;
        raw = NULL;
        goto out;
    }
    if ((repacked = run_alloc(st, count, elem, t->name, err)) == NULL) {
        status = ATTN_ENOMEM;
        goto out;
    }
    size_t heads = t->dims[0], rows = t->dims[1], width = t->dims[2];
    for (size_t h = 0; h < heads; h++)            /* (H, D, d) -> (D, H*d) */
        for (size_t r = 0; r < rows; r++)
            memcpy(repacked + (r * heads + h) * width * elem, raw + (h * rows + r) * width * elem,
                   width * elem);
    *packed = repacked;
out:
    free(raw);
    return status;
}

/*
 * [W_Q | W_K | W_V] as one matrix -- (D, F) side by side for x W, (F, D)
 * one under the other for x W^T -- and the three biases end to end (zeros
 * for an absent one), so that one GEMM projects all three.
 */
static int fuse_parameters(run_state *st, attn_error *err)
{
    const attn_layout *layout = &st->report->layout;
    const attn_dims *d = &layout->dims;
    const size_t elem = attn_precision_size(st->opt->precision), G = attn_kv_heads(d);
    const size_t widths[3] = {d->heads * d->d_k, G * d->d_k, G * d->d_v};
    const size_t all = widths[0] + widths[1] + widths[2], D = d->d_model;
    char *fused = run_alloc(st, D * all, elem, "the fused projection weights", err);
    if (fused == NULL)
        return ATTN_ENOMEM;
    st->fused = fused;
    size_t column = 0;
    for (int i = 0; i < 3; i++) {
        const char *part = st->whole[ATTN_IN_WQ + i];
        if (layout->linear)                        /* rows follow rows */
            memcpy(fused + column * D * elem, part, widths[i] * D * elem);
        else
            for (size_t r = 0; r < D; r++)
                memcpy(fused + (r * all + column) * elem, part + r * widths[i] * elem,
                       widths[i] * elem);
        column += widths[i];
    }
    st->weights.w_qkv = fused;
    if (st->whole[ATTN_IN_BQ] == NULL && st->whole[ATTN_IN_BK] == NULL && st->whole[ATTN_IN_BV] == NULL)
        return ATTN_OK;
    char *bias = run_alloc(st, all, elem, "the fused biases", err);
    if (bias == NULL)
        return ATTN_ENOMEM;
    memset(bias, 0, all * elem);
    st->fused_bias = bias;
    column = 0;
    for (int i = 0; i < 3; i++) {
        if (st->whole[ATTN_IN_BQ + i] != NULL)
            memcpy(bias + column * elem, st->whole[ATTN_IN_BQ + i], widths[i] * elem);
        column += widths[i];
    }
    st->weights.b_qkv = bias;
    return ATTN_OK;
}

/* Once fused, W_Q, W_K, W_V and their biases serve through the fused copy
 * only (attn_weights: w_qkv set, the others ignored): freed. */
static void drop_fused_parts(run_state *st)
{
    static const attn_input parts[] = {ATTN_IN_WQ, ATTN_IN_WK, ATTN_IN_WV,
                                       ATTN_IN_BQ, ATTN_IN_BK, ATTN_IN_BV};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        free(st->whole[parts[i]]);
        st->whole[parts[i]] = NULL;
    }
    st->weights.w_q = st->weights.w_k = st->weights.w_v = NULL;
    st->weights.b_q = st->weights.b_k = st->weights.b_v = NULL;
}

/* The ALiBi slopes: the dataset's, or the standard ones for H heads. */
static int load_alibi(run_state *st, attn_error *err)
{
    const attn_tensor_info *t = &st->info[ATTN_IN_ALIBI_SLOPES];
    const size_t H = st->report->layout.dims.heads;
    if ((st->alibi = run_alloc(st, H, sizeof(double), "the ALiBi slopes", err)) == NULL)
        return ATTN_ENOMEM;
    st->cfg.alibi = st->alibi;
    if (!t->present) {
        attn_alibi_slopes(H, st->alibi);
        return ATTN_OK;
    }
    int status = attn_h5in_read_floats(st->in, t->name, ATTN_F64, 0, H, st->alibi, err);
    if (status == ATTN_OK && attn_find_nonfinite_f64(st->alibi, H) != H)
        status = attn_fail(err, ATTN_EINPUT, "%s: ALiBi slopes %s hold a NaN or an infinity",
                           st->opt->input, t->name);
    return status;
}

/* W_O[h] W_O[h]^T of each head, for the per-key summary value_norm (and
 * the norms made from it): (H, dv, dv) doubles, through rows of W_O in
 * double. */
static int load_value_gram(run_state *st, attn_error *err)
{
    const attn_dims *d = &st->report->layout.dims;
    size_t gram;
    if (!attn_size_product(&gram, (size_t[]){d->heads, d->d_v, d->d_v}, 3))
        return attn_fail(err, ATTN_EINPUT, "%s: d_v %zu is too large for norms",
                         st->opt->input, d->d_v);
    double *rows = run_alloc(st, d->d_v * d->d_model, sizeof(double), "the rows of W_O", err);
    if (rows == NULL || (st->wo_gram = run_alloc(st, gram, sizeof(double),
                                                 "the values' lengths' matrices", err)) == NULL) {
        free(rows);
        return ATTN_ENOMEM;
    }
    attn_value_gram(&st->cfg, &st->weights, st->wo_gram, rows);
    free(rows);
    st->weights.wo_gram = st->wo_gram;
    return ATTN_OK;
}

int run_load_parameters(run_state *st, attn_error *err)
{
    const attn_layout *layout = &st->report->layout;
    for (int i = 0; i < ATTN_IN_COUNT; i++) {
        if (!attn_input_spec_of((attn_input)i)->parameter || i == ATTN_IN_ALIBI_SLOPES)
            continue;
        int status = load_parameter(st, (attn_input)i, &st->whole[i], err);
        if (status != ATTN_OK)
            return status;
    }
    void *const *p = st->whole;
    st->weights = (attn_weights){
        .linear = layout->linear,
        .w_q = p[ATTN_IN_WQ], .w_k = p[ATTN_IN_WK], .w_v = p[ATTN_IN_WV], .w_o = p[ATTN_IN_WO],
        .b_q = p[ATTN_IN_BQ], .b_k = p[ATTN_IN_BK], .b_v = p[ATTN_IN_BV], .b_o = p[ATTN_IN_BO],
        .w_qkv = p[ATTN_IN_WQKV], .b_qkv = p[ATTN_IN_BQKV],
        .heads_interleaved = layout->heads_interleaved,
        .q_norm = p[ATTN_IN_Q_NORM], .k_norm = p[ATTN_IN_K_NORM],
    };
    if (st->report->alibi) {
        int status = load_alibi(st, err);
        if (status != ATTN_OK)
            return status;
    }
    if (attn_plan_needs_key_summary(st->opt->save, ATTN_KEY_SUMMARY_VALUE_NORM)) {
        int status = load_value_gram(st, err);
        if (status != ATTN_OK)
            return status;
    }
    if (layout->fused)
        return ATTN_OK;
    int status = fuse_parameters(st, err);
    if (status == ATTN_OK)
        drop_fused_parts(st);
    return status;
}

/*
 * Rejects a NaN or +inf in an attention bias buf holding `count` values
 * from rows [first, ...) of t: -inf is a mask and is kept.
 */
static int check_bias(const run_state *st, const attn_tensor_info *t, const void *buf,
                      size_t first, size_t count, attn_error *err)
{
    if (st->opt->allow_nonfinite)
        return ATTN_OK;
    for (size_t i = 0; i < count; i++) {
        double v = st->opt->precision == ATTN_F64 ? ((const double *)buf)[i]
                                                  : (double)((const float *)buf)[i];
        if (isnan(v) || v == INFINITY)
            return attn_fail_hint(err, ATTN_EINPUT, ATTN_HINT_NONFINITE,
                                  "%s: attention bias %s holds %s (value %zu from row %zu); only "
                                  "-inf may mask", st->opt->input, t->name,
                                  isnan(v) ? "nan" : "inf", i, first);
    }
    return ATTN_OK;
}

/* X stored (n, B, D) (x_sequence_first): rows [from, from + length) of
 * items [first, first + items), one box of the file per item, into buf
 * (items, length, D). */
static int read_x_sequence_first(const run_state *st, size_t first, size_t items, size_t from,
                                 size_t length, void *buf, attn_error *err)
{
    const attn_tensor_info *t = &st->info[ATTN_IN_X];
    const size_t d = t->dims[2], elem = attn_precision_size(st->opt->precision);
    for (size_t b = 0; b < items; b++) {
        const size_t box[3] = {from, first + b, 0}, count[3] = {length, 1, d};
        int status = attn_h5in_read_float_box(st->in, t->name, st->opt->precision, box, count,
                                              (char *)buf + b * length * d * elem, err);
        if (status != ATTN_OK)
            return status;
    }
    return run_check_finite(st, t, buf, first, items * length * d, err);
}

/* Whether X is read across its stored axes (x_sequence_first). */
static bool x_transposed(const run_state *st, attn_input which)
{
    return which == ATTN_IN_X && st->opt->x_sequence_first && st->info[which].rank == 3;
}

int run_read_rows(const run_state *st, attn_input which, size_t first, size_t rows, void *buf,
                  attn_error *err)
{
    const attn_tensor_info *t = &st->info[which];
    if (x_transposed(st, which))
        return read_x_sequence_first(st, first, rows, 0, t->dims[1], buf, err);
    size_t count;
    attn_size_product(&count, t->dims + 1, t->rank - 1);     /* per row; checked by the plan */
    count *= rows;
    if (which == ATTN_IN_MASK) {
        unsigned char *keep = buf;
        int status = attn_h5in_read_mask(st->in, t->name, first, rows, keep, err);
        for (size_t i = 0; status == ATTN_OK && st->opt->mask_invert && i < count; i++)
            keep[i] = !keep[i];
        return status;
    }
    if (attn_input_spec_of(which)->integer)
        return attn_h5in_read_integers(st->in, t->name, first, rows, buf, err);
    int status = attn_h5in_read_floats(st->in, t->name, st->opt->precision, first, rows, buf, err);
    if (status != ATTN_OK)
        return status;
    return which == ATTN_IN_ATTN_BIAS ? check_bias(st, t, buf, first, count, err)
                                      : run_check_finite(st, t, buf, first, count, err);
}

int run_read_block(const run_state *st, attn_input which, size_t first, size_t rows, size_t axis,
                   size_t from, size_t length, void *buf, attn_error *err)
{
    const attn_tensor_info *t = &st->info[which];
    size_t count;
    if (x_transposed(st, which))                 /* axis 1: the rows of items */
        return read_x_sequence_first(st, first, rows, from, length, buf, err);
    attn_size_product(&count, t->dims + 1, t->rank - 1);     /* per row; checked by the plan */
    count = count / t->dims[axis] * length * rows;
    int status = attn_h5in_read_float_block(st->in, t->name, st->opt->precision, first, rows, axis,
                                            from, length, buf, err);
    if (status != ATTN_OK)
        return status;
    return which == ATTN_IN_ATTN_BIAS ? check_bias(st, t, buf, first, count, err)
                                      : run_check_finite(st, t, buf, first, count, err);
}

/* Reads one input every item shares, whole, into st->whole[which]. */
static int load_whole(run_state *st, attn_input which, size_t elem, attn_error *err)
{
    const attn_tensor_info *t = &st->info[which];
    size_t count;
    attn_size_product(&count, t->dims, t->rank);       /* checked by the plan */
    if ((st->whole[which] = run_alloc(st, count, elem, t->name, err)) == NULL)
        return ATTN_ENOMEM;
    return run_read_rows(st, which, 0, t->dims[0], st->whole[which], err);
}

/*
 * The data inputs every item shares, read once: --kv (m, D), the mask
 * (m), positions (n) and (m), and an attention bias without a batch axis.
 */
int run_load_shared(run_state *st, attn_error *err)
{
    const attn_layout *layout = &st->report->layout;
    const size_t elem = attn_precision_size(st->opt->precision);
    const struct { attn_input which; bool shared; size_t elem; } inputs[] = {
        {ATTN_IN_KV, layout->kv_shared, elem},
        {ATTN_IN_MASK, layout->mask_shared, 1},
        {ATTN_IN_POSITIONS, layout->positions_shared, sizeof(int64_t)},
        {ATTN_IN_KV_POSITIONS, layout->kv_positions_shared, sizeof(int64_t)},
        {ATTN_IN_ATTN_BIAS, layout->bias_rank != 0 && layout->bias_rank < 4, elem},
    };
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        if (!st->info[inputs[i].which].present || !inputs[i].shared)
            continue;
        int status = load_whole(st, inputs[i].which, inputs[i].elem, err);
        if (status != ATTN_OK)
            return status;
    }
    /* A mask (m) that keeps no key hides every key of every item: counted
     * once for the job, on rank 0 (the ranks' counts are summed). */
    if (st->opt->warn != NULL && st->info[ATTN_IN_MASK].present && layout->mask_shared &&
        attn_rank() == 0) {
        if (run_items_without_keys(st->whole[ATTN_IN_MASK], 1, layout->dims.m) == 1)
            st->hidden_items = layout->dims.batch;
        st->blind_rows = run_rows_without_keys(st, st->whole[ATTN_IN_MASK], 1) * layout->dims.batch;
    }
    return ATTN_OK;
}
