/*
 * index.h - one results file for a whole model: an index file whose
 * groups are HDF5 external links to one part file per appended group.
 *
 * HDF5 has no transactions: adding a group to an existing file in place
 * is not atomic, and copying the file to add one makes each layer cost as
 * much as everything before it.  So each appended group's results are
 * their own file (a "part", written and renamed into place like any
 * output), and the index -- a few kilobytes of links, rewritten whole and
 * renamed over the old one -- is what makes them one file to readers.
 *
 *     results.h5                       the index: groups and external links
 *     results.h5.parts/layer0.1.h5     /layer0's results, at /layer0
 *     results.h5.parts/model+layer3.1.h5   /model/layer3's, at /model/layer3
 *
 * A link /G of the index points at the group /G of its part (the same
 * path), through a file name relative to the index's directory, so the
 * index and its parts directory move together.  The index's root carries
 * the attribute `attnrun_index` (the format, ATTN_INDEX_FORMAT) and
 * `attnrun_version`.
 *
 *     attn_index_target target;
 *     attn_index_check(&target, "results.h5", "/layer3", false, &err);
 *     ... write the results into a temporary beside target.index (tx),
 *         at the group /layer3, and flush it ...
 *     attn_index_commit(&target, &tx, NULL, &err);
 *
 * Legend: G a group path ("/layer3"), g a part's generation (1, 2, ...).
 */
#ifndef ATTN_INDEX_H
#define ATTN_INDEX_H

#include "attn_atomic.h"
#include "attn_common.h"

#include <hdf5.h>

#include <limits.h>
#include <signal.h>

/* The index format this attnrun writes and reads. */
#define ATTN_INDEX_FORMAT 1

/* The root attribute that marks an index. */
#define ATTN_INDEX_ATTRIBUTE "attnrun_index"

/* What the parts directory's name adds to the index's: "results.h5.parts". */
#define ATTN_INDEX_PARTS_SUFFIX ".parts"

/* An escaped group path longer than this is cut and given a hash. */
#define ATTN_INDEX_PREFIX_MAX 200

/* Where one append goes: filled by attn_index_check. */
typedef struct attn_index_target {
    char index[PATH_MAX];       /* the index file (a symbolic link resolved) */
    char dir[PATH_MAX];         /* its directory                           */
    char parts[PATH_MAX];       /* its parts directory: index + ".parts"    */
    const char *group;          /* G, the caller's string                   */
    bool force;                 /* an existing G may be replaced            */
} attn_index_target;

/*
 * The file name of generation g of G's part, into buf (len bytes): G
 * without its leading "/", each "/" written as "+" and every byte other
 * than A-Z a-z 0-9 _ - . as @XX (a leading "." too: no hidden files), then
 * "." g ".h5": "/model/h.0" -> "model+h.0.1.h5".  An escaped G longer than
 * ATTN_INDEX_PREFIX_MAX bytes is cut before an escape and followed by "~"
 * and 16 hex digits of a hash of G, so that every name fits a file
 * system's 255 bytes.  Distinct (G, g) give distinct names (but for a hash
 * collision of two such long groups): g is the last "."-separated number.
 * False when G is not an absolute path other than "/", g is 0, or buf is
 * too small.
 */
bool attn_index_part_name(const char *group, unsigned long generation, char *buf, size_t len);

/* g when `name` is a part name of G (attn_index_part_name), else 0. */
unsigned long attn_index_part_generation(const char *group, const char *name);

/*
 * Checks that `index` can take the results of `group`, reading it (when it
 * exists) without writing anything, and fills target.  The index may be
 * missing (the first append creates it) or an index this format of
 * attnrun wrote.  ATTN_EUSAGE when group is "/", index is not a regular
 * file, not an attnrun index (including any HDF5 file that is not one:
 * it is never copied), holds what attnrun did not write there (datasets,
 * attributes, other links: a rewrite would lose them), already holds G
 * (unless force), or holds G as a group of other results, or results
 * above G; ATTN_EIO when it cannot be read; ATTN_ENOMEM.
 */
int attn_index_check(attn_index_target *target, const char *index, const char *group, bool force,
                     attn_error *err);

/*
 * Adds G to the index, its results being the flushed temporary of `part`
 * (written at the group G): under an exclusive lock on the index's
 * directory, the index is read again and checked as attn_index_check
 * does, then part->committing is set (the point of no return: *cancel
 * is honoured up to here) and, in order, the parts directory is made if
 * missing, the part renamed into it under the next free generation of
 * G's name, a new index holding every earlier link and G's written and
 * renamed over the old one, and -- when G was replaced -- G's previous
 * part removed.  On any failure every step taken is undone: the index
 * and every earlier part are as they were, and neither the new part,
 * nor a temporary, nor a parts directory made here remains.  Returns
 * ATTN_OK, ATTN_EUSAGE (as attn_index_check, or an index that appeared
 * meanwhile), ATTN_EIO, ATTN_ENOMEM or ATTN_EINTR; part's temporary is
 * gone in every case.
 */
int attn_index_commit(const attn_index_target *target, attn_atomic *part,
                      volatile sig_atomic_t *cancel, attn_error *err);

/* Whether the open HDF5 file is an index: its root carries ATTN_INDEX_ATTRIBUTE. */
bool attn_index_is_index(hid_t file);

/* One appended group of an index, for its readers. */
typedef struct attn_index_part {
    char *group;                /* G: "/model/layer3"                        */
    char *file;                 /* its part, relative to the index's
                                   directory: "results.h5.parts/model+layer3.1.h5" */
} attn_index_part;

/*
 * The appended groups of the index open as `file` (attnrun's reader has
 * opened and checked it: attn_h5in), in the index's order, into *parts
 * (count; free with attn_index_parts_free).  Every link must be one
 * attnrun writes: to the same group of a part of that group, in one
 * parts directory beside the index (a renamed index still names its
 * old one).  ATTN_EINPUT for anything else (a damaged index, or not
 * attnrun's: never followed), ATTN_ENOMEM.
 */
int attn_index_read_parts(hid_t file, const char *index, attn_index_part **parts, size_t *count,
                          attn_error *err);

void attn_index_parts_free(attn_index_part *parts, size_t count);

#endif
