/* atomic.c - temporary files renamed into place (attn_atomic.h). */
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
void attn_split_path(const char *path, char *dir, char *base)
{
    char a[PATH_MAX], b[PATH_MAX];
    snprintf(a, sizeof a, "%s", path);
    snprintf(b, sizeof b, "%s", path);
    snprintf(dir, PATH_MAX, "%s", dirname(a));
    snprintf(base, PATH_MAX, "%s", basename(b));
}

/* The longest file name the directory takes (NAME_MAX when unknown). */
static size_t name_limit(const char *dir)
{
    long limit = pathconf(dir, _PC_NAME_MAX);
    return limit > 0 ? (size_t)limit : NAME_MAX;
}

/*
 * mkstemp in final_path's directory, as ".BASE.attnrun-tmp-XXXXXX", BASE
 * shortened (at a UTF-8 character boundary) when the name would exceed the
 * directory's name limit.  The file is 0600: the owner can reopen it for
 * writing whatever the umask.  Returns the open descriptor or -1.
 */
static int make_temp(attn_atomic *tx, attn_error *err)
{
    char dir[PATH_MAX], base[PATH_MAX];
    attn_split_path(tx->final_path, dir, base);
    const size_t extra = 1 + strlen(ATTN_TEMP_MARKER "XXXXXX"), limit = name_limit(dir);
    size_t keep = strlen(base);
    if (limit <= extra) {
        attn_fail(err, ATTN_EIO, "%s: the directory %s takes names of %zu bytes only", tx->final_path,
                  dir, limit);
        return -1;
    }
    if (keep > limit - extra) {
        keep = limit - extra;
        while (keep > 0 && ((unsigned char)base[keep] & 0xC0) == 0x80)
            keep--;                                  /* not inside a character */
    }
    int len = snprintf(tx->temp_path, sizeof tx->temp_path, "%s/.%.*s" ATTN_TEMP_MARKER "XXXXXX",
                       dir, (int)keep, base);
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
    } else if (fchmod(fd, S_IRUSR | S_IWUSR) != 0) {      /* mkstemp heeds the umask */
        attn_fail(err, ATTN_EIO, "%s: cannot make %s writable: %s", tx->final_path, tx->temp_path,
                  strerror(errno));
        close(fd);
        attn_atomic_abort(tx);
        fd = -1;
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
            return attn_fail_hint(err, ATTN_EUSAGE, ATTN_HINT_REPLACE, "%s: output exists",
                                  final_path);
        if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
            return attn_fail(err, ATTN_EUSAGE, "%s: output exists and is not a regular file", final_path);
    }
    int fd = make_temp(tx, err);
    if (fd < 0)
        return ATTN_EIO;
    close(fd);
    mode_t mask = umask(0);
    umask(mask);
    tx->mode = 0666 & ~mask;          /* a new file's bits, set at the commit */
    return ATTN_OK;
}

/* Copies every byte of `from` (from its start) to `to`; returns 0 or an
 * errno value. */
static int copy_bytes(int from, int to)
{
    char buf[1 << 16];
    for (off_t at = 0;;) {
        ssize_t got = pread(from, buf, sizeof buf, at);
        if (got == 0)
            return 0;
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        at += got;
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
        return attn_fail(err, ATTN_EUSAGE, "%s: updating it in place needs a regular file", path);
    if (faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) != 0)
        return attn_fail(err, ATTN_EIO, "%s: cannot write the input: %s", path, strerror(errno));
    if (st->st_nlink > 1)
        return attn_fail(err, ATTN_EUSAGE,
                         "%s: the input has %ju hard links; updating it in place replaces the "
                         "file and would separate them",
                         path, (uintmax_t)st->st_nlink);
    return ATTN_OK;
}

int attn_atomic_begin_copy(attn_atomic *tx, const char *final_path, int source, attn_error *err)
{
    struct stat st;
    int from = source, to = -1, failure = 0;
    /* A symbolic link stays; the file it names is the one replaced. */
    char *real = realpath(final_path, NULL);
    int status = real == NULL ? attn_fail(err, ATTN_EIO, "%s: cannot read: %s", final_path, strerror(errno))
                              : start(tx, real, true, err);
    free(real);
    if (status != ATTN_OK)
        return status;
    if (source < 0)
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
    tx->mode = st.st_mode & 07777;     /* set at the commit: writable till then */
    if (close(to) != 0 && failure == 0)
        failure = errno;
    to = -1;
    if (failure != 0)
        status = attn_fail(err, ATTN_EIO, "%s: cannot copy into a temporary file with the same owner and permissions: %s",
                           final_path, strerror(failure));
out:
    if (to >= 0)
        close(to);
    if (from >= 0 && from != source)
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

int attn_atomic_flush(attn_atomic *tx, attn_error *err)
{
    int failure = 0;
    int fd = open(tx->temp_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fchmod(fd, tx->mode) != 0 || fsync(fd) != 0)
        failure = errno;
    if (fd >= 0)
        close(fd);
    if (failure != 0) {
        attn_atomic_abort(tx);
        return attn_fail(err, ATTN_EIO, "%s: cannot flush the output: %s", tx->final_path,
                         strerror(failure));
    }
    return ATTN_OK;
}

/* Removes the temporary after a failed publish; the run goes on failing. */
static int publish_failed(attn_atomic *tx, int status, attn_error *err, int failure)
{
    attn_atomic_abort(tx);
    tx->committing = 0;
    if (status == ATTN_EUSAGE)
        return attn_fail_hint(err, status, ATTN_HINT_REPLACE, "%s: output appeared while running",
                              tx->final_path);
    return attn_fail(err, status, "%s: cannot rename the output into place: %s", tx->final_path,
                     strerror(failure));
}

int attn_atomic_publish(attn_atomic *tx, volatile sig_atomic_t *cancel, attn_error *err)
{
    char dir[PATH_MAX], base[PATH_MAX];
    tx->committing = 1;
    if (cancel != NULL && *cancel) {
        attn_atomic_abort(tx);
        tx->committing = 0;
        return attn_fail(err, ATTN_EINTR, "%s: interrupted; no output was written", tx->final_path);
    }
    if (tx->replace) {
        if (rename(tx->temp_path, tx->final_path) != 0)
            return publish_failed(tx, ATTN_EIO, err, errno);
    } else if (renameat2(AT_FDCWD, tx->temp_path, AT_FDCWD, tx->final_path, RENAME_NOREPLACE) != 0) {
        int failure = errno;
        if (failure == EINVAL || failure == ENOSYS) {   /* no RENAME_NOREPLACE here */
            struct stat st;
            failure = lstat(tx->final_path, &st) == 0 ? EEXIST
                      : rename(tx->temp_path, tx->final_path) == 0 ? 0 : errno;
        }
        if (failure != 0)
            return publish_failed(tx, failure == EEXIST ? ATTN_EUSAGE : ATTN_EIO, err, failure);
    }
    tx->temp_path[0] = '\0';
    attn_split_path(tx->final_path, dir, base);
    sync_path(dir, O_RDONLY | O_DIRECTORY);   /* best effort: the rename is done */
    return ATTN_OK;
}

int attn_atomic_commit(attn_atomic *tx, volatile sig_atomic_t *cancel, attn_error *err)
{
    int status = attn_atomic_flush(tx, err);
    return status == ATTN_OK ? attn_atomic_publish(tx, cancel, err) : status;
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
    attn_split_path(path, dir, base);
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
