/*
 * attn_math.h - multi-head scaled dot-product attention on plain buffers.
 *
 * The math of shared/seed (DESIGN §2), with no knowledge of files.  Every
 * buffer is row-major and dense; its shape is written beside it.
 *
 * Legend: c batch items in a slice, H heads, n queries, m keys,
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

/* The sizes of one attention layer applied to one input. */
typedef struct attn_dims {
    size_t batch;    /* B: batch items in the input (1 for a rank-2 X)   */
    size_t n;        /* queries per item                                */
    size_t m;        /* keys per item (n unless cross-attention)        */
    size_t d_model;  /* D                                               */
    size_t heads;    /* H                                               */
    size_t d_k;      /* per-head query/key width                        */
    size_t d_v;      /* per-head value width                            */
} attn_dims;

typedef struct attn_config {
    attn_dims dims;
    double scale;               /* multiplies Q K^T; 1/sqrt(d_k) by default */
    bool causal;                /* key k is hidden from query q when k > q  */
    attn_precision precision;   /* element type of every buffer below       */
    bool check_overflow;        /* the inputs are finite: flag a NaN or an
                                   infinity computed from them in
                                   attn_slice.overflow                      */
} attn_config;

/* Where a computation from finite inputs gave a NaN or an infinity (the
 * values exceed the precision's range), as bits of attn_slice.overflow. */
enum {
    ATTN_OVERFLOW_PROJECTIONS = 1,   /* q, k or v                          */
    ATTN_OVERFLOW_SCORES = 2,        /* a logit of a key that takes part    */
    ATTN_OVERFLOW_OUTPUT = 4         /* the projected output                */
};

/* The layer's parameters in packed form, in cfg->precision. */
typedef struct attn_weights {
    const void *w_q;  /* (D, H*dk): head i owns columns i*dk .. i*dk+dk-1 */
    const void *w_k;  /* (D, H*dk)                                       */
    const void *w_v;  /* (D, H*dv)                                       */
    const void *w_o;  /* (H*dv, D)                                       */
    const void *b_q;  /* (H*dk) or NULL                                  */
    const void *b_k;  /* (H*dk) or NULL                                  */
    const void *b_v;  /* (H*dv) or NULL                                  */
    const void *b_o;  /* (D) or NULL                                     */
    /* Optional fused form of the first three: when w_qkv is not NULL it is
     * (D, H*(2dk+dv)) = [W_Q | W_K | W_V] and b_qkv is NULL or the three
     * biases end to end; w_q, w_k, w_v, b_q, b_k, b_v are then ignored. */
    const void *w_qkv;
    const void *b_qkv;
} attn_weights;

/* One slice of the batch: inputs, then every buffer attn_forward fills. */
typedef struct attn_slice {
    size_t count;                /* c: batch items in this slice            */
    const void *x;               /* (c, n, D) queries                       */
    const void *y;               /* (c, m, D) keys/values source            */
    size_t y_stride;             /* elements between items of y: m*D, or 0
                                    when one (m, D) block serves every item */
    const unsigned char *keep;   /* (c, m): nonzero = key may be attended;
                                    NULL = every key                        */
    size_t keep_stride;          /* m, or 0 when one row serves every item  */
    void *q;                     /* (c, n, H*dk | ldq) packed projections   */
    void *k;                     /* (c, m, H*dk | ldk)                      */
    void *v;                     /* (c, m, H*dv | ldv)                      */
    size_t ldq, ldk, ldv;        /* row strides; 0 = the packed width. With
                                    fused weights, q k v side by side in one
                                    (c, n, H*(2dk+dv)) buffer (k = q + H*dk,
                                    v = k + H*dk, ld = H*(2dk+dv)) take one
                                    GEMM for self-attention, and k v side by
                                    side one GEMM for cross-attention      */
    void *scores;                /* (c, H, rows, m) scaled, masked = -inf;
                                    NULL = not kept (softmax in place)     */
    void *weights;               /* (c, H, rows, m) softmax of scores; NULL
                                    with scores NULL = online softmax, no maps */
    void *heads;                 /* (c, H, n, dv) per-head outputs, filled
                                    by attn_forward only; may be NULL      */
    void *concat;                /* (c, n, H*dv) heads side by side         */
    void *output;                /* (c, n, D) projected output              */
    void *scratch;               /* attn_attend_scratch_bytes, 64-byte
                                    aligned: per-head flags (set by
                                    attn_project_inputs) and, for the
                                    online softmax, one block per thread   */
    int overflow;                /* ATTN_OVERFLOW_* bits, when
                                    cfg->check_overflow: cleared by
                                    attn_project_inputs, set by each step  */
} attn_slice;

/* Runs the whole layer on one slice: projections, scores, masks, softmax,
 * head outputs and the output projection (DESIGN §2); the maps cover all
 * n query rows.  Equivalent to the three calls below. */
void attn_forward(const attn_config *cfg, const attn_weights *w, attn_slice *s);

/* Step 1: q, k and v of every item (one GEMM when fused, see attn_slice),
 * and in s->scratch which heads' v are finite, for attn_attend. */
void attn_project_inputs(const attn_config *cfg, const attn_weights *w, attn_slice *s);

/*
 * Step 2, for query rows [row_first, row_first + rows) of every head and
 * item: the maps (c, H, rows, m) into s->scores / s->weights, and those
 * rows of every head into s->concat.  Calls covering all n rows, in any
 * blocks, make the complete concat.  Causal blocks above the diagonal are
 * skipped (not when v holds a NaN or an infinity: then every key takes
 * part, as in weights . V written out, so the result does not depend on
 * the blocks).  With scores and weights NULL it keeps no maps: an online
 * softmax over blocks of keys (flash attention), O(rows) extra memory.
 */
void attn_attend(const attn_config *cfg, attn_slice *s, size_t row_first, size_t rows);

/* Bytes of attn_slice.scratch for slices of up to `items` items, with the
 * online softmax's blocks when `online`, for the current attn_threads(). */
size_t attn_attend_scratch_bytes(const attn_config *cfg, size_t items, bool online);

/* Step 3: output (c, n, D) = concat . W_O + b_O. */
void attn_project_output(const attn_config *cfg, const attn_weights *w, attn_slice *s);

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

/* Reorders packed per-row head blocks into head-major order:
 * packed (rows, H*d) -> split (H, rows, d).  Used to store q, k and v. */
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

#endif
