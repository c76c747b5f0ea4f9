/*
 * in.h - what the files reading an input share (internal to the h5 layer):
 * the open input, the datasets resolved so far, and the steps every read
 * takes (in_open.c, in_safety.c, in_heap.c, in_read.c, in_strings.c).
 *
 * Shapes are what the file holds; a "row" is one index along axis 0, so a
 * batch slice of X (B, n, D) is rows [first, first + c): (c, n, D).
 */
#ifndef ATTN_H5_IN_H
#define ATTN_H5_IN_H

#include "h5/h5.h"

#include "core/core.h"

#include <hdf5.h>

#include <stdint.h>
#include <sys/stat.h>

/* A dataset found by name, kept open for the reads that follow. */
typedef struct open_dataset {
    struct open_dataset *next;
    hid_t id;
    bool heap_checked;          /* its strings' places in the global heap
                                   were checked (in_strings.c)          */
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
    bool tiled_maps;            /* chunks may stay unwritten, one per row
                                   of chunks at least (attn_h5in_options) */
    open_dataset *datasets;     /* resolved so far (a list)             */
};

/* Whether the input's file is no longer what was opened: another size or
 * modification time (in_open.c). */
bool h5in_changed(const attn_h5in *in);

/* ATTN_EIO: the input changed while it was read (in_open.c). */
int h5in_changed_failure(const attn_h5in *in, attn_error *err);

/*
 * After a failed or finished read of the input: a read from a file that
 * another program changed meanwhile is refused, whatever it returned (a
 * truncated file reads as zeros where HDF5 expects values).
 */
static inline int h5in_after_read(const attn_h5in *in, int status, attn_error *err)
{
    return h5in_changed(in) ? h5in_changed_failure(in, err) : status;
}

/* The next name of path[*at ...] ("" and "." skipped): its start and
 * length, *at moved past it.  false at the end (in_safety.c). */
bool h5in_next_part(const char *path, size_t *at, const char **part, size_t *len);

/*
 * Opens the object `name` names, following every link on the way itself
 * (in_safety.c).  Returns ATTN_OK with *object open, 1 when the name leads
 * nowhere (no message), or ATTN_EINPUT / ATTN_ENOMEM with a message.
 */
int h5in_resolve(attn_h5in *in, const char *name, hid_t *object, attn_error *err);

/* The open dataset `name`, resolved once and kept for the reads that
 * follow: ATTN_OK, 1 when absent (no message), or ATTN_EINPUT /
 * ATTN_ENOMEM (in_safety.c). */
int h5in_dataset_of(attn_h5in *in, const char *name, hid_t *dataset, attn_error *err);

/*
 * Whether HDF5 can list the names of a group without looping: a group of
 * the original file format whose local heap's free list loops (or runs
 * past the heap) is ATTN_EINPUT, with a message naming it `name`; any
 * other object is ATTN_OK.  Nothing is allocated (in_heap.c).  By the
 * address of the object's header (H5O_info_t's addr), or by an open
 * object.  Every walk of the input's groups calls it for each group
 * before HDF5 reads the group's links.
 */
int h5in_check_names_at(const attn_h5in *in, haddr_t header, const char *name, attn_error *err);
int h5in_check_names(const attn_h5in *in, hid_t object, const char *name, attn_error *err);

/* A little-endian number of `bytes` (at most 8) bytes at p, as the file
 * format stores them. */
static inline uint64_t h5in_le_number(const unsigned char *p, size_t bytes)
{
    uint64_t v = 0;
    for (size_t i = bytes; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

/* Where a dataset's values live, checked before any is read (in_safety.c). */
int h5in_check_storage(attn_h5in *in, const char *name, hid_t dset, hid_t space,
                       size_t elem_size, attn_error *err);

/* Element sizes attnrun reads (in_safety.c). */
bool h5in_type_size_ok(H5T_class_t cls, size_t size);

/* An element class, named for messages (in_safety.c). */
const char *h5in_class_name(H5T_class_t cls);
const char *h5in_type_name(hid_t type);

/* attn_h5in_describe without marking the parse (in_read.c). */
int h5in_describe(attn_h5in *in, attn_data_kind kind, bool required, attn_tensor_info *info,
                  attn_error *err);

/* The public entry points mark HDF5's parse of the input around the work:
 *     attn_parsing_enter();
 *     return h5in_parsed(h5in_read_floats(in, ...)); */
static inline int h5in_parsed(int status)
{
    attn_parsing_leave();
    return status;
}

#endif
