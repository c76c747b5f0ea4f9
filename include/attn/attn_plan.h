/*
 * attn_plan.h - from the shapes found in a file to a validated plan: the
 * layer's sizes, the batch slice that fits in memory, the output datasets
 * with their shapes, bytes and chunks, and the FLOP count.
 *
 * Pure arithmetic: no file access and no allocation.  Every product of
 * shapes goes through attn_size_mul, so a hostile shape is rejected here,
 * before anything is allocated.
 *
 *     attn_tensor_info in[ATTN_IN_COUNT];      // filled by attn_h5in_describe
 *     attn_layout layout;
 *     if (attn_plan_layout(in, "in.h5", heads_flag, &layout, &err) != ATTN_OK) ...
 *     size_t dims[4]; const char *labels[4];
 *     size_t rank = attn_output_shape(&layout, ATTN_OUT_WEIGHTS, dims, labels);
 */
#ifndef ATTN_PLAN_H
#define ATTN_PLAN_H

#include "attn_common.h"
#include "attn_math.h"

/* The input datasets, in the order the pipeline looks them up. */
typedef enum attn_input {
    ATTN_IN_X, ATTN_IN_KV, ATTN_IN_MASK,
    ATTN_IN_WQ, ATTN_IN_WK, ATTN_IN_WV, ATTN_IN_WO,
    ATTN_IN_BQ, ATTN_IN_BK, ATTN_IN_BV, ATTN_IN_BO,
    ATTN_IN_WQKV, ATTN_IN_BQKV, ATTN_IN_Q_NORM, ATTN_IN_K_NORM, ATTN_IN_ALIBI_SLOPES,
    ATTN_IN_POSITIONS, ATTN_IN_KV_POSITIONS, ATTN_IN_ATTN_BIAS,
    ATTN_IN_COUNT
} attn_input;

/* What each input is: one row of the input table. */
typedef struct attn_input_spec {
    const char *key;           /* its short name ("wq"): a program's option
                                  naming the dataset (attnrun's --wq)       */
    const char *default_name;  /* looked up when not named ("W_Q"), or NULL   */
    const char *role;          /* what it is, for messages                   */
    bool integer;              /* integer elements (positions), else float;
                                  the mask is read as flags                */
    bool parameter;            /* a layer parameter: found under the weights
                                  group, read whole once                   */
    bool optional;             /* used when present under its default name  */
} attn_input_spec;

/* The row of the input table for `which`. */
const attn_input_spec *attn_input_spec_of(attn_input which);

/* How the weights are stored, as the options say; the shapes give the rest. */
typedef struct attn_plan_request {
    size_t heads;          /* --heads; 0 = from 3-D weights                  */
    size_t kv_heads;       /* --kv-heads; 0 = from the K weight's shape      */
    bool linear;           /* weights stored for x W^T (torch.nn.Linear)     */
    bool heads_interleaved;/* fused weights hold q|k|v per head              */
} attn_plan_request;

/* How fused Q|K|V weights order their output features. */
typedef enum attn_qkv_split {
    ATTN_QKV_BLOCKS,     /* [Q | K | V] blocks (GPT-2 c_attn, torch in_proj) */
    ATTN_QKV_HEADS,      /* per head [q | k | v] (GPT-NeoX, BLOOM)           */
    ATTN_QKV_SPLIT_COUNT
} attn_qkv_split;

/* "blocks", "heads". */
const char *attn_qkv_split_name(attn_qkv_split split);

/* The validated sizes and how each input is laid out. */
typedef struct attn_layout {
    attn_dims dims;
    bool batched;        /* X is (B, n, D): outputs keep the batch axis      */
    bool cross;          /* keys/values come from --kv                       */
    bool kv_shared;      /* --kv is (m, D) under a rank-3 X: every item uses it */
    bool mask_shared;    /* --mask is (m): every item uses it                */
    bool per_head[4];    /* W_Q, W_K, W_V, W_O stored as (H, ., .)           */
    bool linear;         /* weights stored for x W^T                         */
    bool fused;          /* Q|K|V in one weight (ATTN_IN_WQKV)               */
    bool heads_interleaved; /* ... per head [q | k | v]                      */
    bool positions_shared;  /* positions (n): every item uses them          */
    bool kv_positions_shared;
    size_t bias_rank;    /* attention bias: 0 none, 2 (n, m), 3 (H, n, m),
                            4 (B, H, n, m)                                  */
    bool bias_heads_shared; /* ... its head axis is 1: every head adds the
                            same (n, m), as Hugging Face's additive masks
                            (B, 1, n, m) do                                */
} attn_layout;

/* The output datasets (docs/contract.md §3), then the summaries: one per
 * per-query summary of attn_math.h's list (ATTN_OUT_ENTROPY ...), the
 * head mean, each head's part of the output, one per map made from the
 * weights (ATTN_OUT_NORMS) and one per per-key summary (ATTN_OUT_VALUE_NORM). */
typedef enum attn_output {
    ATTN_OUT_SCORES, ATTN_OUT_WEIGHTS, ATTN_OUT_HEADS, ATTN_OUT_OUTPUT,
    ATTN_OUT_Q, ATTN_OUT_K, ATTN_OUT_V,
#define ATTN_OUT_OF_SUMMARY(NAME, integer) ATTN_OUT_##NAME,
    ATTN_SUMMARIES(ATTN_OUT_OF_SUMMARY)
#undef ATTN_OUT_OF_SUMMARY
    ATTN_OUT_MEAN, ATTN_OUT_RESULT,
#define ATTN_OUT_OF_WEIGHT_MAP(NAME, factor) ATTN_OUT_##NAME,
    ATTN_WEIGHT_MAPS(ATTN_OUT_OF_WEIGHT_MAP)
#undef ATTN_OUT_OF_WEIGHT_MAP
#define ATTN_OUT_OF_KEY_SUMMARY(NAME) ATTN_OUT_##NAME,
    ATTN_KEY_SUMMARIES(ATTN_OUT_OF_KEY_SUMMARY)
#undef ATTN_OUT_OF_KEY_SUMMARY
    ATTN_OUT_COUNT
} attn_output;

/* The axes outputs have; each has a label (its dimension scale's name). */
typedef enum attn_axis {
    ATTN_AXIS_NONE, ATTN_AXIS_BATCH, ATTN_AXIS_HEAD, ATTN_AXIS_KV_HEAD, ATTN_AXIS_QUERY,
    ATTN_AXIS_KEY, ATTN_AXIS_D_K, ATTN_AXIS_D_V, ATTN_AXIS_D_MODEL
} attn_axis;

/* The slice buffer an output is written from. */
typedef enum attn_source {
    ATTN_FROM_SCORES, ATTN_FROM_WEIGHTS,   /* the maps of a block of rows      */
    ATTN_FROM_CONCAT,                      /* (c, n, H*dv), split per head     */
    ATTN_FROM_OUTPUT,                      /* (c, n, D) as it is               */
    ATTN_FROM_Q, ATTN_FROM_K, ATTN_FROM_V, /* projections, split per head      */
    ATTN_FROM_SUMMARY,                     /* (c, H, n): attn_slice.summary    */
    ATTN_FROM_MEAN,                        /* (c, rows, m): a block of rows    */
    ATTN_FROM_RESULT,                      /* (c, n, H, D)                     */
    ATTN_FROM_WEIGHT_MAP,                  /* (c, H, rows, m): attn_slice.weight_map */
    ATTN_FROM_KEY_SUMMARY                  /* (c, H, m): attn_slice.key_summary */
} attn_source;

/* One row of the output table. */
typedef struct attn_output_spec {
    const char *name;          /* dataset name                                */
    const char *description;   /* stored as its `description`                 */
    attn_axis axes[3];         /* after the batch axis (when X has one)       */
    attn_source source;
    attn_summary summary;      /* which, for ATTN_FROM_SUMMARY                */
    int index;                 /* which attn_weight_map or attn_key_summary,
                                  for ATTN_FROM_WEIGHT_MAP, _KEY_SUMMARY  */
} attn_output_spec;

/* The row of the output table for `which`. */
const attn_output_spec *attn_output_spec_of(attn_output which);

/* Whether `which` is one of the (n, m) maps -- scores, weights and norms
 * (B, H, n, m), mean (B, n, m): computed a block of query rows at a
 * time, chunked in tiles, stored as --store says. */
bool attn_output_is_map(attn_output which);

/* Whether `which` is computed and written one block of query rows at a
 * time, in a buffer of those rows only: the maps, and heads, output, q
 * and result.  The others -- k and v along the keys, the per-query
 * summaries -- are kept for whole items. */
bool attn_output_by_rows(attn_output which);

/* The query axis of output `which`, counting a batch axis when X has one;
 * SIZE_MAX when it has none (k and v). */
size_t attn_output_query_axis(const attn_layout *layout, attn_output which);

/* The stored type of output `which`: `maps` (the --store type, not
 * DEFAULT) for the maps, int32 for argmax, else the precision's. */
attn_store attn_output_type(attn_output which, attn_store maps, attn_precision precision);

#define ATTN_SAVE_DEFAULT                                                     \
    ((1u << ATTN_OUT_SCORES) | (1u << ATTN_OUT_WEIGHTS) |                     \
     (1u << ATTN_OUT_HEADS) | (1u << ATTN_OUT_OUTPUT))

/*
 * Checks the shapes of in[] against docs/contract.md §1 and derives the sizes.
 * heads_flag is --heads (0 when not given).  Absent optional inputs (KV,
 * mask, biases) have present == false; X and the four weights must be
 * present.  file names the input in messages.
 * Returns ATTN_OK, or ATTN_EINPUT with a message naming the dataset and
 * the shapes involved (also when a matrix side exceeds CBLAS's int).
 */
int attn_plan_layout(const attn_tensor_info in[ATTN_IN_COUNT], const char *file,
                     size_t heads_flag, attn_layout *layout, attn_error *err);

/* The same for weights stored as `request` says: GQA, transposed
 * (linear) or fused weights, and the positional inputs (positions,
 * attention bias, q/k norms, ALiBi slopes). */
int attn_plan_layout_for(const attn_tensor_info in[ATTN_IN_COUNT], const char *file,
                         const attn_plan_request *request, attn_layout *layout, attn_error *err);

/* The label of an axis: "head" ... ("kv_head" for K/V heads only when G
 * differs from H, so that K and V of plain attention share "head"). */
const char *attn_axis_label(const attn_layout *layout, attn_axis axis);

/* The dataset name of an output ("scores" ...). */
const char *attn_output_name(attn_output which);

/* A one-line description, stored as the dataset's `description`. */
const char *attn_output_description(attn_output which);

/*
 * Parses a comma list such as "weights,output" into a bit set of
 * (1u << attn_output).  Returns ATTN_OK, or ATTN_EUSAGE for an unknown or
 * empty name.
 */
int attn_parse_save_list(const char *list, unsigned *save, attn_error *err);

/*
 * Shape and axis labels of one output: (B, H, n, m) and so on, without the
 * batch axis when X is rank 2.  Returns the rank (2 to 4).
 */
size_t attn_output_shape(const attn_layout *layout, attn_output which,
                         size_t dims[4], const char *labels[4]);

/* Bytes one output takes uncompressed in the given precision, or
 * ATTN_EINPUT when that overflows. */
int attn_output_bytes(const attn_layout *layout, attn_output which,
                      attn_precision precision, size_t *bytes, attn_error *err);

/* Floating-point operations of the whole computation (multiply-adds
 * count 2), for every item of the batch. */
double attn_plan_flops(const attn_dims *dims);

/*
 * The buffers the pipeline needs for its steps, in elements per item.  A
 * step is items (a slice) by query rows (`rows` of each): what the keys
 * need stays for whole items -- X (and --kv), k and v, the per-query
 * summaries -- and the rest is one block of rows: q, heads, output,
 * result, a 4-D attention bias, the maps.
 */
typedef struct attn_slice_sizes {
    size_t x, y;             /* inputs: n*D, and m*D with --kv              */
    size_t q, k, v;          /* each projection: n*H*dk, m*G*dk, m*G*dv
                                (q is kept one block of rows at a time)    */
    size_t projections;      /* q + k + v                                   */
    size_t maps;             /* one (H, n, m) map                           */
    size_t map_count;        /* maps kept in memory: 2 with scores saved, 1
                                with weights or mean only, 0 for none of
                                them (online softmax)                      */
    size_t key_summary[ATTN_KEY_SUMMARY_COUNT];  /* H*m each when it or a map
                                made from it is saved (kept for whole
                                items), else 0                          */
    size_t mean;             /* m when mean is saved (one (n, m) map
                                per item), else 0                          */
    size_t heads, concat, output;   /* n*H*dv, n*H*dv, n*D (by rows)       */
    size_t summary[ATTN_SUMMARY_COUNT];  /* bytes per item of each per-query
                                summary: (H, n) in the precision (int32
                                for the integer ones) when saved, else 0 */
    size_t result;           /* n*H*D when result is saved, else 0 (by rows) */
    size_t staging;          /* bytes per item of the saved outputs kept
                                for whole items (k, v, the summaries),
                                packed in whole chunks                    */
    size_t staging_per_row;  /* bytes per query row of the saved outputs
                                written by rows (attn_output_by_rows),
                                packed in whole chunks (stored type)       */
    size_t keep;             /* bytes per item                              */
    size_t positions;        /* int64 per item: n + m when read per item    */
    size_t bias;             /* attention bias elements per item: H*n*m
                                when it has a batch axis, else 0 (read
                                one block of rows at a time)              */
    size_t bytes_per_slot;   /* bytes per item of the inputs each of the
                                two slots holds (X, --kv, mask, positions):
                                the next slice is read beside a step    */
    size_t bytes_per_base;   /* bytes per item of one step kept for whole
                                items: the slot's inputs, k and v, the
                                summaries, their packed chunks           */
    size_t bytes_per_item;   /* one step of whole items: the base and every
                                query row (n rounded up to whole tiles)    */
    size_t bytes_per_row;    /* bytes per query row of one step (all
                                heads): q, heads, output, result, the
                                maps, a 4-D bias, computed and packed      */
    size_t bytes_twice_per_row;  /* of those, what the next step holds as
                                well: the bias read beside a step, the
                                packed chunks written beside the next     */
    size_t bytes_fixed;      /* what every step holds whatever its size
                                (attn_step_request.fixed)                 */
    size_t rows;             /* query rows per block: n, or fewer when one
                                item does not fit (a power of two)         */
    size_t least_rows;       /* the fewest rows a block may have: one tile
                                of the maps' chunks (n when shorter)       */
    size_t least_bytes;      /* what the least step (one item, least_rows
                                rows) holds: attn_plan_held_bytes          */
    size_t slide_keys;       /* with sliding keys (attn_step_request.
                                slide_window, blocks of rows): the most
                                keys k and v hold, and rows of X a block
                                reads (attn_sliding_keys_most); else 0     */
} attn_slice_sizes;

/* What a step (one block of query rows of one slice) is sized for. */
typedef struct attn_step_request {
    attn_precision precision;
    attn_store store;        /* the maps' stored type; DEFAULT: precision's */
    unsigned save;
    bool compress;           /* chunks are deflated: packed room grows by
                                the compressor's worst case               */
    size_t memory;           /* the cap on what the steps hold at once
                                (--memory): attn_plan_held_bytes          */
    size_t forced;           /* --batch-slice, or 0                        */
    size_t threads;          /* compute threads (0 counts as 1)            */
    size_t task_rows;        /* attn_task_rows: query rows of one block    */
    size_t slide_window;     /* the window of a causal self-attention whose
                                keys may slide (attn_slice.keys_slide: no
                                k or v saved, finite inputs), or 0         */
    size_t ranks;            /* MPI ranks sharing the work (0 counts as 1):
                                when they share items' rows, each cuts its
                                rows into steps of equal cost, which needs
                                steps of many rows                        */
    size_t fixed;            /* bytes the steps hold whatever their size:
                                the threads' scratch                      */
} attn_step_request;

/*
 * The bytes the steps hold at once with steps of `items` items and
 * sizes->rows rows: both slots' inputs when the batch takes more than one
 * slice (the next is read beside a step), the compute buffers once, the
 * packed chunks and bias rows of two steps, and sizes->bytes_fixed.
 * SIZE_MAX on overflow.  --memory caps this.
 */
size_t attn_plan_held_bytes(const attn_layout *layout, const attn_slice_sizes *sizes,
                            size_t items);

/* The bytes of one step of `items` items and sizes->rows rows: one slot,
 * one step's packed chunks, without the fixed bytes.  SIZE_MAX on overflow. */
size_t attn_plan_step_bytes(const attn_layout *layout, const attn_slice_sizes *sizes,
                            size_t items);

/* Independent blocks each thread should find in one step. */
#define ATTN_BLOCKS_PER_THREAD 4

/* The step size preferred while it feeds every thread, in held bytes
 * (two steps in flight, attn_plan_held_bytes, beyond the threads'
 * scratch): large enough that HDF5
 * calls and thread start-ups are few, small enough that the next step's
 * I/O overlaps this one's compute. */
#define ATTN_STEP_BYTES ((size_t)32 << 20)

/* The default --memory: ATTN_MEMORY_PER_THREAD per thread, at least
 * ATTN_STEP_BYTES, at most physical / ATTN_MEMORY_SHARE (the cap counts
 * both steps in flight). */
#define ATTN_MEMORY_PER_THREAD ((size_t)256 << 20)
#define ATTN_MEMORY_SHARE 4
size_t attn_plan_default_memory(size_t threads, size_t physical_bytes);

/*
 * Sizes the per-item buffers for the outputs in req->save and picks the
 * step: req->forced items when not 0 (--batch-slice); otherwise the
 * largest step whose held bytes (attn_plan_held_bytes) fit in a budget of
 * req->fixed + ATTN_STEP_BYTES, the latter doubled while the step holds fewer than
 * ATTN_BLOCKS_PER_THREAD blocks per thread (see attn_plan_step_blocks)
 * and is not the whole batch, never above req->memory -- but the least
 * step, which may exceed it (sizes->least_bytes).  A step is *items batch
 * items, or, when one item does not fit, one item's query rows in blocks
 * of sizes->rows (a power of two, whole chunks of the maps, at least
 * sizes->least_rows).  Items are the whole batch or a power of two, and
 * never so many that items * max(n, m) exceeds INT_MAX.
 * Returns ATTN_OK, or ATTN_EINPUT when one item's buffers overflow size_t.
 */
int attn_plan_steps(const attn_layout *layout, const attn_step_request *req,
                    attn_slice_sizes *sizes, size_t *items, attn_error *err);

/* The same for one fixed budget: the largest step that fits in
 * budget_bytes (threads 1, maps stored in the precision, no compression). */
int attn_plan_slice(const attn_layout *layout, attn_precision precision, unsigned save,
                    size_t budget_bytes, size_t forced, attn_slice_sizes *sizes,
                    size_t *items, attn_error *err);

/* The (H, n, m) maps a step keeps in memory for the outputs in `save`:
 * 2 with scores, 1 with weights, mean or a map made from the weights, 0
 * for none of them (then the softmax runs online, without maps); one more
 * for each map made from the weights, but the first when the weights are
 * not saved (it takes their place). */
size_t attn_plan_map_count(unsigned save);

/* The output of a map made from the weights, of a per-key summary. */
attn_output attn_weight_map_output(attn_weight_map map);
attn_output attn_key_summary_output(attn_key_summary key);

/* Whether the outputs in `save` need per-key summary `key`: it, or a map
 * made from it, is saved. */
bool attn_plan_needs_key_summary(unsigned save, attn_key_summary key);

/* The map made from the weights that takes the weights' own buffer (the
 * first saved when the weights are not), or -1. */
int attn_plan_map_in_weights_place(unsigned save);

/* Blocks of one step of `items` items and sizes->rows rows: items * H *
 * ceil(rows / task_rows), the units attn_attend hands to threads (a
 * task_rows of 0 counts as 1). */
size_t attn_plan_step_blocks(const attn_layout *layout, const attn_slice_sizes *sizes,
                             size_t items, size_t task_rows);

/* Target bytes of one chunk of an output dataset. */
#define ATTN_CHUNK_BYTES ((size_t)1 << 20)

/* The side of the square tiles the maps are chunked in, along (query, key). */
#define ATTN_MAP_TILE ((size_t)256)

/*
 * Chunk shape for a dataset of the given dims: whole trailing axes while
 * they fit in target_bytes, then a power-of-two block of the next axis
 * (so chunks hold between half of target_bytes and all of it), 1 elsewhere;
 * the first axis is capped at first_cap (the slice size) when not 0.
 */
void attn_chunk_shape(size_t rank, const size_t *dims, size_t elem_size,
                      size_t target_bytes, size_t first_cap, size_t *chunk);

/*
 * The chunk shape of output `which` stored with elem_size bytes per
 * element, for slices of `items` items.  The maps (B, H, n, m) are chunked
 * in tiles of at most ATTN_MAP_TILE^2 elements: (1, 1, T, T) with T =
 * ATTN_MAP_TILE clipped to n and m (a short axis whole, the other longer),
 * or, when a whole (n, m) map fits in a tile, whole maps of several heads
 * and items.  Other outputs: attn_chunk_shape with ATTN_CHUNK_BYTES.
 */
void attn_output_chunk(const attn_layout *layout, attn_output which, size_t elem_size,
                       size_t items, size_t chunk[4]);

/* The same for steps of `rows` query rows (0 or n: whole items): the
 * outputs written by rows (attn_output_by_rows) but the maps are chunked
 * as if their query axis were `rows` long, so that their chunks divide
 * the steps' blocks of rows (a power of two). */
void attn_output_chunk_rows(const attn_layout *layout, attn_output which, size_t elem_size,
                            size_t items, size_t rows, size_t chunk[4]);

/*
 * Bytes output `which` takes stored with elem_size bytes per element
 * (uncompressed): for the maps, only their tiles (chunk, from
 * attn_output_chunk) that some query sees under cfg's causal mask and
 * window (attn_tile_visible); the others are never written (cfg NULL:
 * every tile).  ATTN_EINPUT when that overflows.
 */
int attn_output_stored_bytes(const attn_layout *layout, const attn_config *cfg,
                             attn_output which, size_t elem_size, const size_t chunk[4],
                             size_t *bytes, attn_error *err);

#endif
