/*
 * out.h - what the files writing an output share (internal to the h5
 * layer): the open output, its datasets and dimension scales
 * (out_open.c, out_clear.c, out_write.c).
 *
 * Shapes are what the file holds; a "row" is one index along axis 0, so a
 * batch slice of X (B, n, D) is rows [first, first + c): (c, n, D).
 */
#ifndef ATTN_H5_OUT_H
#define ATTN_H5_OUT_H

#include "h5/h5.h"

#include <hdf5.h>

#define MAX_SCALES 16
#define SCALE_BLOCK 65536               /* indices written per call       */
/* The pipeline packs chunks itself (math/store.h) and writes each one
 * whole with H5Dwrite_chunk, so datasets need no chunk cache, except one
 * of a single chunk (see attn_h5out_add_dataset). */
#define CHUNK_CACHE_SLOTS 12421         /* a prime */

typedef struct output_dataset {
    hid_t id;
    attn_precision precision;
    hid_t file_type;              /* owned: the stored type (a copy)    */
    bool one_chunk;               /* written through HDF5, not raw      */
    size_t rank;
    hsize_t dims[4];              /* (rank): the dataset's whole shape */
    char name[256];               /* its path, for messages (H5Iget_name
                                     after a failure would clear the
                                     error stack being reported)         */
} output_dataset;

typedef struct scale_dataset {
    char name[32];
    hid_t id;
    hsize_t length;
} scale_dataset;

struct attn_h5out {
    hid_t file;
    hid_t group;
    char *path;                   /* as named in messages */
    const char *group_name;       /* the caller's, for messages */
    bool provenance;              /* the group held attnrun's provenance
                                     when it was opened               */
    hid_t shared_xfer;            /* opened by every rank (attn_h5out_open_shared):
                                     the collective transfer; else invalid */
    output_dataset datasets[ATTN_H5OUT_MAX_DATASETS];
    size_t dataset_count;
    scale_dataset scales[MAX_SCALES];
    size_t scale_count;
};


/* ATTN_EIO: "<file>: cannot <what> <name>: <HDF5's reason>" (out_open.c). */
int h5out_failure(attn_h5out *out, attn_error *err, const char *what, const char *name);

#endif
