/*
 * attn_plan.c - shape validation, slice sizing and output shapes (attn_plan.h).
 *
 * Legend: B batch, H heads, n queries, m keys, D d_model, d_k, d_v.
 */
#include "attn_plan.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* The input table: every input dataset, how it is named and read. */
static const attn_input_spec input_table[ATTN_IN_COUNT] = {
    [ATTN_IN_X]    = {"x", "X", "queries", false, false, false},
    [ATTN_IN_KV]   = {"kv", NULL, "keys/values source", false, false, false},
    [ATTN_IN_MASK] = {"mask", NULL, "key padding mask", false, false, false},
    [ATTN_IN_WQ]   = {"wq", "W_Q", "query weights", false, true, false},
    [ATTN_IN_WK]   = {"wk", "W_K", "key weights", false, true, false},
    [ATTN_IN_WV]   = {"wv", "W_V", "value weights", false, true, false},
    [ATTN_IN_WO]   = {"wo", "W_O", "output weights", false, true, false},
    [ATTN_IN_BQ]   = {"bq", "b_Q", "query bias", false, true, true},
    [ATTN_IN_BK]   = {"bk", "b_K", "key bias", false, true, true},
    [ATTN_IN_BV]   = {"bv", "b_V", "value bias", false, true, true},
    [ATTN_IN_BO]   = {"bo", "b_O", "output bias", false, true, true},
    [ATTN_IN_WQKV] = {"wqkv", NULL, "fused Q|K|V weights", false, true, false},
    [ATTN_IN_BQKV] = {"bqkv", NULL, "fused Q|K|V bias", false, true, true},
    [ATTN_IN_Q_NORM] = {"q-norm", NULL, "q RMSNorm weights", false, true, false},
    [ATTN_IN_K_NORM] = {"k-norm", NULL, "k RMSNorm weights", false, true, false},
    [ATTN_IN_ALIBI_SLOPES] = {"alibi-slopes", NULL, "ALiBi slopes", false, true, false},
    [ATTN_IN_POSITIONS] = {"positions", NULL, "query positions", true, false, false},
    [ATTN_IN_KV_POSITIONS] = {"kv-positions", NULL, "key positions", true, false, false},
    [ATTN_IN_ATTN_BIAS] = {"attn-bias", NULL, "attention bias", false, false, false},
};

/* The output table: every output dataset, its axes and where it comes from. */
static const attn_output_spec output_table[ATTN_OUT_COUNT] = {
    [ATTN_OUT_SCORES] = {"scores",
        "attention logits entering the softmax: Q K^T * scale, then softcap, then ALiBi and "
        "attention bias added; masked entries are -inf",
        {ATTN_AXIS_HEAD, ATTN_AXIS_QUERY, ATTN_AXIS_KEY}, ATTN_FROM_SCORES},
    [ATTN_OUT_WEIGHTS] = {"weights",
        "attention weights: softmax of scores over keys; rows sum to 1, or are 0 where every key is masked",
        {ATTN_AXIS_HEAD, ATTN_AXIS_QUERY, ATTN_AXIS_KEY}, ATTN_FROM_WEIGHTS},
    [ATTN_OUT_HEADS] = {"heads", "per-head attention outputs: weights V",
        {ATTN_AXIS_HEAD, ATTN_AXIS_QUERY, ATTN_AXIS_D_V}, ATTN_FROM_CONCAT},
    [ATTN_OUT_OUTPUT] = {"output", "projected output: concat(heads) W_O + b_O",
        {ATTN_AXIS_QUERY, ATTN_AXIS_D_MODEL, ATTN_AXIS_NONE}, ATTN_FROM_OUTPUT},
    [ATTN_OUT_Q] = {"q", "per-head queries: X W_Q + b_Q (then q-norm and rotary embedding)",
        {ATTN_AXIS_HEAD, ATTN_AXIS_QUERY, ATTN_AXIS_D_K}, ATTN_FROM_Q},
    [ATTN_OUT_K] = {"k",
        "per-head keys: Y W_K + b_K (Y is X, or the keys/values source; then k-norm and rotary embedding)",
        {ATTN_AXIS_KV_HEAD, ATTN_AXIS_KEY, ATTN_AXIS_D_K}, ATTN_FROM_K},
    [ATTN_OUT_V] = {"v", "per-head values: Y W_V + b_V (Y is X, or the keys/values source)",
        {ATTN_AXIS_KV_HEAD, ATTN_AXIS_KEY, ATTN_AXIS_D_V}, ATTN_FROM_V},
    [ATTN_OUT_ENTROPY] = {"entropy",
        "entropy of each query's attention weights over the keys, in nats: -sum p log p "
        "(0 where every key is masked)",
        {ATTN_AXIS_HEAD, ATTN_AXIS_QUERY, ATTN_AXIS_NONE}, ATTN_FROM_ENTROPY},
    [ATTN_OUT_ARGMAX] = {"argmax",
        "the most-attended key of each query: the first key with the largest logit "
        "(-1 where every key is masked or the weights are NaN)",
        {ATTN_AXIS_HEAD, ATTN_AXIS_QUERY, ATTN_AXIS_NONE}, ATTN_FROM_ARGMAX},
    [ATTN_OUT_DISTANCE] = {"distance",
        "mean distance attended: sum over keys of weight * |query position - key position|",
        {ATTN_AXIS_HEAD, ATTN_AXIS_QUERY, ATTN_AXIS_NONE}, ATTN_FROM_DISTANCE},
    [ATTN_OUT_MEAN] = {"mean", "attention weights averaged over the heads",
        {ATTN_AXIS_QUERY, ATTN_AXIS_KEY, ATTN_AXIS_NONE}, ATTN_FROM_MEAN},
    [ATTN_OUT_RESULT] = {"result",
        "each head's contribution to the output: heads W_O restricted to the head's rows, "
        "without b_O (the sum over heads plus b_O is output)",
        {ATTN_AXIS_QUERY, ATTN_AXIS_HEAD, ATTN_AXIS_D_MODEL}, ATTN_FROM_RESULT},
};

const attn_input_spec *attn_input_spec_of(attn_input which)
{
    return &input_table[which];
}

const attn_output_spec *attn_output_spec_of(attn_output which)
{
    return &output_table[which];
}

bool attn_output_is_map(attn_output which)
{
    const attn_source source = output_table[which].source;
    return source == ATTN_FROM_SCORES || source == ATTN_FROM_WEIGHTS || source == ATTN_FROM_MEAN;
}

attn_store attn_output_type(attn_output which, attn_store maps, attn_precision precision)
{
    if (attn_output_is_map(which))
        return maps;
    return output_table[which].source == ATTN_FROM_ARGMAX ? ATTN_STORE_I32 : attn_store_of(precision);
}

const char *attn_output_name(attn_output which)
{
    return output_table[which].name;
}

const char *attn_output_description(attn_output which)
{
    return output_table[which].description;
}

/* "(2, 4, 8)" for a tensor, in a caller's buffer. */
static const char *shape_of(const attn_tensor_info *t, char *buf, size_t len)
{
    return attn_format_shape(buf, len, t->dims, t->rank);
}

/* Rejects a rank outside [lo, hi] and zero-length axes. */
static int check_rank(const attn_tensor_info *t, const char *file, size_t lo, size_t hi,
                      const char *expected, attn_error *err)
{
    char s[256];
    if (t->rank < lo || t->rank > hi)
        return attn_fail(err, ATTN_EINPUT, "%s: dataset %s has rank %zu, shape %s; expected %s",
                         file, t->name, t->rank, shape_of(t, s, sizeof s), expected);
    for (size_t i = 0; i < t->rank; i++)
        if (t->dims[i] == 0)
            return attn_fail(err, ATTN_EINPUT, "%s: dataset %s has an empty axis, shape %s",
                             file, t->name, shape_of(t, s, sizeof s));
    return ATTN_OK;
}

/* Every present tensor must count its bytes (as float64) within size_t. */
static int check_element_counts(const attn_tensor_info in[ATTN_IN_COUNT], const char *file,
                                attn_error *err)
{
    for (int i = 0; i < ATTN_IN_COUNT; i++) {
        size_t count, bytes;
        char s[256];
        if (!in[i].present)
            continue;
        if (!attn_size_product(&count, in[i].dims, in[i].rank) ||
            !attn_size_mul(&bytes, count, sizeof(double)))
            return attn_fail(err, ATTN_EINPUT, "%s: dataset %s of shape %s is too large to address",
                             file, in[i].name, shape_of(&in[i], s, sizeof s));
    }
    return ATTN_OK;
}

/* X and --kv: the batch, n, m and d_model. */
static int plan_sequences(const attn_tensor_info in[ATTN_IN_COUNT], const char *file,
                          attn_layout *layout, attn_error *err)
{
    const attn_tensor_info *x = &in[ATTN_IN_X], *kv = &in[ATTN_IN_KV];
    attn_dims *d = &layout->dims;
    char s1[256], s2[256];
    int status = check_rank(x, file, 2, 3, "(B, n, d_model) or (n, d_model)", err);
    if (status != ATTN_OK)
        return status;
    layout->batched = x->rank == 3;
    d->batch = layout->batched ? x->dims[0] : 1;
    d->n = x->dims[x->rank - 2];
    d->d_model = x->dims[x->rank - 1];
    d->m = d->n;
    if (!kv->present)
        return ATTN_OK;

    status = check_rank(kv, file, 2, layout->batched ? 3 : 2,
                        layout->batched ? "(B, m, d_model) or (m, d_model)" : "(m, d_model) for a rank-2 X",
                        err);
    if (status != ATTN_OK)
        return status;
    layout->cross = true;
    layout->kv_shared = layout->batched && kv->rank == 2;
    d->m = kv->dims[kv->rank - 2];
    if (kv->dims[kv->rank - 1] != d->d_model)
        return attn_fail(err, ATTN_EINPUT, "%s: d_model of %s %s differs from d_model of %s %s",
                         file, kv->name, shape_of(kv, s1, sizeof s1), x->name, shape_of(x, s2, sizeof s2));
    if (kv->rank == 3 && kv->dims[0] != d->batch)
        return attn_fail(err, ATTN_EINPUT, "%s: batch of %s %s differs from batch of %s %s",
                         file, kv->name, shape_of(kv, s1, sizeof s1), x->name, shape_of(x, s2, sizeof s2));
    return ATTN_OK;
}

/* The head count: from 3-D W_Q or W_O, or --heads for packed ones.  (3-D
 * W_K and W_V have G heads, checked with them.) */
static int plan_heads(const attn_tensor_info in[ATTN_IN_COUNT], const char *file,
                      const attn_plan_request *req, attn_layout *layout, attn_error *err)
{
    const attn_tensor_info *from = NULL;
    char s1[256], s2[256];
    const size_t heads_flag = req->heads;
    for (int i = ATTN_IN_WQ; i <= ATTN_IN_WO; i++) {
        const attn_tensor_info *w = &in[i];
        if (layout->fused && i != ATTN_IN_WO)
            continue;
        int status = check_rank(w, file, 2, req->linear ? 2 : 3,
                                req->linear ? "2-D (out features, in features) weights"
                                            : "2-D packed or 3-D (H, ., .) weights", err);
        if (status != ATTN_OK)
            return status;
        layout->per_head[i - ATTN_IN_WQ] = w->rank == 3;
        if (w->rank != 3 || i == ATTN_IN_WK || i == ATTN_IN_WV)
            continue;
        if (heads_flag != 0 && w->dims[0] != heads_flag)
            return attn_fail_hint(err, ATTN_EINPUT, ATTN_HINT_HEADS,
                                  "%s: %zu heads asked for, but %s of shape %s has %zu", file,
                                  heads_flag, w->name, shape_of(w, s1, sizeof s1), w->dims[0]);
        if (from != NULL && w->dims[0] != from->dims[0])
            return attn_fail(err, ATTN_EINPUT, "%s: %s %s and %s %s disagree on the number of heads",
                             file, from->name, shape_of(from, s1, sizeof s1), w->name,
                             shape_of(w, s2, sizeof s2));
        if (from == NULL)
            from = w;
    }
    if (from != NULL) {
        layout->dims.heads = from->dims[0];
        return ATTN_OK;
    }
    const attn_tensor_info *first = layout->fused ? &in[ATTN_IN_WQKV] : &in[ATTN_IN_WQ];
    if (heads_flag == 0)
        return attn_fail_hint(err, ATTN_EINPUT, ATTN_HINT_HEADS,
                              "%s: %s has packed shape %s: the number of heads is required",
                              file, first->name, shape_of(first, s1, sizeof s1));
    layout->dims.heads = heads_flag;
    return ATTN_OK;
}

/*
 * An input projection weight: packed x W (D, heads*width), per head
 * (heads, D, width), or x W^T (heads*width, D).  With heads known, gives
 * *width; with width known (K given d_k), gives *heads.
 */
static int plan_in_weight(const attn_tensor_info *w, const char *file, bool linear, size_t D,
                          size_t *heads, size_t *width, attn_error *err)
{
    char s[256];
    const size_t in_axis = linear ? 1 : w->rank == 3 ? 1 : 0;
    if (w->dims[in_axis] != D)
        return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s; axis %zu must be d_model = %zu",
                         file, w->name, shape_of(w, s, sizeof s), in_axis, D);
    if (w->rank == 3) {
        if (*heads != 0 && w->dims[0] != *heads)
            return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s: %zu heads, expected %zu",
                             file, w->name, shape_of(w, s, sizeof s), w->dims[0], *heads);
        if (*width != 0 && w->dims[2] != *width)
            return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s: head width %zu, expected d_k = %zu",
                             file, w->name, shape_of(w, s, sizeof s), w->dims[2], *width);
        *heads = w->dims[0];
        *width = w->dims[2];
        return ATTN_OK;
    }
    const size_t features = w->dims[linear ? 0 : 1];
    if (*heads != 0) {
        if (features % *heads != 0)
            return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s: %zu %s do not split into %zu heads",
                             file, w->name, shape_of(w, s, sizeof s), features,
                             linear ? "rows" : "columns", *heads);
        if (*width != 0 && features / *heads != *width)
            return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s: %zu heads of width %zu, expected d_k = %zu",
                             file, w->name, shape_of(w, s, sizeof s), *heads, features / *heads, *width);
        *width = features / *heads;
        return ATTN_OK;
    }
    if (features % *width != 0)
        return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s: %zu %s are not a multiple of d_k = %zu",
                         file, w->name, shape_of(w, s, sizeof s), features,
                         linear ? "rows" : "columns", *width);
    *heads = features / *width;
    return ATTN_OK;
}

static int plan_out_weight(const attn_tensor_info *w, const char *file, bool linear,
                           const attn_dims *d, attn_error *err)
{
    char s[256];
    const size_t hv = d->heads * d->d_v;
    bool ok = linear ? (w->dims[0] == d->d_model && w->dims[1] == hv)
            : w->rank == 3 ? (w->dims[1] == d->d_v && w->dims[2] == d->d_model)
                           : (w->dims[0] == hv && w->dims[1] == d->d_model);
    if (!ok && linear)
        return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s; expected (%zu, %zu) for d_model = %zu, H = %zu, d_v = %zu",
                         file, w->name, shape_of(w, s, sizeof s), d->d_model, hv, d->d_model,
                         d->heads, d->d_v);
    if (!ok)
        return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s; expected (%zu, %zu) or (%zu, %zu, %zu) for H = %zu, d_v = %zu, d_model = %zu",
                         file, w->name, shape_of(w, s, sizeof s), hv, d->d_model,
                         d->heads, d->d_v, d->d_model, d->heads, d->d_v, d->d_model);
    return ATTN_OK;
}

/*
 * Fused Q|K|V weights (D, F) or, linear, (F, D): F = H*dk + 2*G*dk in
 * blocks (dv = dk; G from --kv-heads, else H), or H*3*dk with heads
 * interleaved (G = H).
 */
static int plan_fused(const attn_tensor_info *w, const char *file, const attn_plan_request *req,
                      attn_dims *d, attn_error *err)
{
    char s[256];
    int status = check_rank(w, file, 2, 2, "2-D fused Q|K|V weights", err);
    if (status != ATTN_OK)
        return status;
    const size_t in_axis = req->linear ? 1 : 0, features = w->dims[1 - in_axis];
    if (w->dims[in_axis] != d->d_model)
        return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s; axis %zu must be d_model = %zu",
                         file, w->name, shape_of(w, s, sizeof s), in_axis, d->d_model);
    if (req->heads_interleaved && req->kv_heads != 0 && req->kv_heads != d->heads)
        return attn_fail(err, ATTN_EINPUT, "%s: %s interleaves q, k and v per head, so K/V heads = heads = %zu, not %zu",
                         file, w->name, d->heads, req->kv_heads);
    d->kv_heads = req->kv_heads != 0 ? req->kv_heads : d->heads;
    const size_t per_width = d->heads + 2 * d->kv_heads;   /* head widths in F */
    if (features % per_width != 0)
        return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s: %zu features do not split into "
                         "%zu query and 2 x %zu key/value heads", file, w->name,
                         shape_of(w, s, sizeof s), features, d->heads, d->kv_heads);
    d->d_k = d->d_v = features / per_width;
    return ATTN_OK;
}

/* The RMSNorm weights of q or k: (d_k). */
static int plan_vector(const attn_tensor_info *t, const char *file, size_t length,
                       const char *what, attn_error *err)
{
    char s[256];
    if (!t->present || (t->rank == 1 && t->dims[0] == length))
        return ATTN_OK;
    return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s; expected (%zu,): %s",
                     file, t->name, shape_of(t, s, sizeof s), length, what);
}

/* Positions: (count) for every item or (B, count). */
static int plan_positions(const attn_tensor_info *t, const char *file, const attn_layout *layout,
                          size_t count, bool *shared, attn_error *err)
{
    char s[256];
    if (!t->present)
        return ATTN_OK;
    bool ok = (t->rank == 1 && t->dims[0] == count) ||
              (t->rank == 2 && layout->batched && t->dims[0] == layout->dims.batch &&
               t->dims[1] == count);
    if (!ok)
        return attn_fail(err, ATTN_EINPUT, "%s: positions %s have shape %s; expected (%zu,) or (B, %zu) = (%zu, %zu)",
                         file, t->name, shape_of(t, s, sizeof s), count, count,
                         layout->dims.batch, count);
    *shared = t->rank == 1;
    return ATTN_OK;
}

/* The attention bias: broadcastable to (B, H, n, m) from the right. */
static int plan_attn_bias(const attn_tensor_info *t, const char *file, attn_layout *layout,
                          attn_error *err)
{
    const attn_dims *d = &layout->dims;
    const size_t want[4] = {d->batch, d->heads, d->n, d->m};
    char s[256];
    if (!t->present)
        return ATTN_OK;
    bool ok = t->rank >= 2 && t->rank <= (layout->batched ? 4 : 3);
    for (size_t i = 0; ok && i < t->rank; i++)
        ok = t->dims[i] == want[4 - t->rank + i];
    if (!ok)
        return attn_fail(err, ATTN_EINPUT, "%s: attention bias %s has shape %s; expected (n, m) = (%zu, %zu), "
                         "(H, n, m) or (B, H, n, m) with H = %zu, B = %zu",
                         file, t->name, shape_of(t, s, sizeof s), d->n, d->m, d->heads, d->batch);
    layout->bias_rank = t->rank;
    return ATTN_OK;
}

/* A bias: (H*width) or (H, width); b_O is (d_model). */
static int plan_bias(const attn_tensor_info *b, const char *file, size_t heads, size_t width,
                     bool per_head_ok, attn_error *err)
{
    char s[256];
    if (!b->present)
        return ATTN_OK;
    bool ok = (b->rank == 1 && b->dims[0] == heads * width) ||
              (per_head_ok && b->rank == 2 && b->dims[0] == heads && b->dims[1] == width);
    if (!ok) {
        if (per_head_ok)
            return attn_fail(err, ATTN_EINPUT, "%s: bias %s has shape %s; expected (%zu,) or (%zu, %zu)",
                             file, b->name, shape_of(b, s, sizeof s), heads * width, heads, width);
        return attn_fail(err, ATTN_EINPUT, "%s: bias %s has shape %s; expected (%zu,)",
                         file, b->name, shape_of(b, s, sizeof s), width);
    }
    return ATTN_OK;
}

static int plan_mask(const attn_tensor_info *mask, const char *file, attn_layout *layout,
                     attn_error *err)
{
    const attn_dims *d = &layout->dims;
    char s[256];
    if (!mask->present)
        return ATTN_OK;
    int status = check_rank(mask, file, 1, layout->batched ? 2 : 1,
                            layout->batched ? "(B, m) or (m,)" : "(m,) for a rank-2 X", err);
    if (status != ATTN_OK)
        return status;
    layout->mask_shared = mask->rank == 1;
    bool ok = mask->dims[mask->rank - 1] == d->m && (mask->rank == 1 || mask->dims[0] == d->batch);
    if (!ok)
        return attn_fail(err, ATTN_EINPUT, "%s: mask %s has shape %s; expected (B, m) = (%zu, %zu) or (m,) = (%zu,)",
                         file, mask->name, shape_of(mask, s, sizeof s), d->batch, d->m, d->m);
    return ATTN_OK;
}

/* CBLAS takes sizes as int: every matrix side must fit in one. */
static int check_blas_sizes(const attn_dims *d, const char *file, attn_error *err)
{
    const size_t G = attn_kv_heads(d);
    const size_t sides[] = {d->n, d->m, d->d_model, d->heads * d->d_k, d->heads * d->d_v,
                            (d->heads + G) * d->d_k + G * d->d_v};
    for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++)
        if (sides[i] > INT_MAX)
            return attn_fail(err, ATTN_EINPUT,
                             "%s: a matrix side of %zu (n = %zu, m = %zu, d_model = %zu, H*d_k = %zu, H*d_v = %zu, Q|K|V with G = %zu: %zu) exceeds what CBLAS can address (%d)",
                             file, sides[i], d->n, d->m, d->d_model, d->heads * d->d_k,
                             d->heads * d->d_v, G, sides[5], INT_MAX);
    return ATTN_OK;
}

int attn_plan_layout(const attn_tensor_info in[ATTN_IN_COUNT], const char *file,
                     size_t heads_flag, attn_layout *layout, attn_error *err)
{
    const attn_plan_request request = {.heads = heads_flag};
    return attn_plan_layout_for(in, file, &request, layout, err);
}

/* W_Q, W_K, W_V (or the fused weights) and W_O: H, G, d_k, d_v. */
static int plan_weights(const attn_tensor_info in[ATTN_IN_COUNT], const char *file,
                        const attn_plan_request *req, attn_layout *layout, attn_error *err)
{
    attn_dims *d = &layout->dims;
    const attn_tensor_info *wk = &in[ATTN_IN_WK];
    char s[256];
    int status = plan_heads(in, file, req, layout, err);
    if (status != ATTN_OK)
        return status;
    if (layout->fused)
        return plan_fused(&in[ATTN_IN_WQKV], file, req, d, err);
    size_t heads = d->heads, kv_heads = req->kv_heads, kv_width = 0;
    if ((status = plan_in_weight(&in[ATTN_IN_WQ], file, req->linear, d->d_model, &heads, &d->d_k, err)) != ATTN_OK)
        return status;
    kv_width = d->d_k;
    if ((status = plan_in_weight(wk, file, req->linear, d->d_model, &kv_heads, &kv_width, err)) != ATTN_OK)
        return status;
    if (kv_heads == 0 || d->heads % kv_heads != 0)
        return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s: %zu K/V heads of d_k = %zu, which does not divide the %zu heads",
                         file, wk->name, shape_of(wk, s, sizeof s), kv_heads, d->d_k, d->heads);
    d->kv_heads = kv_heads;
    return plan_in_weight(&in[ATTN_IN_WV], file, req->linear, d->d_model, &kv_heads, &d->d_v, err);
}

int attn_plan_layout_for(const attn_tensor_info in[ATTN_IN_COUNT], const char *file,
                         const attn_plan_request *req, attn_layout *layout, attn_error *err)
{
    attn_dims *d = &layout->dims;
    int status;
    memset(layout, 0, sizeof *layout);
    layout->linear = req->linear;
    layout->fused = in[ATTN_IN_WQKV].present;
    layout->heads_interleaved = layout->fused && req->heads_interleaved;
    if ((status = check_element_counts(in, file, err)) != ATTN_OK ||
        (status = plan_sequences(in, file, layout, err)) != ATTN_OK ||
        (status = plan_weights(in, file, req, layout, err)) != ATTN_OK)
        return status;
    const size_t G = d->kv_heads;
    if ((status = plan_out_weight(&in[ATTN_IN_WO], file, req->linear, d, err)) != ATTN_OK ||
        (status = plan_bias(&in[ATTN_IN_BQ], file, d->heads, d->d_k, true, err)) != ATTN_OK ||
        (status = plan_bias(&in[ATTN_IN_BK], file, G, d->d_k, true, err)) != ATTN_OK ||
        (status = plan_bias(&in[ATTN_IN_BV], file, G, d->d_v, true, err)) != ATTN_OK ||
        (status = plan_bias(&in[ATTN_IN_BO], file, 1, d->d_model, false, err)) != ATTN_OK ||
        (status = plan_bias(&in[ATTN_IN_BQKV], file, 1, (d->heads + G) * d->d_k + G * d->d_v,
                            false, err)) != ATTN_OK ||
        (status = plan_vector(&in[ATTN_IN_Q_NORM], file, d->d_k, "one weight per feature of a head (d_k)", err)) != ATTN_OK ||
        (status = plan_vector(&in[ATTN_IN_K_NORM], file, d->d_k, "one weight per feature of a head (d_k)", err)) != ATTN_OK ||
        (status = plan_vector(&in[ATTN_IN_ALIBI_SLOPES], file, d->heads, "one slope per head", err)) != ATTN_OK ||
        (status = plan_positions(&in[ATTN_IN_POSITIONS], file, layout, d->n, &layout->positions_shared, err)) != ATTN_OK ||
        (status = plan_positions(&in[ATTN_IN_KV_POSITIONS], file, layout, d->m, &layout->kv_positions_shared, err)) != ATTN_OK ||
        (status = plan_attn_bias(&in[ATTN_IN_ATTN_BIAS], file, layout, err)) != ATTN_OK ||
        (status = plan_mask(&in[ATTN_IN_MASK], file, layout, err)) != ATTN_OK)
        return status;
    return check_blas_sizes(d, file, err);
}

int attn_parse_save_list(const char *list, unsigned *save, attn_error *err)
{
    unsigned chosen = 0;
    const char *p = list;
    for (;;) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < ATTN_OUT_COUNT; i++)
            if (strlen(output_table[i].name) == len && strncmp(p, output_table[i].name, len) == 0)
                found = i;
        if (found < 0) {
            char names[256] = "";
            for (int i = 0; i < ATTN_OUT_COUNT; i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                         i ? "," : "", output_table[i].name);
            return attn_fail(err, ATTN_EUSAGE,
                             "unknown output '%.*s' in '%s' (choose from %s)",
                             (int)len, p, list, names);
        }
        chosen |= 1u << found;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    *save = chosen;
    return ATTN_OK;
}

const char *attn_axis_label(const attn_layout *layout, attn_axis axis)
{
    static const char *const labels[] = {
        [ATTN_AXIS_NONE] = "", [ATTN_AXIS_BATCH] = "batch", [ATTN_AXIS_HEAD] = "head",
        [ATTN_AXIS_KV_HEAD] = "kv_head", [ATTN_AXIS_QUERY] = "query", [ATTN_AXIS_KEY] = "key",
        [ATTN_AXIS_D_K] = "d_k", [ATTN_AXIS_D_V] = "d_v", [ATTN_AXIS_D_MODEL] = "d_model",
    };
    if (axis == ATTN_AXIS_KV_HEAD && attn_kv_heads(&layout->dims) == layout->dims.heads)
        axis = ATTN_AXIS_HEAD;
    return labels[axis];
}

/* The length of an axis. */
static size_t axis_length(const attn_layout *layout, attn_axis axis)
{
    const attn_dims *d = &layout->dims;
    const size_t lengths[] = {
        [ATTN_AXIS_NONE] = 0, [ATTN_AXIS_BATCH] = d->batch, [ATTN_AXIS_HEAD] = d->heads,
        [ATTN_AXIS_KV_HEAD] = attn_kv_heads(d), [ATTN_AXIS_QUERY] = d->n, [ATTN_AXIS_KEY] = d->m,
        [ATTN_AXIS_D_K] = d->d_k, [ATTN_AXIS_D_V] = d->d_v, [ATTN_AXIS_D_MODEL] = d->d_model,
    };
    return lengths[axis];
}

size_t attn_output_shape(const attn_layout *layout, attn_output which, size_t dims[4],
                         const char *labels[4])
{
    const attn_output_spec *spec = &output_table[which];
    size_t rank = 0;
    if (layout->batched) {
        dims[rank] = layout->dims.batch;
        labels[rank++] = "batch";
    }
    for (size_t i = 0; i < 3 && spec->axes[i] != ATTN_AXIS_NONE; i++) {
        dims[rank] = axis_length(layout, spec->axes[i]);
        labels[rank++] = attn_axis_label(layout, spec->axes[i]);
    }
    return rank;
}

int attn_output_bytes(const attn_layout *layout, attn_output which, attn_precision precision,
                      size_t *bytes, attn_error *err)
{
    size_t dims[4], count;
    const char *labels[4];
    size_t rank = attn_output_shape(layout, which, dims, labels);
    const attn_store type = attn_output_type(which, attn_store_of(precision), precision);
    if (!attn_size_product(&count, dims, rank) ||
        !attn_size_mul(bytes, count, attn_store_size(type))) {
        char s[256];
        return attn_fail(err, ATTN_EINPUT, "output %s of shape %s is too large to address",
                         output_table[which].name, attn_format_shape(s, sizeof s, dims, rank));
    }
    return ATTN_OK;
}

double attn_plan_flops(const attn_dims *d)
{
    double n = (double)d->n, m = (double)d->m, D = (double)d->d_model, H = (double)d->heads;
    double G = (double)attn_kv_heads(d), dk = (double)d->d_k, dv = (double)d->d_v;
    double projections = 2 * n * D * H * dk + 2 * m * D * G * (dk + dv);
    double attention = 2 * H * n * m * dk + 2 * H * n * m * dv;
    double output = 2 * n * H * dv * D;
    return (double)d->batch * (projections + attention + output);
}

/* The largest power of two <= v (v >= 1). */
static size_t floor_pow2(size_t v)
{
    size_t p = 1;
    while (p <= v / 2)
        p *= 2;
    return p;
}

/* *total += a * b, all checked. */
static bool add_product(size_t *total, size_t a, size_t b)
{
    size_t p;
    return attn_size_mul(&p, a, b) && attn_size_add(total, *total, p);
}

bool attn_deflate_bound(size_t *out, size_t bytes, size_t chunks)
{
    size_t blocks;
    return attn_size_add(&blocks, bytes / 5000, chunks) && attn_size_mul(&blocks, blocks, 5) &&
           attn_size_add(out, bytes, blocks) && add_product(out, chunks, 32);
}

/* Bytes of the packed room of chunks holding `bytes`, in `chunks` chunks:
 * with compression, the compressor's worst case. */
static bool packed_bytes(size_t *out, size_t bytes, size_t chunks, bool compress)
{
    if (compress)
        return attn_deflate_bound(out, bytes, chunks);
    *out = bytes;
    return true;
}

/* Elements per item of output `which` padded to whole chunks (the axes
 * after the batch axis), and the chunks that holds (rounded up). */
static bool padded_per_item(const attn_layout *layout, attn_output which, size_t elem,
                            size_t rows, size_t *elems, size_t *chunks)
{
    size_t dims[4], chunk[4], room = 1, cells = 1;
    const char *labels[4];
    const size_t rank = attn_output_shape(layout, which, dims, labels);
    attn_output_chunk(layout, which, elem, 1, chunk);
    const size_t first = layout->batched ? 1 : 0;
    for (size_t i = first; i < rank; i++) {
        size_t extent = dims[i];
        if (rows != 0 && i == rank - 2)               /* the maps' query axis */
            extent = rows;
        size_t whole = (extent + chunk[i] - 1) / chunk[i];
        if (!attn_size_mul(&room, room, whole * chunk[i]) || !attn_size_mul(&cells, cells, whole))
            return false;
    }
    *elems = room;
    *chunks = cells;
    return true;
}

/* sizes->staging and staging_per_row: the packed room of the outputs. */
static bool plan_staging(const attn_layout *layout, const attn_step_request *req,
                         attn_slice_sizes *sizes)
{
    const attn_store maps = attn_store_for(req->store, req->precision);
    size_t elems, chunks, bytes, tile[4];
    sizes->staging = sizes->staging_per_row = 0;
    for (int i = 0; i < ATTN_OUT_COUNT; i++) {
        if (!((req->save >> i) & 1u))
            continue;
        const size_t elem = attn_store_size(attn_output_type((attn_output)i, maps, req->precision));
        if (!attn_output_is_map((attn_output)i)) {
            if (!padded_per_item(layout, (attn_output)i, elem, 0, &elems, &chunks) ||
                !attn_size_mul(&bytes, elems, elem) ||
                !packed_bytes(&bytes, bytes, chunks, req->compress) ||
                !attn_size_add(&sizes->staging, sizes->staging, bytes))
                return false;
            continue;
        }
        /* Per row: one tile row of chunks, divided by the tile's rows. */
        size_t dims[4];
        const char *labels[4];
        const size_t rank = attn_output_shape(layout, (attn_output)i, dims, labels);
        attn_output_chunk(layout, (attn_output)i, elem, 1, tile);
        const size_t tile_rows = tile[rank - 2];
        if (!padded_per_item(layout, (attn_output)i, elem, tile_rows, &elems, &chunks) ||
            !attn_size_mul(&bytes, elems, elem) ||
            !packed_bytes(&bytes, bytes, chunks, req->compress) ||
            !attn_size_add(&sizes->staging_per_row, sizes->staging_per_row,
                           (bytes + tile_rows - 1) / tile_rows))
            return false;
    }
    return true;
}

/* Query rows of one chunk of a map (B, H, n, m): see attn_output_chunk. */
static size_t map_chunk_rows(const attn_layout *layout, size_t elem)
{
    size_t chunk[4];
    attn_output_chunk(layout, ATTN_OUT_WEIGHTS, elem, 1, chunk);
    return chunk[layout->batched ? 2 : 1];
}

size_t attn_plan_map_count(unsigned save)
{
    if ((save >> ATTN_OUT_SCORES) & 1u)
        return 2;
    return ((save >> ATTN_OUT_WEIGHTS) & 1u) || ((save >> ATTN_OUT_MEAN) & 1u) ? 1 : 0;
}

/* The buffers of one item (sizes), and the bytes of one item without the
 * maps (*base); false on overflow. */
static bool size_item(const attn_layout *layout, const attn_step_request *req,
                      attn_slice_sizes *sizes, size_t *base)
{
    const attn_dims *d = &layout->dims;
    const size_t elem = attn_precision_size(req->precision);
    size_t hk, gk, gv, hv, hn, elems = 0, bytes, row_elems, padded_n;
    const size_t G = attn_kv_heads(d);
    const unsigned save = req->save;
    memset(sizes, 0, sizeof *sizes);
    sizes->map_count = attn_plan_map_count(save);
    sizes->mean = (save >> ATTN_OUT_MEAN) & 1u ? d->m : 0;
    /* entropy and distance in the precision, argmax as int32: (H, n) each */
    const size_t summary_elem[3] = {
        (save >> ATTN_OUT_ENTROPY) & 1u ? elem : 0, (save >> ATTN_OUT_ARGMAX) & 1u ? sizeof(int32_t) : 0,
        (save >> ATTN_OUT_DISTANCE) & 1u ? elem : 0,
    };
    bool ok = attn_size_mul(&hk, d->heads, d->d_k) && attn_size_mul(&hv, d->heads, d->d_v) &&
              attn_size_mul(&gk, G, d->d_k) && attn_size_mul(&gv, G, d->d_v) &&
              attn_size_mul(&sizes->x, d->n, d->d_model) &&
              attn_size_mul(&sizes->y, layout->cross ? d->m : 0, d->d_model) &&
              attn_size_mul(&sizes->q, d->n, hk) && attn_size_mul(&sizes->k, d->m, gk) &&
              attn_size_mul(&sizes->v, d->m, gv) &&
              attn_size_product(&sizes->bias, (size_t[]){layout->bias_rank == 4 ? d->heads : 0,
                                                         d->n, d->m}, 3) &&
              attn_size_add(&sizes->projections, sizes->q, sizes->k) &&
              attn_size_add(&sizes->projections, sizes->projections, sizes->v) &&
              attn_size_product(&sizes->maps, (size_t[]){d->heads, d->n, d->m}, 3) &&
              attn_size_mul(&sizes->heads, d->n, hv) && attn_size_mul(&sizes->concat, d->n, hv) &&
              attn_size_mul(&sizes->output, d->n, d->d_model) &&
              attn_size_mul(&row_elems, d->heads, d->m) &&
              attn_size_mul(&row_elems, row_elems, sizes->map_count) &&
              attn_size_add(&row_elems, row_elems, sizes->mean) &&
              attn_size_product(&sizes->result, (size_t[]){(save >> ATTN_OUT_RESULT) & 1u ? d->n : 0,
                                                           d->heads, d->d_model}, 3) &&
              attn_size_mul(&hn, d->heads, d->n) &&
              attn_size_mul(&sizes->summary[0], hn, summary_elem[0]) &&
              attn_size_mul(&sizes->summary[1], hn, summary_elem[1]) &&
              attn_size_mul(&sizes->summary[2], hn, summary_elem[2]) &&
              attn_size_mul(&sizes->bytes_per_row, row_elems, elem) &&
              plan_staging(layout, req, sizes) &&
              attn_size_add(&sizes->bytes_per_row, sizes->bytes_per_row, sizes->staging_per_row);
    sizes->keep = d->m;
    sizes->positions = (layout->positions_shared ? 0 : d->n) + (layout->kv_positions_shared ? 0 : d->m);
    /* Everything but the maps; then the maps whole (n padded to tiles). */
    ok = ok && add_product(&elems, 1, sizes->x) && add_product(&elems, 1, sizes->y) &&
         add_product(&elems, 1, sizes->projections) && add_product(&elems, 1, sizes->concat) &&
         add_product(&elems, 1, sizes->output) && add_product(&elems, 1, sizes->bias) &&
         add_product(&elems, 1, sizes->result) &&
         attn_size_mul(&bytes, elems, elem) && attn_size_add(&bytes, bytes, sizes->keep) &&
         attn_size_add(&bytes, bytes, sizes->summary[0]) &&
         attn_size_add(&bytes, bytes, sizes->summary[1]) &&
         attn_size_add(&bytes, bytes, sizes->summary[2]) &&
         attn_size_add(&bytes, bytes, sizes->staging) &&
         add_product(&bytes, sizes->positions, sizeof(int64_t));
    *base = sizes->bytes_per_base = bytes;
    const size_t tile_rows = map_chunk_rows(layout, elem);
    padded_n = (d->n + tile_rows - 1) / tile_rows * tile_rows;
    ok = ok && add_product(&bytes, sizes->bytes_per_row, padded_n);
    sizes->bytes_per_item = bytes;
    return ok;
}

/* The largest step in budget_bytes (or req->forced items). */
static int fit_step(const attn_layout *layout, const attn_step_request *req, size_t budget_bytes,
                    attn_slice_sizes *sizes, size_t *items, attn_error *err)
{
    const attn_dims *d = &layout->dims;
    const size_t forced = req->forced;
    size_t base;
    if (!size_item(layout, req, sizes, &base))
        return attn_fail(err, ATTN_EINPUT,
                         "one batch item (n = %zu, m = %zu, d_model = %zu, H = %zu, d_k = %zu, d_v = %zu) is too large to address",
                         d->n, d->m, d->d_model, d->heads, d->d_k, d->d_v);
    const size_t bytes = sizes->bytes_per_item;
    sizes->rows = d->n;
    size_t fit = forced != 0 ? forced : budget_bytes / bytes;
    if (fit == 0) {
        fit = 1;
        /* Not even one item: its query rows in blocks that fit. */
        size_t room = budget_bytes > base ? budget_bytes - base : 0;
        size_t rows = sizes->bytes_per_row ? room / sizes->bytes_per_row : d->n;
        size_t least = map_chunk_rows(layout, attn_precision_size(req->precision));
        rows = rows > least ? floor_pow2(rows) : least;
        if (forced == 0 && rows < d->n)
            sizes->rows = rows;
    }
    /* A power of two, like the batch extent of the chunks (attn_chunk_shape),
     * so that every slice writes whole chunks. */
    if (forced == 0 && fit < d->batch)
        fit = floor_pow2(fit);
    /* The projections treat a slice as one (items * rows) matrix for CBLAS. */
    size_t rows = d->n > d->m ? d->n : d->m;
    if (fit > (size_t)INT_MAX / rows)
        fit = floor_pow2((size_t)INT_MAX / rows);
    *items = fit < d->batch ? fit : d->batch;
    return ATTN_OK;
}

int attn_plan_slice(const attn_layout *layout, attn_precision precision, unsigned save,
                    size_t budget_bytes, size_t forced, attn_slice_sizes *sizes, size_t *items,
                    attn_error *err)
{
    const attn_step_request req = {
        .precision = precision, .save = save, .memory = budget_bytes, .forced = forced,
        .threads = 1, .task_rows = 128,
    };
    return fit_step(layout, &req, budget_bytes, sizes, items, err);
}

size_t attn_plan_step_blocks(const attn_layout *layout, const attn_slice_sizes *sizes,
                             size_t items, size_t task_rows)
{
    const size_t per = task_rows != 0 ? task_rows : 1;
    return items * layout->dims.heads * ((sizes->rows + per - 1) / per);
}

int attn_plan_steps(const attn_layout *layout, const attn_step_request *req,
                    attn_slice_sizes *sizes, size_t *items, attn_error *err)
{
    const size_t threads = req->threads != 0 ? req->threads : 1;
    size_t budget = req->memory < ATTN_STEP_BYTES ? req->memory : ATTN_STEP_BYTES;
    int status = fit_step(layout, req, budget, sizes, items, err);
    /* Grow the step until every thread has its blocks, the step is the
     * whole batch, or the cap is reached. */
    while (status == ATTN_OK && req->forced == 0 && budget < req->memory &&
           attn_plan_step_blocks(layout, sizes, *items, req->task_rows) <
               ATTN_BLOCKS_PER_THREAD * threads &&
           !(*items == layout->dims.batch && sizes->rows == layout->dims.n)) {
        budget = budget > req->memory / 2 ? req->memory : 2 * budget;
        status = fit_step(layout, req, budget, sizes, items, err);
    }
    return status;
}

size_t attn_plan_default_memory(size_t threads, size_t physical_bytes)
{
    size_t cap = ATTN_MEMORY_PER_THREAD, bound = physical_bytes / ATTN_MEMORY_SHARE;
    if (!attn_size_mul(&cap, cap, threads != 0 ? threads : 1))
        cap = SIZE_MAX;
    if (physical_bytes != 0 && cap > bound)
        cap = bound;
    return cap > ATTN_STEP_BYTES ? cap : ATTN_STEP_BYTES;
}

void attn_chunk_shape(size_t rank, const size_t *dims, size_t elem_size, size_t target_bytes,
                      size_t first_cap, size_t *chunk)
{
    size_t room = target_bytes / elem_size;     /* elements still allowed */
    if (room == 0)
        room = 1;
    for (size_t i = rank; i-- > 0;) {
        size_t limit = dims[i];
        if (i == 0 && first_cap != 0 && first_cap < limit)
            limit = first_cap;
        chunk[i] = limit <= room ? limit : floor_pow2(room);
        if (chunk[i] == 0)           /* a zero-length axis still chunks by 1 */
            chunk[i] = 1;
        room /= chunk[i];
        if (room == 0)
            room = 1;
    }
}

/* Tile sides (rows, keys) of an (n, m) map: T x T clipped, a short axis
 * whole and the other as long as a tile of ATTN_MAP_TILE^2 elements. */
static void map_tile(size_t n, size_t m, size_t *rows, size_t *keys)
{
    const size_t T = ATTN_MAP_TILE, area = T * T;
    *rows = n < T ? n : T;
    *keys = m < T ? m : T;
    if (m < T && m != 0)
        *rows = n < floor_pow2(area / m) ? n : floor_pow2(area / m);
    else if (n < T && n != 0)
        *keys = m < floor_pow2(area / n) ? m : floor_pow2(area / n);
    if (*rows == 0)
        *rows = 1;
    if (*keys == 0)
        *keys = 1;
}

void attn_output_chunk(const attn_layout *layout, attn_output which, size_t elem_size,
                       size_t items, size_t chunk[4])
{
    size_t dims[4];
    const char *labels[4];
    const size_t rank = attn_output_shape(layout, which, dims, labels);
    const size_t cap = layout->batched ? items : 0;
    const bool map = attn_output_is_map(which);
    const size_t n = layout->dims.n, m = layout->dims.m;
    const bool whole_maps = n != 0 && m <= ATTN_MAP_TILE * ATTN_MAP_TILE / n;
    if (!map || whole_maps) {
        attn_chunk_shape(rank, dims, elem_size,
                         map ? ATTN_MAP_TILE * ATTN_MAP_TILE * elem_size : ATTN_CHUNK_BYTES, cap,
                         chunk);
        /* Slices start on chunk boundaries (--batch-slice need not be a
         * power of two). */
        while (cap != 0 && cap % chunk[0] != 0)
            chunk[0]--;
        return;
    }
    for (size_t i = 0; i + 2 < rank; i++)
        chunk[i] = 1;
    map_tile(n, m, &chunk[rank - 2], &chunk[rank - 1]);
}

int attn_output_stored_bytes(const attn_layout *layout, const attn_config *cfg,
                             attn_output which, size_t elem_size, const size_t chunk[4],
                             size_t *bytes, attn_error *err)
{
    size_t dims[4], count, visible = 0;
    const char *labels[4];
    const size_t rank = attn_output_shape(layout, which, dims, labels);
    bool ok = attn_size_product(&count, dims, rank - 2);
    if (ok && attn_output_is_map(which) && cfg != NULL) {
        /* The (n, m) elements of the tiles some query sees. */
        const size_t n = dims[rank - 2], m = dims[rank - 1];
        const size_t tr = chunk[rank - 2], tk = chunk[rank - 1];
        for (size_t r = 0; r < n; r += tr)
            for (size_t k = 0; k < m; k += tk)
                if (attn_tile_visible(cfg, r, n - r < tr ? n - r : tr, k, m - k < tk ? m - k : tk))
                    visible += (n - r < tr ? n - r : tr) * (m - k < tk ? m - k : tk);
    } else {
        ok = ok && attn_size_mul(&visible, dims[rank - 2], dims[rank - 1]);
    }
    if (!ok || !attn_size_mul(&count, count, visible) || !attn_size_mul(bytes, count, elem_size)) {
        char s[256];
        return attn_fail(err, ATTN_EINPUT, "output %s of shape %s is too large to address",
                         output_table[which].name, attn_format_shape(s, sizeof s, dims, rank));
    }
    return ATTN_OK;
}

void attn_unravel_index(size_t flat, const size_t *dims, size_t rank, size_t *idx)
{
    for (size_t i = rank; i-- > 0;) {
        idx[i] = dims[i] ? flat % dims[i] : 0;
        flat = dims[i] ? flat / dims[i] : 0;
    }
}
