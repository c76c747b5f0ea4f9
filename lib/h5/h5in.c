/* attn_h5in.c - reading input datasets from an HDF5 file (attn_h5.h). */
/*
 * Shapes are what the file holds; a "row" is one index along axis 0, so a
 * batch slice of X (B, n, D) is rows [first, first + c): (c, n, D).
 */
#define _GNU_SOURCE     /* O_NOCTTY, struct stat's st_mtim */
#include "h5/h5.h"

#include <hdf5.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* A dataset found by name, kept open for the reads that follow. */
typedef struct open_dataset {
    struct open_dataset *next;
    hid_t id;
    char name[];                /* as the caller gave it                  */
} open_dataset;

struct attn_h5in {
    hid_t file;
    char *path;
    int fd;                     /* attnrun's own descriptor of the file:
                                   its identity and its lock            */
    struct stat opened;         /* the file as it was opened            */
    bool allow_external;        /* follow external links, external raw
                                   storage and virtual datasets          */
    open_dataset *datasets;     /* resolved so far (a list)             */
};

volatile sig_atomic_t attn_h5_reading;

/* Dynamic filter plugins: off unless attn_h5_allow_plugins. */
static bool plugins_allowed;

/* What attn_h5_error_detail collects while walking HDF5's error stack. */
typedef struct error_detail {
    char *buf;
    size_t len;
    bool system;        /* buf holds the system's words: stop looking */
} error_detail;

/* Walked from the innermost error outwards: keeps the system's message
 * ("No space left on device") when one is there, else the innermost
 * non-empty description. */
static herr_t keep_detail(unsigned depth, const H5E_error2_t *e, void *data)
{
    error_detail *d = data;
    const char *marker = "error message = '";
    (void)depth;
    if (d->system || e->desc == NULL || e->desc[0] == '\0')
        return 0;
    const char *sys = strstr(e->desc, marker);
    if (sys != NULL) {
        sys += strlen(marker);
        snprintf(d->buf, d->len, "%.*s", (int)strcspn(sys, "'"), sys);
        d->system = true;
    } else if (d->buf[0] == '\0') {
        snprintf(d->buf, d->len, "%s", e->desc);
    }
    return 0;
}

bool attn_h5_locking_disabled(bool *best_effort)
{
    const char *value = getenv("HDF5_USE_FILE_LOCKING");
    *best_effort = value != NULL && strcmp(value, "BEST_EFFORT") == 0;
    return value != NULL && (strcmp(value, "FALSE") == 0 || strcmp(value, "0") == 0);
}

void attn_h5_prepare(void)
{
    /* Before HDF5 initialises: no exit-time clean-up.  After an output
     * file failed to flush (disk full), HDF5 1.10 keeps it half-closed and
     * its atexit handler crashes closing it again; the process is ending
     * anyway, and the operating system reclaims the memory. */
    static bool prepared;
    if (prepared)
        return;
    prepared = true;
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);   /* errors come back as values */
    /* No code is loaded because a file names a filter: HDF5_PLUGIN_PATH
     * would otherwise let any input pull a shared library in. */
    H5PLset_loading_state(plugins_allowed ? H5PL_ALL_PLUGIN : 0);
}

void attn_h5_allow_plugins(bool allow)
{
    plugins_allowed = allow;
    H5PLset_loading_state(allow ? H5PL_ALL_PLUGIN : 0);
}

char *attn_h5_error_detail(char *buf, size_t len)
{
    error_detail detail = {.buf = buf, .len = len};
    if (len == 0)
        return buf;
    buf[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_detail, &detail);
    if (buf[0] == '\0')
        snprintf(buf, len, "HDF5 gave no reason");
    return buf;
}

static bool same_inode(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* What a file that is not a regular file is, for messages. */
static const char *file_kind(mode_t mode)
{
    return S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device"
         : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket" : "not a regular file";
}

/*
 * Takes the lock on in->fd: flock, shared or exclusive, the kind HDF5's
 * own readers and writers take, so that an HDF5 program writing the file
 * and attnrun --in-place exclude each other.  Returns ATTN_OK, ATTN_EIO
 * (held by another program, or locks unsupported) or ATTN_EINTR.
 */
static int lock_descriptor(attn_h5in *in, const attn_h5in_options *opt, attn_error *err)
{
    bool best_effort;
    int operation = (opt->lock == ATTN_LOCK_EXCLUSIVE ? LOCK_EX : LOCK_SH) | (opt->wait ? 0 : LOCK_NB);
    if (opt->lock == ATTN_LOCK_NONE || opt->lock == ATTN_LOCK_HELD ||
        attn_h5_locking_disabled(&best_effort))
        return ATTN_OK;
    while (flock(in->fd, operation) != 0) {
        if (errno == EINTR) {
            if (opt->cancel != NULL && *opt->cancel)
                return attn_fail(err, ATTN_EINTR, "%s: interrupted while waiting for the lock",
                                 in->path);
            continue;
        }
        if (errno == EWOULDBLOCK)
            return attn_fail_hint(err, ATTN_EIO, ATTN_HINT_WAIT,
                                  "%s: locked by another program that has the file open (an HDF5 "
                                  "program or another attnrun)", in->path);
        if (best_effort && (errno == ENOLCK || errno == ENOSYS || errno == EOPNOTSUPP))
            return ATTN_OK;
        return attn_fail(err, ATTN_EIO,
                         "%s: cannot lock the file: %s (HDF5_USE_FILE_LOCKING=FALSE runs "
                         "without locks, as it does for HDF5)", in->path, strerror(errno));
    }
    return ATTN_OK;
}

/*
 * Opens in->path as attnrun's own descriptor: without blocking (a FIFO
 * with no writer would hang), a regular file only, locked as `opt` says.
 * A file replaced while the lock was awaited (another attnrun --in-place
 * renamed its copy over it) is opened again.  Fills in->fd and in->opened.
 */
static int open_descriptor(attn_h5in *in, const attn_h5in_options *opt, attn_error *err)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        struct stat now;
        in->fd = open(in->path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (in->fd < 0)
            return attn_fail(err, ATTN_EINPUT, "%s: cannot read input: %s", in->path, strerror(errno));
        if (fstat(in->fd, &in->opened) != 0)
            return attn_fail(err, ATTN_EINPUT, "%s: cannot read input: %s", in->path, strerror(errno));
        if (S_ISDIR(in->opened.st_mode))
            return attn_fail(err, ATTN_EINPUT, "%s: input is a directory, not an HDF5 file", in->path);
        if (!S_ISREG(in->opened.st_mode))
            return attn_fail(err, ATTN_EINPUT, "%s: input is %s, not a regular file; HDF5 needs "
                             "a file it can seek in", in->path, file_kind(in->opened.st_mode));
        int status = lock_descriptor(in, opt, err);
        if (status != ATTN_OK)
            return status;
        if (stat(in->path, &now) == 0 && same_inode(&now, &in->opened))
            return fstat(in->fd, &in->opened) == 0 ? ATTN_OK
                   : attn_fail(err, ATTN_EIO, "%s: %s", in->path, strerror(errno));
        close(in->fd);                       /* replaced meanwhile: again */
        in->fd = -1;
    }
    return attn_fail(err, ATTN_EIO, "%s: the file keeps being replaced; try again", in->path);
}

/* Whether in->fd's file is no longer what was opened: another size or
 * modification time. */
static bool descriptor_changed(const attn_h5in *in)
{
    struct stat now;
    return fstat(in->fd, &now) != 0 || now.st_size != in->opened.st_size ||
           now.st_mtim.tv_sec != in->opened.st_mtim.tv_sec ||
           now.st_mtim.tv_nsec != in->opened.st_mtim.tv_nsec;
}

static int changed_failure(const attn_h5in *in, attn_error *err)
{
    return attn_fail(err, ATTN_EIO,
                     "%s: the input changed while it was read (another program wrote to it); "
                     "nothing was written", in->path);
}

/* HDF5 opened the file by name: it must be the one attnrun opened, locked
 * and checked (not one put there in between). */
static int check_hdf5_descriptor(const attn_h5in *in, attn_error *err)
{
    void *handle = NULL;
    struct stat st;
    hid_t fapl = H5Fget_access_plist(in->file);
    bool sec2 = fapl >= 0 && H5Pget_driver(fapl) == H5FD_SEC2;
    if (fapl >= 0)
        H5Pclose(fapl);
    if (!sec2 || H5Fget_vfd_handle(in->file, H5P_DEFAULT, &handle) < 0 || handle == NULL) {
        H5Eclear2(H5E_DEFAULT);
        return ATTN_OK;                      /* another driver: nothing to compare */
    }
    if (fstat(*(int *)handle, &st) != 0 || !same_inode(&st, &in->opened))
        return changed_failure(in, err);
    return ATTN_OK;
}

static void h5in_free(attn_h5in *in)
{
    for (open_dataset *d = in->datasets, *next; d != NULL; d = next) {
        next = d->next;
        H5Dclose(d->id);
        free(d);
    }
    if (in->file >= 0)
        H5Fclose(in->file);
    if (in->fd >= 0)
        close(in->fd);                       /* releases the lock */
    free(in->path);
    free(in);
}

static int h5in_open(const char *path, const attn_h5in_options *opt, attn_h5in **out,
                     attn_error *err)
{
    static const attn_h5in_options defaults = {.lock = ATTN_LOCK_NONE};
    char detail[256];
    hid_t fapl = H5I_INVALID_HID;
    int status = ATTN_OK;
    attn_h5_prepare();
    *out = NULL;
    if (opt == NULL)
        opt = &defaults;
    attn_h5in *in = attn_calloc(1, sizeof *in);
    if (in == NULL || (in->path = attn_strdup(path)) == NULL) {
        free(in);
        return attn_fail(err, ATTN_ENOMEM, "%s: out of memory", path);
    }
    in->fd = -1;
    in->file = H5I_INVALID_HID;
    in->allow_external = opt->allow_external;
    if ((status = open_descriptor(in, opt, err)) != ATTN_OK)
        goto out;
    if (H5Fis_hdf5(path) <= 0) {
        status = attn_fail(err, ATTN_EINPUT, "%s: not an HDF5 file", path);
        goto out;
    }
    /* attnrun's own lock stands for HDF5's, which would conflict with it
     * (flock locks of two descriptors exclude each other, even in one
     * process). */
    if ((fapl = H5Pcreate(H5P_FILE_ACCESS)) < 0 ||
        (opt->lock != ATTN_LOCK_NONE && H5Pset_file_locking(fapl, 0, 1) < 0)) {
        status = attn_fail(err, ATTN_ENOMEM, "%s: cannot set up HDF5 to read it", path);
        goto out;
    }
    in->file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (in->file < 0) {
        status = attn_fail(err, ATTN_EINPUT, "%s: cannot open HDF5 file: %s", path,
                           attn_h5_error_detail(detail, sizeof detail));
        goto out;
    }
    status = check_hdf5_descriptor(in, err);
out:
    if (fapl >= 0)
        H5Pclose(fapl);
    if (status != ATTN_OK) {
        H5Eclear2(H5E_DEFAULT);
        h5in_free(in);
        return status;
    }
    *out = in;
    return ATTN_OK;
}

void attn_h5in_close(attn_h5in *in)
{
    if (in == NULL)
        return;
    attn_h5_reading++;
    h5in_free(in);
    attn_h5_reading--;
}

int attn_h5in_descriptor(const attn_h5in *in)
{
    return in->fd;
}

int attn_h5in_check_unchanged(attn_h5in *in, attn_error *err)
{
    struct stat now;
    if (descriptor_changed(in))
        return changed_failure(in, err);
    if (stat(in->path, &now) != 0 || !same_inode(&now, &in->opened))
        return attn_fail(err, ATTN_EIO,
                         "%s: the input was replaced by another file while it was read; "
                         "nothing was written", in->path);
    return ATTN_OK;
}

/* Soft links followed on the way to one object, in all (HDF5's own
 * default limit, H5Pset_nlinks). */
#define MAX_SOFT_LINKS 16

/* The longest soft-link target followed. */
#define MAX_LINK_TARGET ((size_t)1 << 16)

/* The next name of path[*at ...] ("" and "." skipped): its start and
 * length, *at moved past it.  false at the end. */
static bool next_part(const char *path, size_t *at, const char **part, size_t *len)
{
    for (;;) {
        while (path[*at] == '/')
            (*at)++;
        if (path[*at] == '\0')
            return false;
        *part = path + *at;
        *len = strcspn(*part, "/");
        *at += *len;
        if (!(*len == 1 && (*part)[0] == '.'))
            return true;
    }
}

/* An external link's file and object, for messages (into buf). */
static void describe_external(hid_t group, const char *link, size_t size, char *buf, size_t len)
{
    char *value = size <= MAX_LINK_TARGET ? attn_malloc(size) : NULL;
    const char *file = "?", *object = "?";
    unsigned flags;
    if (value == NULL || H5Lget_val(group, link, value, size, H5P_DEFAULT) < 0 ||
        H5Lunpack_elink_val(value, size, &flags, &file, &object) < 0)
        H5Eclear2(H5E_DEFAULT);
    snprintf(buf, len, "%s in file %s", object, file);
    free(value);
}

/* A link on the way to `name` that HDF5 cannot read: a damaged file. */
static int damaged(const attn_h5in *in, const char *name, const char *link, attn_error *err)
{
    char detail[256];
    return attn_fail(err, ATTN_EINPUT, "%s: cannot follow %.200s on the way to %.200s (a damaged "
                     "file): %s", in->path, link, name, attn_h5_error_detail(detail, sizeof detail));
}

/*
 * Opens the object `name` names ("/a/b/X" or "a/b/X", from the root),
 * following every link on the way itself, once, left to right: a hard link
 * as it is; a soft link by its target (from the root when absolute, else
 * from the group holding the link), at most MAX_SOFT_LINKS in all, like
 * the kernel's ELOOP; an external link (another file) only when allowed;
 * a user-defined link never.  Any length of path works.
 * Returns ATTN_OK with *object open, 1 when the name leads nowhere (no
 * message), or ATTN_EINPUT / ATTN_ENOMEM with a message -- also for a
 * soft link on the way that leads nowhere.
 */
static int resolve(attn_h5in *in, const char *name, hid_t *object, attn_error *err)
{
    char *path = attn_strdup(name), *target = NULL;
    const char *part;
    size_t at = 0, len, links = 0;
    hid_t here = H5Gopen2(in->file, "/", H5P_DEFAULT);
    int status = ATTN_OK;
    *object = H5I_INVALID_HID;
    if (path == NULL || here < 0) {
        status = attn_fail(err, path == NULL ? ATTN_ENOMEM : ATTN_EINPUT,
                           "%s: cannot look up %s", in->path, name);
        goto out;
    }
    if (!next_part(path, &at, &part, &len)) {
        status = 1;                           /* "" or "/": not a dataset */
        goto out;
    }
    do {
        char link[len + 1];
        H5L_info_t info;
        memcpy(link, part, len);
        link[len] = '\0';
        htri_t there = H5Iget_type(here) == H5I_GROUP ? H5Lexists(here, link, H5P_DEFAULT) : 0;
        if (there == 0 && links > 0) {        /* a soft link led nowhere */
            status = attn_fail(err, ATTN_EINPUT, "%s: %.200s leads through a soft link to "
                               "%.200s, which does not exist", in->path, name, path);
            goto out;
        }
        if (there == 0) {
            status = 1;                       /* no such link, or not a group */
            goto out;
        }
        if (there < 0 || H5Lget_info(here, link, &info, H5P_DEFAULT) < 0) {
            status = damaged(in, name, link, err);
            goto out;
        }
        if (info.type == H5L_TYPE_SOFT) {
            size_t size = info.u.val_size, rest = strlen(path + at);
            if (++links > MAX_SOFT_LINKS) {
                status = attn_fail(err, ATTN_EINPUT, "%s: %s: more than %d soft links on the way "
                                   "(a loop?); not followed", in->path, name, MAX_SOFT_LINKS);
                goto out;
            }
            if (size == 0 || size > MAX_LINK_TARGET ||
                (target = attn_malloc(size + 1 + rest + 1)) == NULL ||
                H5Lget_val(here, link, target, size, H5P_DEFAULT) < 0) {
                status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the soft link %s (on the "
                                   "way to %s)", in->path, link, name);
                goto out;
            }
            target[size] = '\0';
            size = strlen(target);
            memcpy(target + size, path + at, rest + 1);   /* target, then the rest */
            if (target[0] == '/') {
                H5Gclose(here);
                if ((here = H5Gopen2(in->file, "/", H5P_DEFAULT)) < 0) {
                    status = 1;
                    goto out;
                }
            }
            free(path);
            path = target;
            target = NULL;
            at = 0;
            continue;
        }
        if (info.type == H5L_TYPE_EXTERNAL && !in->allow_external) {
            char where[512];
            describe_external(here, link, info.u.val_size, where, sizeof where);
            status = attn_fail_hint(err, ATTN_EINPUT, ATTN_HINT_EXTERNAL,
                                    "%s: %s is an external link to %s; not followed", in->path,
                                    name, where);
            goto out;
        }
        if (info.type != H5L_TYPE_HARD && info.type != H5L_TYPE_EXTERNAL) {
            status = attn_fail(err, ATTN_EINPUT, "%s: %s is a user-defined link; not followed",
                               in->path, name);
            goto out;
        }
        hid_t next = H5Oopen(here, link, H5P_DEFAULT);
        if (next < 0) {
            status = damaged(in, name, link, err);
            goto out;
        }
        H5Oclose(here);
        here = next;
    } while (next_part(path, &at, &part, &len));
    *object = here;
    here = H5I_INVALID_HID;
out:
    if (here >= 0)
        H5Oclose(here);
    free(path);
    free(target);
    if (status != ATTN_OK)
        H5Eclear2(H5E_DEFAULT);
    return status;
}

/*
 * The open dataset `name`, resolved once (resolve) and kept for the reads
 * that follow.  Returns ATTN_OK, 1 when absent (no message), or
 * ATTN_EINPUT / ATTN_ENOMEM.
 */
static int dataset_of(attn_h5in *in, const char *name, hid_t *dataset, attn_error *err)
{
    for (const open_dataset *d = in->datasets; d != NULL; d = d->next)
        if (strcmp(d->name, name) == 0) {
            *dataset = d->id;
            return ATTN_OK;
        }
    hid_t object;
    int status = resolve(in, name, &object, err);
    if (status != ATTN_OK)
        return status;
    if (H5Iget_type(object) != H5I_DATASET) {
        H5Oclose(object);
        return attn_fail(err, ATTN_EINPUT, "%s: %s is not a dataset", in->path, name);
    }
    size_t len = strlen(name);
    open_dataset *d = attn_malloc(sizeof *d + len + 1);
    if (d == NULL) {
        H5Dclose(object);
        return attn_fail(err, ATTN_ENOMEM, "%s: out of memory", in->path);
    }
    d->next = in->datasets;
    d->id = object;
    memcpy(d->name, name, len + 1);
    in->datasets = d;
    *dataset = object;
    return ATTN_OK;
}

/* Element sizes attnrun reads: half, single and double floats; integers
 * (masks) of 1 to 8 bytes.  A damaged type can claim gigabytes per value. */
static bool type_size_ok(H5T_class_t cls, size_t size)
{
    if (cls == H5T_FLOAT)
        return size == 2 || size == 4 || size == 8;
    return size == 1 || size == 2 || size == 4 || size == 8;
}

/* Filters HDF5 has built in; anything else would need a plugin. */
static bool filter_built_in(H5Z_filter_t id)
{
    return id == H5Z_FILTER_DEFLATE || id == H5Z_FILTER_SHUFFLE || id == H5Z_FILTER_FLETCHER32 ||
           id == H5Z_FILTER_SZIP || id == H5Z_FILTER_NBIT || id == H5Z_FILTER_SCALEOFFSET;
}

/*
 * Where a dataset's values live, checked before any is read: no virtual
 * dataset or external raw storage unless allowed; no filter that needs a
 * plugin unless plugins are allowed; and the storage must be plausible --
 * no more than the file holds, and every value written (an unwritten part
 * would read as fill values: a damaged or unfinished file, or a huge
 * declared shape with nothing behind it).
 */
static int check_storage(attn_h5in *in, const char *name, hid_t dset, hid_t space,
                         size_t elem_size, attn_error *err)
{
    hid_t dcpl = H5Dget_create_plist(dset);
    int status = ATTN_OK;
    if (dcpl < 0)
        return attn_fail(err, ATTN_EINPUT, "%s: cannot read the storage of %s", in->path, name);
    H5D_layout_t layout = H5Pget_layout(dcpl);
    int externals = H5Pget_external_count(dcpl);
    int filters = H5Pget_nfilters(dcpl);
    if (layout == H5D_VIRTUAL && !in->allow_external) {
        status = attn_fail_hint(err, ATTN_EINPUT, ATTN_HINT_EXTERNAL,
                                "%s: %s is a virtual dataset, its values come from other files; "
                                "not followed", in->path, name);
        goto out;
    }
    if (externals > 0 && !in->allow_external) {
        char file[256] = "?";
        off_t offset;
        hsize_t size;
        if (H5Pget_external(dcpl, 0, sizeof file, file, &offset, &size) < 0)
            H5Eclear2(H5E_DEFAULT);
        file[sizeof file - 1] = '\0';
        status = attn_fail_hint(err, ATTN_EINPUT, ATTN_HINT_EXTERNAL,
                                "%s: %s keeps its values in external file %s; not followed",
                                in->path, name, file);
        goto out;
    }
    if (layout < 0 || externals < 0 || filters < 0) {
        status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the storage of %s", in->path, name);
        goto out;
    }
    for (int i = 0; i < filters; i++) {
        unsigned flags, config;
        size_t values = 0;
        char filter_name[64] = "";
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &values, NULL,
                                         sizeof filter_name, filter_name, &config);
        if (id < 0) {
            status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the filters of %s", in->path, name);
            goto out;
        }
        if (!filter_built_in(id) && !plugins_allowed) {
            status = attn_fail_hint(err, ATTN_EINPUT, ATTN_HINT_PLUGINS,
                                    "%s: %s needs filter %d (%s), which HDF5 would load as a "
                                    "plugin; plugins are off", in->path, name, (int)id,
                                    filter_name[0] ? filter_name : "unnamed");
            goto out;
        }
    }
    if (layout == H5D_VIRTUAL || externals > 0)
        goto out;                                 /* allowed: not in this file */

    hssize_t count = H5Sget_simple_extent_npoints(space);
    size_t logical;
    hsize_t stored = H5Dget_storage_size(dset), file_size = 0;
    hid_t file = H5Iget_file_id(dset);      /* the dataset's own file: an
                                               external link leads elsewhere */
    if (file < 0 || H5Fget_filesize(file, &file_size) < 0)
        file_size = (hsize_t)in->opened.st_size;
    if (file >= 0)
        H5Fclose(file);
    if (count < 0 || !attn_size_mul(&logical, (size_t)count, elem_size)) {
        status = attn_fail(err, ATTN_EINPUT, "%s: %s is too large to address", in->path, name);
        goto out;
    }
    if (stored > file_size) {
        status = attn_fail(err, ATTN_EINPUT,
                           "%s: %s claims %llu bytes of storage in a file of %llu bytes (damaged file)",
                           in->path, name, (unsigned long long)stored, (unsigned long long)file_size);
        goto out;
    }
    /* Contiguous: every byte stored.  Chunked: every chunk of the extent
     * (bytes would not do: padded edge chunks can cover a missing one). */
    bool complete = layout == H5D_CHUNKED || stored >= logical;
    if (layout == H5D_CHUNKED && logical > 0) {
        hsize_t dims[H5S_MAX_RANK], chunk[H5S_MAX_RANK], allocated = 0, expected = 1;
        int rank = H5Sget_simple_extent_dims(space, dims, NULL);
        if (rank < 0 || H5Pget_chunk(dcpl, rank, chunk) != rank ||
            H5Dget_num_chunks(dset, space, &allocated) < 0) {
            status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the chunks of %s", in->path, name);
            goto out;
        }
        for (int i = 0; i < rank; i++)
            expected *= chunk[i] ? (dims[i] + chunk[i] - 1) / chunk[i] : 0;
        complete = allocated >= expected;
    }
    if (!complete)
        status = attn_fail(err, ATTN_EINPUT,
                           "%s: %s stores %llu bytes for %zu bytes of values; the rest was never "
                           "written (a damaged or unfinished file)",
                           in->path, name, (unsigned long long)stored, logical);
out:
    H5Pclose(dcpl);
    if (status != ATTN_OK)
        H5Eclear2(H5E_DEFAULT);
    return status;
}

/* Element classes, named for messages. */
static const char *class_name(H5T_class_t cls)
{
    switch (cls) {
    case H5T_INTEGER:   return "integer";
    case H5T_FLOAT:     return "floating-point";
    case H5T_STRING:    return "string";
    case H5T_COMPOUND:  return "compound";
    case H5T_ENUM:      return "enum";
    case H5T_BITFIELD:  return "bitfield";
    case H5T_OPAQUE:    return "opaque";
    case H5T_REFERENCE: return "reference";
    case H5T_VLEN:      return "variable-length";
    case H5T_ARRAY:     return "array";
    default:            return "unknown";
    }
}

static int h5in_describe(attn_h5in *in, attn_data_kind kind, bool required,
                         attn_tensor_info *info, attn_error *err)
{
    hid_t dset = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    hsize_t dims[H5S_MAX_RANK];
    int status = ATTN_OK;

    info->present = false;
    info->rank = 0;
    int found = dataset_of(in, info->name, &dset, err);
    if (found == 1) {
        if (required)
            return attn_fail(err, ATTN_EINPUT, "%s: no dataset %s", in->path, info->name);
        return ATTN_OK;
    }
    if (found != ATTN_OK)
        return found;
    type = H5Dget_type(dset);
    space = H5Dget_space(dset);
    if (type < 0 || space < 0) {
        status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the type or shape of %s",
                           in->path, info->name);
        goto out;
    }
    H5T_class_t cls = H5Tget_class(type);
    bool type_ok = kind == ATTN_DATA_FLOAT ? cls == H5T_FLOAT
                 : kind == ATTN_DATA_INTEGER ? cls == H5T_INTEGER
                                             : (cls == H5T_INTEGER || cls == H5T_ENUM);
    if (!type_ok) {
        status = attn_fail(err, ATTN_EINPUT, "%s: dataset %s has %s elements; %s expected",
                           in->path, info->name, class_name(cls),
                           kind == ATTN_DATA_FLOAT ? "floating-point"
                           : kind == ATTN_DATA_INTEGER ? "integer" : "integer or boolean");
        goto out;
    }
    size_t elem_size = H5Tget_size(type);
    if (!type_size_ok(cls, elem_size)) {
        status = attn_fail(err, ATTN_EINPUT, "%s: dataset %s has %zu-byte %s elements; %s expected",
                           in->path, info->name, elem_size, class_name(cls),
                           cls == H5T_FLOAT ? "2, 4 or 8 bytes" : "1 to 8 bytes");
        goto out;
    }
    if (H5Sget_simple_extent_type(space) != H5S_SIMPLE && H5Sget_simple_extent_type(space) != H5S_SCALAR) {
        status = attn_fail(err, ATTN_EINPUT, "%s: dataset %s holds no data space", in->path, info->name);
        goto out;
    }
    int rank = H5Sget_simple_extent_dims(space, dims, NULL);
    if (rank < 0 || rank > ATTN_MAX_RANK) {
        status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the shape of %s", in->path, info->name);
        goto out;
    }
    if ((status = check_storage(in, info->name, dset, space, elem_size, err)) != ATTN_OK)
        goto out;
    info->rank = (size_t)rank;
    for (int i = 0; i < rank; i++)
        info->dims[i] = (size_t)dims[i];
    info->present = true;
out:
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    if (status != ATTN_OK)
        H5Eclear2(H5E_DEFAULT);
    return status;
}

/*
 * After a failed or finished read of the input: a read from a file that
 * another program changed meanwhile is refused, whatever it returned (a
 * truncated file reads as zeros where HDF5 expects values).
 */
static int after_read(const attn_h5in *in, int status, attn_error *err)
{
    return descriptor_changed(in) ? changed_failure(in, err) : status;
}

/* Reads rows [first, first + count) of name with memory type mem_type. */
static int read_rows(attn_h5in *in, const char *name, hid_t mem_type, size_t first,
                     size_t count, void *buf, attn_error *err)
{
    hid_t dset, file_space = H5I_INVALID_HID, mem_space = H5I_INVALID_HID;
    hsize_t dims[H5S_MAX_RANK], start[H5S_MAX_RANK] = {0};
    char detail[256];
    int status = dataset_of(in, name, &dset, err);
    if (status == 1)
        return attn_fail(err, ATTN_EINPUT, "%s: no dataset %s", in->path, name);
    if (status != ATTN_OK)
        return status;
    if ((file_space = H5Dget_space(dset)) < 0)
        goto fail;
    int rank = H5Sget_simple_extent_dims(file_space, dims, NULL);
    if (rank < 0)
        goto fail;
    if (rank > 0) {
        start[0] = first;
        dims[0] = count;
        if (H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, dims, NULL) < 0)
            goto fail;
    }
    if ((mem_space = rank > 0 ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR)) < 0 ||
        H5Dread(dset, mem_type, mem_space, file_space, H5P_DEFAULT, buf) < 0)
        goto fail;
    goto out;
fail:
    status = attn_fail(err, ATTN_EIO, "%s: cannot read %s rows %zu..%zu: %s", in->path, name,
                       first, first + count, attn_h5_error_detail(detail, sizeof detail));
    H5Eclear2(H5E_DEFAULT);
out:
    if (mem_space >= 0)
        H5Sclose(mem_space);
    if (file_space >= 0)
        H5Sclose(file_space);
    return after_read(in, status, err);
}

static int h5in_read_floats(attn_h5in *in, const char *name, attn_precision precision,
                            size_t first, size_t count, void *buf, attn_error *err)
{
    hid_t mem_type = precision == ATTN_F64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
    return read_rows(in, name, mem_type, first, count, buf, err);
}

static int h5in_read_mask(attn_h5in *in, const char *name, size_t first, size_t count,
                          unsigned char *keep, attn_error *err)
{
    attn_tensor_info info = {.name = name};
    hid_t dset, file_type = H5I_INVALID_HID, mem_type = H5I_INVALID_HID;
    unsigned char *raw = NULL;
    size_t elements, elem_size, bytes;
    int status = h5in_describe(in, ATTN_DATA_MASK, true, &info, err);
    if (status == ATTN_OK)
        status = dataset_of(in, name, &dset, err);   /* opened by describe */
    if (status != ATTN_OK)
        return status;
    /* Read in the file's own integer width, then test each value for 0:
     * no narrowing can turn a nonzero into a zero. */
    if ((file_type = H5Dget_type(dset)) < 0 ||
        (mem_type = H5Tget_native_type(file_type, H5T_DIR_ASCEND)) < 0 ||
        (elem_size = H5Tget_size(mem_type)) == 0) {
        status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the type of mask %s", in->path, name);
        goto out;
    }
    info.dims[0] = count;
    if (!attn_size_product(&elements, info.dims, info.rank) ||
        !attn_size_mul(&bytes, elements, elem_size)) {
        status = attn_fail(err, ATTN_EINPUT, "%s: mask %s is too large", in->path, name);
        goto out;
    }
    if ((raw = attn_malloc(bytes)) == NULL) {
        status = attn_fail(err, ATTN_ENOMEM, "%s: out of memory reading mask %s (%zu bytes)",
                           in->path, name, bytes);
        goto out;
    }
    if ((status = read_rows(in, name, mem_type, first, count, raw, err)) != ATTN_OK)
        goto out;
    for (size_t i = 0; i < elements; i++) {
        unsigned char any = 0;
        for (size_t j = 0; j < elem_size; j++)
            any |= raw[i * elem_size + j];
        keep[i] = any != 0;
    }
out:
    free(raw);
    if (mem_type >= 0)
        H5Tclose(mem_type);
    if (file_type >= 0)
        H5Tclose(file_type);
    return status;
}

static int h5in_read_integers(attn_h5in *in, const char *name, size_t first, size_t count,
                              int64_t *values, attn_error *err)
{
    attn_tensor_info info = {.name = name};
    int status = h5in_describe(in, ATTN_DATA_INTEGER, true, &info, err);
    if (status == ATTN_OK)
        status = read_rows(in, name, H5T_NATIVE_INT64, first, count, values, err);
    return status;
}

static int h5in_read_value(attn_h5in *in, const char *name, const size_t *index, size_t rank,
                           double *value, attn_error *err)
{
    hid_t dset, file_space = H5I_INVALID_HID, mem_space = H5I_INVALID_HID;
    hsize_t point[ATTN_MAX_RANK], one = 1;
    char detail[256];
    int status = dataset_of(in, name, &dset, err);
    if (status == 1)
        return attn_fail(err, ATTN_EINPUT, "%s: no dataset %s", in->path, name);
    if (status != ATTN_OK)
        return status;
    for (size_t i = 0; i < rank && i < ATTN_MAX_RANK; i++)
        point[i] = index[i];
    if ((file_space = H5Dget_space(dset)) < 0 ||
        (rank > 0 && H5Sselect_elements(file_space, H5S_SELECT_SET, 1, point) < 0) ||
        (mem_space = H5Screate_simple(1, &one, NULL)) < 0 ||
        H5Dread(dset, H5T_NATIVE_DOUBLE, mem_space, file_space, H5P_DEFAULT, value) < 0)
        status = attn_fail(err, ATTN_EIO, "%s: cannot read one value of %s: %s", in->path, name,
                           attn_h5_error_detail(detail, sizeof detail));
    if (mem_space >= 0)
        H5Sclose(mem_space);
    if (file_space >= 0)
        H5Sclose(file_space);
    return after_read(in, status, err);
}

/* HDF5 1.12 renamed the call that frees variable-length data read. */
#if H5_VERSION_GE(1, 12, 0)
#define reclaim_variable H5Treclaim
#else
#define reclaim_variable H5Dvlen_reclaim
#endif

/* An array of strings: a dataset (kept open in in->datasets) or an
 * attribute (open until close_strings). */
typedef struct string_array {
    hid_t dataset;
    hid_t attribute;
} string_array;

static void close_strings(string_array *a)
{
    if (a->attribute >= 0)
        H5Aclose(a->attribute);
    a->attribute = H5I_INVALID_HID;
}

/*
 * Opens the strings of the dataset `name`, or of the attribute `attribute`
 * of the object `name` (the root group for "" or "/"), the object found as
 * resolve finds it.  Messages call them `what`.
 */
static int open_strings(attn_h5in *in, const char *name, const char *attribute, const char *what,
                        string_array *a, attn_error *err)
{
    char detail[256];
    const char *part;
    size_t at = 0, len;
    hid_t holder = H5I_INVALID_HID;
    int status = ATTN_OK;
    a->dataset = a->attribute = H5I_INVALID_HID;
    if (attribute == NULL) {
        status = dataset_of(in, name, &a->dataset, err);
        return status == 1 ? attn_fail(err, ATTN_EINPUT, "%s: %s does not exist", in->path, what)
                           : status;
    }
    if (!next_part(name, &at, &part, &len))
        holder = H5Oopen(in->file, "/", H5P_DEFAULT);
    else if ((status = resolve(in, name, &holder, err)) == 1)
        return attn_fail(err, ATTN_EINPUT, "%s: %s does not exist: there is no object %s",
                         in->path, what, name);
    if (status != ATTN_OK)
        return status;
    htri_t there = holder < 0 ? -1 : H5Aexists(holder, attribute);
    if (there > 0)
        a->attribute = H5Aopen(holder, attribute, H5P_DEFAULT);
    if (holder >= 0)
        H5Oclose(holder);
    if (there == 0)
        status = attn_fail(err, ATTN_EINPUT, "%s: %s does not exist", in->path, what);
    else if (a->attribute < 0)
        status = attn_fail(err, ATTN_EINPUT, "%s: cannot open %s: %s", in->path, what,
                           attn_h5_error_detail(detail, sizeof detail));
    if (status != ATTN_OK)
        H5Eclear2(H5E_DEFAULT);
    return status;
}

static int h5in_describe_strings(attn_h5in *in, const char *name, const char *attribute,
                                 const char *what, size_t max_fixed, attn_tensor_info *info,
                                 size_t *fixed, attn_error *err)
{
    string_array a;
    hid_t type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    hsize_t dims[H5S_MAX_RANK];
    info->present = false;
    info->rank = 0;
    *fixed = 0;
    int status = open_strings(in, name, attribute, what, &a, err);
    if (status != ATTN_OK)
        return status;
    bool attr = a.attribute >= 0;
    type = attr ? H5Aget_type(a.attribute) : H5Dget_type(a.dataset);
    space = attr ? H5Aget_space(a.attribute) : H5Dget_space(a.dataset);
    H5T_class_t cls = type < 0 ? H5T_NO_CLASS : H5Tget_class(type);
    htri_t variable = cls == H5T_STRING ? H5Tis_variable_str(type) : 0;
    size_t size = type < 0 ? 0 : H5Tget_size(type);
    int rank = space < 0 ? -1 : H5Sget_simple_extent_dims(space, dims, NULL);
    if (type < 0 || space < 0 || variable < 0) {
        status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the type or shape of %s", in->path,
                           what);
    } else if (cls != H5T_STRING) {
        status = attn_fail(err, ATTN_EINPUT, "%s: %s has %s elements; strings expected", in->path,
                           what, class_name(cls));
    } else if (!variable && (size == 0 || size > max_fixed)) {
        status = attn_fail(err, ATTN_EINPUT, "%s: %s has fixed-length strings of %zu bytes; at "
                           "most %zu bytes per string", in->path, what, size, max_fixed);
    } else if (H5Sget_simple_extent_type(space) == H5S_NULL || rank < 0 || rank > ATTN_MAX_RANK) {
        status = attn_fail(err, ATTN_EINPUT, "%s: %s holds no readable data space", in->path, what);
    } else if (!attr) {
        status = check_storage(in, name, a.dataset, space, size, err);
    }
    if (status == ATTN_OK) {
        info->rank = (size_t)rank;
        for (int i = 0; i < rank; i++)
            info->dims[i] = (size_t)dims[i];
        info->present = true;
        *fixed = variable ? 0 : size;
    }
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    close_strings(&a);
    if (status != ATTN_OK)
        H5Eclear2(H5E_DEFAULT);
    return status;
}

/*
 * The variable-length strings HDF5 allocates while it reads a dataset:
 * each remembers the size HDF5 asked for (the bytes the file holds, NULs
 * included, plus the NUL it appends), and all of them are freed together
 * whatever the read did -- a read that fails halfway leaves some in HDF5's
 * own buffers, where nothing else could free them.
 */
typedef struct vlen_block {
    struct vlen_block *next;
    size_t size;
} vlen_block;

typedef struct vlen_arena {
    vlen_block *blocks;
    bool failed;                  /* an allocation failed */
} vlen_arena;

static void *vlen_allocate(size_t size, void *info)
{
    vlen_arena *arena = info;
    vlen_block *block = size <= SIZE_MAX - sizeof *block ? attn_calloc(1, sizeof *block + size)
                                                         : NULL;
    if (block == NULL) {
        arena->failed = true;
        return NULL;
    }
    block->size = size;
    block->next = arena->blocks;
    arena->blocks = block;
    return block + 1;
}

static void vlen_keep(void *memory, void *info)
{
    (void)memory;                 /* freed with the arena */
    (void)info;
}

static void vlen_free_arena(vlen_arena *arena)
{
    for (vlen_block *b = arena->blocks, *next; b != NULL; b = next) {
        next = b->next;
        free(b);
    }
    arena->blocks = NULL;
}

/* The bytes of a string of the arena, its NUL not counted. */
static size_t vlen_length(const char *string)
{
    const vlen_block *block = (const vlen_block *)(const void *)string - 1;
    return block->size > 0 ? block->size - 1 : 0;
}

/* One string of a raw buffer read: where it starts and its bytes. */
typedef struct raw_strings {
    const char *buf;
    size_t size;                  /* bytes of a fixed-length string; 0: pointers */
    bool space_padded;
    bool arena;                   /* variable-length strings of a vlen_arena */
} raw_strings;

static const char *raw_string(const raw_strings *raw, size_t index, size_t *length)
{
    if (raw->size == 0) {
        const char *s = ((char *const *)(const void *)raw->buf)[index];
        *length = s == NULL ? 0 : raw->arena ? vlen_length(s) : strlen(s);
        return s != NULL ? s : "";
    }
    const char *s = raw->buf + index * raw->size;
    size_t n = raw->size;
    while (n > 0 && s[n - 1] == (raw->space_padded ? ' ' : '\0'))
        n--;
    *length = n;
    return s;
}

/* Copies the strings at index[0 .. count) of raw into *out. */
static int pack_strings(const attn_h5in *in, const raw_strings *raw, const size_t *index,
                        size_t count, attn_strings *out, attn_error *err)
{
    size_t total = 0, length;
    out->count = count;
    out->strings = attn_calloc(count, sizeof *out->strings);
    out->lengths = attn_calloc(count, sizeof *out->lengths);
    if (out->strings == NULL || out->lengths == NULL)
        return attn_fail(err, ATTN_ENOMEM, "%s: out of memory reading %zu strings", in->path, count);
    for (size_t i = 0; i < count; i++) {
        raw_string(raw, index[i], &out->lengths[i]);
        if (!attn_size_add(&total, total, out->lengths[i]) || !attn_size_add(&total, total, 1))
            return attn_fail(err, ATTN_EINPUT, "%s: the strings are too long to address", in->path);
    }
    if ((out->text = attn_malloc(total)) == NULL)
        return attn_fail(err, ATTN_ENOMEM, "%s: out of memory reading %zu bytes of strings",
                         in->path, total);
    char *at = out->text;
    for (size_t i = 0; i < count; i++) {
        const char *s = raw_string(raw, index[i], &length);
        memcpy(at, s, length);
        at[length] = '\0';
        out->strings[i] = at;
        at += length + 1;
    }
    return ATTN_OK;
}

void attn_strings_free(attn_strings *strings)
{
    free(strings->strings);
    free(strings->lengths);
    free(strings->text);
    memset(strings, 0, sizeof *strings);
}

/* The memory type strings are read as: the file's own for fixed-length
 * ones (no conversion), C strings of the file's character set otherwise. */
static hid_t string_memory_type(hid_t file_type, bool variable)
{
    if (!variable)
        return H5Tcopy(file_type);
    hid_t type = H5Tcopy(H5T_C_S1);
    if (type >= 0 && (H5Tset_size(type, H5T_VARIABLE) < 0 ||
                      H5Tset_cset(type, H5Tget_cset(file_type)) < 0)) {
        H5Tclose(type);
        return H5I_INVALID_HID;
    }
    return type;
}

/*
 * Reads the block first[], count[] of the dataset a->dataset into buf
 * (its elements of mem_type, row-major), the variable-length strings into
 * arena.
 */
static herr_t read_string_block(hid_t dataset, hid_t mem_type, bool variable, int rank,
                                const size_t *first, const size_t *count, void *buf,
                                vlen_arena *arena)
{
    hsize_t start[2], dims[2];
    hid_t file_space = H5Dget_space(dataset), mem_space = H5I_INVALID_HID;
    hid_t transfer = H5Pcreate(H5P_DATASET_XFER);
    herr_t result = file_space < 0 || transfer < 0 ? -1 : 0;
    for (int i = 0; i < rank; i++) {
        start[i] = first[i];
        dims[i] = count[i];
    }
    if (result >= 0 && variable)
        result = H5Pset_vlen_mem_manager(transfer, vlen_allocate, arena, vlen_keep, arena);
    if (result >= 0)
        result = H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, dims, NULL);
    if (result >= 0 && (mem_space = H5Screate_simple(rank, dims, NULL)) < 0)
        result = -1;
    if (result >= 0)
        result = H5Dread(dataset, mem_type, mem_space, file_space, transfer, buf);
    if (mem_space >= 0)
        H5Sclose(mem_space);
    if (file_space >= 0)
        H5Sclose(file_space);
    if (transfer >= 0)
        H5Pclose(transfer);
    return result;
}

/* Where each string wanted lies in what was read (index, (wanted)): the
 * whole array for an attribute, the block itself for a dataset. */
static void string_positions(bool whole, int rank, const hsize_t *dims, const size_t *first,
                             const size_t *count, size_t wanted, size_t *index)
{
    const size_t columns = rank == 2 ? count[1] : count[0];
    for (size_t i = 0; i < wanted; i++)
        index[i] = !whole ? i
                 : rank == 1 ? first[0] + i
                             : (first[0] + i / columns) * (size_t)dims[1] + first[1] + i % columns;
}

static int h5in_read_strings(attn_h5in *in, const char *name, const char *attribute,
                             const size_t *first, const size_t *count, attn_strings *out,
                             attn_error *err)
{
    string_array a;
    hid_t type = H5I_INVALID_HID, mem_type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    hsize_t dims[2] = {1, 1};
    vlen_arena arena = {NULL, false};
    raw_strings raw = {NULL, 0, false, false};
    char detail[256];
    char *buf = NULL;             /* (read) strings as HDF5 reads them: fixed-length
                                     ones, or pointers to variable-length ones */
    size_t *index = NULL;         /* (wanted): where each wanted one is in buf */
    size_t wanted = 1, stored = 1, read;
    herr_t result = -1;
    memset(out, 0, sizeof *out);
    int status = open_strings(in, name, attribute, name, &a, err);
    if (status != ATTN_OK)
        return status;
    const bool attr = a.attribute >= 0;
    type = attr ? H5Aget_type(a.attribute) : H5Dget_type(a.dataset);
    space = attr ? H5Aget_space(a.attribute) : H5Dget_space(a.dataset);
    int rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    htri_t variable = type < 0 ? -1 : H5Tis_variable_str(type);
    if (rank < 1 || rank > 2 || variable < 0 || H5Sget_simple_extent_dims(space, dims, NULL) < 0 ||
        (mem_type = string_memory_type(type, variable > 0)) < 0) {
        status = attn_fail(err, ATTN_EIO, "%s: cannot read the strings of %s: %s", in->path, name,
                           attn_h5_error_detail(detail, sizeof detail));
        goto out;
    }
    raw.size = variable ? 0 : H5Tget_size(type);
    raw.space_padded = H5Tget_strpad(type) == H5T_STR_SPACEPAD;
    raw.arena = !attr;
    for (int i = 0; i < rank; i++)
        if (!attn_size_mul(&wanted, wanted, count[i]) || !attn_size_mul(&stored, stored, (size_t)dims[i])) {
            status = attn_fail(err, ATTN_EINPUT, "%s: %s holds too many strings to address",
                               in->path, name);
            goto out;
        }
    read = attr ? stored : wanted;
    if ((index = attn_calloc(wanted, sizeof *index)) == NULL ||
        (buf = attn_calloc(read, variable ? sizeof(char *) : raw.size)) == NULL) {
        status = attn_fail(err, ATTN_ENOMEM, "%s: out of memory reading %zu strings of %s",
                           in->path, read, name);
        goto out;
    }
    string_positions(attr, rank, dims, first, count, wanted, index);
    result = attr ? H5Aread(a.attribute, mem_type, buf)
                  : read_string_block(a.dataset, mem_type, variable > 0, rank, first, count, buf,
                                      &arena);
    if (result < 0) {
        status = arena.failed ? attn_fail(err, ATTN_ENOMEM, "%s: out of memory reading %s",
                                          in->path, name)
                              : attn_fail(err, ATTN_EIO, "%s: cannot read %s: %s", in->path, name,
                                          attn_h5_error_detail(detail, sizeof detail));
        goto out;
    }
    raw.buf = buf;
    status = pack_strings(in, &raw, index, wanted, out, err);
out:
    if (attr && variable > 0 && result >= 0)      /* HDF5's own allocations */
        reclaim_variable(mem_type, space, H5P_DEFAULT, buf);
    vlen_free_arena(&arena);
    free(index);
    free(buf);
    if (status != ATTN_OK)
        attn_strings_free(out);
    if (mem_type >= 0)
        H5Tclose(mem_type);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    close_strings(&a);
    if (status != ATTN_OK)
        H5Eclear2(H5E_DEFAULT);
    return after_read(in, status, err);
}

/* The public entry points: the same, with attn_h5_reading raised while
 * HDF5 parses the input (see attn_h5.h). */
int attn_h5in_open(const char *path, attn_h5in **out, attn_error *err)
{
    return attn_h5in_open_with(path, NULL, out, err);
}

int attn_h5in_open_with(const char *path, const attn_h5in_options *options, attn_h5in **out,
                        attn_error *err)
{
    attn_h5_reading++;
    int status = h5in_open(path, options, out, err);
    attn_h5_reading--;
    return status;
}

int attn_h5in_describe(attn_h5in *in, attn_data_kind kind, bool required,
                       attn_tensor_info *info, attn_error *err)
{
    attn_h5_reading++;
    int status = h5in_describe(in, kind, required, info, err);
    attn_h5_reading--;
    return status;
}

int attn_h5in_read_floats(attn_h5in *in, const char *name, attn_precision precision,
                          size_t first, size_t count, void *buf, attn_error *err)
{
    attn_h5_reading++;
    int status = h5in_read_floats(in, name, precision, first, count, buf, err);
    attn_h5_reading--;
    return status;
}

int attn_h5in_read_mask(attn_h5in *in, const char *name, size_t first, size_t count,
                        unsigned char *keep, attn_error *err)
{
    attn_h5_reading++;
    int status = h5in_read_mask(in, name, first, count, keep, err);
    attn_h5_reading--;
    return status;
}

int attn_h5in_read_integers(attn_h5in *in, const char *name, size_t first, size_t count,
                            int64_t *values, attn_error *err)
{
    attn_h5_reading++;
    int status = h5in_read_integers(in, name, first, count, values, err);
    attn_h5_reading--;
    return status;
}

int attn_h5in_read_value(attn_h5in *in, const char *name, const size_t *index, size_t rank,
                         double *value, attn_error *err)
{
    attn_h5_reading++;
    int status = h5in_read_value(in, name, index, rank, value, err);
    attn_h5_reading--;
    return status;
}

int attn_h5in_describe_strings(attn_h5in *in, const char *name, const char *attribute,
                               const char *what, size_t max_fixed, attn_tensor_info *info,
                               size_t *fixed, attn_error *err)
{
    attn_h5_reading++;
    int status = h5in_describe_strings(in, name, attribute, what, max_fixed, info, fixed, err);
    attn_h5_reading--;
    return status;
}

int attn_h5in_read_strings(attn_h5in *in, const char *name, const char *attribute,
                           const size_t *first, const size_t *count, attn_strings *strings,
                           attn_error *err)
{
    attn_h5_reading++;
    int status = h5in_read_strings(in, name, attribute, first, count, strings, err);
    attn_h5_reading--;
    return status;
}
