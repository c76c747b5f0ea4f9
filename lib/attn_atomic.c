/* attn_atomic.c - temporary files renamed into place (attn_atomic.h). */
#define _GNU_SOURCE
#include "attn_atomic.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* dir (of path) and base, split without touching path. */
static void split_path(const char *path, char *dir, char *base)
{
    char a[PATH_MAX], b[PATH_MAX];
    snprintf(a, sizeof a, "%s", path);
    snprintf(b, sizeof b, "%s", path);
    snprintf(dir, PATH_MAX, "%s", dirname(a));
    snprintf(base, PATH_MAX, "%s", basename(b));
}

/* mkstemp in final_path's directory; returns the open descriptor or -1. */
static int make_temp(attn_atomic *tx, attn_error *err)
{
    char dir[PATH_MAX], base[PATH_MAX];
    split_path(tx->final_path, dir, base);
    int len = snprintf(tx->temp_path, sizeof tx->temp_path, "%s/.%s" ATTN_TEMP_MARKER "XXXXXX",
                       dir, base);
    if (len < 0 || (size_t)len >= sizeof tx->temp_path) {
        tx->temp_path[0] = '\0';
        attn_fail(err, ATTN_EIO, "%s: path too long", tx->final_path);
        return -1;
    }
    int fd = mkostemp(tx->temp_path, O_CLOEXEC);
    if (fd < 0) {
        attn_fail(err, ATTN_EIO, "%s: cannot create a temporary file in %s: %s", tx->final_path,
                  dir, strerror(errno));
        tx->temp_path[0] = '\0';
    }
    return fd;
}

static int start(attn_atomic *tx, const char *final_path, bool replace, attn_error *err)
{
    memset(tx, 0, sizeof *tx);
    if (strlen(final_path) >= sizeof tx->final_path)
        return attn_fail(err, ATTN_EUSAGE, "%s: path too long", final_path);
    snprintf(tx->final_path, sizeof tx->final_path, "%s", final_path);
    tx->replace = replace;
    return ATTN_OK;
}

int attn_atomic_begin(attn_atomic *tx, const char *final_path, bool replace, attn_error *err)
{
    struct stat st;
    int status = start(tx, final_path, replace, err);
    if (status != ATTN_OK)
        return status;
    if (lstat(final_path, &st) == 0) {
        if (!replace)
            return attn_fail(err, ATTN_EUSAGE, "%s: output exists; use --force to replace it", final_path);
        if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
            return attn_fail(err, ATTN_EUSAGE, "%s: output exists and is not a regular file", final_path);
    }
    int fd = make_temp(tx, err);
    if (fd < 0)
        return ATTN_EIO;
    /* mkstemp makes the file 0600; a new output gets the usual 0666 & ~umask */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0)
        status = attn_fail(err, ATTN_EIO, "%s: cannot set the permissions of %s: %s", final_path,
                           tx->temp_path, strerror(errno));
    close(fd);
    if (status != ATTN_OK)
        attn_atomic_abort(tx);
    return status;
}

/* Copies every byte of `from` to `to`; returns 0 or an errno value. */
static int copy_bytes(int from, int to)
{
    char buf[1 << 16];
    for (;;) {
        ssize_t got = read(from, buf, sizeof buf);
        if (got == 0)
            return 0;
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        for (ssize_t done = 0; done < got;) {
            ssize_t put = write(to, buf + done, (size_t)(got - done));
            if (put < 0 && errno != EINTR)
                return errno;
            if (put > 0)
                done += put;
        }
    }
}

/*
 * Whether the copy may stand in for the file `st` describes: the caller can
 * write that file, and the copy keeps its owner, group and permission bits.
 */
static int check_replaceable(const char *path, const struct stat *st, attn_error *err)
{
    if (!S_ISREG(st->st_mode))
        return attn_fail(err, ATTN_EUSAGE, "%s: --in-place needs a regular file", path);
    if (faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) != 0)
        return attn_fail(err, ATTN_EIO, "%s: cannot write the input: %s", path, strerror(errno));
    if (st->st_nlink > 1)
        return attn_fail(err, ATTN_EUSAGE,
                         "%s: the input has %ju hard links; --in-place replaces the file and would separate them",
                         path, (uintmax_t)st->st_nlink);
    return ATTN_OK;
}

int attn_atomic_begin_copy(attn_atomic *tx, const char *final_path, attn_error *err)
{
    struct stat st;
    int from = -1, to = -1, failure = 0;
    /* A symbolic link stays; the file it names is the one replaced. */
    char *real = realpath(final_path, NULL);
    int status = real == NULL ? attn_fail(err, ATTN_EIO, "%s: cannot read: %s", final_path, strerror(errno))
                              : start(tx, real, true, err);
    free(real);
    if (status != ATTN_OK)
        return status;
    from = open(tx->final_path, O_RDONLY | O_CLOEXEC);
    if (from < 0 || fstat(from, &st) != 0) {
        status = attn_fail(err, ATTN_EIO, "%s: cannot read: %s", final_path, strerror(errno));
        goto out;
    }
    if ((status = check_replaceable(final_path, &st, err)) != ATTN_OK)
        goto out;
    if ((to = make_temp(tx, err)) < 0) {
        status = ATTN_EIO;
        goto out;
    }
    failure = copy_bytes(from, to);
    if (failure == 0 && fchown(to, st.st_uid, st.st_gid) != 0 && st.st_uid != geteuid())
        failure = errno;
    if (failure == 0 && fchmod(to, st.st_mode & 07777) != 0)
        failure = errno;
    if (close(to) != 0 && failure == 0)
        failure = errno;
    to = -1;
    if (failure != 0)
        status = attn_fail(err, ATTN_EIO, "%s: cannot copy into a temporary file with the same owner and permissions: %s",
                           final_path, strerror(failure));
out:
    if (to >= 0)
        close(to);
    if (from >= 0)
        close(from);
    if (status != ATTN_OK)
        attn_atomic_abort(tx);
    return status;
}

/* fsync a path opened with `flags`; returns 0 or an errno value. */
static int sync_path(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int failure = fsync(fd) != 0 && errno != EINVAL ? errno : 0;
    close(fd);
    return failure;
}

int attn_atomic_commit(attn_atomic *tx, attn_error *err)
{
    char dir[PATH_MAX], base[PATH_MAX];
    int failure = sync_path(tx->temp_path, O_RDONLY);
    if (failure != 0) {
        attn_atomic_abort(tx);
        return attn_fail(err, ATTN_EIO, "%s: cannot flush the output: %s", tx->final_path,
                         strerror(failure));
    }
    if (tx->replace) {
        if (rename(tx->temp_path, tx->final_path) != 0) {
            failure = errno;
            attn_atomic_abort(tx);
            return attn_fail(err, ATTN_EIO, "%s: cannot rename the output into place: %s",
                             tx->final_path, strerror(failure));
        }
    } else if (renameat2(AT_FDCWD, tx->temp_path, AT_FDCWD, tx->final_path, RENAME_NOREPLACE) != 0) {
        failure = errno;
        if (failure == EINVAL || failure == ENOSYS) {   /* no RENAME_NOREPLACE here */
            struct stat st;
            failure = lstat(tx->final_path, &st) == 0 ? EEXIST
                      : rename(tx->temp_path, tx->final_path) == 0 ? 0 : errno;
        }
        if (failure != 0) {
            attn_atomic_abort(tx);
            if (failure == EEXIST)
                return attn_fail(err, ATTN_EUSAGE, "%s: output appeared while running; use --force to replace it",
                                 tx->final_path);
            return attn_fail(err, ATTN_EIO, "%s: cannot rename the output into place: %s",
                             tx->final_path, strerror(failure));
        }
    }
    tx->temp_path[0] = '\0';
    split_path(tx->final_path, dir, base);
    sync_path(dir, O_RDONLY | O_DIRECTORY);   /* best effort: the rename is done */
    return ATTN_OK;
}

void attn_atomic_abort(attn_atomic *tx)
{
    if (tx->temp_path[0] != '\0')
        unlink(tx->temp_path);
    tx->temp_path[0] = '\0';
}

/* The canonical form of path's directory joined to its base name, in
 * out (2 * PATH_MAX); false when the directory cannot be resolved.  No
 * allocation: this check must not be skipped for want of memory. */
static bool canonical_path(const char *path, char *out)
{
    char dir[PATH_MAX], base[PATH_MAX], real_dir[PATH_MAX];
    split_path(path, dir, base);
    if (realpath(dir, real_dir) == NULL)
        return false;
    snprintf(out, 2 * PATH_MAX, "%s/%s", real_dir, base);
    return true;
}

bool attn_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    char ca[2 * PATH_MAX], cb[2 * PATH_MAX];
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    return canonical_path(a, ca) && canonical_path(b, cb) && strcmp(ca, cb) == 0;
}
