/*
 * in_open.c - an input opened: a regular file, attnrun's own descriptor
 * of it and its lock, HDF5's view of the same file, and the checks that
 * it has not changed since (h5/h5.h).
 */
#define _GNU_SOURCE     /* O_NOCTTY, struct stat's st_mtim */
#include "h5/in.h"

#include "core/core.h"
#include "h5/close.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

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
        if (in->fd < 0)        /* missing: the input's; EMFILE, EACCES: the system's */
            return attn_fail(err, attn_open_status(errno), "%s: cannot read input: %s", in->path,
                             strerror(errno));
        if (fstat(in->fd, &in->opened) != 0)
            return attn_fail(err, ATTN_EIO, "%s: cannot read input: %s", in->path, strerror(errno));
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

bool h5in_changed(const attn_h5in *in)
{
    struct stat now;
    return fstat(in->fd, &now) != 0 || now.st_size != in->opened.st_size ||
           now.st_mtim.tv_sec != in->opened.st_mtim.tv_sec ||
           now.st_mtim.tv_nsec != in->opened.st_mtim.tv_nsec;
}

int h5in_changed_failure(const attn_h5in *in, attn_error *err)
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
    h5_close(fapl);
    if (!sec2 || H5Fget_vfd_handle(in->file, H5P_DEFAULT, &handle) < 0 || handle == NULL) {
        H5Eclear2(H5E_DEFAULT);
        return ATTN_OK;                      /* another driver: nothing to compare */
    }
    if (fstat(*(int *)handle, &st) != 0 || !same_inode(&st, &in->opened))
        return h5in_changed_failure(in, err);
    return ATTN_OK;
}

static void h5in_free(attn_h5in *in)
{
    for (open_dataset *d = in->datasets, *next; d != NULL; d = next) {
        next = d->next;
        H5Dclose(d->id);
        free(d);
    }
    h5_close(in->file);
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
    in->tiled_maps = opt->tiled_maps;
    if ((status = open_descriptor(in, opt, err)) != ATTN_OK)
        goto out;
    if ((status = h5_is_hdf5(path, "input", err)) <= 0) {    /* EMFILE: not the file's fault */
        if (status == 0)
            status = attn_fail(err, ATTN_EINPUT, "%s: not an HDF5 file", path);
        goto out;
    }
    status = ATTN_OK;
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
        bool system = h5_system_error(detail, sizeof detail);
        status = attn_fail(err, system ? ATTN_EIO : ATTN_EINPUT, "%s: cannot open HDF5 file: %s",
                           path, system ? detail : attn_h5_error_detail(detail, sizeof detail));
        goto out;
    }
    status = check_hdf5_descriptor(in, err);
out:
    h5_close(fapl);
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
    attn_parsing_enter();
    h5in_free(in);
    attn_parsing_leave();
}

int attn_h5in_descriptor(const attn_h5in *in)
{
    return in->fd;
}

int attn_h5in_check_unchanged(attn_h5in *in, attn_error *err)
{
    struct stat now;
    if (h5in_changed(in))
        return h5in_changed_failure(in, err);
    if (stat(in->path, &now) != 0 || !same_inode(&now, &in->opened))
        return attn_fail(err, ATTN_EIO,
                         "%s: the input was replaced by another file while it was read; "
                         "nothing was written", in->path);
    return ATTN_OK;
}

int attn_h5in_open(const char *path, attn_h5in **out, attn_error *err)
{
    return attn_h5in_open_with(path, NULL, out, err);
}

int attn_h5in_open_with(const char *path, const attn_h5in_options *options, attn_h5in **out,
                        attn_error *err)
{
    attn_parsing_enter();
    return h5in_parsed(h5in_open(path, options, out, err));
}
