/*
 * plot_read.c - the results file for a picture (plot.h): one item's maps
 * of the chosen heads, read in blocks and max-pooled as they come, so
 * memory stays bounded whatever n and m are; their range; the tokens.
 *
 * Legend: B items, H heads, n queries, m keys, k heads drawn.  A source
 * map (rows, cols) is (n, m) of one head for scores and weights, (k, n)
 * for entropy; pooled it is (out_rows, out_cols).
 */
#define _GNU_SOURCE
#include "plot/plot.h"

#include "h5/h5.h"

#include <hdf5.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Values read at once: a block of a source map is at most this many
 * floats (16 MiB), unless one pooled cell alone is larger. */
#define BLOCK_VALUES ((size_t)1 << 22)

/* The token datasets that label the axes, when a run stored them. */
#define QUERY_TOKENS "query_token"
#define KEY_TOKENS "key_token"

/* The open file and what every read needs. */
typedef struct source {
    const plot_request *rq;
    hid_t file, group, dataset;
    size_t rank;
    size_t dims[4];
} source;

/* The finite values seen so far. */
typedef struct value_range {
    double lo, hi;
    bool any;
} value_range;

static int fail_h5(attn_error *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* attn_fail with HDF5's innermost reason after the message. */
static int fail_h5(attn_error *err, int status, const char *fmt, ...)
{
    char detail[512], what[768];
    va_list ap;
    attn_h5_error_detail(detail, sizeof detail);
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return attn_fail(err, status, "%s: %s", what, detail);
}

/* Whether another program holds an exclusive lock on path (an HDF5
 * writer, attnrun --in-place): HDF5's open fails then. */
static bool locked_by_writer(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return false;
    bool locked = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return locked;
}

static int open_file(source *src, attn_error *err)
{
    const char *path = src->rq->input;
    struct stat st;
    if (stat(path, &st) != 0)
        return attn_fail(err, ATTN_EINPUT, "%s: cannot read: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return attn_fail(err, ATTN_EINPUT, "%s: not a regular file", path);
    if (access(path, R_OK) != 0)
        return attn_fail(err, ATTN_EINPUT, "%s: cannot read: %s", path, strerror(errno));
    if (H5Fis_hdf5(path) <= 0)
        return attn_fail(err, ATTN_EINPUT, "%s: not an HDF5 file", path);
    src->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (src->file < 0 && locked_by_writer(path))
        return attn_fail(err, ATTN_EIO, "%s: a program writing it holds its lock; try again when "
                         "it has finished", path);
    if (src->file < 0)
        return fail_h5(err, ATTN_EINPUT, "%s: cannot open", path);
    src->group = H5Gopen2(src->file, src->rq->group, H5P_DEFAULT);
    if (src->group < 0)
        return fail_h5(err, ATTN_EINPUT, "%s: no group %s", path, src->rq->group);
    return ATTN_OK;
}

/* Opens the map dataset and checks its type and rank. */
static int open_map(source *src, attn_error *err)
{
    const plot_request *rq = src->rq;
    const plot_what_spec *w = plot_what_of(rq->what);
    int status = ATTN_OK;
    htri_t exists = H5Lexists(src->group, w->name, H5P_DEFAULT);
    if (exists <= 0) {
        if (rq->what == PLOT_ENTROPY)
            return attn_fail(err, ATTN_EINPUT, "%s: no dataset entropy in group %s; "
                             "run attnrun with --save entropy to have one", rq->input, rq->group);
        return attn_fail(err, ATTN_EINPUT, "%s: no dataset %s in group %s; attnrun saves it by "
                         "default or with --save %s", rq->input, w->name, rq->group, w->name);
    }
    src->dataset = H5Dopen2(src->group, w->name, H5P_DEFAULT);
    if (src->dataset < 0)
        return fail_h5(err, ATTN_EINPUT, "%s: cannot open dataset %s", rq->input, w->name);
    /* Values kept in other files (external raw storage, a virtual
     * dataset) would draw whatever those files hold: not followed, as
     * attnrun does not follow them in its inputs. */
    hid_t dcpl = H5Dget_create_plist(src->dataset);
    const H5D_layout_t layout = dcpl < 0 ? H5D_LAYOUT_ERROR : H5Pget_layout(dcpl);
    const int external = dcpl < 0 ? -1 : H5Pget_external_count(dcpl);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (layout == H5D_LAYOUT_ERROR || external < 0)
        return fail_h5(err, ATTN_EINPUT, "%s: cannot read how %s is stored", rq->input, w->name);
    if (layout == H5D_VIRTUAL || external > 0)
        return attn_fail(err, ATTN_EINPUT, "%s: %s keeps its values in other files (%s); not "
                         "followed", rq->input, w->name,
                         layout == H5D_VIRTUAL ? "a virtual dataset" : "external storage");
    hid_t type = H5Dget_type(src->dataset), space = H5Dget_space(src->dataset);
    int rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    hsize_t dims[ATTN_MAX_RANK];
    if (type < 0 || rank < 0 || H5Sget_simple_extent_dims(space, dims, NULL) < 0) {
        status = fail_h5(err, ATTN_EINPUT, "%s: cannot read the shape of %s", rq->input, w->name);
        goto out;
    }
    if (H5Tget_class(type) != H5T_FLOAT) {
        status = attn_fail(err, ATTN_EINPUT, "%s: %s is not a floating-point dataset", rq->input,
                           w->name);
        goto out;
    }
    size_t shape[ATTN_MAX_RANK];
    for (int i = 0; i < rank; i++)
        shape[i] = (size_t)dims[i];
    if ((size_t)rank != w->batched_rank && (size_t)rank != w->batched_rank - 1) {
        char text[256];
        status = attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s; expected %s", rq->input,
                           w->name, attn_format_shape(text, sizeof text, shape, (size_t)rank),
                           w->shapes);
        goto out;
    }
    src->rank = (size_t)rank;
    memcpy(src->dims, shape, (size_t)rank * sizeof shape[0]);
out:
    if (type >= 0)
        H5Tclose(type);
    if (space >= 0)
        H5Sclose(space);
    return status;
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
    hsize_t start[4], count[4];
    size_t a = 0;
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
    hsize_t block_dims[2] = {nr, nc};
    hid_t file_space = H5Dget_space(src->dataset), memory = H5Screate_simple(2, block_dims, NULL);
    int status = ATTN_OK;
    if (file_space < 0 || memory < 0 ||
        H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
        H5Dread(src->dataset, H5T_NATIVE_FLOAT, memory, file_space, H5P_DEFAULT, block) < 0)
        status = fail_h5(err, ATTN_EINPUT, "%s: cannot read %s", src->rq->input,
                         plot_what_of(d->what)->name);
    if (file_space >= 0)
        H5Sclose(file_space);
    if (memory >= 0)
        H5Sclose(memory);
    return status;
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

static void free_labels(char **labels, size_t count)
{
    if (labels == NULL)
        return;
    for (size_t i = 0; i < count; i++)
        free(labels[i]);
    free(labels);
}

/* The `count` strings the selection of `space` picks, from a dataset of
 * variable-length strings, into labels[] (count): ATTN_OK, ATTN_ENOMEM, or
 * ATTN_EINPUT when HDF5 cannot read them. */
static int read_variable(hid_t dataset, hid_t type, hid_t memory, hid_t space, size_t count,
                         char **labels)
{
    hid_t memory_type = H5Tcopy(H5T_C_S1);
    char **strings = attn_calloc(count, sizeof *strings);       /* (count) HDF5's */
    int status = ATTN_OK;
    if (strings == NULL) {
        status = ATTN_ENOMEM;
    } else if (memory_type < 0 || H5Tset_size(memory_type, H5T_VARIABLE) < 0 ||
               H5Tset_cset(memory_type, H5Tget_cset(type)) < 0 ||
               H5Dread(dataset, memory_type, memory, space, H5P_DEFAULT, strings) < 0) {
        status = ATTN_EINPUT;
    } else {
        for (size_t i = 0; i < count && status == ATTN_OK; i++)
            if ((labels[i] = attn_strdup(strings[i] != NULL ? strings[i] : "")) == NULL)
                status = ATTN_ENOMEM;
        H5Dvlen_reclaim(memory_type, memory, H5P_DEFAULT, strings);
    }
    free(strings);
    if (memory_type >= 0)
        H5Tclose(memory_type);
    return status;
}

/* The same for fixed-length strings, each read NUL-terminated. */
static int read_fixed(hid_t dataset, hid_t type, hid_t memory, hid_t space, size_t count,
                      char **labels)
{
    size_t size = H5Tget_size(type), each, bytes;
    hid_t memory_type = H5Tcopy(H5T_C_S1);
    char *fixed = NULL;                                          /* (count, size + 1) */
    int status = ATTN_OK;
    if (size == 0 || !attn_size_add(&each, size, 1) || !attn_size_mul(&bytes, each, count))
        status = ATTN_EINPUT;
    else if ((fixed = attn_malloc(bytes)) == NULL)
        status = ATTN_ENOMEM;
    else if (memory_type < 0 || H5Tset_size(memory_type, each) < 0 ||
             H5Tset_strpad(memory_type, H5T_STR_NULLTERM) < 0 ||
             H5Tset_cset(memory_type, H5Tget_cset(type)) < 0 ||
             H5Dread(dataset, memory_type, memory, space, H5P_DEFAULT, fixed) < 0)
        status = ATTN_EINPUT;
    for (size_t i = 0; i < count && status == ATTN_OK; i++)
        if ((labels[i] = attn_strdup(fixed + i * each)) == NULL)
            status = ATTN_ENOMEM;
    free(fixed);
    if (memory_type >= 0)
        H5Tclose(memory_type);
    return status;
}

/*
 * Reads the token dataset `name`, (length) -- the same for every item --
 * or (B, length) -- row `item` -- of variable- or fixed-length strings,
 * into *labels (length); *labels stays NULL when the group has no such
 * dataset.
 */
static int read_labels(const source *src, const char *name, size_t item, size_t length,
                       char ***labels, attn_error *err)
{
    const char *path = src->rq->input;
    *labels = NULL;
    if (H5Lexists(src->group, name, H5P_DEFAULT) <= 0)
        return ATTN_OK;
    int status = ATTN_OK;
    hid_t dataset = H5Dopen2(src->group, name, H5P_DEFAULT);
    hid_t type = dataset < 0 ? -1 : H5Dget_type(dataset);
    hid_t space = dataset < 0 ? -1 : H5Dget_space(dataset);
    hid_t memory = -1;
    char **out = NULL;                                           /* (length) */
    hsize_t dims[2] = {0, 0};
    int rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    htri_t variable = type < 0 ? -1 : H5Tis_variable_str(type);
    if (type < 0 || rank < 1 || rank > 2 || H5Sget_simple_extent_dims(space, dims, NULL) < 0 ||
        H5Tget_class(type) != H5T_STRING || variable < 0) {
        status = attn_fail(err, ATTN_EINPUT, "%s: %s is not a dataset of strings (n) or (B, n)",
                           path, name);
        goto out;
    }
    hsize_t have = dims[rank - 1];
    if (have != length) {
        status = attn_fail(err, ATTN_EINPUT, "%s: %s has %llu tokens%s for an axis of %zu", path,
                           name, (unsigned long long)have, rank == 2 ? " per item" : "", length);
        goto out;
    }
    if (rank == 2 && item >= dims[0]) {
        status = attn_fail(err, ATTN_EINPUT, "%s: %s has tokens for %llu items, none for item %zu",
                           path, name, (unsigned long long)dims[0], item);
        goto out;
    }
    hsize_t start[2] = {item, 0}, count[2] = {1, have}, row[1] = {have};
    if ((memory = H5Screate_simple(1, row, NULL)) < 0 ||
        H5Sselect_hyperslab(space, H5S_SELECT_SET, rank == 2 ? start : start + 1, NULL,
                            rank == 2 ? count : count + 1, NULL) < 0) {
        status = fail_h5(err, ATTN_EINPUT, "%s: cannot read %s", path, name);
        goto out;
    }
    if ((out = attn_calloc(length, sizeof *out)) == NULL) {
        status = attn_fail(err, ATTN_ENOMEM, "out of memory");
        goto out;
    }
    status = (variable ? read_variable : read_fixed)(dataset, type, memory, space, length, out);
    if (status == ATTN_ENOMEM)
        attn_fail(err, status, "out of memory");
    else if (status != ATTN_OK)
        fail_h5(err, status, "%s: cannot read the strings of %s", path, name);
out:
    if (status == ATTN_OK)
        *labels = out;
    else
        free_labels(out, length);
    if (memory >= 0)
        H5Sclose(memory);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    if (dataset >= 0)
        H5Dclose(dataset);
    return status;
}

/* The picture's axes: tokens where the group holds them. */
static int read_tokens(const source *src, plot_data *d, attn_error *err)
{
    if (d->what == PLOT_ENTROPY)                 /* rows are heads */
        return read_labels(src, QUERY_TOKENS, d->item, d->cols, &d->col_labels, err);
    int status = read_labels(src, QUERY_TOKENS, d->item, d->rows, &d->row_labels, err);
    if (status == ATTN_OK)
        status = read_labels(src, KEY_TOKENS, d->item, d->cols, &d->col_labels, err);
    return status;
}

static int read_all(source *src, plot_data *d, attn_error *err)
{
    value_range range = {0, 0, false};
    int status = open_file(src, err);
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
    source src = {.rq = rq, .file = -1, .group = -1, .dataset = -1};
    attn_h5_prepare();
    attn_h5_reading++;          /* a crash in HDF5 from here is the file's */
    int status = read_all(&src, data, err);
    if (src.dataset >= 0)
        H5Dclose(src.dataset);
    if (src.group >= 0)
        H5Gclose(src.group);
    if (src.file >= 0)
        H5Fclose(src.file);
    attn_h5_reading--;
    if (status != ATTN_OK)
        plot_data_free(data);
    return status;
}

void plot_data_free(plot_data *data)
{
    free(data->heads);
    free(data->values);
    free_labels(data->row_labels, data->rows);
    free_labels(data->col_labels, data->cols);
    data->heads = NULL;
    data->values = NULL;
    data->row_labels = data->col_labels = NULL;
}
