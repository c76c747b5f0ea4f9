/* math.c - the attention kernels for float and double (attn_math.h). */
#include "attn_math.h"

#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#else                       /* built without OpenMP (the fuzzer): one thread */
static int omp_get_thread_num(void) { return 0; }
#endif

/*
 * Vector versions of exp from glibc's libmvec: with these declarations the
 * compiler turns the exp loops (omp simd) into calls of _ZGV*_expf/_exp,
 * for the instruction set of each target clone.
 */
#pragma omp declare simd notinbranch
extern float expf(float);
#pragma omp declare simd notinbranch
extern double exp(double);

/* Work blocks (see kernels.inc): fixed, so that results do not depend
 * on the thread count.  Sizes from make bench: larger query blocks pack
 * each K block for more rows (xl: 1.13 s at 64 rows, 0.90 s at 256 with
 * 512 keys) but waste more of the causal diagonal. */
#define PROJECT_ROWS ((size_t)256)
#define QUERY_BLOCK ((size_t)128)
#define ONLINE_QUERY_BLOCK ((size_t)256)   /* the online softmax's rows */
#define KEY_BLOCK ((size_t)512)
#define ONLINE_WINDOW_ROWS ((size_t)64)     /* the fewest rows of a windowed task */
#define ONLINE_WINDOW_SHARE ((size_t)4)     /* ... else a quarter of the window */
#define MEAN_KEYS ((size_t)256)             /* keys a head mean sums at a time */

/* Bytes of the (c, H) flags at the start of s->scratch, padded so that
 * the blocks after them stay aligned. */
static size_t attn_scratch_flags(size_t items, size_t heads)
{
    return (items * heads + 63) / 64 * 64;
}

/* Bytes of the room after the flags where the projections compute their
 * blocks that are not full as full ones (see row_blocks_of): per thread,
 * PROJECT_ROWS rows of the widest input and output of the layer. */
static size_t attn_scratch_pad_for(const attn_config *cfg, size_t threads)
{
    const attn_dims *d = &cfg->dims;
    const size_t G = attn_kv_heads(d), hv = d->heads * d->d_v;
    const size_t fused = d->heads * d->d_k + G * (d->d_k + d->d_v);
    const size_t widest_in = d->d_model > hv ? d->d_model : hv;
    const size_t widest_out = fused > d->d_model ? fused : d->d_model;
    return threads *
           ((PROJECT_ROWS * (widest_in + widest_out) * attn_precision_size(cfg->precision) + 63) /
            64 * 64);
}

static size_t attn_scratch_pad(const attn_config *cfg)
{
    return attn_scratch_pad_for(cfg, (size_t)attn_threads());
}

/*
 * The keys [*lo, *hi) that query row `query` may see by position: the
 * causal mask hides k > q, the window hides k <= q - window.  (Key
 * padding is per key, applied on top: see mask_range.)
 */
static void attn_visible_keys(const attn_config *cfg, size_t query, size_t *lo, size_t *hi)
{
    const size_t m = cfg->dims.m;
    const size_t window = cfg->variant.window;
    *hi = cfg->variant.causal && query + 1 < m ? query + 1 : m;
    *lo = window != 0 && query >= window ? query - window + 1 : 0;
    if (*lo > *hi)
        *lo = *hi;
}

size_t attn_project_block_rows(void)
{
    return PROJECT_ROWS;
}

size_t attn_sliding_keys_from(const attn_config *cfg, size_t row)
{
    size_t lo, hi;
    attn_visible_keys(cfg, row, &lo, &hi);
    return lo / PROJECT_ROWS * PROJECT_ROWS;
}

size_t attn_sliding_keys_most(size_t window, size_t rows)
{
    return rows + window + PROJECT_ROWS - 2;
}

/*
 * Query rows per task of the online softmax.  A task multiplies the keys
 * any of its rows sees: with a window of W keys, R rows see R + W - 1, so
 * fewer rows waste less (R = W/ONLINE_WINDOW_SHARE, at least
 * ONLINE_WINDOW_ROWS).  Fixed by the configuration, never by the threads.
 */
static size_t attn_online_rows(const attn_config *cfg)
{
    size_t rows = ONLINE_QUERY_BLOCK;
    if (cfg->variant.window == 0)
        return rows;
    while (rows > ONLINE_WINDOW_ROWS && rows > cfg->variant.window / ONLINE_WINDOW_SHARE)
        rows /= 2;
    return rows;
}

/* A task of attn_attend saw `pairs` pairs: counted, and on the calling
 * thread reported when `every` seconds have passed (attn_progress). */
static void attn_progress_add(attn_progress *p, uint64_t pairs)
{
#pragma omp atomic update
    p->pairs += pairs;
    if (omp_get_thread_num() != 0 || p->report == NULL)
        return;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    const double now = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
    if (now - p->last < p->every)
        return;
    p->last = now;
    uint64_t seen;
#pragma omp atomic read
    seen = p->pairs;
    p->report(seen, p->context);
}

#define REAL float
#define SUFFIX f32
#define GEMM cblas_sgemm
#define EXP expf
#include "kernels.inc"
#undef REAL
#undef SUFFIX
#undef GEMM
#undef EXP

#define REAL double
#define SUFFIX f64
#define GEMM cblas_dgemm
#define EXP exp
#include "kernels.inc"
#undef REAL
#undef SUFFIX
#undef GEMM
#undef EXP

void attn_forward(const attn_config *cfg, const attn_weights *w, attn_slice *s)
{
    attn_blas_single();
    if (cfg->precision == ATTN_F64)
        forward_f64(cfg, w, s);
    else
        forward_f32(cfg, w, s);
}

void attn_project_inputs(const attn_config *cfg, const attn_weights *w, attn_slice *s)
{
    attn_blas_single();
    if (cfg->precision == ATTN_F64)
        project_inputs_f64(cfg, w, s);
    else
        project_inputs_f32(cfg, w, s);
}

void attn_project_rows(const attn_config *cfg, const attn_weights *w, attn_slice *s, bool keys)
{
    attn_blas_single();
    if (cfg->precision == ATTN_F64)
        project_rows_f64(cfg, w, s, keys);
    else
        project_rows_f32(cfg, w, s, keys);
}

void attn_project_sliding(const attn_config *cfg, const attn_weights *w, attn_slice *s,
                          size_t from)
{
    attn_blas_single();
    if (cfg->precision == ATTN_F64)
        project_sliding_f64(cfg, w, s, from);
    else
        project_sliding_f32(cfg, w, s, from);
}

void attn_attend(const attn_config *cfg, attn_slice *s, size_t row_first, size_t rows)
{
    attn_blas_single();
    if (cfg->precision == ATTN_F64)
        attend_f64(cfg, s, row_first, rows);
    else
        attend_f32(cfg, s, row_first, rows);
}

void attn_project_output(const attn_config *cfg, const attn_weights *w, attn_slice *s)
{
    attn_blas_single();
    if (cfg->precision == ATTN_F64)
        project_output_f64(cfg, w, s);
    else
        project_output_f32(cfg, w, s);
}

void attn_project_result(const attn_config *cfg, const attn_weights *w, attn_slice *s)
{
    attn_blas_single();
    if (cfg->precision == ATTN_F64)
        project_result_f64(cfg, w, s);
    else
        project_result_f32(cfg, w, s);
}

void attn_value_gram(const attn_config *cfg, const attn_weights *w, double *gram, double *rows)
{
    if (cfg->precision == ATTN_F64)
        value_gram_f64(cfg, w, gram, rows);
    else
        value_gram_f32(cfg, w, gram, rows);
}

void attn_key_summaries(const attn_config *cfg, const attn_weights *w, attn_slice *s)
{
    if (cfg->precision == ATTN_F64)
        key_summaries_f64(cfg, w, s);
    else
        key_summaries_f32(cfg, w, s);
}

void attn_weight_maps(const attn_config *cfg, attn_slice *s, size_t rows)
{
    if (cfg->precision == ATTN_F64)
        weight_maps_f64(cfg, s, rows);
    else
        weight_maps_f32(cfg, s, rows);
}

attn_key_summary attn_weight_map_factor(attn_weight_map map)
{
    static const attn_key_summary factors[] = {
#define FACTOR(NAME, factor) ATTN_KEY_SUMMARY_##factor,
        ATTN_WEIGHT_MAPS(FACTOR)
#undef FACTOR
    };
    static_assert(sizeof factors / sizeof factors[0] == ATTN_WEIGHT_MAP_COUNT,
                  "a factor for every map");
    return factors[map];
}

void attn_head_mean(const attn_config *cfg, attn_slice *s, size_t rows)
{
    if (cfg->precision == ATTN_F64)
        head_mean_f64(cfg, s, rows);
    else
        head_mean_f32(cfg, s, rows);
}

size_t attn_task_rows(const attn_config *cfg, bool online)
{
    return online ? attn_online_rows(cfg) : QUERY_BLOCK;
}

bool attn_tile_visible(const attn_config *cfg, size_t row0, size_t rows, size_t key0,
                       size_t keys)
{
    size_t from, to, unused;
    if (rows == 0 || keys == 0)
        return false;
    /* Both ends of the visible range grow with the query. */
    attn_visible_keys(cfg, row0, &from, &unused);
    attn_visible_keys(cfg, row0 + rows - 1, &unused, &to);
    return from < key0 + keys && key0 < to;
}

double attn_visible_pairs(const attn_config *cfg, size_t row0, size_t rows)
{
    double pairs = 0;
    for (size_t r = row0; r < row0 + rows; r++) {
        size_t lo, hi;
        attn_visible_keys(cfg, r, &lo, &hi);
        pairs += (double)(hi - lo);
    }
    return pairs;
}

size_t attn_attend_scratch_bytes_for(const attn_config *cfg, size_t items, bool online,
                                     size_t threads)
{
    size_t bytes = attn_scratch_flags(items, attn_kv_heads(&cfg->dims)) +
                   attn_scratch_pad_for(cfg, threads);
    if (online)
        bytes += threads * ONLINE_QUERY_BLOCK * KEY_BLOCK * attn_precision_size(cfg->precision);
    return bytes;
}

size_t attn_attend_scratch_bytes(const attn_config *cfg, size_t items, bool online)
{
    return attn_attend_scratch_bytes_for(cfg, items, online, (size_t)attn_threads());
}

bool attn_summary_is_integer(attn_summary s)
{
#define SUMMARY_INTEGER(NAME, integer) [ATTN_SUMMARY_##NAME] = integer,
    static const bool integer[ATTN_SUMMARY_COUNT] = {ATTN_SUMMARIES(SUMMARY_INTEGER)};
#undef SUMMARY_INTEGER
    return integer[s];
}

const char *attn_rope_style_name(attn_rope_style style)
{
    static const char *const names[] = {
        [ATTN_ROPE_DEFAULT] = "", [ATTN_ROPE_NEOX] = "neox", [ATTN_ROPE_GPTJ] = "gptj",
    };
    static_assert(sizeof names / sizeof names[0] == ATTN_ROPE_STYLE_COUNT,
                  "a name for every rope style");
    return names[style];
}

void attn_alibi_slopes(size_t heads, double *slopes)
{
    size_t power = 1;                      /* the largest power of two <= heads */
    while (power <= heads / 2)
        power *= 2;
    const double base = pow(2.0, -8.0 / (double)power);
    for (size_t h = 0; h < power && h < heads; h++)
        slopes[h] = pow(base, (double)(h + 1));
    const double extra = pow(2.0, -4.0 / (double)power);
    for (size_t h = power; h < heads; h++)
        slopes[h] = pow(extra, (double)(2 * (h - power) + 1));
}
