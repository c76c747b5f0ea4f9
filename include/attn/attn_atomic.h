/*
 * attn_atomic.h - all-or-nothing output files.
 *
 * A result is written to a temporary file beside its destination and
 * renamed onto it only after everything was written and flushed, so a
 * reader of the destination sees the old file or the whole new one, never
 * part of one.  Temporaries are named ".NAME.attnrun-tmp-" and six random
 * characters (NAME shortened when the whole would exceed the file system's
 * name limit).  The temporary is the owner's to read and write (0600)
 * while it is written; it gets its final permission bits at the commit.
 *
 *     attn_atomic tx;
 *     attn_atomic_begin(&tx, "out.h5", false, &err);     // new file
 *     ... write tx.temp_path ...
 *     if (ok) attn_atomic_commit(&tx, NULL, &err); else attn_atomic_abort(&tx);
 *
 * The commit is two steps that a caller may also take apart, to check
 * something between the flush and the rename: attn_atomic_flush, then
 * attn_atomic_publish.
 *
 * For --in-place the temporary starts as a byte copy of the destination
 * (attn_atomic_begin_copy), so the original stays untouched until the
 * rename and is replaced whole.
 */
#ifndef ATTN_ATOMIC_H
#define ATTN_ATOMIC_H

#include "attn_common.h"

#include <limits.h>
#include <signal.h>

#include <sys/types.h>

typedef struct attn_atomic {
    char final_path[PATH_MAX];
    char temp_path[PATH_MAX];   /* "" when no temporary exists          */
    bool replace;               /* the destination may be replaced      */
    mode_t mode;                /* permission bits the destination gets */
    /* Set by attn_atomic_publish once the flushed temporary is being
     * renamed into place: the point of no return.  A signal handler that
     * removes temp_path must leave the run alone while this is set. */
    volatile sig_atomic_t committing;
} attn_atomic;

/* The marker every temporary name carries. */
#define ATTN_TEMP_MARKER ".attnrun-tmp-"

/*
 * Creates an empty temporary file for final_path, which gets the
 * permission bits a new file gets (0666 less the umask) at the commit.  An
 * existing final_path is refused with ATTN_EUSAGE unless `replace`, and
 * even then when it is neither a regular file nor a symbolic link (which
 * is itself replaced).  ATTN_EIO when the directory cannot take a new file.
 */
int attn_atomic_begin(attn_atomic *tx, const char *final_path, bool replace, attn_error *err);

/*
 * Creates the temporary as a copy of final_path (which must exist), with
 * its owner and group now and its permission bits at the commit; a
 * symbolic link is followed, so the commit replaces the file it names.
 * The bytes come from `source`, an open descriptor of that file, when it
 * is not -1 (so that exactly the file the caller has read and locked is
 * copied), else from final_path.  ATTN_EIO when the caller cannot write
 * final_path or the copy fails; ATTN_EUSAGE when final_path is not a
 * regular file or has other hard links (replacing it would separate them).
 */
int attn_atomic_begin_copy(attn_atomic *tx, const char *final_path, int source, attn_error *err);

/*
 * Gives the temporary its final permission bits and flushes it to disk.
 * ATTN_EIO when that fails (the temporary is removed).
 */
int attn_atomic_flush(attn_atomic *tx, attn_error *err);

/*
 * Renames the flushed temporary onto final_path, then flushes the
 * directory.  First it sets tx->committing; then, if *cancel is set (cancel
 * may be NULL), it removes the temporary and returns ATTN_EINTR -- the
 * last moment a cancellation counts.  Without `replace`, a final_path that
 * appeared in the meantime is still refused (ATTN_EUSAGE) and the
 * temporary removed.  ATTN_EIO when the rename fails (the temporary is
 * removed).  tx->committing stays set after a successful rename and is
 * cleared again when the publish fails.
 */
int attn_atomic_publish(attn_atomic *tx, volatile sig_atomic_t *cancel, attn_error *err);

/* attn_atomic_flush, then attn_atomic_publish. */
int attn_atomic_commit(attn_atomic *tx, volatile sig_atomic_t *cancel, attn_error *err);

/* Removes the temporary, if any.  Safe to call more than once. */
void attn_atomic_abort(attn_atomic *tx);

/*
 * Whether two paths name the same file: the same inode when both exist,
 * otherwise the same canonical directory and name.
 */
bool attn_same_file(const char *a, const char *b);

/* path's directory and last component (dirname and basename, on copies)
 * into dir and base, PATH_MAX bytes each. */
void attn_split_path(const char *path, char *dir, char *base);

#endif
