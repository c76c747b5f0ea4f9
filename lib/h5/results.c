/*
 * results.c - a group of a results file read back (attn_results.h): its
 * float datasets in blocks, the token strings of its axes.
 *
 * Shapes are what the file holds; a block is (count[0], ...) of one
 * dataset, read row-major into the caller's floats.
 */
#define _GNU_SOURCE
#include "attn_results.h"

#include "core/core.h"
#include "h5/h5.h"

#include "h5/close.h"
#include "h5/index.h"

#include <hdf5.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* HDF5 1.12 renamed the call that frees variable-length data read. */
#if H5_VERSION_GE(1, 12, 0)
#define reclaim_variable H5Treclaim
#else
#define reclaim_variable H5Dvlen_reclaim
#endif

struct attn_results {
    char *path, *group_name;
    hid_t file, group;
    hid_t dataset;                /* the dataset read last, kept open     */
    char *dataset_name;           /* its name, or NULL                    */
};

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
    H5Eclear2(H5E_DEFAULT);
    return attn_fail(err, status, "%s: %s", what, detail);
}

/* The end of a call that parsed the file: its status. */
static int parsed(int status)
{
    attn_parsing_leave();
    return status;
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

static int open_file(attn_results *r, const char *path, const char *group, attn_error *err)
{
    struct stat st;
    char detail[256];
    if (stat(path, &st) != 0)
        return attn_fail(err, attn_open_status(errno), "%s: cannot read: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return attn_fail(err, ATTN_EINPUT, "%s: not a regular file", path);
    int is = h5_is_hdf5(path, "results", err);    /* EACCES, EMFILE: the system's */
    if (is < 0)
        return is;
    if (is == 0)
        return attn_fail(err, ATTN_EINPUT, "%s: not an HDF5 file", path);
    r->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (r->file < 0 && locked_by_writer(path))
        return attn_fail(err, ATTN_EIO, "%s: a program writing it holds its lock; try again when "
                         "it has finished", path);
    if (r->file < 0 && h5_system_error(detail, sizeof detail)) {
        H5Eclear2(H5E_DEFAULT);
        return attn_fail(err, ATTN_EIO, "%s: cannot open: %s", path, detail);
    }
    if (r->file < 0)
        return fail_h5(err, ATTN_EINPUT, "%s: cannot open", path);
    r->group = H5Gopen2(r->file, group, H5P_DEFAULT);
    if (r->group < 0)
        return fail_h5(err, ATTN_EINPUT, "%s: no group %s", path, group);
    return ATTN_OK;
}

int attn_results_open(const char *path, const char *group, attn_results **results,
                      attn_error *err)
{
    attn_results *r = attn_calloc(1, sizeof *r);
    *results = NULL;
    if (r == NULL || (r->path = attn_strdup(path)) == NULL ||
        (r->group_name = attn_strdup(group)) == NULL) {
        if (r != NULL)
            free(r->path);
        free(r);
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    }
    r->file = r->group = r->dataset = H5I_INVALID_HID;
    attn_h5_prepare();
    attn_parsing_enter();
    int status = parsed(open_file(r, path, group, err));
    if (status != ATTN_OK) {
        attn_results_close(r);
        return status;
    }
    *results = r;
    return ATTN_OK;
}

void attn_results_close(attn_results *results)
{
    if (results == NULL)
        return;
    attn_parsing_enter();
    h5_close(results->dataset, results->group, results->file);
    attn_parsing_leave();
    free(results->dataset_name);
    free(results->group_name);
    free(results->path);
    free(results);
}

const char *attn_results_path(const attn_results *results)
{
    return results->path;
}

const char *attn_results_group(const attn_results *results)
{
    return results->group_name;
}

/* The dataset `name` of the group, opened once and kept while it is the
 * one read. */
static int dataset_of(attn_results *r, const char *name, hid_t *dataset, attn_error *err)
{
    if (r->dataset_name != NULL && strcmp(r->dataset_name, name) == 0) {
        *dataset = r->dataset;
        return ATTN_OK;
    }
    h5_close(r->dataset);
    free(r->dataset_name);
    r->dataset = H5I_INVALID_HID;
    if ((r->dataset_name = attn_strdup(name)) == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    r->dataset = H5Dopen2(r->group, name, H5P_DEFAULT);
    if (r->dataset < 0) {
        free(r->dataset_name);
        r->dataset_name = NULL;
        return fail_h5(err, ATTN_EINPUT, "%s: cannot open dataset %s", r->path, name);
    }
    *dataset = r->dataset;
    return ATTN_OK;
}

/* Values kept in other files (external raw storage, a virtual dataset)
 * would read whatever those files hold: not followed, as attnrun does
 * not follow them in its inputs. */
static int check_storage(const attn_results *r, hid_t dataset, const char *name,
                         attn_error *err)
{
    hid_t dcpl = H5Dget_create_plist(dataset);
    const H5D_layout_t layout = dcpl < 0 ? H5D_LAYOUT_ERROR : H5Pget_layout(dcpl);
    const int external = dcpl < 0 ? -1 : H5Pget_external_count(dcpl);
    h5_close(dcpl);
    if (layout == H5D_LAYOUT_ERROR || external < 0)
        return fail_h5(err, ATTN_EINPUT, "%s: cannot read how %s is stored", r->path, name);
    if (layout == H5D_VIRTUAL || external > 0)
        return attn_fail(err, ATTN_EINPUT, "%s: %s keeps its values in other files (%s); not "
                         "followed", r->path, name,
                         layout == H5D_VIRTUAL ? "a virtual dataset" : "external storage");
    return ATTN_OK;
}

static int describe(attn_results *r, attn_tensor_info *info, attn_error *err)
{
    hid_t dataset, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    hsize_t dims[ATTN_MAX_RANK];
    info->present = false;
    info->rank = 0;
    if (H5Lexists(r->group, info->name, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ATTN_OK;
    }
    int status = dataset_of(r, info->name, &dataset, err);
    if (status == ATTN_OK)
        status = check_storage(r, dataset, info->name, err);
    if (status != ATTN_OK)
        return status;
    type = H5Dget_type(dataset);
    space = H5Dget_space(dataset);
    int rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    if (type < 0 || rank < 0 || rank > ATTN_MAX_RANK ||
        H5Sget_simple_extent_dims(space, dims, NULL) < 0)
        status = fail_h5(err, ATTN_EINPUT, "%s: cannot read the shape of %s", r->path, info->name);
    else if (H5Tget_class(type) != H5T_FLOAT)
        status = attn_fail(err, ATTN_EINPUT, "%s: %s is not a floating-point dataset", r->path,
                           info->name);
    if (status == ATTN_OK) {
        info->present = true;
        info->rank = (size_t)rank;
        for (int i = 0; i < rank; i++)
            info->dims[i] = (size_t)dims[i];
    }
    h5_close(type, space);
    return status;
}

int attn_results_describe(attn_results *results, attn_tensor_info *info, attn_error *err)
{
    attn_parsing_enter();
    return parsed(describe(results, info, err));
}

/* The block of dataset name from first, count[] values along each axis,
 * into values: (count[0], count[1], ...) as float. */
static int read_block(attn_results *r, const char *name, const size_t *first,
                      const size_t *count, float *values, attn_error *err)
{
    hid_t dataset, file_space = H5I_INVALID_HID, memory = H5I_INVALID_HID;
    hsize_t start[ATTN_MAX_RANK], extent[ATTN_MAX_RANK], total = 1;
    int status = dataset_of(r, name, &dataset, err);
    if (status != ATTN_OK)
        return status;
    file_space = H5Dget_space(dataset);
    int rank = file_space < 0 ? -1 : H5Sget_simple_extent_ndims(file_space);
    for (int i = 0; i < rank && i < ATTN_MAX_RANK; i++) {
        start[i] = first[i];
        extent[i] = count[i];
        total *= count[i];
    }
    if (rank < 0 || rank > ATTN_MAX_RANK || (memory = H5Screate_simple(1, &total, NULL)) < 0 ||
        H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, extent, NULL) < 0 ||
        H5Dread(dataset, H5T_NATIVE_FLOAT, memory, file_space, H5P_DEFAULT, values) < 0)
        status = fail_h5(err, ATTN_EINPUT, "%s: cannot read %s", r->path, name);
    h5_close(file_space, memory);
    return status;
}

int attn_results_read(attn_results *results, const char *name, const size_t *first,
                      const size_t *count, float *values, attn_error *err)
{
    attn_parsing_enter();
    return parsed(read_block(results, name, first, count, values, err));
}

void attn_labels_free(char **labels, size_t count)
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
        reclaim_variable(memory_type, memory, H5P_DEFAULT, strings);
    }
    free(strings);
    h5_close(memory_type);
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
    h5_close(memory_type);
    return status;
}

static int read_labels(const attn_results *r, const char *name, size_t item, size_t length,
                       char ***labels, attn_error *err)
{
    const char *path = r->path;
    *labels = NULL;
    if (H5Lexists(r->group, name, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ATTN_OK;
    }
    int status = ATTN_OK;
    hid_t dataset = H5Dopen2(r->group, name, H5P_DEFAULT);
    hid_t type = dataset < 0 ? H5I_INVALID_HID : H5Dget_type(dataset);
    hid_t space = dataset < 0 ? H5I_INVALID_HID : H5Dget_space(dataset);
    hid_t memory = H5I_INVALID_HID;
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
        attn_labels_free(out, length);
    h5_close(memory, space, type, dataset);
    return status;
}

int attn_results_labels(attn_results *results, const char *name, size_t item, size_t length,
                        char ***labels, attn_error *err)
{
    attn_parsing_enter();
    return parsed(read_labels(results, name, item, length, labels, err));
}

/* The attribute every group of a run's results carries (provenance). */
#define PROVENANCE_ATTRIBUTE "attnrun_version"

/* The walk over a plain results file's groups (H5Ovisit's data). */
typedef struct groups_walk {
    attn_result_groups *groups;
    size_t capacity;
    bool out_of_memory;
} groups_walk;

static herr_t visit_group(hid_t root, const char *name, const H5O_info_t *info, void *data)
{
    groups_walk *walk = data;
    attn_result_groups *g = walk->groups;
    if (info->type != H5O_TYPE_GROUP ||
        H5Aexists_by_name(root, name, PROVENANCE_ATTRIBUTE, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return 0;
    }
    if (g->count == walk->capacity) {
        size_t capacity = walk->capacity == 0 ? 16 : 2 * walk->capacity, bytes;
        char **grown = attn_size_mul(&bytes, capacity, sizeof *grown) ? attn_malloc(bytes) : NULL;
        if (grown == NULL) {
            walk->out_of_memory = true;
            return -1;
        }
        if (g->count > 0)
            memcpy(grown, g->paths, g->count * sizeof *grown);
        free(g->paths);
        g->paths = grown;
        walk->capacity = capacity;
    }
    size_t len = strlen(name) + 2;
    char *path = attn_malloc(len);
    if (path == NULL) {
        walk->out_of_memory = true;
        return -1;
    }
    snprintf(path, len, "/%s", strcmp(name, ".") == 0 ? "" : name);
    g->paths[g->count++] = path;
    return 0;
}

static int list_groups(const char *path, attn_result_groups *g, attn_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return attn_fail(err, attn_open_status(errno), "%s: cannot read: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return attn_fail(err, ATTN_EINPUT, "%s: not a regular file", path);
    int is = h5_is_hdf5(path, "results", err);
    if (is <= 0)
        return is < 0 ? is : attn_fail(err, ATTN_EINPUT, "%s: not an HDF5 file", path);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t root = file < 0 ? H5I_INVALID_HID : H5Gopen2(file, "/", H5P_DEFAULT);
    int status = ATTN_OK;
    if (root < 0) {
        status = fail_h5(err, ATTN_EINPUT, "%s: cannot open", path);
    } else if (H5Aexists(root, ATTN_INDEX_ATTRIBUTE) > 0) {
        g->index = true;                     /* its own reader checks it */
    } else {
        groups_walk walk = {.groups = g};
        H5Ovisit2(root, H5_INDEX_NAME, H5_ITER_INC, visit_group, &walk, H5O_INFO_BASIC);
        if (walk.out_of_memory)
            status = attn_fail(err, ATTN_ENOMEM, "out of memory");
    }
    h5_close(root, file);
    H5Eclear2(H5E_DEFAULT);
    if (status == ATTN_OK && g->index)
        status = attn_index_groups(path, &g->paths, &g->count, err);
    return status;
}

int attn_results_groups(const char *path, attn_result_groups *groups, attn_error *err)
{
    memset(groups, 0, sizeof *groups);
    attn_h5_prepare();
    attn_parsing_enter();
    int status = parsed(list_groups(path, groups, err));
    if (status != ATTN_OK)
        attn_result_groups_free(groups);
    return status;
}

void attn_result_groups_free(attn_result_groups *groups)
{
    for (size_t i = 0; i < groups->count; i++)
        free(groups->paths[i]);
    free(groups->paths);
    memset(groups, 0, sizeof *groups);
}

/* The string of the attribute `name` of the group: one string, variable-
 * or fixed-length, read NUL-terminated into *value (its own copy). */
static int read_attribute_text(const attn_results *r, const char *name, char **value,
                               attn_error *err)
{
    *value = NULL;
    if (H5Aexists(r->group, name) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ATTN_OK;
    }
    int status = ATTN_OK;
    hid_t attribute = H5Aopen(r->group, name, H5P_DEFAULT);
    hid_t type = attribute < 0 ? H5I_INVALID_HID : H5Aget_type(attribute);
    hid_t space = attribute < 0 ? H5I_INVALID_HID : H5Aget_space(attribute);
    hid_t memory_type = H5I_INVALID_HID;
    htri_t variable = type < 0 ? -1 : H5Tis_variable_str(type);
    hssize_t points = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    size_t size = type < 0 ? 0 : H5Tget_size(type);
    char *text = NULL;                           /* fixed: (size + 1) */
    if (type < 0 || H5Tget_class(type) != H5T_STRING || variable < 0 || points != 1 ||
        (!variable && size == 0)) {
        status = attn_fail(err, ATTN_EINPUT, "%s: attribute %s of group %s is not one string",
                           r->path, name, r->group_name);
        goto out;
    }
    memory_type = H5Tcopy(H5T_C_S1);
    if (memory_type < 0 || H5Tset_cset(memory_type, H5Tget_cset(type)) < 0 ||
        H5Tset_size(memory_type, variable ? H5T_VARIABLE : size + 1) < 0 ||
        (!variable && H5Tset_strpad(memory_type, H5T_STR_NULLTERM) < 0)) {
        status = fail_h5(err, ATTN_EINPUT, "%s: cannot read attribute %s", r->path, name);
        goto out;
    }
    if (variable) {
        char *held = NULL;                       /* HDF5's */
        if (H5Aread(attribute, memory_type, &held) < 0) {
            status = fail_h5(err, ATTN_EINPUT, "%s: cannot read attribute %s", r->path, name);
            goto out;
        }
        *value = attn_strdup(held != NULL ? held : "");
        H5free_memory(held);
    } else {
        if ((text = attn_malloc(size + 1)) == NULL) {
            status = attn_fail(err, ATTN_ENOMEM, "out of memory");
            goto out;
        }
        if (H5Aread(attribute, memory_type, text) < 0) {
            status = fail_h5(err, ATTN_EINPUT, "%s: cannot read attribute %s", r->path, name);
            goto out;
        }
        text[size] = '\0';
        *value = attn_strdup(text);
    }
    if (*value == NULL)
        status = attn_fail(err, ATTN_ENOMEM, "out of memory");
out:
    free(text);
    h5_close(memory_type, space, type, attribute);
    H5Eclear2(H5E_DEFAULT);
    return status;
}

int attn_results_attribute_text(attn_results *results, const char *name, char **value,
                                attn_error *err)
{
    attn_parsing_enter();
    return parsed(read_attribute_text(results, name, value, err));
}
