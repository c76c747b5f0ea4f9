/*
 * run_state.h - what the phases of one run share (internal to the run
 * layer).
 *
 * run.c orchestrates; each phase is one file:
 *   preflight.c   options, memory, threads and disk checked before work
 *   params.c      weights and biases read, checked, packed and fused
 *   rank_steps.c  this rank's share of the steps (one rank: all of them)
 *   slices.c      the buffers of the two slots, carved from one allocation
 *   outfile.c     the output group: room made, datasets, tokens
 *   settings.c    the settings table: checked, recorded as provenance
 *   pipeline.c    slices read, computed and written, overlapped
 *   progress.c    the work done, reported as the steps go
 *   tokens.c      the tokens of the query and key axes, checked and copied
 *   warnings.c    the likely mistakes found on the way, reported at the end
 * and presets.c, ranks.c hold the presets and the ranks of an MPI job.
 *
 * Legend: B batch, c items in a slice, H heads, G K/V heads, n queries,
 *         m keys, D d_model, dk, dv.
 */
#ifndef ATTN_RUN_STATE_H
#define ATTN_RUN_STATE_H

#include "h5/h5.h"
#include "attn_math.h"
#include "attn_run.h"
#include "math/store.h"

#include <stdint.h>

/* One step of a rank that shares items' rows with others: rows [row,
 * row + rows) of slice `slice` (rank_steps.c). */
typedef struct run_step {
    size_t slice, row, rows;
} run_step;

/* The progress reported to attn_run_options.progress, in the unit of
 * attn_run_work (progress.c). */
typedef struct run_progress {
    attn_progress hook;           /* st->cfg.progress while the steps run,
                                     when they report inside a step     */
    size_t item, total;           /* the work of one item, of the batch    */
    size_t base, step;            /* the step computed: the work done before
                                     it, its own                        */
    size_t shown;                 /* the last done reported                */
    bool failed;                  /* the callback returned false           */
} run_progress;

typedef struct run_state {
    const attn_run_options *opt;
    attn_run_report *report;
    const attn_preset *preset;    /* --preset, or NULL                      */
    attn_tensor_info info[ATTN_IN_COUNT];
    char *paths[ATTN_IN_COUNT];   /* names joined to --weights-group        */
    attn_h5in *in;
    attn_h5out *out;
    attn_config cfg;
    void *whole[ATTN_IN_COUNT];   /* inputs read once, whole: the parameters
                                     (per-head weights packed) and what
                                     every item shares (--kv (m, D), mask
                                     (m), positions, attention bias
                                     without a batch axis)               */
    double *alibi;                /* (H) ALiBi slopes, or NULL              */
    double *wo_gram;              /* (H, dv, dv) W_O[h] W_O[h]^T, when the
                                     per-key summary value_norm is needed,
                                     else NULL                          */
    void *fused;                  /* [W_Q | W_K | W_V]: (D, F), linear (F, D),
                                     F = H*dk + G*dk + G*dv                */
    void *fused_bias;             /* (F), zeros for absent biases           */
    attn_weights weights;
    attn_slice_sizes sizes;
    void *slice_memory;           /* every per-slice buffer, carved below   */
    attn_slice slots[2];          /* the slice computed and the next, read
                                     beside it (compute buffers shared)   */
    void *bias[2];                /* [step parity] the rows of a step of a
                                     4-D attention bias (c, H, rows, m),
                                     read beside the step before; NULL
                                     without one                        */
    void *x_rows[2];              /* [step parity] with sliding keys
                                     (run_sliding): the rows of X a step
                                     projects (sizes.slide_keys, D), read
                                     beside the step before; else NULL */
    void *maps[2][2];             /* [step parity][scores, weights]: both
                                     parities share one set             */
    int handles[ATTN_OUT_COUNT];
    attn_stored stored[ATTN_OUT_COUNT];   /* how each output is stored     */
    /* A step's outputs packed in chunks by the compute threads, written
     * by thread 0 beside the next step: by step parity. */
    char *staging[2];             /* packed chunks: staging_bytes each      */
    size_t staging_bytes;
    attn_block blocks[2][ATTN_OUT_COUNT]; /* what each step computed         */
    attn_chunk_job *jobs[2];      /* (job_capacity) the chunks of a step    */
    size_t job_count[2];
    size_t job_capacity;
    attn_packer *packer;          /* the packing threads' buffers           */
    /* This rank's share of the steps (attn_ranks.h): [step_first,
     * step_first + step_count) of the run's sequence, slice by slice. */
    size_t step_first, step_count;
    size_t step_rounds;           /* steps every rank runs: the most any
                                     rank has (step_count with one rank) */
    size_t *key_bounds;           /* (ranks + 1) with ranks sharing the rows
                                     of one slice: rank r projects the k
                                     and v of rows [key_bounds[r],
                                     key_bounds[r + 1]) and the ranks
                                     exchange them; NULL: each projects
                                     every key                          */
    run_step *own_steps;          /* (step_count) this rank's steps when the
                                     ranks split items' rows; NULL: slice
                                     by slice, block by block         */
    /* With a shared file (attn_ranks_shared_file), each step's outputs
     * are whole blocks in the stored type, carved from its staging: NULL
     * where this rank writes none of that output in the step. */
    void *block_data[2][ATTN_OUT_COUNT];
    /* What the warnings report (warnings.c), gathered while the data is
     * read when the options ask for warnings: */
    size_t hidden_items;          /* items whose mask keeps no key: this
                                     rank's (the slices it reads first),
                                     the job's once summed              */
    size_t blind_rows;            /* query rows that see no key under the
                                     mask: as hidden_items             */
    unsigned zero_weights;        /* bits (1u << attn_input) of the
                                     projection weights all zeros       */
    run_progress progress;
} run_state;

static inline bool run_saved(const run_state *st, attn_output which)
{
    return (st->opt->save >> which) & 1u;
}

/* Every buffer carved from one allocation starts on this boundary. */
#define RUN_ALIGN ((size_t)64)

static inline char *run_align_up(void *p)
{
    uintptr_t at = (uintptr_t)p;
    return (char *)((at + RUN_ALIGN - 1) / RUN_ALIGN * RUN_ALIGN);
}

/* Whether a slice's q is kept over its X (attn_slice.q_over_x): when its
 * items go in blocks of query rows, q of every row is projected with K
 * and V at an item's first block, into X's own rows (X is read only
 * then), so that no later block projects its q again -- when a row of X
 * has room for the H*dk values of q. */
static inline bool run_q_over_x(const run_state *st)
{
    const attn_dims *d = &st->report->layout.dims;
    return st->sizes.rows < d->n && d->heads * d->d_k <= d->d_model && st->sizes.slide_keys == 0;
}

/* Whether the steps slide their keys (attn_slice.keys_slide): a causal
 * self-attention under a window, in blocks of rows, so that each step
 * reads and projects its own rows of X and keeps the keys its window
 * reaches -- the plan chose it (attn_step_request.slide_window). */
static inline bool run_sliding(const run_state *st)
{
    return st->sizes.slide_keys != 0;
}

/* Blocks of query rows in one slice. */
static inline size_t run_slice_blocks(const run_state *st)
{
    const size_t n = st->report->layout.dims.n, block = st->sizes.rows;
    return (n + block - 1) / block;
}

/* params.c */
void *run_alloc(const run_state *st, size_t count, size_t size, const char *what, attn_error *err);
int run_check_finite(const run_state *st, const attn_tensor_info *t, const void *buf,
                     size_t first, size_t count, attn_error *err);
int run_load_parameters(run_state *st, attn_error *err);
int run_load_shared(run_state *st, attn_error *err);
/* Reads rows [first, first + rows) along axis 0 of input `which` into
 * buf, as its kind asks: a mask as keep flags (inverted by --mask-invert),
 * positions as int64, floats in the run's precision, checked finite (an
 * attention bias may hold -inf). */
int run_read_rows(const run_state *st, attn_input which, size_t first, size_t rows, void *buf,
                  attn_error *err);
/* The same for a float input, of rows [from, from + length) along its
 * axis `axis` only (a 4-D attention bias one block of query rows at a
 * time): (rows, ..., length, ...) values. */
int run_read_block(const run_state *st, attn_input which, size_t first, size_t rows, size_t axis,
                   size_t from, size_t length, void *buf, attn_error *err);

/* preflight.c */
int run_check_options(const attn_run_options *opt, attn_error *err);
size_t run_planned_bytes(const run_state *st);
int run_check_free_space(run_state *st, attn_error *err);
/* Reserves on disk, for the file at path that the ranks of a shared file
 * are about to write, the room the outputs take uncompressed (every tile)
 * and some for HDF5 (the file shrinks back at its close): a disk too full
 * for them then fails here, before any rank writes, instead of in a
 * collective write or flush that some ranks would leave and others not.
 * ATTN_EIO with the system's reason; nothing reserved (and ATTN_OK) where
 * the file system cannot reserve. */
int run_reserve_space(const run_state *st, const char *path, attn_error *err);

/* outfile.c */
/* How each saved output is stored (st->stored): shape, chunks, type,
 * filters; and its bytes in the report (the maps' visible tiles only). */
int run_plan_stored(run_state *st, attn_error *err);
int run_open_output(run_state *st, attn_error *err);

/* rank_steps.c */
/* This rank's steps (st->step_first, step_count, step_rounds, own_steps). */
int run_share_steps(run_state *st, attn_error *err);

/* slices.c */
/* Bytes of the one allocation run_allocate_slices carves: two slots'
 * buffers (the compute buffers once), each on a RUN_ALIGN boundary, and
 * the attend scratch; false on overflow. */
bool run_slice_memory_bytes(const run_state *st, size_t *total);
int run_allocate_slices(run_state *st, attn_error *err);

/* pipeline.c */
/* The packed room of a step's outputs, by step parity (after the steps
 * are shared and the slices carved). */
int run_allocate_staging(run_state *st, attn_error *err);
int run_steps(run_state *st, attn_error *err);

/* progress.c */
/* The work of the run (st->progress.total), and the report from inside
 * the steps (st->cfg.progress) when a callback wants it and every step
 * is this rank's alone (no shared file). */
void run_progress_start(run_state *st);
/* The step of items [first, first + count), rows [row, row + rows) is
 * computed next: the reports inside it count from the work before it. */
void run_progress_step(run_state *st, size_t first, size_t count, size_t row, size_t rows);
/* The work of rows [row, row + rows) of count items. */
size_t run_progress_work(const run_state *st, size_t count, size_t row, size_t rows);
/* The work done once the step of items [first, first + count) is
 * computed to row `end`: every earlier item whole, rows [0, end) of its
 * items. */
size_t run_progress_through(const run_state *st, size_t first, size_t count, size_t end);
/* Reports done (when above the last report) to the callback; ATTN_EIO
 * when it returned false, now or from inside a step. */
int run_progress_report(run_state *st, size_t done, attn_error *err);

/* settings.c */
/* The numbers of the variant the options must give finite and >= 0. */
int run_check_variant(const attn_run_options *opt, attn_error *err);
/* The provenance attributes of the output group, created_utc = stamp. */
int run_write_provenance(const run_state *st, const char *stamp, attn_error *err);
/* --in-place: makes way for them (attn_h5out_clear_attribute). */
int run_clear_provenance(run_state *st, attn_error *err);

/* warnings.c */
/* Items of keep flags (items, m) that keep no key. */
size_t run_items_without_keys(const unsigned char *keep, size_t items, size_t m);
/* Query rows of items of keep flags (items, m) that see no key under the
 * mask, the causal mask and the window. */
size_t run_rows_without_keys(const run_state *st, const unsigned char *keep, size_t items);
/* Whether buf's count values (precision) are all zeros (count > 0). */
bool run_all_zero(attn_precision precision, const void *buf, size_t count);
/* W_Q, W_K, W_V, W_O and the fused W_QKV: looked at for zeros. */
bool run_is_projection_weight(attn_input which);
/* Reports the warnings the run found to options->warn, on rank 0 (after
 * the hidden items are summed over the ranks): the plan's, and unless
 * it is a dry run the data's. */
void run_report_warnings(const run_state *st);

/* suggest.c */
/* The failure of the required input `which`, absent under the name
 * st->info[which].name (`relative`: that name before the weights group
 * was put before it; from_preset: the preset's name for it): what the
 * file holds that could be meant, with the hint to use it. */
int run_missing_input(run_state *st, attn_input which, const char *relative, bool from_preset,
                      attn_error *err);

/* The failure `status` of the tokens `name` (role: "tokens") of an axis of
 * `length` (B = batch, 0 without a batch axis): when name is no object
 * of the file, the string datasets that fit, with the hint to use one
 * (setting: the run option's key, "tokens", "kv-tokens").  Returns status. */
int run_missing_tokens(const run_state *st, const char *name, const char *setting,
                       const char *role, size_t batch, size_t length, int status,
                       attn_error *err);

/* tokens.c */
/* Finds and reads the tokens the options name and checks every one, and
 * their shapes against the plan's (before any output exists). */
int run_check_tokens(run_state *st, attn_error *err);
/* --in-place: makes way for the token datasets and their axes (call
 * after clearing the results, before clearing their axes). */
int run_clear_tokens(run_state *st, attn_error *err);
/* Copies the tokens into the output group (after the results are
 * created) and names them in the results' `coordinates`. */
int run_write_tokens(run_state *st, attn_error *err);

#endif
