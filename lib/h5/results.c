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
#include "core/guard.h"
#include "h5/in.h"

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
#include <limits.h>
#include <sys/resource.h>
#include <unistd.h>

/* The longest fixed-length label read (a damaged type can claim more). */
#define LABEL_FIXED_MAX ((size_t)1 << 20)

/* A part of an index as first opened: later opens must find the same
 * file, so that a reader sees one generation of the index. */
typedef struct part_seen {
    bool seen;
    struct stat st;               /* its identity, size and mtime then  */
} part_seen;

struct attn_results_file {
    char *path;                   /* as given, for messages               */
    attn_h5in *in;                /* the file named: results, or an index */
    bool index;
    char dir[PATH_MAX];           /* the index's directory ("" : the
                                     working directory), a symbolic link
                                     to the index followed              */
    attn_index_part *parts;       /* (part_count) the index's groups when
                                     opened, in its order               */
    size_t part_count;
    part_seen *seen;              /* (part_count)                         */
};

struct attn_results {
    attn_results_file *file;
    bool owns_file;               /* opened by attn_results_open          */
    char *group_name;             /* as asked, for messages               */
    char *prefix;                 /* the group's path in `in`, no trailing
                                     "/": "" for the root               */
    attn_h5in *in;                /* the file holding the group: file->in,
                                     or a part of the index (owned)     */
};

/* ---- what every call does ------------------------------------------------ */

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

/*
 * HDF5 parses a file it was not made to read safely: each call is marked
 * (attn_parsing_file: a crash there is the file's) and the address space
 * capped while it runs, as the run's (attn_guard_cap_parse_memory): a
 * damaged file cannot make HDF5 take gigabytes.
 */
typedef struct parse_guard {
    struct rlimit saved;
    bool capped;
} parse_guard;

static void parse_begin(parse_guard *g)
{
    attn_parsing_enter();
    g->capped = attn_guard_cap_parse_memory(&g->saved);
}

static int parse_end(parse_guard *g, int status)
{
    if (g->capped)
        attn_guard_restore_memory(&g->saved);
    attn_parsing_leave();
    return status;
}

/* A reader has no options to follow other files or wait for a lock: the
 * input layer's hints for those say what to do instead. */
static int as_reader(int status, attn_error *err)
{
    if (status == ATTN_OK)
        return status;
    size_t used = strlen(err->msg);
    if (err->hint == ATTN_HINT_WAIT && used < sizeof err->msg)
        snprintf(err->msg + used, sizeof err->msg - used, "; try again when it has finished");
    err->hint = ATTN_HINT_NONE;
    return status;
}

/* The options every file of results is opened with: read-only under a
 * shared lock, nothing external followed, maps in tiles. */
static const attn_h5in_options reader_options = {.lock = ATTN_LOCK_SHARED, .tiled_maps = true};

/* ---- the file ---------------------------------------------------------- */

/* The directory the index's parts are found from: the index's own (a
 * symbolic link to the index followed, as attn_index_check does). */
static int index_directory(attn_results_file *f, attn_error *err)
{
    char base[PATH_MAX];
    struct stat st;
    const char *index = f->path;
    char *real = NULL;
    if (lstat(index, &st) == 0 && S_ISLNK(st.st_mode)) {
        if ((real = realpath(index, NULL)) == NULL)
            return attn_fail(err, ATTN_EIO, "%s: cannot follow the symbolic link: %s", index,
                             strerror(errno));
        index = real;
    }
    int status = ATTN_OK;
    if (strlen(index) >= sizeof f->dir)
        status = attn_fail(err, ATTN_EINPUT, "%s: path too long", f->path);
    else if (strchr(index, '/') == NULL)
        f->dir[0] = '\0';
    else
        attn_split_path(index, f->dir, base);
    free(real);
    return status;
}

static int file_open(attn_results_file *f, attn_error *err)
{
    int status = as_reader(attn_h5in_open_with(f->path, &reader_options, &f->in, err), err);
    if (status != ATTN_OK)
        return status;
    f->index = attn_index_is_index(f->in->file);
    if (!f->index)
        return ATTN_OK;
    if ((status = index_directory(f, err)) != ATTN_OK ||
        (status = attn_index_read_parts(f->in->file, f->path, &f->parts, &f->part_count, err)) !=
            ATTN_OK)
        return status;
    if ((f->seen = attn_calloc(f->part_count + 1, sizeof *f->seen)) == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    return ATTN_OK;
}

int attn_results_file_open(const char *path, attn_results_file **file, attn_error *err)
{
    parse_guard g;
    *file = NULL;
    attn_results_file *f = attn_calloc(1, sizeof *f);
    if (f == NULL || (f->path = attn_strdup(path)) == NULL) {
        free(f);
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    }
    attn_h5_prepare();
    parse_begin(&g);
    int status = parse_end(&g, file_open(f, err));
    if (status != ATTN_OK) {
        attn_results_file_close(f);
        return status;
    }
    *file = f;
    return ATTN_OK;
}

void attn_results_file_close(attn_results_file *file)
{
    if (file == NULL)
        return;
    attn_h5in_close(file->in);
    attn_index_parts_free(file->parts, file->part_count);
    free(file->seen);
    free(file->path);
    free(file);
}

const char *attn_results_file_path(const attn_results_file *file)
{
    return file->path;
}

/* The path of a part (its file relative to the index's directory) into
 * buf; false when too long. */
static bool part_path(const attn_results_file *f, const char *file, char *buf, size_t len)
{
    int wrote = snprintf(buf, len, "%s%s%s", f->dir, f->dir[0] ? "/" : "", file);
    return wrote > 0 && (size_t)wrote < len;
}

bool attn_results_file_holds(const attn_results_file *file, const char *path)
{
    char parts[PATH_MAX], dir[PATH_MAX], base[PATH_MAX], part[PATH_MAX];
    struct stat target, st;
    if (!file->index || file->part_count == 0)
        return false;
    const char *slash = strchr(file->parts[0].file, '/');     /* one parts directory */
    if (!part_path(file, file->parts[0].file, parts, sizeof parts))
        return false;
    parts[strlen(parts) - strlen(slash)] = '\0';
    attn_split_path(path, dir, base);
    if (stat(parts, &st) == 0 && stat(dir, &target) == 0 && st.st_dev == target.st_dev &&
        st.st_ino == target.st_ino)
        return true;                      /* in the parts directory */
    if (stat(path, &target) != 0)
        return false;
    for (size_t i = 0; i < file->part_count; i++)      /* a part by another name */
        if (part_path(file, file->parts[i].file, part, sizeof part) && stat(part, &st) == 0 &&
            st.st_dev == target.st_dev && st.st_ino == target.st_ino)
            return true;
    return false;
}

/* The index's part that holds `group`: its own, or one above it. */
static const attn_index_part *part_of(const attn_results_file *f, const char *group,
                                      size_t *at)
{
    for (size_t i = 0; i < f->part_count; i++) {
        size_t len = strlen(f->parts[i].group);
        if (strncmp(group, f->parts[i].group, len) == 0 &&
            (group[len] == '\0' || group[len] == '/')) {
            *at = i;
            return &f->parts[i];
        }
    }
    return NULL;
}

static bool same_version(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* The failure of a reader whose index changed under it. */
static int index_changed(const attn_results_file *f, const char *group, attn_error *err)
{
    return attn_fail(err, ATTN_EIO, "%s: the index changed while it was read (the results of %s "
                     "were replaced meanwhile, by another append or another program); nothing "
                     "was written: run again", f->path, group);
}

/* Whether the index's path names another file than the one opened (an
 * append renamed a new index over it). */
static bool index_replaced(const attn_results_file *f)
{
    attn_error ignored;
    return attn_h5in_check_unchanged(f->in, &ignored) != ATTN_OK;
}

/* Opens the part of the index that holds `group` into r->in: the file
 * the index named when it was opened, the same one every time. */
static int open_part(attn_results *r, const char *group, attn_error *err)
{
    attn_results_file *f = r->file;
    size_t at = 0;
    const attn_index_part *part = part_of(f, group, &at);
    char path[PATH_MAX];
    struct stat st;
    if (part == NULL)
        return attn_fail(err, ATTN_EINPUT, "%s: no group %s in the index", f->path, group);
    part_seen *seen = &f->seen[at];
    if (!part_path(f, part->file, path, sizeof path))
        return attn_fail(err, ATTN_EINPUT, "%s: path too long for the part of %s", f->path,
                         part->group);
    if (lstat(path, &st) != 0 && (errno == ENOENT || errno == ENOTDIR))
        return seen->seen || index_replaced(f) ? index_changed(f, part->group, err)
               : attn_fail(err, ATTN_EINPUT, "%s: the part of %s, %s, is missing; an index reads "
                           "its parts from the directory beside it (move or copy the two "
                           "together)", f->path, part->group, path);
    if (S_ISLNK(st.st_mode))
        return attn_fail(err, ATTN_EINPUT, "%s: the part of %s, %s, is a symbolic link; attnrun "
                         "writes parts as files and follows no link out of the index", f->path,
                         part->group, path);
    int status = as_reader(attn_h5in_open_with(path, &reader_options, &r->in, err), err);
    if (status != ATTN_OK)       /* gone meanwhile (between its opens): replaced by an append */
        return (status == ATTN_EINPUT || lstat(path, &st) != 0) &&
                       (seen->seen || index_replaced(f))
                   ? index_changed(f, part->group, err) : status;
    if (fstat(attn_h5in_descriptor(r->in), &st) != 0)
        return attn_fail(err, ATTN_EIO, "%s: %s", path, strerror(errno));
    if (seen->seen && !same_version(&st, &seen->st))
        return index_changed(f, part->group, err);
    seen->seen = true;
    seen->st = st;
    if (attn_index_is_index(r->in->file))
        return attn_fail(err, ATTN_EINPUT, "%s: the part of %s, %s, is itself an index; an "
                         "index's parts hold results", f->path, part->group, path);
    return ATTN_OK;
}

/* The group's path without trailing "/" ("" for the root) into r. */
static int set_prefix(attn_results *r, const char *group, attn_error *err)
{
    size_t len = strlen(group);
    while (len > 0 && group[len - 1] == '/')
        len--;
    if ((r->prefix = attn_malloc(len + 1)) == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    memcpy(r->prefix, group, len);
    r->prefix[len] = '\0';
    return ATTN_OK;
}

/* Opens the group r->prefix of r->in, following its links as an input's
 * (h5in_resolve: nothing external, soft links bounded). */
static int find_group(attn_results *r, attn_error *err)
{
    hid_t object = H5I_INVALID_HID;
    int status = r->prefix[0] == '\0' ? ATTN_OK : h5in_resolve(r->in, r->prefix, &object, err);
    if (status == 1)
        return attn_fail(err, ATTN_EINPUT, "%s: no group %s", r->file->path, r->group_name);
    if (status != ATTN_OK)
        return as_reader(status, err);
    bool group = object < 0 || H5Iget_type(object) == H5I_GROUP;
    h5_close(object);
    return group ? ATTN_OK
                 : attn_fail(err, ATTN_EINPUT, "%s: %s is not a group", r->file->path,
                             r->group_name);
}

static int group_open(attn_results *r, const char *group, attn_error *err)
{
    int status = set_prefix(r, group, err);
    if (status != ATTN_OK)
        return status;
    /* an index's root holds no results of its own, and its readers say
     * so: it is read as it is */
    if (r->file->index && r->prefix[0] != '\0')
        status = open_part(r, r->prefix, err);
    else
        r->in = r->file->in;
    return status == ATTN_OK ? find_group(r, err) : status;
}

int attn_results_open_group(attn_results_file *file, const char *group, attn_results **results,
                            attn_error *err)
{
    parse_guard g;
    *results = NULL;
    attn_results *r = attn_calloc(1, sizeof *r);
    if (r == NULL || (r->group_name = attn_strdup(group)) == NULL) {
        free(r);
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    }
    r->file = file;
    parse_begin(&g);
    int status = parse_end(&g, group_open(r, group, err));
    if (status != ATTN_OK) {
        attn_results_close(r);
        return status;
    }
    *results = r;
    return ATTN_OK;
}

int attn_results_open(const char *path, const char *group, attn_results **results,
                      attn_error *err)
{
    attn_results_file *file;
    *results = NULL;
    int status = attn_results_file_open(path, &file, err);
    if (status == ATTN_OK && (status = attn_results_open_group(file, group, results, err)) == ATTN_OK)
        (*results)->owns_file = true;
    else
        attn_results_file_close(file);
    return status;
}

void attn_results_close(attn_results *results)
{
    if (results == NULL)
        return;
    if (results->in != NULL && results->in != results->file->in)
        attn_h5in_close(results->in);
    if (results->owns_file)
        attn_results_file_close(results->file);
    free(results->prefix);
    free(results->group_name);
    free(results);
}

const char *attn_results_path(const attn_results *results)
{
    return results->file->path;
}

const char *attn_results_group(const attn_results *results)
{
    return results->group_name;
}

/* "PREFIX/name": the path of a dataset of the group in its file. */
static char *member(const attn_results *r, const char *name, attn_error *err)
{
    size_t len = strlen(r->prefix) + strlen(name) + 2;
    char *path = attn_malloc(len);
    if (path == NULL)
        attn_fail(err, ATTN_ENOMEM, "out of memory");
    else
        snprintf(path, len, "%s/%s", r->prefix, name);
    return path;
}

/* The block [first, first + count) of the group's `name` as `precision`. */
static int read_box(attn_results *results, const char *name, const size_t *first,
                    const size_t *count, attn_precision precision, void *values, attn_error *err)
{
    parse_guard g;
    char *path = member(results, name, err);
    if (path == NULL)
        return ATTN_ENOMEM;
    parse_begin(&g);
    int status = parse_end(&g, as_reader(attn_h5in_read_float_box(results->in, path, precision,
                                                                  first, count, values, err),
                                         err));
    free(path);
    return status;
}

int attn_results_read(attn_results *results, const char *name, const size_t *first,
                      const size_t *count, float *values, attn_error *err)
{
    return read_box(results, name, first, count, ATTN_F32, values, err);
}

int attn_results_read_doubles(attn_results *results, const char *name, const size_t *first,
                              const size_t *count, double *values, attn_error *err)
{
    return read_box(results, name, first, count, ATTN_F64, values, err);
}

void attn_labels_free(char **labels, size_t count)
{
    if (labels == NULL)
        return;
    for (size_t i = 0; i < count; i++)
        free(labels[i]);
    free(labels);
}

/* The strings `path` as the input layer describes them (its storage
 * checked): present false when the group has no such link. */
static int describe_strings(attn_results *r, const char *path, const char *name,
                            attn_tensor_info *info, attn_error *err)
{
    size_t fixed;
    hid_t object = H5I_INVALID_HID;
    info->present = false;
    int found = h5in_resolve(r->in, path, &object, err);
    h5_close(object);
    if (found == 1)
        return ATTN_OK;
    if (found != ATTN_OK)
        return found;
    int status = attn_h5in_describe_strings(r->in, path, NULL, name, LABEL_FIXED_MAX, info,
                                            &fixed, err);
    if (status == ATTN_OK && (info->rank < 1 || info->rank > 2))
        status = attn_fail(err, ATTN_EINPUT, "%s: %s is not a dataset of strings (n) or (B, n)",
                           r->file->path, name);
    return status;
}

/* info->present, rank and dims of the group's dataset info->name: floats
 * (their storage checked as an input's), or `strings`. */
static int describe_member(attn_results *r, attn_tensor_info *info, bool strings,
                           attn_error *err)
{
    parse_guard g;
    char *path = member(r, info->name, err);
    if (path == NULL)
        return ATTN_ENOMEM;
    attn_tensor_info found = {.name = path};
    parse_begin(&g);
    int status = strings ? describe_strings(r, path, info->name, &found, err)
                         : attn_h5in_describe(r->in, ATTN_DATA_FLOAT, false, &found, err);
    status = parse_end(&g, as_reader(status, err));
    free(path);
    info->present = status == ATTN_OK && found.present;
    info->rank = info->present ? found.rank : 0;
    memcpy(info->dims, found.dims, sizeof info->dims);
    return status;
}

int attn_results_describe(attn_results *results, attn_tensor_info *info, attn_error *err)
{
    return describe_member(results, info, false, err);
}

int attn_results_describe_labels(attn_results *results, attn_tensor_info *info, attn_error *err)
{
    return describe_member(results, info, true, err);
}

static int read_labels(attn_results *r, const char *name, size_t item, size_t length,
                       char ***labels, attn_error *err)
{
    const char *path = r->file->path;
    char *member_path = member(r, name, err);
    attn_tensor_info info = {.name = member_path};
    attn_strings strings = {0};
    char **out = NULL;                                           /* (length) */
    *labels = NULL;
    if (member_path == NULL)
        return ATTN_ENOMEM;
    int status = describe_strings(r, member_path, name, &info, err);
    if (status != ATTN_OK || !info.present)
        goto out;
    const size_t rank = info.rank, have = info.dims[rank - 1];
    if (have != length) {
        status = attn_fail(err, ATTN_EINPUT, "%s: %s has %zu tokens%s for an axis of %zu", path,
                           name, have, rank == 2 ? " per item" : "", length);
        goto out;
    }
    if (rank == 2 && item >= info.dims[0]) {
        status = attn_fail(err, ATTN_EINPUT, "%s: %s has tokens for %zu items, none for item %zu",
                           path, name, info.dims[0], item);
        goto out;
    }
    const size_t first[2] = {item, 0}, count[2] = {1, length};
    status = attn_h5in_read_strings(r->in, member_path, NULL, rank == 2 ? first : first + 1,
                                    rank == 2 ? count : count + 1, &strings, err);
    if (status == ATTN_OK && (out = attn_calloc(length + 1, sizeof *out)) == NULL)
        status = attn_fail(err, ATTN_ENOMEM, "out of memory");
    for (size_t i = 0; i < length && status == ATTN_OK; i++)
        if ((out[i] = attn_strdup(strings.strings[i])) == NULL)
            status = attn_fail(err, ATTN_ENOMEM, "out of memory");
out:
    attn_strings_free(&strings);
    free(member_path);
    if (status == ATTN_OK)
        *labels = out;
    else
        attn_labels_free(out, length);
    return status;
}

int attn_results_labels(attn_results *results, const char *name, size_t item, size_t length,
                        char ***labels, attn_error *err)
{
    parse_guard g;
    parse_begin(&g);
    return parse_end(&g, as_reader(read_labels(results, name, item, length, labels, err), err));
}

/* The attribute every group of a run's results carries (provenance). */
#define PROVENANCE_ATTRIBUTE "attnrun_version"

/* The walk over a plain results file's groups (H5Ovisit's data). */
typedef struct groups_walk {
    const attn_h5in *in;
    attn_result_groups *groups;
    size_t capacity;
    int status;                 /* ATTN_OK, or why the walk stopped (err) */
    attn_error *err;
} groups_walk;

static herr_t visit_group(hid_t root, const char *name, const H5O_info_t *info, void *data)
{
    groups_walk *walk = data;
    attn_result_groups *g = walk->groups;
    if (info->type == H5O_TYPE_GROUP &&
        (walk->status = h5in_check_names_at(walk->in, info->addr, name, walk->err)) != ATTN_OK)
        return -1;
    if (info->type != H5O_TYPE_GROUP ||
        H5Aexists_by_name(root, name, PROVENANCE_ATTRIBUTE, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return 0;
    }
    if (g->count == walk->capacity) {
        size_t capacity = walk->capacity == 0 ? 16 : 2 * walk->capacity, bytes;
        char **grown = attn_size_mul(&bytes, capacity, sizeof *grown) ? attn_malloc(bytes) : NULL;
        if (grown == NULL) {
            walk->status = attn_fail(walk->err, ATTN_ENOMEM, "out of memory");
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
        walk->status = attn_fail(walk->err, ATTN_ENOMEM, "out of memory");
        return -1;
    }
    snprintf(path, len, "/%s", strcmp(name, ".") == 0 ? "" : name);
    g->paths[g->count++] = path;
    return 0;
}

/* The first external link found (H5Lvisit's data), into `where`. */
static herr_t find_external(hid_t root, const char *name, const H5L_info_t *info, void *data)
{
    (void)root;
    if (info->type != H5L_TYPE_EXTERNAL)
        return 0;
    snprintf(data, PATH_MAX, "/%s", name);
    return 1;
}

/* A plain file without results of its own whose groups may be external
 * links: said (ATTN_EINPUT), since a reader follows none, rather than
 * letting the reader say the file holds nothing. */
static int no_other_files(const attn_results_file *f, hid_t root, attn_error *err)
{
    char where[PATH_MAX] = "";
    herr_t found = H5Lvisit(root, H5_INDEX_NAME, H5_ITER_INC, find_external, where);
    H5Eclear2(H5E_DEFAULT);
    if (found <= 0)
        return ATTN_OK;
    return attn_fail(err, ATTN_EINPUT, "%s: holds no results of its own, and %s is an external "
                     "link to another file; not followed (open that file itself)", f->path,
                     where);
}

/* The groups of a plain file holding results, by name, reached by hard
 * links only (H5Ovisit follows no other). */
static int list_groups(const attn_results_file *f, attn_result_groups *g, attn_error *err)
{
    hid_t root = H5Gopen2(f->in->file, "/", H5P_DEFAULT);
    int status = ATTN_OK;
    if (root < 0) {
        status = attn_fail(err, ATTN_EINPUT, "%s: cannot open its root group", f->path);
    } else {
        groups_walk walk = {.in = f->in, .groups = g, .status = ATTN_OK, .err = err};
        H5Ovisit2(root, H5_INDEX_NAME, H5_ITER_INC, visit_group, &walk, H5O_INFO_BASIC);
        if (walk.status != ATTN_OK)
            status = walk.status;
        else if (g->count == 0)
            status = no_other_files(f, root, err);
    }
    h5_close(root);
    H5Eclear2(H5E_DEFAULT);
    return status;
}

/* An index's groups, as it listed them when opened. */
static int index_groups(const attn_results_file *f, attn_result_groups *g, attn_error *err)
{
    g->index = true;
    if ((g->paths = attn_calloc(f->part_count + 1, sizeof *g->paths)) == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    for (; g->count < f->part_count; g->count++)
        if ((g->paths[g->count] = attn_strdup(f->parts[g->count].group)) == NULL)
            return attn_fail(err, ATTN_ENOMEM, "out of memory");
    return ATTN_OK;
}

int attn_results_file_groups(attn_results_file *file, attn_result_groups *groups,
                             attn_error *err)
{
    parse_guard g;
    memset(groups, 0, sizeof *groups);
    parse_begin(&g);
    int status = parse_end(&g, file->index ? index_groups(file, groups, err)
                                           : list_groups(file, groups, err));
    if (status != ATTN_OK)
        attn_result_groups_free(groups);
    return status;
}

int attn_results_groups(const char *path, attn_result_groups *groups, attn_error *err)
{
    attn_results_file *file;
    memset(groups, 0, sizeof *groups);
    int status = attn_results_file_open(path, &file, err);
    if (status == ATTN_OK)
        status = attn_results_file_groups(file, groups, err);
    attn_results_file_close(file);
    return status;
}

void attn_result_groups_free(attn_result_groups *groups)
{
    for (size_t i = 0; i < groups->count; i++)
        free(groups->paths[i]);
    free(groups->paths);
    memset(groups, 0, sizeof *groups);
}

/* The index's groups that were read and now name another part (or none):
 * the first into err. */
static int used_parts_unchanged(const attn_results_file *f, attn_error *err)
{
    attn_results_file *now = NULL;
    attn_error ignored;
    if (attn_results_file_open(f->path, &now, &ignored) != ATTN_OK || !now->index) {
        attn_results_file_close(now);
        return f->part_count > 0 ? index_changed(f, f->parts[0].group, err) : ATTN_OK;
    }
    int status = ATTN_OK;
    for (size_t i = 0; i < f->part_count && status == ATTN_OK; i++) {
        size_t at;
        const attn_index_part *part = f->seen[i].seen ? part_of(now, f->parts[i].group, &at) : NULL;
        if (f->seen[i].seen && (part == NULL || strcmp(part->group, f->parts[i].group) != 0 ||
                                strcmp(part->file, f->parts[i].file) != 0))
            status = index_changed(f, f->parts[i].group, err);
    }
    attn_results_file_close(now);
    return status;
}

int attn_results_file_check(attn_results_file *file, attn_error *err)
{
    if (!file->index)
        return attn_h5in_check_unchanged(file->in, err);
    /* An index is replaced whole by each append: what matters is that the
     * groups read still name the parts that were read. */
    attn_error changed;
    if (attn_h5in_check_unchanged(file->in, &changed) == ATTN_OK)
        return ATTN_OK;
    return used_parts_unchanged(file, err);
}

/* The string of the attribute `name` of the group: one string, variable-
 * or fixed-length, read NUL-terminated into *value (its own copy). */
static int read_attribute_text(const attn_results *r, const char *name, char **value,
                               attn_error *err)
{
    hid_t group = H5I_INVALID_HID;
    *value = NULL;
    int found = r->prefix[0] == '\0' ? ATTN_OK : h5in_resolve(r->in, r->prefix, &group, err);
    if (found != ATTN_OK)
        return found == 1 ? attn_fail(err, ATTN_EINPUT, "%s: no group %s", r->file->path,
                                      r->group_name) : found;
    if (group < 0)
        group = H5Gopen2(r->in->file, "/", H5P_DEFAULT);
    if (group < 0 || H5Aexists(group, name) <= 0) {
        h5_close(group);
        H5Eclear2(H5E_DEFAULT);
        return ATTN_OK;
    }
    int status = ATTN_OK;
    hid_t attribute = H5Aopen(group, name, H5P_DEFAULT);
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
                           r->file->path, name, r->group_name);
        goto out;
    }
    memory_type = H5Tcopy(H5T_C_S1);
    if (memory_type < 0 || H5Tset_cset(memory_type, H5Tget_cset(type)) < 0 ||
        H5Tset_size(memory_type, variable ? H5T_VARIABLE : size + 1) < 0 ||
        (!variable && H5Tset_strpad(memory_type, H5T_STR_NULLTERM) < 0)) {
        status = fail_h5(err, ATTN_EINPUT, "%s: cannot read attribute %s", r->file->path, name);
        goto out;
    }
    if (variable) {
        char *held = NULL;                       /* HDF5's */
        if (H5Aread(attribute, memory_type, &held) < 0) {
            status = fail_h5(err, ATTN_EINPUT, "%s: cannot read attribute %s", r->file->path, name);
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
            status = fail_h5(err, ATTN_EINPUT, "%s: cannot read attribute %s", r->file->path, name);
            goto out;
        }
        text[size] = '\0';
        *value = attn_strdup(text);
    }
    if (*value == NULL)
        status = attn_fail(err, ATTN_ENOMEM, "out of memory");
out:
    free(text);
    h5_close(memory_type, space, type, attribute, group);
    H5Eclear2(H5E_DEFAULT);
    return status;
}

int attn_results_attribute_text(attn_results *results, const char *name, char **value,
                                attn_error *err)
{
    parse_guard g;
    parse_begin(&g);
    return parse_end(&g, as_reader(read_attribute_text(results, name, value, err), err));
}
