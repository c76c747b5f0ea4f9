/*
 * attn_math.h - multi-head scaled dot-product attention on plain buffers.
 *
 * The math of docs/contract.md §2, with no knowledge of files.  Every
 * buffer is row-major and dense; its shape is written beside it.
 *
 * Legend: c batch items in a slice, H heads, G K/V heads (G divides H;
 *         query head h uses K/V head h*G/H), n queries, m keys,
 *         D d_model, dk = d_k, dv = d_v.
 *
 *     attn_config cfg = { .dims = dims, .scale = 1 / sqrt(dk), .causal = true,
 *                         .precision = ATTN_F32 };
 *     attn_slice s = { .count = c, .x = x, .y = x, .y_stride = n * D, ... };
 *     attn_forward(&cfg, &weights, &s);    // fills s.scores ... s.output
 *
 * Each kernel exists for float (_f32) and double (_f64); attn_forward picks
 * one by cfg->precision.  The kernels never fail: sizes were validated by
 * attn_plan before any buffer was allocated.
 */
#ifndef ATTN_MATH_H
#define ATTN_MATH_H

#include "attn_common.h"
#include "attn_threads.h"

#include <stddef.h>
#include <stdint.h>

/* The sizes of one attention layer applied to one input. */
typedef struct attn_dims {
    size_t batch;    /* B: batch items in the input (1 for a rank-2 X)   */
    size_t n;        /* queries per item                                */
    size_t m;        /* keys per item (n unless cross-attention)        */
    size_t d_model;  /* D                                               */
    size_t heads;    /* H                                               */
    size_t kv_heads; /* G; 0 means H                                    */
    size_t d_k;      /* per-head query/key width                        */
    size_t d_v;      /* per-head value width                            */
} attn_dims;

/* G of the dims: kv_heads, or H when 0. */
static inline size_t attn_kv_heads(const attn_dims *d)
{
    return d->kv_heads != 0 ? d->kv_heads : d->heads;
}

/* How rotary position embeddings pair the features they rotate. */
typedef enum attn_rope_style {
    ATTN_ROPE_DEFAULT, /* not said: attn_run takes the preset's, else neox;
                          the kernels turn it as neox                     */
    ATTN_ROPE_NEOX,    /* feature i with i + R/2 (HF rotate_half)          */
    ATTN_ROPE_GPTJ,    /* feature 2i with 2i + 1 (HF rotate_every_two)     */
    ATTN_ROPE_STYLE_COUNT
} attn_rope_style;

/* "neox", "gptj"; "" for ATTN_ROPE_DEFAULT. */
const char *attn_rope_style_name(attn_rope_style style);

/* Rotary position embeddings of q and k; none when theta is 0. */
typedef struct attn_rope {
    double theta;            /* base: pair i turns by pos * theta^(-2i/R)  */
    size_t dim;              /* R: the first R features of each head turn  */
    attn_rope_style style;
} attn_rope;

/*
 * The variant of attention a layer computes: how its logits are formed
 * from q and k and which keys each query sees -- what a model family's
 * attention is, apart from its sizes and parameters.  Each is 0 (false)
 * when not used.  attn_run_options carries the same settings as asked,
 * where scale 0 stands for 1/sqrt(d_k), rope.dim 0 for d_k and
 * rope.style ATTN_ROPE_DEFAULT for the preset's.  The logits are, in this
 * order:  scale q.k  ->  softcap  ->  + ALiBi + bias  ->  masks (-inf).
 */
typedef struct attn_variant {
    double scale;            /* multiplies Q K^T; 1/sqrt(d_k) is usual      */
    bool causal;             /* key k is hidden from query q when k > q     */
    size_t window;           /* 0, or key k is hidden from query q when
                                k <= q - window                             */
    double softcap;          /* 0, or logit = softcap tanh(logit/softcap)   */
    attn_rope rope;          /* rotary embeddings of q and k (theta 0: none) */
    double norm_eps;         /* in the RMSNorm of attn_weights.q_norm, k_norm */
} attn_variant;

/*
 * Progress from inside attn_attend (and attn_forward), for a caller whose
 * one call is long.  Each task of attn_attend (one head of one item, a
 * block of query rows: attn_task_rows) adds, when it finishes, the
 * (query, key) pairs its rows see under the causal mask and the window
 * (attn_visible_pairs) to `pairs`, atomically: a call for rows
 * [r0, r0 + rows) of c items adds c H attn_visible_pairs(cfg, r0, rows)
 * in all.  Between its own tasks the thread that called attn_attend
 * (OpenMP's thread 0), and no other, calls report(pairs, context) when
 * `every` seconds (CLOCK_MONOTONIC) have passed since `last`, and sets
 * `last` to that time.  The caller sets pairs and last before (0 and
 * now, say) and may read pairs between calls.
 */
typedef struct attn_progress {
    void (*report)(uint64_t pairs, void *context);
    void *context;
    double every;               /* seconds between two reports, at least  */
    double last;                /* CLOCK_MONOTONIC seconds of the last one */
    uint64_t pairs;             /* pairs done, summed over items and heads */
} attn_progress;

typedef struct attn_config {
    attn_dims dims;
    attn_variant variant;
    const double *alibi;        /* (H) slopes: logit += slope (pos_k - pos_q);
                                   NULL = none                              */
    attn_precision precision;   /* element type of every buffer below       */
    bool check_overflow;        /* the inputs are finite: flag a NaN or an
                                   infinity computed from them in
                                   attn_slice.overflow                      */
    attn_progress *progress;    /* the work of attn_attend counted and
                                   reported as it goes; NULL = none      */
} attn_config;

/*
 * The per-query summaries of each head's weights, computed by attn_attend
 * from the softmax's own running sums, so that the maps need not be kept
 * (the online softmax): one row each, its name and whether its values are
 * int32 (else floats of the precision).  The enum below, attn_output's
 * summaries and attn_slice.summary follow this list; each summary's
 * accumulator is in lib/math/summaries.inc.
 */
#define ATTN_SUMMARIES(X)                                                      \
    X(ENTROPY, false)    /* -sum p log p, nats                          */  \
    X(ARGMAX, true)      /* the first key of the largest logit          */  \
    X(DISTANCE, false)   /* sum p |pos_q - pos_k|                       */

typedef enum attn_summary {
#define ATTN_SUMMARY_ENUM(NAME, integer) ATTN_SUMMARY_##NAME,
    ATTN_SUMMARIES(ATTN_SUMMARY_ENUM)
#undef ATTN_SUMMARY_ENUM
    ATTN_SUMMARY_COUNT
} attn_summary;

/* Whether summary s holds int32 values (else floats of the precision). */
bool attn_summary_is_integer(attn_summary s);

/*
 * The per-key summaries: one value per item, head and key, made once per
 * item when its keys are projected (attn_key_summaries), (c, H, m) each
 * in the precision.  Then the maps made from the weights of a block of
 * rows (attn_weight_maps), each the weights times one per-key summary of
 * the key, (c, H, rows, m).  One row each: its name, and for a map the
 * summary it scales by.  The enums below, attn_output, the plan's sizes,
 * the slices' buffers and the pipeline's calls follow these lists; each
 * per-key summary's kernel is in lib/math/kernels.inc (key_kernels).
 */
#define ATTN_KEY_SUMMARIES(X)                                                  \
    X(VALUE_NORM)        /* || v_k W_O[h] ||, from w->wo_gram           */

#define ATTN_WEIGHT_MAPS(X)                                                    \
    X(NORMS, VALUE_NORM) /* weights * value_norm (Kobayashi et al. 2020) */

typedef enum attn_key_summary {
#define ATTN_KEY_SUMMARY_ENUM(NAME) ATTN_KEY_SUMMARY_##NAME,
    ATTN_KEY_SUMMARIES(ATTN_KEY_SUMMARY_ENUM)
#undef ATTN_KEY_SUMMARY_ENUM
    ATTN_KEY_SUMMARY_COUNT
} attn_key_summary;

typedef enum attn_weight_map {
#define ATTN_WEIGHT_MAP_ENUM(NAME, factor) ATTN_WEIGHT_MAP_##NAME,
    ATTN_WEIGHT_MAPS(ATTN_WEIGHT_MAP_ENUM)
#undef ATTN_WEIGHT_MAP_ENUM
    ATTN_WEIGHT_MAP_COUNT
} attn_weight_map;

/* The per-key summary weight map `map` multiplies the weights by. */
attn_key_summary attn_weight_map_factor(attn_weight_map map);

/* Where a computation from finite inputs gave a NaN or an infinity (the
 * values exceed the precision's range), as bits of attn_slice.overflow. */
enum {
    ATTN_OVERFLOW_PROJECTIONS = 1,   /* q, k or v                          */
    ATTN_OVERFLOW_SCORES = 2,        /* a logit of a key that takes part    */
    ATTN_OVERFLOW_OUTPUT = 4         /* the projected output                */
};

/*
 * The layer's parameters in packed form, in cfg->precision.  Shapes are
 * for x W (linear false); with linear every weight is stored transposed,
 * as torch.nn.Linear does (W_Q (H*dk, D), W_O (D, H*dv), ...).
 */
typedef struct attn_weights {
    bool linear;      /* y = x W^T + b instead of y = x W + b            */
    const void *w_q;  /* (D, H*dk): head i owns columns i*dk .. i*dk+dk-1 */
    const void *w_k;  /* (D, G*dk)                                       */
    const void *w_v;  /* (D, G*dv)                                       */
    const void *w_o;  /* (H*dv, D)                                       */
    const void *b_q;  /* (H*dk) or NULL                                  */
    const void *b_k;  /* (G*dk) or NULL                                  */
    const void *b_v;  /* (G*dv) or NULL                                  */
    const void *b_o;  /* (D) or NULL                                     */
    /* Optional fused form of the first three: when w_qkv is not NULL it is
     * (D, F) with F = H*dk + G*dk + G*dv output features, either the blocks
     * [W_Q | W_K | W_V] or, with heads_interleaved (G = H, dv = dk), per
     * head [q | k | v] (head h owns features h*3dk .. h*3dk+3dk-1).  b_qkv
     * is NULL or (F) in the same order.  w_q, w_k, w_v, b_q, b_k, b_v are
     * then ignored. */
    const void *w_qkv;
    const void *b_qkv;
    bool heads_interleaved;      /* then the slice must be self-attention
                                    (y = x) with its projections laid out
                                    the same way: k = q + dk, v = q + 2dk,
                                    ldq = ldk = ldv = 3 H dk, hsq = hsk =
                                    hsv = 3dk, one GEMM fills them      */
    const void *q_norm;  /* (dk): RMSNorm weights of each head's q, or NULL */
    const void *k_norm;  /* (dk): the same for k                           */
    const double *wo_gram;  /* (H, dv, dv): W_O[h] W_O[h]^T of each head's
                               rows of W_O, in double (attn_value_gram), for
                               the per-key summary value_norm; NULL when
                               not needed                                */
} attn_weights;

/* One slice of the batch: inputs, then every buffer attn_forward fills. */
typedef struct attn_slice {
    size_t count;                /* c: batch items in this slice            */
    size_t first_item;           /* the batch index of its item 0: the
                                    projections' row blocks are aligned to
                                    the whole batch (see attn_attend_scratch_bytes) */
    const void *x;               /* (c, n, D) queries                       */
    const void *y;               /* (c, m, D) keys/values source            */
    size_t y_stride;             /* elements between items of y: m*D, or 0
                                    when one (m, D) block serves every item */
    const unsigned char *keep;   /* (c, m): nonzero = key may be attended;
                                    NULL = every key                        */
    size_t keep_stride;          /* m, or 0 when one row serves every item  */
    const int64_t *positions;    /* (c, n) query positions (RoPE, ALiBi);
                                    NULL = 0 .. n-1                         */
    size_t positions_stride;     /* n, or 0 when one row serves every item  */
    const int64_t *kv_positions; /* (c, m) key positions; NULL = 0 .. m-1   */
    size_t kv_positions_stride;
    const void *bias;            /* (c, H, n, m) added to the logits, with
                                    the strides below (0 = broadcast); NULL
                                    = none                                 */
    size_t bias_item_stride, bias_head_stride;
    void *q;                     /* (c, n, H*dk | ldq) packed projections
                                    (c, block_rows, ..) with block_rows   */
    void *k;                     /* (c, m, G*dk | ldk)                      */
    void *v;                     /* (c, m, G*dv | ldv)                      */
    size_t hsq, hsk, hsv;        /* elements between heads in a row; 0 = dk,
                                    dk, dv (3dk for every one when the
                                    fused weights interleave heads)       */
    size_t ldq, ldk, ldv;        /* row strides; 0 = the packed width. With
                                    fused weights, q k v side by side in one
                                    (c, n, H*(2dk+dv)) buffer (k = q + H*dk,
                                    v = k + H*dk, ld = H*(2dk+dv)) take one
                                    GEMM for self-attention, and k v side by
                                    side one GEMM for cross-attention      */
    void *scores;                /* (c, H, rows, m) logits (attn_attend),
                                    masked = -inf;
                                    NULL = not kept (softmax in place)     */
    void *weights;               /* (c, H, rows, m) softmax of scores; NULL
                                    with scores NULL = online softmax, no maps */
    void *heads;                 /* (c, H, n, dv) per-head outputs, filled
                                    by attn_forward only; may be NULL      */
    /* Per-query summaries of each head's weights (attn_summary), filled by
     * attn_attend for its rows: (c, H, n) each, int32 for the integer
     * ones, or NULL (not computed).  A query that sees no key gets
     * entropy 0, distance 0, argmax -1; a row of NaN weights NaN, NaN, -1. */
    void *summary[ATTN_SUMMARY_COUNT];
    void *mean;                  /* (c, rows, m): the weights averaged over
                                    heads (attn_head_mean); may be NULL    */
    void *key_summary[ATTN_KEY_SUMMARY_COUNT];  /* (c, H, m) each, of all m
                                    keys (attn_key_summaries), or NULL    */
    void *weight_map[ATTN_WEIGHT_MAP_COUNT];    /* (c, H, rows, m) each
                                    (attn_weight_maps), or NULL; one may be
                                    the weights' own buffer               */
    void *result;                /* (c, n, H, D): each head's part of the
                                    output, without b_O (attn_project_result);
                                    (c, block_rows, H, D) with block_rows   */
    void *concat;                /* (c, n, H*dv) heads side by side; (c,
                                    block_rows, H*dv) with block_rows      */
    void *output;                /* (c, n, D) projected output; (c,
                                    block_rows, D) with block_rows         */
    void *scratch;               /* attn_attend_scratch_bytes, 64-byte
                                    aligned: per-head flags (set by
                                    attn_project_inputs) and, for the
                                    online softmax, one block per thread   */
    int overflow;                /* ATTN_OVERFLOW_* bits, when
                                    cfg->check_overflow: cleared by
                                    attn_project_inputs, set by each step  */
    /* One block of query rows (attn_project_rows), so that a long item
     * needs no buffer of all its n query rows: with block_rows not 0, q,
     * concat, output and result hold rows [block_first, block_first +
     * block_rows) of each item, (c, block_rows, ...), and attn_attend,
     * attn_project_output and attn_project_result take those rows.
     * block_first is 0 or a multiple of 256 (the projections' blocks of
     * rows, so that each row is computed as the whole item's is), and a
     * block shorter than 256 rows ends the item.  0: all n rows. */
    size_t block_first, block_rows;
    size_t bias_first;           /* the query row that row 0 of bias holds
                                    (a bias read one block of rows at a
                                    time); 0 for a bias of all n rows      */
    bool q_over_x;               /* q is x's own buffer (q == x, ldq = D >=
                                    H*dk): attn_project_rows with keys
                                    writes q of all n rows over x, which
                                    only it reads, and later calls leave
                                    it; q holds all n rows (not a block) */
    /* Sliding keys (attn_project_sliding): one item, causal with a window,
     * self-attention, its blocks of rows in order; k and v hold only keys
     * [kv_first, kv_first + kv_rows), those the blocks so far and the next
     * can see (attn_sliding_keys_most), so that neither memory nor the
     * projections grow with the whole item.  kv_rows 0 starts the item. */
    bool keys_slide;
    size_t kv_first, kv_rows;
    /* attn_project_rows with keys, self-attention with fused weights: only
     * the k and v (and, with q_over_x, the q) of rows [keys_first,
     * keys_end) of each item, a multiple of attn_project_block_rows()
     * apart from 0 -- MPI ranks sharing an item's rows each project their
     * own and exchange them.  0, 0: all m. */
    size_t keys_first, keys_end;
} attn_slice;

/* Runs the whole layer on one slice: projections, scores, masks, softmax,
 * head outputs and the output projection (docs/contract.md §2); the maps
 * cover all n query rows.  Equivalent to the three calls below, with
 * attn_head_mean (when s->mean and s->weights are set) and
 * attn_project_result (when s->result is). */
void attn_forward(const attn_config *cfg, const attn_weights *w, attn_slice *s);

/* Step 1: q, k and v of every item (one GEMM when fused, see attn_slice),
 * the RMSNorm of q and k per head (w->q_norm, w->k_norm) and then their
 * rotary embeddings (cfg->rope), and in s->scratch which K/V heads' v are
 * finite, for attn_attend. */
void attn_project_inputs(const attn_config *cfg, const attn_weights *w, attn_slice *s);

/*
 * Step 1 of one block of query rows (s->block_first, s->block_rows): q of
 * those rows of every item into s->q (c, block_rows, H*dk | ldq), RMSNorm
 * and rotary embeddings at their own positions (row block_first + i, or
 * s->positions' value of that row); with `keys`, first k and v of every
 * item (all m rows) as attn_project_inputs makes them, the v flags of
 * s->scratch, s->overflow cleared.  Without keys, s->k and s->v are those
 * of an earlier call (the same items).  With fused weights and
 * self-attention q, k and v come from one GEMM of the fused weight (its
 * columns kept where s->q, s->k and s->v say), as attn_project_inputs
 * does for q|k|v side by side, so every value is bit for bit what that
 * gives, whatever the block.  s->overflow gets ATTN_OVERFLOW_PROJECTIONS
 * for a NaN or an infinity in the block's q too.  With s->q_over_x, q of
 * every row comes with k and v, over x, and a call without keys does
 * nothing: no block projects its q again.
 */
void attn_project_rows(const attn_config *cfg, const attn_weights *w, attn_slice *s, bool keys);

/*
 * Step 1 of one block of query rows with sliding keys (s->keys_slide): x
 * holds the item's rows [from, block_first + block_rows) and nothing
 * else.  The keys held before attn_sliding_keys_from(block_first) are
 * dropped; then q of the block's rows into s->q, and k and v of x's rows
 * after those held (from must be where they end, or, with s->kv_rows 0,
 * attn_sliding_keys_from(block_first)), with RMSNorm and rotary
 * embeddings, the v flags and the overflow check as attn_project_rows;
 * every value bit for bit what the whole item's projection gives.
 */
void attn_project_sliding(const attn_config *cfg, const attn_weights *w, attn_slice *s,
                          size_t from);

/* The rows of the projections' blocks (256): a block of query rows, or a
 * share of keys, that starts on a multiple of it is computed as part of
 * the whole item, bit for bit. */
size_t attn_project_block_rows(void);

/* The first key that sliding keys hold for a block of query rows starting
 * at `row`: its first row's first visible key, rounded down to the
 * projections' blocks of rows. */
size_t attn_sliding_keys_from(const attn_config *cfg, size_t row);

/* The most keys sliding keys hold for blocks of `rows` query rows under a
 * window of `window` keys, which is also the most rows of x a block reads. */
size_t attn_sliding_keys_most(size_t window, size_t rows);

/*
 * Step 2, for query rows [row_first, row_first + rows) of every head and
 * item: the maps (c, H, rows, m) into s->scores / s->weights, and those
 * rows of every head into s->concat.  Calls covering all n rows, in any
 * blocks, make the complete concat.  The logits are as attn_variant says,
 * with s->bias added beside ALiBi, then masked (-inf) by the causal mask,
 * the window and key padding.  Keys that no row of a block sees (above
 * the causal diagonal, before the window) are skipped (not when v holds
 * a NaN or an infinity: then every key takes
 * part, as in weights . V written out, so the result does not depend on
 * the blocks).  With scores and weights NULL it keeps no maps: an online
 * softmax over blocks of keys (flash attention), O(rows) extra memory.
 * With s->block_rows the rows lie in that block, whose q and concat the
 * buffers hold.
 */
void attn_attend(const attn_config *cfg, attn_slice *s, size_t row_first, size_t rows);

/* Query rows of one task of attn_attend: the independent blocks its
 * threads share are (item, head, task_rows rows).  Fixed by the
 * configuration (and whether the softmax is online), never by the threads. */
size_t attn_task_rows(const attn_config *cfg, bool online);

/* Whether any query of rows [row0, row0 + rows) sees any key of
 * [key0, key0 + keys) under the causal mask and the window: a tile of the
 * maps where none does holds only -inf scores and 0 weights. */
bool attn_tile_visible(const attn_config *cfg, size_t row0, size_t rows, size_t key0,
                       size_t keys);

/* (query, key) pairs of rows [row0, row0 + rows) that the causal mask and
 * the window leave visible: the rows' share of the attention work. */
double attn_visible_pairs(const attn_config *cfg, size_t row0, size_t rows);

/* Bytes of attn_slice.scratch for slices of up to `items` items, with the
 * online softmax's blocks when `online`, for the current attn_threads(). */
size_t attn_attend_scratch_bytes(const attn_config *cfg, size_t items, bool online);

/* The same for `threads` threads. */
size_t attn_attend_scratch_bytes_for(const attn_config *cfg, size_t items, bool online,
                                     size_t threads);

/* Step 3: output (c, n, D) = concat . W_O + b_O (of the block of rows the
 * buffers hold, with s->block_rows). */
void attn_project_output(const attn_config *cfg, const attn_weights *w, attn_slice *s);

/* result (c, n, H, D): head h's part of the output, heads_h (n, dv) .
 * W_O rows h*dv .. h*dv+dv-1 (dv, D), without b_O (TransformerLens'
 * hook_result); the sum over h plus b_O is the output.  After the
 * concat is complete (every row attended). */
void attn_project_result(const attn_config *cfg, const attn_weights *w, attn_slice *s);

/* mean (c, rows, m) = the weights (c, H, rows, m) of the rows attn_attend
 * just computed, averaged over heads (summed in double, head by head). */
void attn_head_mean(const attn_config *cfg, attn_slice *s, size_t rows);

/*
 * Norm-based analysis (Kobayashi et al., "Attention is Not Only a Weight",
 * EMNLP 2020): what key k adds to query q's output through head h is
 * weights[q, k] v_k W_O[h], with v_k of K/V head g(h) (b_V included) and
 * W_O[h] the head's (dv, D) rows of W_O; its length is
 * weights[q, k] || v_k W_O[h] ||.  The squared length is the quadratic
 * form v_k (W_O[h] W_O[h]^T) v_k^T, so each key costs dv^2
 * multiply-adds (in double) instead of dv D.
 */

/* gram (H, dv, dv) = W_O[h] W_O[h]^T for every head, in double (BLAS
 * dsyrk on the head's rows converted to double in rows (dv, D)), both
 * triangles. */
void attn_value_gram(const attn_config *cfg, const attn_weights *w, double *gram, double *rows);

/* Every per-key summary s->key_summary[] asks for (not NULL), of every
 * key of every item, from s->v (all m keys): value_norm = || v_k W_O[h] ||
 * (w->wo_gram set) in double, rounded once to the precision, NaN when v_k
 * holds one. */
void attn_key_summaries(const attn_config *cfg, const attn_weights *w, attn_slice *s);

/* Every map s->weight_map[] asks for, (c, H, rows, m) = s->weights (c, H,
 * rows, m) times its per-key summary of the key, of the rows attn_attend
 * just computed (in place when the map is s->weights). */
void attn_weight_maps(const attn_config *cfg, attn_slice *s, size_t rows);

/*
 * The kernels attn_forward is made of, for float and for double.
 * (The _f64 versions take double pointers and otherwise read the same.)
 */

/* out (rows, cols) = in (rows, d_in) . w (d_in, cols) + bias (cols).
 * bias may be NULL. */
void attn_project_f32(const float *in, size_t rows, size_t d_in, const float *w,
                      size_t cols, const float *bias, float *out);
void attn_project_f64(const double *in, size_t rows, size_t d_in, const double *w,
                      size_t cols, const double *bias, double *out);

/* scores (n, m) = scale . q (n, d; row stride ldq) . k (m, d; row stride ldk)^T */
void attn_head_scores_f32(const float *q, size_t ldq, const float *k, size_t ldk,
                          size_t n, size_t m, size_t d, double scale, float *scores);
void attn_head_scores_f64(const double *q, size_t ldq, const double *k, size_t ldk,
                          size_t n, size_t m, size_t d, double scale, double *scores);

/* Sets scores (n, m)[q][k] to -inf where k > q (the causal mask), and where
 * keep[k] == 0 when keep (m) is not NULL. */
void attn_mask_f32(float *scores, size_t n, size_t m, bool causal, const unsigned char *keep);
void attn_mask_f64(double *scores, size_t n, size_t m, bool causal, const unsigned char *keep);

/* weights (n, m) = softmax of each row of scores (n, m), stable (the row
 * max is subtracted first).  A row of nothing but -inf gives a row of 0;
 * a row holding a NaN gives a row of NaN.
 * scores and weights may be the same buffer. */
void attn_softmax_rows_f32(const float *scores, float *weights, size_t n, size_t m);
void attn_softmax_rows_f64(const double *scores, double *weights, size_t n, size_t m);

/* out (n, dv; row stride ldo) = weights (n, m) . v (m, dv; row stride ldv) */
void attn_head_output_f32(const float *weights, const float *v, size_t ldv, size_t n,
                          size_t m, size_t dv, float *out, size_t ldo);
void attn_head_output_f64(const double *weights, const double *v, size_t ldv, size_t n,
                          size_t m, size_t dv, double *out, size_t ldo);

/* The ALiBi slopes of `heads` heads into slopes (heads): the geometric
 * sequence 2^(-8/P), its powers 1..P for the largest power of two P <=
 * heads, then the odd powers of 2^(-4/P) for the rest (ALiBi paper, as
 * BLOOM's build_alibi_tensor). */
void attn_alibi_slopes(size_t heads, double *slopes);

/* Rotates x (rows, . | ld), `heads` heads hs apart, each head's first
 * rope->dim features, row r at position pos[r] (pos NULL: first + r). */
void attn_rope_rows_f32(const attn_rope *rope, float *x, size_t ld, size_t rows, size_t heads,
                        size_t hs, const int64_t *pos, size_t first);
void attn_rope_rows_f64(const attn_rope *rope, double *x, size_t ld, size_t rows,
                        size_t heads, size_t hs, const int64_t *pos, size_t first);

/* RMSNorm of each head of x (rows, . | ld), `heads` heads hs apart, d
 * features each: x / sqrt(mean(x^2) + eps) * w (d). */
void attn_rms_norm_rows_f32(float *x, size_t ld, size_t rows, size_t heads, size_t hs, size_t d,
                            const float *w, double eps);
void attn_rms_norm_rows_f64(double *x, size_t ld, size_t rows, size_t heads, size_t hs,
                            size_t d, const double *w, double eps);

/* Reorders packed per-row head blocks into head-major order:
 * packed (rows, H*d) -> split (H, rows, d); attn_forward's heads. */
void attn_split_heads_f32(const float *packed, size_t rows, size_t heads, size_t d, float *split);
void attn_split_heads_f64(const double *packed, size_t rows, size_t heads, size_t d, double *split);

/* The same from packed rows with a row stride of ld elements (>= H*d). */
void attn_split_heads_ld_f32(const float *packed, size_t ld, size_t rows, size_t heads, size_t d,
                             float *split);
void attn_split_heads_ld_f64(const double *packed, size_t ld, size_t rows, size_t heads, size_t d,
                             double *split);

/* Index of the first NaN or infinity among values (count), or count when
 * every value is finite. */
size_t attn_find_nonfinite_f32(const float *values, size_t count);
size_t attn_find_nonfinite_f64(const double *values, size_t count);

/* ---- attention rollout (lib/math/rollout.c) ------------------------------
 *
 * Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in
 * Transformers"): how much each position of a layer's output draws on each
 * input token through layers 1..l, attention and residual connections
 * both.  With Ā_l the mean over heads of layer l's weights (n, n) and r the
 * share of the residual connection (0 <= r <= 1):
 *
 *     Â_l = rownorm((1 - r) Ā_l + r I),   R_1 = Â_1,   R_l = Â_l R_{l-1}
 *
 * rownorm divides each row by its sum; a row summing to 0 (a query that
 * sees no key, with r = 0) stays 0.  Every buffer is row-major float64 but
 * the maps read (float); n tokens (self-attention: n queries = n keys).
 *
 *     memset(a_hat, 0, n * n * sizeof *a_hat);
 *     for (size_t h = 0; h < H; h++)                   // head h's map (n, n)
 *         attn_rollout_accumulate(n * n, 1.0 / H, map[h], a_hat);
 *     attn_rollout_layer(n, 0.5, a_hat, a_hat);        // Ā_l -> Â_l in place
 *     attn_rollout_step(n, a_hat, prev, next);         // R_l = Â_l R_{l-1}
 *
 * None of them fails: the caller allocated the buffers.
 */

/* sum (count) += weight * values (count): one head's map (n, n) added to
 * the head mean with weight 1/H, or the stored mean with weight 1. */
void attn_rollout_accumulate(size_t count, double weight, const float *values, double *sum);

/* a_hat (n, n) = rownorm((1 - residual) * mean + residual * I), from mean
 * (n, n); a row summing to 0 stays 0 (and one holding a NaN is NaN).
 * mean and a_hat may be the same buffer. */
void attn_rollout_layer(size_t n, double residual, const double *mean, double *a_hat);

/* next (n, n) = a_hat (n, n) . prev (n, n), one BLAS product (n <= INT_MAX);
 * next overlaps neither. */
void attn_rollout_step(size_t n, const double *a_hat, const double *prev, double *next);

/* ---- attention flow (attnrun flow; lib/math/flow.c) ------------------------
 *
 * Attention flow (Abnar & Zuidema 2020): the layers as a graph with a node
 * per (boundary l = 0 .. L, token) and an edge from key k of boundary l - 1
 * to query q of boundary l of capacity Â_l[q, k] (attn_rollout_layer's
 * Â).  flow[q][j] is the value of a maximum flow from token j at boundary
 * 0 to position q at boundary L, in float64, each pair proved maximal by a
 * cut of the same value (within report.gap).  When every Â_l is lower
 * triangular (a causal model) the flows to earlier positions (j > q) are
 * 0 and are not searched.
 *
 *     attn_flow_report report;
 *     attn_flow(n, L, a_hat, flow, &report, NULL, NULL);   // a_hat (L, n, n)
 */

/* What a call of attn_flow did. */
typedef struct attn_flow_report {
    size_t pairs;                 /* maximum flows searched                */
    size_t phases;                /* Dinic's phases over every pair        */
    double gap;                   /* the largest |cut - flow| of a pair: at
                                     most 1e-14 for each arc of its cut    */
    bool causal;                  /* every layer lower triangular          */
} attn_flow_report;

/* Called on the first thread after each row of flow it finishes: `done`
 * rows of `total` (n) finished on every thread. */
typedef void (*attn_flow_progress)(size_t done, size_t total, void *context);

/* The bytes attn_flow allocates for n tokens through `layers` layers on
 * `threads` threads (SIZE_MAX when they cannot be addressed). */
size_t attn_flow_bytes(size_t n, size_t layers, int threads);

/*
 * flow (n, n) = the maximum flow from each token j (column) to each
 * position q (row) through the layers a_hat (layers, n, n), each Â_l with
 * finite capacities >= 0.  The pairs are shared among attn_threads()
 * threads, each pair computed the same way on any of them.  ATTN_ENOMEM
 * when an allocation fails (flow then holds nothing of use).
 */
int attn_flow(size_t n, size_t layers, const double *a_hat, double *flow,
              attn_flow_report *report, attn_flow_progress progress, void *context);

/* ---- head census (attnrun heads; lib/math/census.c) ------------------------
 *
 * Scores of each attention head, each a mean over the (item, query) rows
 * of its weights, for telling previous-token, duplicate-token and
 * induction heads apart (Olsson et al. 2022).  p is one row of weights
 * (m), of query q; a row that is all zero (a query that sees no key) is
 * left out of every score.  The token scores read the query's and the
 * keys' tokens as integer ids, equal ids for equal tokens.
 *
 *     attn_census *census = attn_calloc(H, sizeof *census);   // one per head
 *     attn_census_tokens tokens;                       // once per item
 *     attn_census_tokens_build(&tokens, n, m, query_ids, key_ids, &err);
 *     for (size_t h = 0; h < H; h++)
 *         attn_census_add(&census[h], 0, n, m, weights[h], &tokens);   // (n, m)
 *     attn_census_tokens_free(&tokens);
 *     double s = attn_census_score(&census[0], ATTN_CENSUS_INDUCTION);  // NaN: none
 *
 * Cost per item: the index of the tokens takes O((n + m) log m) time and
 * m + 2n size_t, built once and read by every head; a head's rows take
 * O(rows m) for the scores without tokens, plus one read per qualifying
 * key for duplicate and induction (at most rows m), never a search among
 * the keys.
 */

/* The scores, in the order of the CSV's columns. */
typedef enum attn_census_kind {
    ATTN_CENSUS_ENTROPY,      /* -sum_k p_k ln p_k, nats                    */
    ATTN_CENSUS_DISTANCE,     /* sum_k p_k |q - k|                         */
    ATTN_CENSUS_FIRST,        /* p_0                                       */
    ATTN_CENSUS_PREVIOUS,     /* p_(q-1), rows with 1 <= q <= m            */
    ATTN_CENSUS_SELF,         /* p_q, rows with q < m                      */
    ATTN_CENSUS_DUPLICATE,    /* sum of p_k, k < q with key k's token = q's;
                                 rows with such a k                        */
    ATTN_CENSUS_INDUCTION,    /* sum of p_k, 1 <= k <= q with key (k-1)'s
                                 token = q's; rows with such a k           */
    ATTN_CENSUS_COUNT
} attn_census_kind;

/* The score's name ("entropy", ... "induction": the CSV column and the
 * dataset of attnrun heads), its definition in short ("p_(q-1), with 1 <=
 * q <= m"), the whole of it in a sentence (the dataset's description),
 * and whether it needs tokens. */
const char *attn_census_name(attn_census_kind kind);
const char *attn_census_definition(attn_census_kind kind);
const char *attn_census_description(attn_census_kind kind);
bool attn_census_needs_tokens(attn_census_kind kind);

/* One head's scores so far: zero it to start. */
typedef struct attn_census {
    double sum[ATTN_CENSUS_COUNT];     /* each score summed over its rows  */
    size_t rows[ATTN_CENSUS_COUNT];    /* the rows it was counted in       */
} attn_census;

/* The keys each query's token scores read, from one item's tokens. */
typedef struct attn_census_tokens {
    size_t n, m;
    size_t *keys;       /* (m) key indices ordered by (token id, index)    */
    size_t *start;      /* (n) where the keys of query q's token start in
                           keys                                            */
    size_t *earlier;    /* (n) how many of those lie before q: its earlier
                           occurrences, keys[start[q] .. + earlier[q])     */
} attn_census_tokens;

/* Indexes query_ids (n) against key_ids (m).  ATTN_OK, or ATTN_ENOMEM
 * (nothing left to free). */
int attn_census_tokens_build(attn_census_tokens *tokens, size_t n, size_t m,
                             const int32_t *query_ids, const int32_t *key_ids, attn_error *err);

/* Frees what attn_census_tokens_build allocated; safe on a zeroed struct. */
void attn_census_tokens_free(attn_census_tokens *tokens);

/* Adds the rows of weights (rows, m) -- queries first .. first + rows - 1
 * of one head's map -- to census.  tokens NULL: no token scores; else
 * indexed for this item (tokens->m == m, first + rows <= tokens->n). */
void attn_census_add(attn_census *census, size_t first, size_t rows, size_t m,
                     const float *weights, const attn_census_tokens *tokens);

/* The mean of score `kind`: its sum over its rows; NaN when no row
 * qualified. */
double attn_census_score(const attn_census *census, attn_census_kind kind);

/* ---- end of head census ---------------------------------------------------- */

#endif
