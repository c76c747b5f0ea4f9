/*
 * shapes.c - the shapes found in a file checked against each other: the
 * layer's sizes and how each input is laid out (attn_plan.h).
 *
 * Legend: B batch, H heads, n queries, m keys, D d_model, d_k, d_v.
 */
#include "attn_plan.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

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

/* The layouts' names (attn_weight_layout_name's), for the hint to use
 * the other one. */
#define LAYOUT_XW "xw"
#define LAYOUT_LINEAR "linear"

/* A 2-D input weight whose axis in_axis is not d_model = D: when its
 * other axis is, and its features (axis in_axis) split into `parts`
 * (the heads or d_k, when known; else 0), it is stored for the other
 * layout (x W^T, as torch.nn.Linear keeps (out, in), or x W), which the
 * hint names. */
static int wrong_in_axis(const attn_tensor_info *w, const char *file, bool linear,
                         size_t in_axis, size_t D, size_t parts, attn_error *err)
{
    char s[256];
    if (w->rank == 2 && w->dims[1 - in_axis] == D && (parts == 0 || w->dims[in_axis] % parts == 0))
        return attn_fail_hint_arg(err, ATTN_EINPUT, ATTN_HINT_LAYOUT, NULL,
                                  linear ? LAYOUT_XW : LAYOUT_LINEAR,
                                  "%s: %s has shape %s; axis %zu must be d_model = %zu (axis %zu "
                                  "is: the weights look stored %s)", file, w->name,
                                  shape_of(w, s, sizeof s), in_axis, D, 1 - in_axis,
                                  linear ? "(in, out) for x W" : "(out, in) for x W^T, as "
                                  "torch.nn.Linear keeps them");
    return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s; axis %zu must be d_model = %zu",
                     file, w->name, shape_of(w, s, sizeof s), in_axis, D);
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
        return wrong_in_axis(w, file, linear, in_axis, D, *heads != 0 ? *heads : *width, err);
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
        return wrong_in_axis(w, file, req->linear, in_axis, d->d_model,
                             d->heads + 2 * (req->kv_heads != 0 ? req->kv_heads : d->heads), err);
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

/* The attention bias: broadcastable to (B, H, n, m) from the right; its
 * head axis may be 1 (one map for every head). */
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
        ok = t->dims[i] == want[4 - t->rank + i] || (i + 3 == t->rank && t->dims[i] == 1);
    if (!ok)
        return attn_fail(err, ATTN_EINPUT, "%s: attention bias %s has shape %s; expected (n, m) = (%zu, %zu), "
                         "(H, n, m) or (B, H, n, m) with H = %zu or 1, B = %zu",
                         file, t->name, shape_of(t, s, sizeof s), d->n, d->m, d->heads, d->batch);
    layout->bias_rank = t->rank;
    layout->bias_heads_shared = t->rank >= 3 && t->dims[t->rank - 3] != d->heads;
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
    if (ok)
        return ATTN_OK;
    const bool per_query = mask->rank == 2 && mask->dims[0] == d->n && mask->dims[1] == d->m;
    const bool swapped = mask->rank == 2 && mask->dims[0] == d->m && mask->dims[1] == d->batch;
    attn_fail_hint(err, ATTN_EINPUT, per_query ? ATTN_HINT_ATTN_MASK : ATTN_HINT_NONE,
                   "%s: mask %s has shape %s; expected (B, m) = (%zu, %zu) or (m,) = (%zu,)%s",
                   file, mask->name, shape_of(mask, s, sizeof s), d->batch, d->m, d->m,
                   per_query ? ": (n, m) is torch's attn_mask, one for every item"
                   : swapped ? ": X looks transposed, stored (n, B, D) as torch keeps it with "
                               "batch_first=False; store X.transpose(0, 1)" : "");
    return ATTN_EINPUT;
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

