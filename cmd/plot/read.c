/*
 * read.c - the results file for a picture (plot.h): one item's maps of
 * the chosen heads, read in blocks and max-pooled as they come, so memory
 * stays bounded whatever n and m are; their range; the tokens.
 *
 * Legend: B items, H heads, n queries, m keys, k heads drawn.  A source
 * map (rows, cols) is (n, m) of one head for scores and weights, (k, n)
 * for entropy; pooled it is (out_rows, out_cols).
 */
#include "plot/plot.h"

#include "attn_results.h"
#include "cli/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Values read at once: a block of a source map is at most this many
 * floats (16 MiB), unless one pooled cell alone is larger. */
#define BLOCK_VALUES ((size_t)1 << 22)

/* The token datasets that label the axes, when a run stored them. */
#define QUERY_TOKENS "query_token"
#define KEY_TOKENS "key_token"

/* The open results and what every read needs. */
typedef struct source {
    const plot_request *rq;
    attn_results *results;
    size_t rank;
    size_t dims[4];
} source;

/* The finite values seen so far. */
typedef struct value_range {
    double lo, hi;
    bool any;
} value_range;

/* Finds the map dataset and checks its rank. */
static int open_map(source *src, attn_error *err)
{
    const plot_request *rq = src->rq;
    const plot_what_spec *w = plot_what_of(rq->what);
    attn_tensor_info map = {.name = w->name};
    int status = attn_results_describe(src->results, &map, err);
    if (status != ATTN_OK)
        return status;
    bool index;
    char names[256];
    size_t groups;
    if (!map.present && (groups = cli_other_groups(rq->input, rq->group, &index, names,
                                                   sizeof names)) > 0) {
        if (index)
            return attn_fail(err, ATTN_EINPUT, "%s is an --append index of %zu group%s (%s); "
                             "choose one with --group", rq->input, groups, groups == 1 ? "" : "s",
                             names);
        return attn_fail(err, ATTN_EINPUT, "%s: no dataset %s in group %s; results are in %s; "
                         "choose one with --group", rq->input, w->name, rq->group, names);
    }
    if (!map.present) {
        if (rq->what == PLOT_ENTROPY)
            return attn_fail(err, ATTN_EINPUT, "%s: no dataset entropy in group %s; "
                             "run attnrun with --save entropy to have one", rq->input, rq->group);
        return attn_fail(err, ATTN_EINPUT, "%s: no dataset %s in group %s; attnrun saves it by "
                         "default or with --save %s", rq->input, w->name, rq->group, w->name);
    }
    if (map.rank != w->batched_rank && map.rank != w->batched_rank - 1) {
        char text[256];
        return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s; expected %s", rq->input,
                         w->name, attn_format_shape(text, sizeof text, map.dims, map.rank),
                         w->shapes);
    }
    src->rank = map.rank;
    memcpy(src->dims, map.dims, map.rank * sizeof map.dims[0]);
    return ATTN_OK;
}

static int compare_sizes(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* data->heads: the heads of --heads (every head without it), ascending,
 * each once, all below `total`. */
static int select_heads(const plot_request *rq, size_t total, plot_data *d, attn_error *err)
{
    const char *name = plot_what_of(rq->what)->name;
    plot_range all = {0, total - 1};
    const plot_range *ranges = rq->heads != NULL ? rq->heads : &all;
    if (rq->heads == NULL && total > PLOT_MAX_HEADS)      /* before listing them */
        return attn_fail(err, ATTN_EINPUT, "%s: %zu heads are more than one picture shows (%d); "
                         "choose some with --heads", rq->input, total, PLOT_MAX_HEADS);
    size_t count = 0, nranges = rq->heads != NULL ? rq->head_ranges : 1;
    for (size_t i = 0; i < nranges; i++) {
        if (ranges[i].last >= total)
            return attn_fail(err, ATTN_EINPUT, "%s: head %zu is not in %s, which has %zu head%s "
                             "(0 to %zu)", rq->input, ranges[i].last, name, total,
                             total == 1 ? "" : "s", total - 1);
        if (!attn_size_add(&count, count, ranges[i].last - ranges[i].first + 1) ||
            count > ((size_t)1 << 24))
            return attn_fail(err, ATTN_EINPUT, "%s: too many heads chosen", rq->input);
    }
    d->heads = attn_calloc(count, sizeof d->heads[0]);
    if (d->heads == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    size_t at = 0;
    for (size_t i = 0; i < nranges; i++)
        for (size_t h = ranges[i].first; h <= ranges[i].last; h++)
            d->heads[at++] = h;
    qsort(d->heads, count, sizeof d->heads[0], compare_sizes);
    size_t kept = 0;
    for (size_t i = 0; i < count; i++)
        if (kept == 0 || d->heads[kept - 1] != d->heads[i])
            d->heads[kept++] = d->heads[i];
    d->head_count = kept;
    if (kept > PLOT_MAX_HEADS)
        return attn_fail(err, ATTN_EINPUT, "%s: %zu heads are more than one picture shows (%d); "
                         "choose some with --heads", rq->input, kept, PLOT_MAX_HEADS);
    return ATTN_OK;
}

/* ceil(length / limit): the pooling factor that brings an axis within the limit. */
static size_t pool_factor(size_t length)
{
    return length / PLOT_POOL_LIMIT + (length % PLOT_POOL_LIMIT != 0);
}

/* The shape of the picture's data from the dataset's: item, heads, pooling. */
static int plan(const source *src, plot_data *d, attn_error *err)
{
    const plot_request *rq = src->rq;
    const char *name = plot_what_of(rq->what)->name;
    const size_t *dims = src->dims;
    d->batched = src->rank == plot_what_of(rq->what)->batched_rank;
    const size_t *axes = dims + d->batched;          /* (H, n[, m]) */
    if (!d->batched && rq->item > 0)
        return attn_fail(err, ATTN_EINPUT, "%s: %s has no batch axis (the run's X was rank 2), "
                         "so there is no item %zu", rq->input, name, rq->item);
    if (d->batched && rq->item >= dims[0])
        return attn_fail(err, ATTN_EINPUT, "%s: item %zu is not in %s, which has %zu item%s",
                         rq->input, rq->item, name, dims[0], dims[0] == 1 ? "" : "s");
    for (size_t i = 0; i < src->rank; i++)
        if (dims[i] == 0) {
            char text[256];
            return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s: nothing to draw", rq->input,
                             name, attn_format_shape(text, sizeof text, dims, src->rank));
        }
    d->item = rq->item;
    int status = select_heads(rq, axes[0], d, err);
    if (status != ATTN_OK)
        return status;
    if (rq->what == PLOT_ENTROPY) {
        d->panels = 1;
        d->rows = d->head_count;
        d->cols = axes[1];
    } else {
        d->panels = d->head_count;
        d->rows = axes[1];
        d->cols = axes[2];
    }
    d->pool_rows = pool_factor(d->rows);
    d->pool_cols = pool_factor(d->cols);
    d->out_rows = d->rows / d->pool_rows + (d->rows % d->pool_rows != 0);
    d->out_cols = d->cols / d->pool_cols + (d->cols % d->pool_cols != 0);
    size_t width, height, cells;
    if (!plot_size(d, &width, &height))
        return attn_fail(err, ATTN_EINPUT, "%s: %zu heads of (%zu, %zu) make a picture of %zu x %zu, "
                         "more than one picture may be (32767 a side, 2^26 pixels); choose fewer "
                         "heads with --heads", rq->input, d->head_count, d->rows, d->cols, width,
                         height);
    size_t bytes;
    if (!attn_size_mul(&cells, d->out_rows, d->out_cols) ||
        !attn_size_mul(&cells, cells, d->panels) ||
        !attn_size_mul(&bytes, cells, sizeof d->values[0]) ||
        (d->values = attn_malloc(bytes)) == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    for (size_t i = 0; i < cells; i++)
        d->values[i] = -INFINITY;        /* the max of nothing yet */
    return ATTN_OK;
}

/* Reads rows [r0, r0 + nr) and columns [c0, c0 + nc) of panel p's source
 * map into block (nr, nc), as float.  For entropy nr is 1: each row is
 * another head. */
static int read_block(const source *src, const plot_data *d, size_t p, size_t r0, size_t nr,
                      size_t c0, size_t nc, float *block, attn_error *err)
{
    size_t start[4], count[4], a = 0;
    if (d->batched) {
        start[a] = d->item;
        count[a++] = 1;
    }
    if (d->what == PLOT_ENTROPY) {
        start[a] = d->heads[r0];
        count[a++] = 1;
    } else {
        start[a] = d->heads[p];
        count[a++] = 1;
        start[a] = r0;
        count[a++] = nr;
    }
    start[a] = c0;
    count[a++] = nc;
    return attn_results_read(src->results, plot_what_of(d->what)->name, start, count, block, err);
}

/* Folds block (nr, nc), at rows r0 and columns c0 of a source map, into
 * its pooled map (out_rows, out_cols): each pooled cell is the largest
 * value of its cells, NaN when one is NaN; a cell may span blocks.  The
 * finite values widen *range. */
static void pool_block(const plot_data *d, const float *block, size_t r0, size_t nr, size_t c0,
                       size_t nc, float *pooled, value_range *range)
{
    const size_t fk = d->pool_cols;
    for (size_t i = 0; i < nr; i++) {
        const float *in = block + i * nc;
        float *out = pooled + ((r0 + i) / d->pool_rows) * d->out_cols + c0 / fk;
        /* the columns of the first pooled cell, then fk at a time */
        for (size_t j = 0, end = fk - c0 % fk; j < nc; j = end, end += fk, out++) {
            end = end < nc ? end : nc;
            float cell = *out;
            for (size_t c = j; c < end; c++) {
                float v = in[c];
                if (isnan(v) || isnan(cell)) {
                    cell = NAN;
                } else if (v > cell) {
                    cell = v;
                }
                if (isfinite(v)) {
                    range->lo = range->any && range->lo < v ? range->lo : v;
                    range->hi = range->any && range->hi > v ? range->hi : v;
                    range->any = true;
                }
            }
            *out = cell;
        }
    }
}

/* Reads and pools every panel, in blocks of at most BLOCK_VALUES values:
 * whole rows while they fit (as many as fit), else parts of one row. */
static int read_maps(const source *src, plot_data *d, value_range *range, attn_error *err)
{
    const size_t nc = d->cols < BLOCK_VALUES ? d->cols : BLOCK_VALUES;
    size_t nr = BLOCK_VALUES / nc, bytes;
    nr = nr > d->rows ? d->rows : nr;
    if (d->what == PLOT_ENTROPY)
        nr = 1;                              /* each row another head */
    float *block = NULL;                     /* (nr, nc) */
    if (!attn_size_mul(&bytes, nr * nc, sizeof *block) || (block = attn_malloc(bytes)) == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    int status = ATTN_OK;
    for (size_t p = 0; p < d->panels && status == ATTN_OK; p++) {
        float *pooled = d->values + p * d->out_rows * d->out_cols;
        for (size_t r0 = 0; r0 < d->rows && status == ATTN_OK; r0 += nr) {
            size_t rows = d->rows - r0 < nr ? d->rows - r0 : nr;
            for (size_t c0 = 0; c0 < d->cols && status == ATTN_OK; c0 += nc) {
                size_t cols = d->cols - c0 < nc ? d->cols - c0 : nc;
                status = read_block(src, d, p, r0, rows, c0, cols, block, err);
                if (status == ATTN_OK)
                    pool_block(d, block, r0, rows, c0, cols, pooled, range);
            }
        }
    }
    free(block);
    return status;
}

/* The colour scale's range and the special values the picture shows. */
static void finish_range(plot_data *d, const value_range *range)
{
    d->lo = plot_what_of(d->what)->from_zero ? 0 : range->any ? range->lo : 0;
    /* An empty range gets a width that large values still see: lo + 1
     * would be lo itself beyond 2^53. */
    d->hi = range->any ? range->hi : d->lo;
    if (!(d->hi > d->lo))
        d->hi = d->lo + fmax(1.0, fabs(d->lo) * 0x1p-20);
    size_t cells = d->panels * d->out_rows * d->out_cols;
    for (size_t i = 0; i < cells; i++)
        d->specials |= plot_special(d->values[i]);
}

/* The picture's axes: tokens where the group holds them. */
static int read_tokens(const source *src, plot_data *d, attn_error *err)
{
    if (d->what == PLOT_ENTROPY)                 /* rows are heads */
        return attn_results_labels(src->results, QUERY_TOKENS, d->item, d->cols,
                                   &d->col_labels, err);
    int status = attn_results_labels(src->results, QUERY_TOKENS, d->item, d->rows,
                                     &d->row_labels, err);
    if (status == ATTN_OK)
        status = attn_results_labels(src->results, KEY_TOKENS, d->item, d->cols,
                                     &d->col_labels, err);
    return status;
}

static int read_all(source *src, plot_data *d, attn_error *err)
{
    value_range range = {0, 0, false};
    int status = attn_results_open(src->rq->input, src->rq->group, &src->results, err);
    bool index;
    char names[256];
    size_t groups;
    if (status == ATTN_EINPUT &&
        (groups = cli_other_groups(src->rq->input, src->rq->group, &index, names,
                                   sizeof names)) > 0) {
        size_t used = strlen(err->msg);       /* the group is not there: say which are */
        snprintf(err->msg + used, sizeof err->msg - used, "; %s %s; choose one with --group",
                 index ? "the index's groups are" : "results are in", names);
    }
    if (status == ATTN_OK)
        status = open_map(src, err);
    if (status == ATTN_OK)
        status = plan(src, d, err);
    if (status == ATTN_OK)
        status = read_maps(src, d, &range, err);
    if (status == ATTN_OK)
        status = read_tokens(src, d, err);
    if (status == ATTN_OK)
        finish_range(d, &range);
    return status;
}

int plot_read(const plot_request *rq, plot_data *data, attn_error *err)
{
    memset(data, 0, sizeof *data);
    data->what = rq->what;
    data->input = rq->input;
    data->group = rq->group;
    source src = {.rq = rq, .results = NULL};
    int status = read_all(&src, data, err);
    attn_results_close(src.results);
    if (status != ATTN_OK)
        plot_data_free(data);
    return status;
}

void plot_data_free(plot_data *data)
{
    free(data->heads);
    free(data->values);
    attn_labels_free(data->row_labels, data->rows);
    attn_labels_free(data->col_labels, data->cols);
    data->heads = NULL;
    data->values = NULL;
    data->row_labels = data->col_labels = NULL;
}
