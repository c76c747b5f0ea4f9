/*
 * h5.h - the HDF5 layer of libattn (internal): reading input datasets and
 * writing output datasets.  It knows shapes and element types, not
 * attention.  One phase a file:
 *
 *   in_open.c, in_safety.c, in_read.c, in_strings.c   an input opened and
 *       locked; links and storage checked; numbers read; strings read
 *   in_list.c   an input's groups and datasets listed, for messages
 *   out_open.c, out_clear.c, out_write.c   an output opened and closed;
 *       room made for --in-place; datasets, values and attributes written
 *   index.c   the index of --append;  results.c   results read back
 *   h5.c      what they all use (set-up, HDF5's reasons, closing ids)
 *
 * Reading (the file is opened read-only and never changed):
 *
 *     attn_h5in *in;
 *     attn_tensor_info x = { .name = "X" };
 *     attn_h5in_open("in.h5", &in, &err);
 *     attn_h5in_describe(in, ATTN_DATA_FLOAT, false, &x, &err);
 *     attn_h5in_read_floats(in, "X", ATTN_F32, 0, 2, buf, &err);  // X[0:2]
 *     attn_h5in_close(in);
 *
 * Writing (into a file the caller made safe to write, see attn_atomic.h):
 *
 *     attn_h5out *out;
 *     attn_h5out_create("tmp.h5", "out.h5", "/", &out, &err);
 *     attn_h5out_add_dataset(out, &spec, &handle, &err);
 *     attn_h5out_write(out, handle, 0, 2, buf, &err);           // rows 0..1
 *     attn_h5out_close(out, &err);
 *
 * Every function returns ATTN_OK or a negative attn_status with err filled:
 * ATTN_EINPUT for what the input file holds, ATTN_EIO for failures to read
 * or write, ATTN_ENOMEM for allocations.  HDF5's own error printing is
 * turned off; its innermost message is folded into err instead.
 */
#ifndef ATTN_H5_H
#define ATTN_H5_H

#include "attn_common.h"

#include <signal.h>
#include <stdint.h>

/* What an input dataset must hold. */
typedef enum attn_data_kind {
    ATTN_DATA_FLOAT,   /* any IEEE floating type, converted on read       */
    ATTN_DATA_MASK,    /* integer or boolean (enum over an integer)        */
    ATTN_DATA_INTEGER  /* integer (positions)                              */
} attn_data_kind;

typedef struct attn_h5in attn_h5in;

/* Every attn_h5in function, and attn_h5out_open of the --in-place copy,
 * runs marked as HDF5 parsing a file libattn reads (attn_parsing_file):
 * HDF5 does not read damaged or hostile files safely. */

/* The lock attn_h5in_open_with holds on the input until attn_h5in_close:
 * flock, the kind HDF5's own readers (shared) and writers (exclusive)
 * take, so that attnrun --in-place, other attnruns and HDF5 programs
 * writing the file exclude each other.  HDF5_USE_FILE_LOCKING=FALSE (or
 * 0) turns it off, as it does HDF5's. */
typedef enum attn_lock {
    ATTN_LOCK_NONE,        /* no lock of attnrun's; HDF5 takes its own   */
    ATTN_LOCK_SHARED,      /* reading                                    */
    ATTN_LOCK_EXCLUSIVE,   /* reading, to replace the file (--in-place)  */
    ATTN_LOCK_HELD         /* reading under the lock another process of
                              the same job holds (rank 0, attn_ranks.h):
                              none taken, and HDF5's own is off       */
} attn_lock;

typedef struct attn_h5in_options {
    attn_lock lock;
    bool wait;                        /* wait for a conflicting lock     */
    bool allow_external;              /* follow external links, external
                                         raw storage and virtual datasets
                                         (they name other files)        */
    bool tiled_maps;                  /* a results file: a chunked dataset
                                         may leave chunks unwritten (the
                                         tiles of a map no query sees),
                                         but every row of chunks along its
                                         last axis holds one             */
    volatile sig_atomic_t *cancel;    /* set: stop waiting (ATTN_EINTR);
                                         may be NULL                    */
} attn_h5in_options;

/*
 * Opens path read-only.  ATTN_EINPUT when it is missing, not a regular
 * file (a FIFO, a device: refused before anything could block) or not an
 * HDF5 file; ATTN_EIO when the system fails to open it (no permission, no
 * descriptor left: EACCES, EMFILE -- the system's reason in the message),
 * when the lock is held by another program (unless `wait`) or cannot be
 * taken; ATTN_EINTR when *cancel stops a wait.  options may be NULL: no lock of attnrun's, nothing external.
 */
int attn_h5in_open_with(const char *path, const attn_h5in_options *options, attn_h5in **in,
                        attn_error *err);

/* attn_h5in_open_with(path, NULL, in, err). */
int attn_h5in_open(const char *path, attn_h5in **in, attn_error *err);

/* Closes the file and releases the lock. */
void attn_h5in_close(attn_h5in *in);

/* attnrun's own descriptor of the input: the file opened, checked and
 * locked (its bytes are what --in-place copies). */
int attn_h5in_descriptor(const attn_h5in *in);

/*
 * Whether the input is still as it was opened: the same size and
 * modification time, and its path still names it.  Every read checks the
 * first two already; this is for the end of a run.  ATTN_EIO ("changed
 * while it was read") when not.
 */
int attn_h5in_check_unchanged(attn_h5in *in, attn_error *err);

/* Filter plugins (HDF5_PLUGIN_PATH) stay unloaded unless allowed here. */
void attn_h5_allow_plugins(bool allow);

/*
 * Fills info->present, rank and dims for the dataset info->name (a path
 * of any length; attnrun follows each link on it itself, once, and at
 * most 16 soft links in all).  An absent name gives present = false,
 * which is an error (ATTN_EINPUT) only when `required`.  A name that is
 * not a dataset, a rank above ATTN_MAX_RANK, or an element type that is
 * not of `kind` is ATTN_EINPUT; so are, before HDF5 follows or reads
 * them: external links, external raw storage and virtual datasets (unless
 * allowed), user-defined links, more than 16 soft links, filters that
 * need a plugin (unless allowed), element sizes no real file has, storage
 * larger than the file holding it, and values never written.
 */
int attn_h5in_describe(attn_h5in *in, attn_data_kind kind, bool required,
                       attn_tensor_info *info, attn_error *err);

/* A group or dataset of an input, as attn_h5in_list_objects finds it. */
typedef struct attn_h5in_object {
    char *path;                 /* from the root: "/layer3/attn/W_Q"       */
    bool group;                 /* a group; else a dataset                 */
    bool floating;              /* a dataset of floats                     */
    bool integer;               /* ... of integers or an enum (a mask's)   */
    bool strings;               /* ... of strings (tokens)                 */
    bool ours;                  /* ... that attnrun wrote (ATTN_ROLE_ATTRIBUTE) */
    size_t rank;                /* a dataset's; dims are known up to rank 4 */
    size_t dims[4];
} attn_h5in_object;

/* The objects of an input (attn_h5in_list_objects). */
typedef struct attn_h5in_list {
    size_t count;
    attn_h5in_object *objects;  /* (count): groups and datasets, depth
                                   first, each group's links by name     */
    bool cut;                   /* more than ATTN_H5IN_LIST_MAX: the rest
                                   are not listed                       */
} attn_h5in_list;

/* The most objects attn_h5in_list_objects lists. */
#define ATTN_H5IN_LIST_MAX 100000

/*
 * Lists the groups and datasets of the input reachable from the root by
 * hard links, for messages that name what could be meant: no soft or
 * external link is followed (H5Ovisit), no value read, only each
 * dataset's type and shape; objects HDF5 cannot describe are left out.
 * ATTN_OK or ATTN_ENOMEM.  Free the list with attn_h5in_list_free.
 */
int attn_h5in_list_objects(attn_h5in *in, attn_h5in_list *list, attn_error *err);

void attn_h5in_list_free(attn_h5in_list *list);

/*
 * Reads rows [first, first + count) along axis 0 of a floating dataset of
 * shape (rows, ...) into buf (count, ...), converted to `precision`.
 * Every read fails with ATTN_EIO ("changed while it was read") when the
 * file's size or modification time is no longer what it was at the open.
 */
int attn_h5in_read_floats(attn_h5in *in, const char *name, attn_precision precision,
                          size_t first, size_t count, void *buf, attn_error *err);

/* The same for rows [first, first + count) along axis 0 and [from, from +
 * length) along axis `axis` (> 0) only: (count, ..., length, ...) values. */
int attn_h5in_read_float_block(attn_h5in *in, const char *name, attn_precision precision,
                               size_t first, size_t count, size_t axis, size_t from,
                               size_t length, void *buf, attn_error *err);

/* The block [first, first + count) of every axis (one index and one
 * length per axis of the dataset): (count[0], count[1], ...) values. */
int attn_h5in_read_float_box(attn_h5in *in, const char *name, attn_precision precision,
                             const size_t *first, const size_t *count, void *buf,
                             attn_error *err);
/* Reads the one value at index (rank) of a floating dataset as a double:
 * what the file holds, before any narrowing to float. */
int attn_h5in_read_value(attn_h5in *in, const char *name, const size_t *index, size_t rank,
                         double *value, attn_error *err);

/* Reads rows [first, first + count) of an integer or boolean dataset as
 * keep flags: keep[i] = 1 where the value is nonzero, else 0. */
int attn_h5in_read_mask(attn_h5in *in, const char *name, size_t first, size_t count,
                        unsigned char *keep, attn_error *err);

/* Reads rows [first, first + count) of an integer dataset as int64
 * (values beyond int64 are clipped by HDF5's conversion). */
int attn_h5in_read_integers(attn_h5in *in, const char *name, size_t first, size_t count,
                            int64_t *values, attn_error *err);

/* Strings read from the input: string i is strings[i], lengths[i] bytes
 * (a NUL inside one counts, and shows), followed by a NUL. */
typedef struct attn_strings {
    size_t count;
    char **strings;               /* (count) pointers into text           */
    size_t *lengths;              /* (count)                              */
    char *text;                   /* every string and its NUL, in order   */
} attn_strings;

/* Frees what attn_h5in_read_strings filled (and zeroes it). */
void attn_strings_free(attn_strings *strings);

/*
 * Fills info->present, rank and dims for an array of strings: the dataset
 * `name` (looked up as attn_h5in_describe does, with the same checks of
 * its storage), or, when attribute is not NULL, the attribute of that
 * name on the object `name` ("" or "/": the root group).  *fixed is the
 * bytes of each fixed-length string, 0 for variable length.  Messages
 * call it `what` ("the tokens dataset tok").  ATTN_EINPUT when it is
 * absent, holds no strings, has fixed-length strings of more than
 * max_fixed bytes, or its storage is refused.
 */
int attn_h5in_describe_strings(attn_h5in *in, const char *name, const char *attribute,
                               const char *what, size_t max_fixed, attn_tensor_info *info,
                               size_t *fixed, attn_error *err);

/*
 * Reads the block first[], count[] (one index each per axis, rank 1 or 2,
 * as described) of those strings, row-major, into *strings.  A fixed-length
 * string loses its padding (trailing NULs, or spaces for space-padded
 * ones); a variable-length one keeps every byte the file holds, NULs too
 * (for a dataset; an attribute's ends at its first NUL, all HDF5 tells).
 * An attribute is read whole for each call.  ATTN_EIO when reading fails,
 * ATTN_ENOMEM when the strings do not fit in memory.
 */
int attn_h5in_read_strings(attn_h5in *in, const char *name, const char *attribute,
                           const size_t *first, const size_t *count, attn_strings *strings,
                           attn_error *err);

typedef struct attn_h5out attn_h5out;

/*
 * Creates (truncating) path and the group `group` in it (a path of any
 * length).  Messages call the file `label` (the destination, when path is
 * its temporary).  ATTN_EUSAGE when part of `group` exists and is not a
 * group reached by a hard link.
 */
int attn_h5out_create(const char *path, const char *label, const char *group, attn_h5out **out,
                      attn_error *err);

/* Opens an existing file read-write and creates `group` when missing. */
int attn_h5out_open(const char *path, const char *label, const char *group, attn_h5out **out,
                    attn_error *err);

/* The attribute on every dataset attnrun writes: "result" on the outputs,
 * "axis" on the dimension scales.  --force replaces only what carries it. */
#define ATTN_ROLE_ATTRIBUTE "attnrun_role"

/*
 * Makes way, in the group of a file attnrun did not make (--in-place), for
 * the result dataset `name`.  No object of that name: ATTN_OK.  One that
 * attnrun wrote (ATTN_ROLE_ATTRIBUTE "result") is removed with `force`,
 * detached first from its dimension scales.  Anything else is ATTN_EUSAGE
 * naming it: without `force`, or not attnrun's (never touched).
 */
int attn_h5out_clear_result(attn_h5out *out, const char *name, bool force, attn_error *err);

/*
 * Makes way for the dimension scale `label` of `length` (call after
 * clearing the results, whose scales they detach).  An axis scale attnrun
 * wrote, of that length, stays and is shared; one of another length is
 * removed with `force` when no dataset is attached to it any more.
 * Anything else is ATTN_EUSAGE naming it: without `force`, not attnrun's,
 * or still in use (replacing it would leave other datasets without their
 * axis).
 */
int attn_h5out_clear_axis(attn_h5out *out, const char *label, size_t length, bool force,
                          attn_error *err);

/*
 * Makes way for the group attribute `name` (provenance).  An existing one
 * is removed with `force` when the group held attnrun's provenance when it
 * was opened (an attnrun_version attribute); otherwise ATTN_EUSAGE naming
 * it.  Attributes and links are separate: a dataset `scale` does not
 * stand in the way of an attribute `scale`.
 */
int attn_h5out_clear_attribute(attn_h5out *out, const char *name, bool force, attn_error *err);

/* One output dataset. */
typedef struct attn_dataset_spec {
    const char *name;             /* inside the group                      */
    attn_precision precision;     /* of the buffers attn_h5out_write takes  */
    attn_store store;             /* the file's type: IEEE float32 or
                                     float64 LE, binary16 or bfloat16;
                                     ATTN_STORE_DEFAULT: precision's     */
    bool has_fill;                /* chunks never written read as fill   */
    bool whole;                   /* every element is written (by the
                                     ranks of a shared file, whose chunks
                                     HDF5 allocates when it opens it):
                                     no fill is written first          */
    double fill;
    size_t rank;
    const size_t *dims;           /* (rank)                                */
    const size_t *chunk;          /* (rank)                                */
    const char *const *labels;    /* (rank) axis names, also dimension scales */
    const char *description;
    int compress;                 /* 0: none; 1-9: shuffle + deflate level */
} attn_dataset_spec;

/* The most datasets one output holds, of attn_h5out_add_dataset,
 * attn_h5out_add_strings and attn_h5out_find_dataset together. */
#define ATTN_H5OUT_MAX_DATASETS 16

/* Creates the dataset, labels its axes and attaches a dimension scale per
 * axis (a dataset named after the label holding 0, 1, ...; an axis scale
 * of attnrun's already in the group is shared).  Both carry
 * ATTN_ROLE_ATTRIBUTE.  *handle names it for attn_h5out_write. */
int attn_h5out_add_dataset(attn_h5out *out, const attn_dataset_spec *spec, int *handle,
                           attn_error *err);

/*
 * Writes one chunk as packed by attn_store_pack: its first element at
 * offset[] (one index per axis), `bytes` bytes already in the file's
 * type and, when attn_h5out_raw_chunks, filtered (shuffled and deflated
 * when the dataset is compressed) -- written as they are.
 */
int attn_h5out_write_chunk(attn_h5out *out, int handle, const size_t *offset, const void *data,
                           size_t bytes, attn_error *err);

/* Whether chunks of the dataset are written raw (attn_h5out_write_chunk
 * writes filtered bytes as they are).  False for a dataset of one chunk:
 * its chunk is handed to HDF5 unfiltered, which filters it (see
 * attn_h5out_add_dataset). */
bool attn_h5out_raw_chunks(const attn_h5out *out, int handle);

/* Writes the block buf (count[0], count[1], ...) at first[] (one index per
 * axis of the dataset). */
int attn_h5out_write_block(attn_h5out *out, int handle, const size_t *first,
                           const size_t *count, const void *buf, attn_error *err);

/*
 * Opens the output `path` on every rank of the job together (collective,
 * attn_ranks.h) for attn_h5out_write_shared: MPI-IO, metadata read and
 * written collectively.  Rank 0 made the file before, with every dataset
 * (attn_h5out_create, attn_h5out_add_dataset); the group must exist.
 * Built without MPI: ATTN_EIO.
 */
int attn_h5out_open_shared(const char *path, const char *label, const char *group,
                           attn_h5out **out, attn_error *err);

/* Opens the dataset `name` of the group, made by attn_h5out_add_dataset,
 * for attn_h5out_write_shared; *handle names it. */
int attn_h5out_find_dataset(attn_h5out *out, const char *name, int *handle, attn_error *err);

/*
 * Collective: each rank writes its block buf (count[0], ...), already in
 * the file's type, row-major, at first[] (one index per axis); count NULL:
 * this rank has nothing for the dataset this time.  The raw data moves
 * collectively (HDF5 needs that for filtered datasets; it also measured
 * faster for the others).
 */
int attn_h5out_write_shared(attn_h5out *out, int handle, const size_t *first,
                            const size_t *count, const void *buf, attn_error *err);

/* Starts writing the file's dirty pages to disk without waiting, so that
 * the final fsync (attn_atomic_commit) finds little left to do. */
void attn_h5out_start_writeback(attn_h5out *out);

/* Writes buf (count, ...) to rows [first, first + count) along axis 0. */
int attn_h5out_write(attn_h5out *out, int handle, size_t first, size_t count, const void *buf,
                     attn_error *err);

/*
 * Creates a dataset `name` of variable-length UTF-8 strings, (rank) dims,
 * rank 1 or 2, with its description and ATTN_ROLE_ATTRIBUTE "result", its
 * axes labelled and attached to dimension scales as attn_h5out_add_dataset
 * does.  *handle names it for attn_h5out_write_strings.
 */
int attn_h5out_add_strings(attn_h5out *out, const char *name, size_t rank, const size_t *dims,
                           const char *const *labels, const char *description, int *handle,
                           attn_error *err);

/* Writes the NUL-terminated UTF-8 strings (count[0], ...) at first[] (one
 * index per axis) of a dataset of attn_h5out_add_strings. */
int attn_h5out_write_strings(attn_h5out *out, int handle, const size_t *first,
                             const size_t *count, const char *const *strings, attn_error *err);

/* A UTF-8 string attribute `name` on the dataset `handle`. */
int attn_h5out_dataset_attr_string(attn_h5out *out, int handle, const char *name,
                                   const char *value, attn_error *err);

/* Group attributes (provenance). */
int attn_h5out_attr_string(attn_h5out *out, const char *name, const char *value, attn_error *err);
int attn_h5out_attr_double(attn_h5out *out, const char *name, double value, attn_error *err);
int attn_h5out_attr_int(attn_h5out *out, const char *name, long long value, attn_error *err);

/* Flushes and closes everything; out is freed whatever the result. */
int attn_h5out_close(attn_h5out *out, attn_error *err);

/*
 * Sets HDF5 up for libattn: no printed error stacks (errors come back as
 * values) and no clean-up at exit.  Called by the open functions; call it
 * first when using HDF5 directly before them.
 */
void attn_h5_prepare(void);

/* Whether HDF5_USE_FILE_LOCKING turns file locks off ("FALSE" or "0"),
 * as it does HDF5's own; *best_effort when it says "BEST_EFFORT" (a file
 * system that cannot lock is then no failure). */
bool attn_h5_locking_disabled(bool *best_effort);

/* Whether filter plugins may load (attn_h5_allow_plugins). */
bool h5_plugins_allowed(void);

/* Whether HDF5's error stack holds a failure of the system (an open()
 * that found no descriptor left, say); its words ("Too many open files")
 * into buf. */
bool h5_system_error(char *buf, size_t len);

/*
 * Whether path is an HDF5 file (H5Fis_hdf5), telling a failure of the
 * system -- no descriptor left for HDF5 to open it with, no permission,
 * no memory -- from a file that is not one: 1 or 0, or the status of
 * attn_open_status with err filled ("PATH: cannot read WHAT: Too many
 * open files"; what: "input", "results").  HDF5's error stack is
 * cleared.
 */
int h5_is_hdf5(const char *path, const char *what, attn_error *err);

/*
 * Copies the most specific message on HDF5's error stack into buf (empty
 * when the stack holds none); for a system error, the system's words
 * ("No space left on device").  Returns buf.
 */
char *attn_h5_error_detail(char *buf, size_t len);

#endif
