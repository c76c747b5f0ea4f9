/*
 * read.c - the results file for a picture (plot.h): what the group holds
 * (a run's results, a rollout, a census of heads), the maps of one item
 * and of the chosen heads or layers, zoomed, read in blocks and max-pooled
 * as they come, so memory stays bounded whatever n and m are; their
 * ranges; the labels.
 *
 * Legend: B items, H heads, L layers, n queries, m keys, k heads drawn.  A
 * source map (rows, cols) is (n, m) of one head or layer, (k, n) for
 * entropy, (L, H) for a census grid, or the block of it --queries and
 * --keys choose, whose first row and column are row_first and col_first of
 * the dataset; pooled it is (out_rows, out_cols).
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

/* The finite values of one colour bar seen so far. */
typedef cli_values value_range;

/* The open results and what every read needs. */
typedef struct source {
    const plot_request *rq;
    attn_results *results;
    bool census;                  /* the group is a census of attnrun heads */
    const plot_what_spec *specs[PLOT_WHAT_COUNT];   /* (spec_count) the datasets
                                     drawn: one map, or a census's grids  */
    size_t spec_count;
    const plot_panels_spec *layout;
    size_t rank;
    size_t dims[4];               /* the dataset's shape (every grid's)   */
    size_t *index;                /* (index_count) the heads or layers of
                                     the lead axis drawn, ascending       */
    size_t index_count;
    value_range *ranges;          /* (panels) or (1), as d->bar_per_panel */
} source;

/* ------------------------------------------------------ what is drawn */

/* "entropy, distance, first" into text (size): the grids of the census
 * present. */
static void grid_names(const source *src, char *text, size_t size)
{
    size_t at = 0;
    text[0] = '\0';
    for (size_t i = 0; i < src->spec_count && at < size; i++)
        at += (size_t)snprintf(text + at, size - at, "%s%s", i > 0 ? ", " : "",
                               src->specs[i]->name);
}

/* Whether the group holds the dataset `name`, with its shape in *info. */
static int find_dataset(source *src, const char *name, attn_tensor_info *info, attn_error *err)
{
    *info = (attn_tensor_info){.name = name};
    return attn_results_describe(src->results, info, err);
}

/* The census's grids: the one --what names, or every one present. */
static int choose_grids(source *src, attn_error *err)
{
    const plot_request *rq = src->rq;
    attn_tensor_info info;
    char names[256];
    for (int w = 0; w < PLOT_WHAT_COUNT; w++) {
        const plot_what_spec *spec = plot_grid_of((plot_what)w);
        if (spec == NULL)
            continue;
        int status = find_dataset(src, spec->name, &info, err);
        if (status != ATTN_OK)
            return status;
        if (!info.present)
            continue;
        if (info.rank != 2) {
            char text[256];
            return attn_fail(err, ATTN_EINPUT, "%s: the census's %s has shape %s; expected (L, H)",
                             rq->input, spec->name,
                             attn_format_shape(text, sizeof text, info.dims, info.rank));
        }
        if (src->spec_count > 0 && (info.dims[0] != src->dims[0] || info.dims[1] != src->dims[1]))
            return attn_fail(err, ATTN_EINPUT, "%s: the census's %s is (%zu, %zu) but %s is "
                             "(%zu, %zu): one census has one shape", rq->input, spec->name,
                             info.dims[0], info.dims[1], src->specs[0]->name, src->dims[0],
                             src->dims[1]);
        src->rank = 2;
        memcpy(src->dims, info.dims, 2 * sizeof info.dims[0]);
        src->specs[src->spec_count++] = spec;
    }
    grid_names(src, names, sizeof names);
    if (src->spec_count == 0)
        return attn_fail(err, ATTN_EINPUT, "%s: a census of attnrun heads with no grid (entropy, "
                         "distance, first, ...) in group %s", rq->input, rq->group);
    if (rq->what == PLOT_WHAT_DEFAULT)
        return ATTN_OK;
    const plot_what_spec *wanted = plot_grid_of(rq->what);
    if (wanted == NULL)
        return attn_fail(err, ATTN_EINPUT, "%s is a census of attnrun heads, which holds no %s; "
                         "--what takes one of its grids: %s", rq->input,
                         plot_map_of(rq->what)->name, names);
    for (size_t i = 0; i < src->spec_count; i++)
        if (src->specs[i] == wanted) {
            src->specs[0] = wanted;
            src->spec_count = 1;
            return ATTN_OK;
        }
    return attn_fail(err, ATTN_EINPUT, "%s: this census has no grid %s (%s); it has %s",
                     rq->input, wanted->name, wanted->made_by, names);
}

/* The map datasets of the group, "mean, entropy", into text (size). */
static size_t present_maps(source *src, char *text, size_t size)
{
    size_t count = 0, at = 0;
    attn_tensor_info info;
    attn_error ignored;
    text[0] = '\0';
    for (int w = 0; w < PLOT_WHAT_COUNT && at < size; w++) {
        const plot_what_spec *spec = plot_map_of((plot_what)w);
        if (spec == NULL || find_dataset(src, spec->name, &info, &ignored) != ATTN_OK ||
            !info.present)
            continue;
        at += (size_t)snprintf(text + at, size - at, "%s%s", count++ > 0 ? ", " : "", spec->name);
    }
    return count;
}

/* The map --what names, or by default weights -- rollout or flow in a
 * file that has one and no weights --; its rank checked. */
static int choose_map(source *src, attn_error *err)
{
    const plot_request *rq = src->rq;
    plot_what what = rq->what;
    attn_tensor_info map;
    int status;
    if (what == PLOT_WHAT_DEFAULT) {
        what = PLOT_WEIGHTS;
        attn_tensor_info weights, rollout, flow;
        if ((status = find_dataset(src, "weights", &weights, err)) != ATTN_OK ||
            (status = find_dataset(src, "rollout", &rollout, err)) != ATTN_OK ||
            (status = find_dataset(src, "flow", &flow, err)) != ATTN_OK)
            return status;
        if (!weights.present && rollout.present)
            what = PLOT_ROLLOUT;
        else if (!weights.present && flow.present)
            what = PLOT_FLOW;
    }
    const plot_what_spec *spec = plot_map_of(what);
    if (spec == NULL)
        return attn_fail(err, ATTN_EINPUT, "%s: %s is a grid of a census of attnrun heads "
                         "(attnrun heads -o CENSUS.h5), and group %s is not one", rq->input,
                         plot_grid_of(what)->name, rq->group);
    src->specs[0] = spec;
    src->spec_count = 1;
    if ((status = find_dataset(src, spec->name, &map, err)) != ATTN_OK)
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
                         "choose one with --group", rq->input, spec->name, rq->group, names);
    }
    if (!map.present) {
        if (present_maps(src, names, sizeof names) > 0)
            return attn_fail(err, ATTN_EINPUT, "%s: no dataset %s in group %s (%s); it holds %s: "
                             "choose one with --what", rq->input, spec->name, rq->group,
                             spec->made_by, names);
        return attn_fail(err, ATTN_EINPUT, "%s: no dataset %s in group %s; %s", rq->input,
                         spec->name, rq->group, spec->made_by);
    }
    const plot_panels_spec *layout = plot_panels_of(spec->panels);
    size_t rank = plot_panels_rank(layout);
    if (map.rank != rank && map.rank != rank - 1) {
        char text[256];
        return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s; expected %s", rq->input,
                         spec->name, attn_format_shape(text, sizeof text, map.dims, map.rank),
                         layout->shapes);
    }
    src->rank = map.rank;
    memcpy(src->dims, map.dims, map.rank * sizeof map.dims[0]);
    return ATTN_OK;
}

/* Whether the group is a census of attnrun heads (its attnrun_analysis). */
static int is_census(source *src, attn_error *err)
{
    char *analysis = NULL;
    int status = attn_results_attribute_text(src->results, PLOT_ANALYSIS_ATTRIBUTE, &analysis,
                                             err);
    src->census = status == ATTN_OK && analysis != NULL &&
                  strcmp(analysis, PLOT_CENSUS_ANALYSIS) == 0;
    free(analysis);
    return status;
}

/* An option given that does not apply to what is drawn: ATTN_EUSAGE. */
static int not_applying(const source *src, const char *option, attn_error *err)
{
    const char *what = src->census ? "a census of heads" : src->specs[0]->name;
    return attn_fail(err, ATTN_EUSAGE, "%s does not apply to %s: %s", option, what,
                     src->layout->is);
}

/* --heads, --queries and --keys each apply to an axis of the maps drawn. */
static int check_options(const source *src, attn_error *err)
{
    const plot_request *rq = src->rq;
    const plot_panels_spec *layout = src->layout;
    bool heads = layout->lead != PLOT_LEAD_NONE && layout->lead_axis == PLOT_HEAD;
    if (rq->heads != NULL && !heads)
        return not_applying(src, "--heads", err);
    const plot_range *zoom[2] = {rq->queries, rq->keys};
    const plot_axis axes[2] = {PLOT_QUERY, PLOT_KEY};
    for (size_t i = 0; i < 2; i++)
        if (zoom[i] != NULL && layout->rows != axes[i] && layout->cols != axes[i])
            return not_applying(src, plot_axis_of(axes[i])->option, err);
    return ATTN_OK;
}

/* ------------------------------------------------------------- shapes */

static int compare_sizes(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* src->index: the heads of --heads (every index without it), ascending,
 * each once, all below `total`, the lead axis's length. */
static int select_index(source *src, size_t total, attn_error *err)
{
    const plot_request *rq = src->rq;
    const char *name = src->specs[0]->name;
    const plot_axis_spec *axis = plot_axis_of(src->layout->lead_axis);
    plot_range all = {0, total - 1};
    const plot_range *ranges = rq->heads != NULL ? rq->heads : &all;
    if (rq->heads == NULL && total > PLOT_MAX_HEADS)      /* before listing them */
        return attn_fail(err, ATTN_EINPUT, "%s: %zu %s are more than one picture shows (%d)%s",
                         rq->input, total, axis->plural, PLOT_MAX_HEADS,
                         src->layout->lead_axis == PLOT_HEAD ? "; choose some with --heads" : "");
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
    src->index = attn_calloc(count, sizeof src->index[0]);
    if (src->index == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    size_t at = 0;
    for (size_t i = 0; i < nranges; i++)
        for (size_t h = ranges[i].first; h <= ranges[i].last; h++)
            src->index[at++] = h;
    qsort(src->index, count, sizeof src->index[0], compare_sizes);
    size_t kept = 0;
    for (size_t i = 0; i < count; i++)
        if (kept == 0 || src->index[kept - 1] != src->index[i])
            src->index[kept++] = src->index[i];
    src->index_count = kept;
    if (kept > PLOT_MAX_HEADS)
        return attn_fail(err, ATTN_EINPUT, "%s: %zu heads are more than one picture shows (%d); "
                         "choose some with --heads", rq->input, kept, PLOT_MAX_HEADS);
    return ATTN_OK;
}

/* The rows or columns of an axis of `length` that --queries or --keys
 * keep: *first and *count; all of them without. */
static int zoom_axis(const source *src, plot_axis axis, size_t length, size_t *first,
                     size_t *count, attn_error *err)
{
    const plot_request *rq = src->rq;
    const plot_range *zoom = axis == PLOT_QUERY ? rq->queries : axis == PLOT_KEY ? rq->keys : NULL;
    *first = 0;
    *count = length;
    if (zoom == NULL)
        return ATTN_OK;
    const plot_axis_spec *a = plot_axis_of(axis);
    if (zoom->last >= length)
        return attn_fail(err, ATTN_EINPUT, "%s: %s %zu-%zu is outside %s, which has %zu %s "
                         "(0 to %zu)", rq->input, a->option, zoom->first, zoom->last,
                         src->specs[0]->name, length, length == 1 ? a->name : a->plural,
                         length - 1);
    *first = zoom->first;
    *count = zoom->last - zoom->first + 1;
    return ATTN_OK;
}

/* ceil(length / limit): the pooling factor that brings an axis within the limit. */
static size_t pool_factor(size_t length)
{
    return length / PLOT_POOL_LIMIT + (length % PLOT_POOL_LIMIT != 0);
}

/* The item: in the batch axis when there is one, else only item 0. */
static int check_item(const source *src, plot_data *d, attn_error *err)
{
    const plot_request *rq = src->rq;
    const char *name = src->specs[0]->name;
    d->batched = src->layout->batch && src->rank == plot_panels_rank(src->layout);
    if (!d->batched && rq->item > 0)
        return attn_fail(err, ATTN_EINPUT, "%s: %s has no batch axis%s, so there is no item %zu",
                         rq->input, src->census ? "a census" : name,
                         src->layout->batch ? " (the run's X was rank 2)" : "", rq->item);
    if (d->batched && rq->item >= src->dims[0])
        return attn_fail(err, ATTN_EINPUT, "%s: item %zu is not in %s, which has %zu item%s",
                         rq->input, rq->item, name, src->dims[0], src->dims[0] == 1 ? "" : "s");
    for (size_t i = 0; i < src->rank; i++)
        if (src->dims[i] == 0) {
            char text[256];
            return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s: nothing to draw", rq->input,
                             name, attn_format_shape(text, sizeof text, src->dims, src->rank));
        }
    d->item = rq->item;
    return ATTN_OK;
}

/* The panels, the source map and its zoom: what the dataset's axes give. */
static int shape_panels(source *src, plot_data *d, attn_error *err)
{
    const plot_panels_spec *layout = src->layout;
    const size_t *axes = src->dims + d->batched;     /* [lead] [rows] cols */
    int status = ATTN_OK;
    if (layout->lead != PLOT_LEAD_NONE)
        status = select_index(src, axes[0], err);
    if (status != ATTN_OK)
        return status;
    size_t length[2];                                /* the rows' and the columns' */
    switch (layout->lead) {
    case PLOT_LEAD_PANEL:
        d->panels = src->index_count;
        length[0] = axes[1];
        length[1] = axes[2];
        break;
    case PLOT_LEAD_ROW:
        d->panels = 1;
        length[0] = src->index_count;
        length[1] = axes[1];
        break;
    case PLOT_LEAD_NONE:
    default:
        d->panels = src->spec_count;                 /* a census's grids, or one map */
        length[0] = axes[0];
        length[1] = axes[1];
        break;
    }
    d->row_length = length[0];
    d->col_length = length[1];
    if (layout->lead == PLOT_LEAD_ROW)
        d->rows = length[0];
    else
        status = zoom_axis(src, layout->rows, length[0], &d->row_first, &d->rows, err);
    if (status == ATTN_OK)
        status = zoom_axis(src, layout->cols, length[1], &d->col_first, &d->cols, err);
    return status;
}

/* The shape of the picture's data from the dataset's: item, heads or
 * layers, zoom, pooling; the values and ranges allocated. */
static int plan(source *src, plot_data *d, attn_error *err)
{
    const plot_request *rq = src->rq;
    int status = check_item(src, d, err);
    if (status == ATTN_OK)
        status = shape_panels(src, d, err);
    if (status != ATTN_OK)
        return status;
    d->bar_per_panel = src->census;
    d->pool_rows = pool_factor(d->rows);
    d->pool_cols = pool_factor(d->cols);
    d->out_rows = d->rows / d->pool_rows + (d->rows % d->pool_rows != 0);
    d->out_cols = d->cols / d->pool_cols + (d->cols % d->pool_cols != 0);
    size_t width, height, cells, bytes, bars = d->bar_per_panel ? d->panels : 1;
    if (!plot_size(d, &width, &height))
        return attn_fail(err, ATTN_EINPUT, "%s: %zu panels of (%zu, %zu) make a picture of %zu x "
                         "%zu, more than one picture may be (32767 a side, 2^26 pixels)%s",
                         rq->input, d->panels, d->rows, d->cols, width, height,
                         src->layout->lead == PLOT_LEAD_PANEL &&
                         src->layout->lead_axis == PLOT_HEAD ? "; choose fewer heads with --heads"
                                                             : "");
    if (!attn_size_mul(&cells, d->out_rows, d->out_cols) ||
        !attn_size_mul(&cells, cells, d->panels) ||
        !attn_size_mul(&bytes, cells, sizeof d->values[0]) ||
        (d->values = attn_malloc(bytes)) == NULL ||
        (d->bars = attn_calloc(bars, sizeof d->bars[0])) == NULL ||
        (src->ranges = attn_calloc(bars, sizeof src->ranges[0])) == NULL ||
        (d->panel_titles = attn_calloc(d->panels, sizeof d->panel_titles[0])) == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    for (size_t i = 0; i < cells; i++)
        d->values[i] = -INFINITY;        /* the max of nothing yet */
    return ATTN_OK;
}

/* --------------------------------------------------------------- maps */

/* Reads rows [r0, r0 + nr) and columns [c0, c0 + nc) of panel p's source
 * map into block (nr, nc), as float.  With PLOT_LEAD_ROW nr is 1: each row
 * is another head. */
static int read_block(const source *src, const plot_data *d, size_t p, size_t r0, size_t nr,
                      size_t c0, size_t nc, float *block, attn_error *err)
{
    size_t start[4], count[4], a = 0;
    const char *name = src->specs[src->spec_count > 1 ? p : 0]->name;
    if (d->batched) {
        start[a] = d->item;
        count[a++] = 1;
    }
    if (src->layout->lead != PLOT_LEAD_NONE) {
        start[a] = src->index[src->layout->lead == PLOT_LEAD_ROW ? r0 : p];
        count[a++] = 1;
    }
    if (src->layout->lead != PLOT_LEAD_ROW) {
        start[a] = d->row_first + r0;
        count[a++] = nr;
    }
    start[a] = d->col_first + c0;
    count[a++] = nc;
    return attn_results_read(src->results, name, start, count, block, err);
}

/* Widens *range by a finite v. */
static void widen(value_range *range, float v)
{
    range->lo = range->any && range->lo < v ? range->lo : v;
    range->hi = range->any && range->hi > v ? range->hi : v;
    range->any = true;
    if (v > 0) {
        range->positive = range->any_positive && range->positive < v ? range->positive : v;
        range->any_positive = true;
    }
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
                if (isfinite(v))
                    widen(range, v);
            }
            *out = cell;
        }
    }
}

/* Reads and pools every panel, in blocks of at most BLOCK_VALUES values:
 * whole rows while they fit (as many as fit), else parts of one row. */
static int read_maps(const source *src, plot_data *d, attn_error *err)
{
    const size_t nc = d->cols < BLOCK_VALUES ? d->cols : BLOCK_VALUES;
    size_t nr = BLOCK_VALUES / nc, bytes;
    nr = nr > d->rows ? d->rows : nr;
    if (src->layout->lead == PLOT_LEAD_ROW)
        nr = 1;                              /* each row another head */
    float *block = NULL;                     /* (nr, nc) */
    if (!attn_size_mul(&bytes, nr * nc, sizeof *block) || (block = attn_malloc(bytes)) == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    int status = ATTN_OK;
    for (size_t p = 0; p < d->panels && status == ATTN_OK; p++) {
        float *pooled = d->values + p * d->out_rows * d->out_cols;
        value_range *range = &src->ranges[d->bar_per_panel ? p : 0];
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

/* ------------------------------------------------------------- ranges */

/* Each bar's range and the special values the picture shows; ATTN_EUSAGE
 * for a log scale over negative values. */
static int finish_ranges(const source *src, plot_data *d, attn_error *err)
{
    size_t bars = d->bar_per_panel ? d->panels : 1;
    for (size_t b = 0; b < bars; b++) {
        const plot_what_spec *spec = src->specs[src->spec_count > 1 ? b : 0];
        const value_range *range = &src->ranges[b];
        if (d->scale == CLI_LOG && range->any && range->lo < 0)
            return attn_fail(err, ATTN_EUSAGE, "--color log: %s has negative values (down to "
                             "%.4g), which no log scale shows; use --color sqrt or --color linear",
                             spec->name, range->lo);
        d->bars[b] = cli_bar_of(d->scale, spec->from, range);
    }
    size_t cells = d->panels * d->out_rows * d->out_cols;
    for (size_t i = 0; i < cells; i++)
        d->specials |= cli_special(d->values[i]);
    return ATTN_OK;
}

/* ------------------------------------------------------------- labels */

/* "head 3": an index of an axis named, as a string of its own. */
static char *index_label(plot_axis axis, size_t index)
{
    char text[64];
    snprintf(text, sizeof text, "%s %zu", plot_axis_of(axis)->name, index);
    return attn_strdup(text);
}

/* The labels of an axis of the dataset's `length`: its string dataset
 * (query_token, layer_group) when the group holds it, else NULL. */
static int axis_labels(const source *src, const plot_data *d, plot_axis axis, size_t length,
                       char ***labels, attn_error *err)
{
    const char *dataset = plot_axis_of(axis)->labels;
    attn_tensor_info info = {.name = dataset};
    *labels = NULL;
    if (dataset == NULL)
        return ATTN_OK;
    /* (n), or (B, n): a row for each item of the map, no more */
    const size_t items = d->batched ? src->dims[0] : 1;
    int status = attn_results_describe_labels(src->results, &info, err);
    if (status == ATTN_OK && info.present && info.rank == 2 && info.dims[0] != items)
        return attn_fail(err, ATTN_EINPUT, "%s: %s holds the labels of %zu items, but %s holds "
                         "%zu", src->rq->input, dataset, info.dims[0], src->specs[0]->name, items);
    if (status != ATTN_OK)
        return status;
    return attn_results_labels(src->results, dataset, d->item, length, labels, err);
}

/* "head 3" for each row of a map of heads by queries or keys. */
static int head_rows(const source *src, plot_data *d, attn_error *err)
{
    d->row_labels = attn_calloc(d->row_length, sizeof d->row_labels[0]);
    for (size_t i = 0; d->row_labels != NULL && i < d->row_length; i++)
        if ((d->row_labels[i] = index_label(PLOT_HEAD, src->index[i])) == NULL)
            return attn_fail(err, ATTN_ENOMEM, "out of memory");
    return d->row_labels == NULL ? attn_fail(err, ATTN_ENOMEM, "out of memory") : ATTN_OK;
}

/* Each panel's title: its head, its layer (its group of layer_group, when
 * the file holds that), or the quantity. */
static int panel_titles(const source *src, plot_data *d, attn_error *err)
{
    const plot_panels_spec *layout = src->layout;
    char **names = NULL;                      /* (length) */
    size_t length = src->dims[d->batched];
    int status = ATTN_OK;
    if (layout->lead == PLOT_LEAD_PANEL)
        status = axis_labels(src, d, layout->lead_axis, length, &names, err);
    for (size_t p = 0; p < d->panels && status == ATTN_OK; p++) {
        if (layout->lead != PLOT_LEAD_PANEL)
            d->panel_titles[p] = attn_strdup(src->specs[src->spec_count > 1 ? p : 0]->title);
        else if (names != NULL)
            d->panel_titles[p] = attn_strdup(names[src->index[p]]);
        else
            d->panel_titles[p] = index_label(layout->lead_axis, src->index[p]);
        if (d->panel_titles[p] == NULL)
            status = attn_fail(err, ATTN_ENOMEM, "out of memory");
    }
    attn_labels_free(names, length);
    return status;
}

/* The picture's axes and titles: tokens and layer groups where the group
 * holds them, heads by name, else indices. */
static int read_labels(const source *src, plot_data *d, attn_error *err)
{
    int status;
    if (src->layout->lead == PLOT_LEAD_ROW)
        status = head_rows(src, d, err);
    else
        status = axis_labels(src, d, d->row_axis, d->row_length, &d->row_labels, err);
    if (status == ATTN_OK)
        status = axis_labels(src, d, d->col_axis, d->col_length, &d->col_labels, err);
    if (status == ATTN_OK)
        status = panel_titles(src, d, err);
    return status;
}

/* --------------------------------------------------------------- all */

static int open_results(source *src, attn_error *err)
{
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
    return status;
}

static int read_all(source *src, plot_data *d, attn_error *err)
{
    int status = open_results(src, err);
    if (status == ATTN_OK)
        status = is_census(src, err);
    if (status == ATTN_OK)
        status = src->census ? choose_grids(src, err) : choose_map(src, err);
    if (status != ATTN_OK)
        return status;
    src->layout = plot_panels_of(src->specs[0]->panels);
    d->title = src->census ? PLOT_CENSUS_TITLE : src->specs[0]->title;
    d->bar_title = src->specs[0]->bar;
    d->row_axis = src->layout->rows;
    d->col_axis = src->layout->cols;
    status = check_options(src, err);
    if (status == ATTN_OK)
        status = plan(src, d, err);
    if (status == ATTN_OK)
        status = read_maps(src, d, err);
    if (status == ATTN_OK)
        status = finish_ranges(src, d, err);
    if (status == ATTN_OK)
        status = read_labels(src, d, err);
    return status;
}

int plot_read(const plot_request *rq, plot_data *data, attn_error *err)
{
    memset(data, 0, sizeof *data);
    data->input = rq->input;
    data->group = rq->group;
    data->scale = rq->scale;
    source src = {.rq = rq, .results = NULL};
    int status = read_all(&src, data, err);
    attn_results_close(src.results);
    free(src.index);
    free(src.ranges);
    if (status != ATTN_OK)
        plot_data_free(data);
    return status;
}

void plot_data_free(plot_data *data)
{
    free(data->values);
    free(data->bars);
    attn_labels_free(data->panel_titles, data->panels);
    attn_labels_free(data->row_labels, data->row_length);
    attn_labels_free(data->col_labels, data->col_length);
    data->values = NULL;
    data->bars = NULL;
    data->panel_titles = data->row_labels = data->col_labels = NULL;
}
