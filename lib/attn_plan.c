/*
 * attn_plan.c - shape validation, slice sizing and output shapes (attn_plan.h).
 *
 * Legend: B batch, H heads, n queries, m keys, D d_model, d_k, d_v.
 */
#include "attn_plan.h"

#include <limits.h>
#include <string.h>

static const char *const output_names[ATTN_OUT_COUNT] = {
    "scores", "weights", "heads", "output", "q", "k", "v",
};

static const char *const output_descriptions[ATTN_OUT_COUNT] = {
    "scaled attention scores Q K^T * scale per head; masked entries are -inf",
    "attention weights: softmax of scores over keys; rows sum to 1, or are 0 where every key is masked",
    "per-head attention outputs: weights V",
    "projected output: concat(heads) W_O + b_O",
    "per-head queries: X W_Q + b_Q",
    "per-head keys: Y W_K + b_K (Y is X, or the --kv dataset)",
    "per-head values: Y W_V + b_V (Y is X, or the --kv dataset)",
};

const char *attn_output_name(attn_output which)
{
    return output_names[which];
}

const char *attn_output_description(attn_output which)
{
    return output_descriptions[which];
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

/* The head count: from 3-D weights, or --heads for packed ones. */
static int plan_heads(const attn_tensor_info in[ATTN_IN_COUNT], const char *file,
                      size_t heads_flag, attn_layout *layout, attn_error *err)
{
    const attn_tensor_info *from = NULL;
    char s1[256], s2[256];
    for (int i = ATTN_IN_WQ; i <= ATTN_IN_WO; i++) {
        const attn_tensor_info *w = &in[i];
        int status = check_rank(w, file, 2, 3, "2-D packed or 3-D (H, ., .) weights", err);
        if (status != ATTN_OK)
            return status;
        layout->per_head[i - ATTN_IN_WQ] = w->rank == 3;
        if (w->rank != 3)
            continue;
        if (heads_flag != 0 && w->dims[0] != heads_flag)
            return attn_fail(err, ATTN_EINPUT, "%s: --heads %zu disagrees with %s of shape %s (%zu heads)",
                             file, heads_flag, w->name, shape_of(w, s1, sizeof s1), w->dims[0]);
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
    if (heads_flag == 0)
        return attn_fail(err, ATTN_EINPUT, "%s: %s has packed shape %s: --heads is required",
                         file, in[ATTN_IN_WQ].name, shape_of(&in[ATTN_IN_WQ], s1, sizeof s1));
    layout->dims.heads = heads_flag;
    return ATTN_OK;
}

/*
 * A projection weight: packed (rows, H*width) or per head (H, rows, width).
 * `rows` is what its input axis must be; *width receives the per-head width.
 * For W_O the roles swap: (H*width, rows) or (H, width, rows), width known.
 */
static int plan_in_weight(const attn_tensor_info *w, const char *file, size_t heads,
                          size_t rows, const char *rows_name, size_t *width, attn_error *err)
{
    char s[256];
    size_t in_axis = w->rank == 3 ? 1 : 0;
    if (w->dims[in_axis] != rows)
        return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s; axis %zu must be %s = %zu",
                         file, w->name, shape_of(w, s, sizeof s), in_axis, rows_name, rows);
    if (w->rank == 3) {
        *width = w->dims[2];
        return ATTN_OK;
    }
    if (w->dims[1] % heads != 0)
        return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s: %zu columns do not split into %zu heads",
                         file, w->name, shape_of(w, s, sizeof s), w->dims[1], heads);
    *width = w->dims[1] / heads;
    return ATTN_OK;
}

static int plan_out_weight(const attn_tensor_info *w, const char *file, const attn_dims *d,
                           attn_error *err)
{
    char s[256];
    bool ok = w->rank == 3 ? (w->dims[1] == d->d_v && w->dims[2] == d->d_model)
                           : (w->dims[0] == d->heads * d->d_v && w->dims[1] == d->d_model);
    if (!ok)
        return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s; expected (%zu, %zu) or (%zu, %zu, %zu) for H = %zu, d_v = %zu, d_model = %zu",
                         file, w->name, shape_of(w, s, sizeof s), d->heads * d->d_v, d->d_model,
                         d->heads, d->d_v, d->d_model, d->heads, d->d_v, d->d_model);
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
    const size_t sides[] = {d->n, d->m, d->d_model, d->heads * d->d_k, d->heads * d->d_v};
    for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++)
        if (sides[i] > INT_MAX)
            return attn_fail(err, ATTN_EINPUT,
                             "%s: a matrix side of %zu (n = %zu, m = %zu, d_model = %zu, H*d_k = %zu, H*d_v = %zu) exceeds what CBLAS can address (%d)",
                             file, sides[i], d->n, d->m, d->d_model, d->heads * d->d_k,
                             d->heads * d->d_v, INT_MAX);
    return ATTN_OK;
}

int attn_plan_layout(const attn_tensor_info in[ATTN_IN_COUNT], const char *file,
                     size_t heads_flag, attn_layout *layout, attn_error *err)
{
    attn_dims *d = &layout->dims;
    int status;
    memset(layout, 0, sizeof *layout);
    if ((status = check_element_counts(in, file, err)) != ATTN_OK ||
        (status = plan_sequences(in, file, layout, err)) != ATTN_OK ||
        (status = plan_heads(in, file, heads_flag, layout, err)) != ATTN_OK)
        return status;

    size_t d_k_from_k;
    if ((status = plan_in_weight(&in[ATTN_IN_WQ], file, d->heads, d->d_model, "d_model", &d->d_k, err)) != ATTN_OK ||
        (status = plan_in_weight(&in[ATTN_IN_WK], file, d->heads, d->d_model, "d_model", &d_k_from_k, err)) != ATTN_OK ||
        (status = plan_in_weight(&in[ATTN_IN_WV], file, d->heads, d->d_model, "d_model", &d->d_v, err)) != ATTN_OK)
        return status;
    if (d_k_from_k != d->d_k) {
        char s1[256], s2[256];
        return attn_fail(err, ATTN_EINPUT, "%s: %s %s and %s %s give different d_k (%zu and %zu)",
                         file, in[ATTN_IN_WQ].name, shape_of(&in[ATTN_IN_WQ], s1, sizeof s1),
                         in[ATTN_IN_WK].name, shape_of(&in[ATTN_IN_WK], s2, sizeof s2), d->d_k, d_k_from_k);
    }
    if ((status = plan_out_weight(&in[ATTN_IN_WO], file, d, err)) != ATTN_OK ||
        (status = plan_bias(&in[ATTN_IN_BQ], file, d->heads, d->d_k, true, err)) != ATTN_OK ||
        (status = plan_bias(&in[ATTN_IN_BK], file, d->heads, d->d_k, true, err)) != ATTN_OK ||
        (status = plan_bias(&in[ATTN_IN_BV], file, d->heads, d->d_v, true, err)) != ATTN_OK ||
        (status = plan_bias(&in[ATTN_IN_BO], file, 1, d->d_model, false, err)) != ATTN_OK)
        return status;
    if ((status = plan_mask(&in[ATTN_IN_MASK], file, layout, err)) != ATTN_OK)
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
            if (strlen(output_names[i]) == len && strncmp(p, output_names[i], len) == 0)
                found = i;
        if (found < 0)
            return attn_fail(err, ATTN_EUSAGE,
                             "--save: unknown output '%.*s' in '%s' (choose from scores,weights,heads,output,q,k,v)",
                             (int)len, p, list);
        chosen |= 1u << found;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    *save = chosen;
    return ATTN_OK;
}

size_t attn_output_shape(const attn_layout *layout, attn_output which, size_t dims[4],
                         const char *labels[4])
{
    const attn_dims *d = &layout->dims;
    size_t rank = 0;
    if (layout->batched) {
        dims[rank] = d->batch;
        labels[rank++] = "batch";
    }
    if (which != ATTN_OUT_OUTPUT) {
        dims[rank] = d->heads;
        labels[rank++] = "head";
    }
    bool keys_rows = which == ATTN_OUT_K || which == ATTN_OUT_V;
    dims[rank] = keys_rows ? d->m : d->n;
    labels[rank++] = keys_rows ? "key" : "query";
    switch (which) {
    case ATTN_OUT_SCORES:
    case ATTN_OUT_WEIGHTS: dims[rank] = d->m;       labels[rank++] = "key";     break;
    case ATTN_OUT_HEADS:
    case ATTN_OUT_V:       dims[rank] = d->d_v;     labels[rank++] = "d_v";     break;
    case ATTN_OUT_Q:
    case ATTN_OUT_K:       dims[rank] = d->d_k;     labels[rank++] = "d_k";     break;
    case ATTN_OUT_OUTPUT:
    default:               dims[rank] = d->d_model; labels[rank++] = "d_model"; break;
    }
    return rank;
}

int attn_output_bytes(const attn_layout *layout, attn_output which, attn_precision precision,
                      size_t *bytes, attn_error *err)
{
    size_t dims[4], count;
    const char *labels[4];
    size_t rank = attn_output_shape(layout, which, dims, labels);
    if (!attn_size_product(&count, dims, rank) ||
        !attn_size_mul(bytes, count, attn_precision_size(precision))) {
        char s[256];
        return attn_fail(err, ATTN_EINPUT, "output %s of shape %s is too large to address",
                         output_names[which], attn_format_shape(s, sizeof s, dims, rank));
    }
    return ATTN_OK;
}

double attn_plan_flops(const attn_dims *d)
{
    double n = (double)d->n, m = (double)d->m, D = (double)d->d_model, H = (double)d->heads;
    double dk = (double)d->d_k, dv = (double)d->d_v;
    double projections = 2 * n * D * H * dk + 2 * m * D * H * (dk + dv);
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

/* Query rows of one chunk of a map (B, H, n, m): see attn_chunk_shape. */
static size_t map_chunk_rows(const attn_dims *d, size_t elem)
{
    size_t dims[4] = {1, d->heads, d->n, d->m}, chunk[4];
    attn_chunk_shape(4, dims, elem, ATTN_CHUNK_BYTES, 1, chunk);
    return chunk[2];
}

int attn_plan_slice(const attn_layout *layout, attn_precision precision, unsigned save,
                    size_t budget_bytes, size_t forced, attn_slice_sizes *sizes, size_t *items,
                    attn_error *err)
{
    const attn_dims *d = &layout->dims;
    const size_t elem = attn_precision_size(precision);
    size_t hk, hv, elems = 0, bytes, row_elems;
    memset(sizes, 0, sizeof *sizes);
    sizes->map_count = (save >> ATTN_OUT_SCORES) & 1u ? 2 : (save >> ATTN_OUT_WEIGHTS) & 1u ? 1 : 0;
    bool ok = attn_size_mul(&hk, d->heads, d->d_k) && attn_size_mul(&hv, d->heads, d->d_v) &&
              attn_size_mul(&sizes->x, d->n, d->d_model) &&
              attn_size_mul(&sizes->y, layout->cross ? d->m : 0, d->d_model) &&
              attn_size_mul(&sizes->q, d->n, hk) && attn_size_mul(&sizes->k, d->m, hk) &&
              attn_size_mul(&sizes->v, d->m, hv) &&
              attn_size_add(&sizes->projections, sizes->q, sizes->k) &&
              attn_size_add(&sizes->projections, sizes->projections, sizes->v) &&
              attn_size_product(&sizes->maps, (size_t[]){d->heads, d->n, d->m}, 3) &&
              attn_size_mul(&sizes->heads, d->n, hv) && attn_size_mul(&sizes->concat, d->n, hv) &&
              attn_size_mul(&sizes->output, d->n, d->d_model) &&
              attn_size_mul(&row_elems, d->heads, d->m) &&
              attn_size_mul(&row_elems, row_elems, sizes->map_count) &&
              attn_size_mul(&sizes->bytes_per_row, row_elems, elem);
    sizes->keep = d->m;
    sizes->reorder = sizes->q > sizes->k ? sizes->q : sizes->k;
    sizes->reorder = sizes->reorder > sizes->v ? sizes->reorder : sizes->v;
    sizes->reorder = sizes->reorder > sizes->heads ? sizes->reorder : sizes->heads;
    /* Everything but the maps; then the maps whole. */
    ok = ok && add_product(&elems, 1, sizes->x) && add_product(&elems, 1, sizes->y) &&
         add_product(&elems, 1, sizes->projections) && add_product(&elems, 1, sizes->concat) &&
         add_product(&elems, 1, sizes->output) && add_product(&elems, 1, sizes->reorder) &&
         attn_size_mul(&bytes, elems, elem) && attn_size_add(&bytes, bytes, sizes->keep);
    size_t base = bytes;
    ok = ok && add_product(&bytes, sizes->bytes_per_row, d->n);
    if (!ok)
        return attn_fail(err, ATTN_EINPUT,
                         "one batch item (n = %zu, m = %zu, d_model = %zu, H = %zu, d_k = %zu, d_v = %zu) is too large to address",
                         d->n, d->m, d->d_model, d->heads, d->d_k, d->d_v);
    sizes->bytes_per_item = bytes;
    sizes->rows = d->n;
    size_t fit = forced != 0 ? forced : budget_bytes / bytes;
    if (fit == 0) {
        fit = 1;
        /* Not even one item: its query rows in blocks that fit. */
        size_t room = budget_bytes > base ? budget_bytes - base : 0;
        size_t rows = sizes->bytes_per_row ? room / sizes->bytes_per_row : d->n;
        size_t least = map_chunk_rows(d, elem);
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

void attn_unravel_index(size_t flat, const size_t *dims, size_t rank, size_t *idx)
{
    for (size_t i = rank; i-- > 0;) {
        idx[i] = dims[i] ? flat % dims[i] : 0;
        flat = dims[i] ? flat / dims[i] : 0;
    }
}
