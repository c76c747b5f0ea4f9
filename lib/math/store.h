/*
 * store.h - outputs in their stored form: blocks of computed values
 * cut into the chunks of their datasets, converted to the stored type,
 * shuffled and deflated as HDF5's own filters would, in the compute
 * threads, ready for attn_h5out_write_chunk.
 *
 *     attn_chunk_job jobs[...];            // one per chunk of a step
 *     size_t count = attn_store_list(&stored, &block, cfg, slots, jobs, 0);
 *     attn_store_pack(jobs, count, packer);    // every thread
 *     for (size_t i = 0; i < count; i++)       // then one thread writes
 *         attn_h5out_write_chunk(out, handle, jobs[i].offset, jobs[i].data, jobs[i].bytes, &err);
 *
 * Legend: rank <= 4 axes; a chunk is (chunk[0], ..., chunk[rank-1]),
 * row-major, whole even past the dataset's end (the padding is the fill).
 */
#ifndef ATTN_STORE_H
#define ATTN_STORE_H

#include "attn_common.h"
#include "attn_math.h"

#include <stdint.h>

/* How one output dataset is stored. */
typedef struct attn_stored {
    size_t rank;
    size_t dims[4];          /* (rank) the dataset's shape                 */
    size_t chunk[4];         /* (rank) its chunk shape                     */
    attn_store type;         /* element type in the file                   */
    int compress;            /* 0, or the deflate level (after shuffle)    */
    bool map;                /* an (n, m) map: chunked in tiles          */
    bool skip_hidden;        /* tiles no query sees are never written;
                                they read as the fill                    */
    double fill;             /* the fill value: -inf for scores, else 0
                                (an integer for ATTN_STORE_I32)           */
    bool raw;                /* chunks go to the file as packed (filters
                                applied here); false: HDF5 filters them  */
} attn_stored;

/* A block of computed values: element (i0, ..., i[rank-1]) of the dataset
 * region [first, first + count) sits at base + sum((i - first) * stride)
 * elements of `precision` (int32 when `integer`); stride[rank - 1] is 1. */
typedef struct attn_block {
    const void *base;
    attn_precision precision;
    bool integer;                /* int32 values, stored as ATTN_STORE_I32 */
    size_t first[4], count[4];   /* (rank), first[] on chunk boundaries */
    size_t stride[4];            /* (rank) in elements                  */
} attn_block;

/* One chunk of a step: where it goes and, once packed, its bytes. */
typedef struct attn_chunk_job {
    const attn_stored *stored;
    const attn_block *block;
    int handle;                  /* the output's dataset (attn_h5out)      */
    size_t offset[4];            /* the chunk's first element, per axis    */
    void *data;                  /* its room: attn_store_slot_bytes        */
    size_t bytes;                /* after attn_store_pack: what to write   */
} attn_chunk_job;

/* Bytes of one chunk's packed room: the chunk in the stored type, plus
 * the compressor's worst case when compressed (below bytes/512 + 64). */
size_t attn_store_slot_bytes(const attn_stored *stored);

/*
 * Lists the chunks of block (a region of stored's dataset) into jobs
 * (when not NULL), skipping tiles of a map no query sees (cfg), each
 * with room carved from *room (advanced; NULL: not carved).  Returns the
 * number of chunks listed; *room_bytes grows by their room.
 */
size_t attn_store_list(const attn_stored *stored, const attn_block *block, int handle,
                       const attn_config *cfg, char **room, size_t *room_bytes,
                       attn_chunk_job *jobs);

/* Per-thread scratch attn_store_pack needs for chunks of up to
 * chunk_bytes stored bytes. */
size_t attn_store_scratch_bytes(size_t chunk_bytes);

/* What the packing threads keep between steps: per thread, a scratch
 * for chunks of up to chunk_bytes and a deflate compressor. */
typedef struct attn_packer attn_packer;

/* A packer for `threads` threads, deflating at `level` (0: none).
 * NULL when out of memory. */
attn_packer *attn_packer_new(size_t threads, size_t chunk_bytes, int level);
void attn_packer_free(attn_packer *packer);

/*
 * Packs every job on every thread (attn_threads(), at most the packer's;
 * thread 0 first runs the job attn_beside handed over): gathers its
 * elements, converts them to the stored type (round to nearest even;
 * beyond the type's range, +-inf), and when compressed shuffles and
 * deflates them as HDF5's shuffle and deflate filters do (a zlib stream,
 * made by libdeflate).
 */
void attn_store_pack(attn_chunk_job *jobs, size_t count, attn_packer *packer);

/* Bytes of a block of stored's dataset in its stored type. */
size_t attn_store_block_bytes(const attn_stored *stored, const attn_block *block);

/*
 * The whole block (a region of stored's dataset; first[] need not lie on
 * chunk boundaries) in the stored type at out, row-major (count[0], ...),
 * converted as attn_store_pack does, on every thread: what
 * attn_h5out_write_shared writes.  The tiles of a map no query sees (cfg,
 * when stored->skip_hidden) hold the fill, which is what they read as
 * where attn_store_list leaves them out.
 */
void attn_store_gather_block(const attn_stored *stored, const attn_block *block,
                             const attn_config *cfg, void *out);

/* Conversions, exposed for the tests: n values to binary16 or bfloat16
 * bit patterns, rounded to nearest even from the value itself (a double
 * is rounded once, not through float). */
void attn_store_f16_from_f32(const float *in, uint16_t *out, size_t n);
void attn_store_bf16_from_f32(const float *in, uint16_t *out, size_t n);
void attn_store_f16_from_f64(const double *in, uint16_t *out, size_t n);
void attn_store_bf16_from_f64(const double *in, uint16_t *out, size_t n);

#endif
