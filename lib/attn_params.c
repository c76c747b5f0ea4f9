/*
 * attn_params.c - the layer's parameters: read whole, checked finite, per-head
 * weights packed, and W_Q | W_K | W_V fused for one GEMM.
 *
 * Legend: see attn_run_state.h.
 */
#include "attn_run_state.h"

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
        return attn_fail(err, ATTN_EINPUT,
                         "%s: dataset %s holds %g at %s, too large for float32; use --precision f64",
                         st->opt->input, t->name, stored, where);
    return attn_fail(err, ATTN_EINPUT,
                     "%s: dataset %s has a non-finite value (%s) at %s; use --allow-nonfinite to accept it",
                     st->opt->input, t->name, isnan(value) ? "nan" : value > 0 ? "inf" : "-inf", where);
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
 * [W_Q | W_K | W_V] as one (D, H*(2dk+dv)) matrix, and the three biases end
 * to end (zeros for an absent one), so that one GEMM projects all three.
 */
static int fuse_parameters(run_state *st, attn_error *err)
{
    const attn_dims *d = &st->report->layout.dims;
    const size_t elem = attn_precision_size(st->opt->precision);
    const size_t qk = d->heads * d->d_k, widths[3] = {qk, qk, d->heads * d->d_v};
    const size_t all = widths[0] + widths[1] + widths[2];
    char *fused = run_alloc(st, d->d_model * all, elem, "the fused projection weights", err);
    if (fused == NULL)
        return ATTN_ENOMEM;
    st->fused = fused;
    size_t column = 0;
    for (int i = 0; i < 3; i++) {
        const char *part = st->parameters[i];
        for (size_t r = 0; r < d->d_model; r++)
            memcpy(fused + (r * all + column) * elem, part + r * widths[i] * elem, widths[i] * elem);
        column += widths[i];
    }
    st->weights.w_qkv = fused;
    if (st->parameters[4] == NULL && st->parameters[5] == NULL && st->parameters[6] == NULL)
        return ATTN_OK;
    char *bias = run_alloc(st, all, elem, "the fused biases", err);
    if (bias == NULL)
        return ATTN_ENOMEM;
    memset(bias, 0, all * elem);
    st->fused_bias = bias;
    column = 0;
    for (int i = 0; i < 3; i++) {
        if (st->parameters[4 + i] != NULL)
            memcpy(bias + column * elem, st->parameters[4 + i], widths[i] * elem);
        column += widths[i];
    }
    st->weights.b_qkv = bias;
    return ATTN_OK;
}

int run_load_parameters(run_state *st, attn_error *err)
{
    static const attn_input order[8] = {ATTN_IN_WQ, ATTN_IN_WK, ATTN_IN_WV, ATTN_IN_WO,
                                        ATTN_IN_BQ, ATTN_IN_BK, ATTN_IN_BV, ATTN_IN_BO};
    for (int i = 0; i < 8; i++) {
        int status = load_parameter(st, order[i], &st->parameters[i], err);
        if (status != ATTN_OK)
            return status;
    }
    st->weights = (attn_weights){
        .w_q = st->parameters[0], .w_k = st->parameters[1], .w_v = st->parameters[2],
        .w_o = st->parameters[3], .b_q = st->parameters[4], .b_k = st->parameters[5],
        .b_v = st->parameters[6], .b_o = st->parameters[7],
    };
    return fuse_parameters(st, err);
}

/* --kv (m, D) and --mask (m) shared by every item: read once. */
int run_load_shared(run_state *st, attn_error *err)
{
    const attn_layout *layout = &st->report->layout;
    const attn_tensor_info *kv = &st->info[ATTN_IN_KV], *mask = &st->info[ATTN_IN_MASK];
    int status;
    if (layout->kv_shared) {
        size_t count = layout->dims.m * layout->dims.d_model;
        st->y_shared = run_alloc(st, count, attn_precision_size(st->opt->precision), kv->name, err);
        if (st->y_shared == NULL)
            return ATTN_ENOMEM;
        if ((status = attn_h5in_read_floats(st->in, kv->name, st->opt->precision, 0, layout->dims.m,
                                            st->y_shared, err)) != ATTN_OK ||
            (status = run_check_finite(st, kv, st->y_shared, 0, count, err)) != ATTN_OK)
            return status;
        st->slots[0].y = st->slots[1].y = st->y_shared;
    }
    if (mask->present && layout->mask_shared) {
        st->keep_shared = run_alloc(st, layout->dims.m, 1, mask->name, err);
        if (st->keep_shared == NULL)
            return ATTN_ENOMEM;
        if ((status = attn_h5in_read_mask(st->in, mask->name, 0, layout->dims.m, st->keep_shared, err)) != ATTN_OK)
            return status;
        st->slots[0].keep = st->slots[1].keep = st->keep_shared;
    }
    return ATTN_OK;
}

