/*
 * test_store.c - the stored forms of lib/math/store.h: float32 and float64
 * values rounded to binary16 and bfloat16, and which tiles of the maps
 * some query sees.
 *
 * The reference decodes every 16-bit pattern from the formats' definitions
 * (sign, biased exponent, mantissa) into a double, then rounds by value:
 * the nearest pattern, ties to the even one, past the largest finite
 * value by half a step or more: infinity.  Nothing of lib/math/store.c's bit
 * arithmetic is used.
 *
 * The chunks and blocks (attn_store_list, attn_store_pack,
 * attn_store_gather_block) are checked element by element against the
 * definitions in store.h: a chunk's elements inside the dataset are the
 * block's values in the stored type (rounded by the reference above), every
 * element past the dataset's end is the fill; a compressed chunk is the
 * zlib stream of the chunk shuffled as HDF5's shuffle filter does (byte j
 * of element i at j * count + i), read back with libdeflate's decompressor.
 * A packer makes one compressor per thread and frees each (counted through
 * stand-ins for libdeflate's allocator).
 */
#define _GNU_SOURCE             /* RTLD_NEXT */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libdeflate.h>
#include <math.h>

#include "attn_math.h"
#include "math/store.h"

/* A 16-bit float format: exponent and mantissa bits. */
typedef struct format {
    const char *name;
    int exponent_bits, mantissa_bits;
} format;

static const format f16 = {"f16", 5, 10};
static const format bf16 = {"bf16", 8, 7};

/* The value of a positive finite pattern, by the definition. */
static double decode(const format *f, uint32_t pattern)
{
    const uint32_t mantissa = pattern & ((1u << f->mantissa_bits) - 1);
    const int exponent = (int)(pattern >> f->mantissa_bits);
    const int bias = (1 << (f->exponent_bits - 1)) - 1;
    if (exponent == 0)                                   /* subnormal */
        return ldexp((double)mantissa, 1 - bias - f->mantissa_bits);
    return ldexp(1.0 + ldexp((double)mantissa, -f->mantissa_bits), exponent - bias);
}

/* The pattern of infinity (all exponent bits set, mantissa 0). */
static uint32_t infinity_of(const format *f)
{
    return ((1u << f->exponent_bits) - 1) << f->mantissa_bits;
}

/* x rounded to nearest even in format f, by value. */
static uint16_t reference(const format *f, double x)
{
    const uint32_t inf = infinity_of(f), sign = signbit(x) ? 0x8000u : 0;
    const double a = fabs(x);
    if (isnan(x))
        return 0xFFFF;                                   /* any NaN; compared as NaN */
    /* the largest pattern whose value is <= a (values grow with patterns) */
    uint32_t lo = 0, hi = inf;                           /* decode(inf) stands for 2^emax */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (decode(f, mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    if (a >= decode(f, inf))                             /* past the top step */
        return (uint16_t)(sign | inf);
    const double below = a - decode(f, lo), above = decode(f, hi) - a;
    uint32_t pick = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
    return (uint16_t)(sign | pick);
}

static bool is_nan_pattern(const format *f, uint16_t p)
{
    const uint32_t inf = infinity_of(f);
    return (p & 0x7FFFu & inf) == inf && (p & ((1u << f->mantissa_bits) - 1)) != 0;
}

/* Fails, naming the value, when got differs from the reference. */
static void expect_pattern(const format *f, double x, uint16_t got)
{
    const uint16_t want = reference(f, x);
    if (isnan(x) ? !is_nan_pattern(f, got) : got != want)
        fail_msg("%s of %.17g (float bits %08x): got %04x, expected %04x", f->name, x,
                 (unsigned)((union { float v; uint32_t u; }){.v = (float)x}).u, got, want);
}

static const format *const formats[] = {&f16, &bf16};

/* Runs check for each format. */
static void for_each_format(void (*check)(const format *f))
{
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        check(formats[i]);
}

static void convert_f32(const format *f, const float *in, uint16_t *out, size_t n)
{
    if (f == &f16)
        attn_store_f16_from_f32(in, out, n);
    else
        attn_store_bf16_from_f32(in, out, n);
}

static void convert_f64(const format *f, const double *in, uint16_t *out, size_t n)
{
    if (f == &f16)
        attn_store_f16_from_f64(in, out, n);
    else
        attn_store_bf16_from_f64(in, out, n);
}

enum { BATCH = 4096 };

/* Values gathered and converted to format f a batch of at most BATCH at
 * a time, from float64 when wide, else from float32 (the values are then
 * floats), each checked against the reference. */
typedef struct batch {
    const format *f;
    bool wide;
    size_t count;
    double in[BATCH];
} batch;

static void batch_convert(batch *b)
{
    float in32[BATCH];
    uint16_t out[BATCH];
    if (b->wide) {
        convert_f64(b->f, b->in, out, b->count);
    } else {
        for (size_t j = 0; j < b->count; j++)
            in32[j] = (float)b->in[j];                   /* exact: they are floats */
        convert_f32(b->f, in32, out, b->count);
    }
    for (size_t j = 0; j < b->count; j++)
        expect_pattern(b->f, b->in[j], out[j]);
    b->count = 0;
}

/* Adds count values to b, converting what b holds first when they do not fit. */
static void batch_add(batch *b, const double *values, size_t count)
{
    if (b->count + count > BATCH)
        batch_convert(b);
    memcpy(b->in + b->count, values, count * sizeof *values);
    b->count += count;
}

/* The float32 values around every step of the format: each finite
 * value, the midpoint to the next, and the floats just either side. */
static void check_float_steps(const format *f)
{
    static batch b;
    b = (batch){.f = f};
    const uint32_t inf = infinity_of(f);
    for (uint32_t p = 0; p < inf; p++) {
        const double v = decode(f, p), next = decode(f, p + 1);
        const float mid = (float)((v + next) / 2);         /* exact: a few more bits */
        const float around[] = {(float)v, mid, nextafterf(mid, 0), nextafterf(mid, INFINITY),
                                -mid, -(float)v};
        for (size_t i = 0; i < sizeof around / sizeof around[0]; i++)
            batch_add(&b, &(double){around[i]}, 1);
    }
    batch_convert(&b);
}

static void test_f16_and_bf16_from_f32_every_step(void **state)
{
    (void)state;
    for_each_format(check_float_steps);
}

/* Random float32 bit patterns, all exponents, NaN and infinity included. */
static void check_random_floats(const format *f)
{
    enum { N = 1 << 16 };
    static float in[N];
    static uint16_t out[N];
    uint64_t seed = 0x9E3779B97F4A7C15u;
    for (int round = 0; round < 16; round++) {
        for (size_t i = 0; i < N; i++) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            uint32_t bits = (uint32_t)(seed >> 32);
            memcpy(&in[i], &bits, sizeof bits);
        }
        convert_f32(f, in, out, N);
        for (size_t i = 0; i < N; i++)
            expect_pattern(f, in[i], out[i]);
    }
}

static void test_f16_and_bf16_from_f32_random(void **state)
{
    (void)state;
    for_each_format(check_random_floats);
}

/* A double a hair off a midpoint rounds by that hair: through float32 it
 * would land on the midpoint and round to even, the wrong way half the
 * time.  Also the ends of the range and the specials. */
static void check_doubles(const format *f)
{
    static batch b;
    b = (batch){.f = f, .wide = true};
    const uint32_t inf = infinity_of(f);
    for (uint32_t p = 0; p <= inf; p += 1 + p / 97) {
        const double v = decode(f, p < inf ? p : inf - 1), next = decode(f, p < inf ? p + 1 : inf);
        const double mid = (v + next) / 2, hair = (next - v) * 0x1p-30;
        const double around[] = {mid + hair, mid - hair, -(mid + hair), mid, v, 1e300, -1e300,
                                 0x1p-1060, -0.0, INFINITY, -INFINITY, NAN};
        batch_add(&b, around, sizeof around / sizeof around[0]);
    }
    batch_convert(&b);
}

static void test_f16_and_bf16_from_f64_round_once(void **state)
{
    (void)state;
    for_each_format(check_doubles);
}

/* Fixed points by hand: 65504 is the largest binary16, 65520 its
 * midpoint to 2^16 (ties to even: inf); 2^-24 the smallest subnormal. */
static void test_f16_by_hand(void **state)
{
    (void)state;
    const float in[] = {1.0f, 65504.0f, 65519.0f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, -2.0f};
    const uint16_t want[] = {0x3C00, 0x7BFF, 0x7BFF, 0x7C00, 0x0001, 0x0000, 0x0001, 0xC000};
    uint16_t out[8];
    attn_store_f16_from_f32(in, out, 8);
    for (size_t i = 0; i < 8; i++)
        assert_int_equal(out[i], want[i]);
}

/* Whether a query of rows [r0, r0 + rows) sees a key of [k0, k0 + keys),
 * query by query: causal hides keys after the query, the window keys
 * W or more before it. */
static bool tile_visible_by_hand(bool causal, size_t window, size_t m, size_t r0, size_t rows,
                                 size_t k0, size_t keys)
{
    for (size_t q = r0; q < r0 + rows; q++)
        for (size_t k = k0; k < k0 + keys && k < m; k++)
            if ((!causal || k <= q) && (window == 0 || k + window > q))
                return true;
    return false;
}

static void test_tile_visible_matches_the_masks(void **state)
{
    (void)state;
    const size_t windows[] = {0, 1, 3, 16, 40};
    for (int causal = 0; causal < 2; causal++)
        for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
            attn_config cfg = {.dims = {.n = 70, .m = 70},
                               .variant = {.causal = causal != 0, .window = windows[w]}};
            for (size_t r0 = 0; r0 < 70; r0 += 7)
                for (size_t k0 = 0; k0 < 70; k0 += 5)
                    for (size_t side = 1; side <= 16; side *= 2) {
                        const size_t rows = 70 - r0 < side ? 70 - r0 : side;
                        const size_t keys = 70 - k0 < side ? 70 - k0 : side;
                        if (attn_tile_visible(&cfg, r0, rows, k0, keys) !=
                            tile_visible_by_hand(causal, windows[w], 70, r0, rows, k0, keys))
                            fail_msg("causal %d window %zu: tile rows %zu+%zu keys %zu+%zu",
                                     causal, windows[w], r0, rows, k0, keys);
                    }
        }
}

/* ------------------------------------------------- chunks and blocks */

/* The bytes of value v stored as `type` (v exact in every type but the
 * roundings of f16 and bf16, by the reference; -inf included). */
static void stored_bytes(attn_store type, double v, unsigned char *out)
{
    switch (type) {
    case ATTN_STORE_F16:
    case ATTN_STORE_BF16: {
        const uint16_t p = reference(type == ATTN_STORE_F16 ? &f16 : &bf16, v);
        memcpy(out, &p, 2);
        return;
    }
    case ATTN_STORE_F32: {
        const float f = (float)v;
        memcpy(out, &f, 4);
        return;
    }
    case ATTN_STORE_F64:
        memcpy(out, &v, 8);
        return;
    case ATTN_STORE_I32: {
        const int32_t i = (int32_t)v;
        memcpy(out, &i, 4);
        return;
    }
    default:
        fail_msg("no such store type %d", (int)type);
    }
}

/* A dataset's values laid out in a larger array: `dims` padded on every
 * axis to whole chunks and one chunk more, row-major, so that any run
 * read past the dataset's end stays in the array and reads SENTINEL,
 * which is no fill.  Element idx of the dataset holds value_at(idx). */
enum { SENTINEL = -3 };

typedef struct padded {
    size_t rank, dims[4], shape[4], stride[4];
    attn_precision precision;
    bool integer;
    void *values;
} padded;

static double value_at(size_t rank, const size_t *dims, const size_t *idx)
{
    size_t flat = 0;
    for (size_t i = 0; i < rank; i++)
        flat = flat * dims[i] + idx[i];
    return (double)flat + 1.0 + (flat % 2 ? 0.5 : 0.0);      /* distinct, none a fill */
}

static padded padded_new(size_t rank, const size_t *dims, const size_t *chunk,
                         attn_precision precision, bool integer)
{
    padded p = {.rank = rank, .precision = precision, .integer = integer};
    size_t total = 1;
    for (size_t i = 0; i < rank; i++) {
        p.dims[i] = dims[i];
        p.shape[i] = (dims[i] + chunk[i] - 1) / chunk[i] * chunk[i] + chunk[i];
        total *= p.shape[i];
    }
    for (size_t i = rank; i-- > 0;)
        p.stride[i] = i + 1 == rank ? 1 : p.stride[i + 1] * p.shape[i + 1];
    const size_t elem = integer ? 4 : attn_precision_size(precision);
    p.values = malloc(total * elem);
    assert_non_null(p.values);
    for (size_t flat = 0; flat < total; flat++) {
        size_t idx[4], rest = flat;
        bool inside = true;
        for (size_t i = rank; i-- > 0;) {
            idx[i] = rest % p.shape[i];
            rest /= p.shape[i];
            inside = inside && idx[i] < dims[i];
        }
        const double v = inside ? value_at(rank, dims, idx) : SENTINEL;
        if (integer)
            ((int32_t *)p.values)[flat] = (int32_t)(v * 2);
        else if (precision == ATTN_F64)
            ((double *)p.values)[flat] = v;
        else
            ((float *)p.values)[flat] = (float)v;
    }
    return p;
}

/* The value the block reads at idx of the dataset (int32 doubled). */
static double padded_value(const padded *p, const size_t *idx)
{
    const double v = value_at(p->rank, p->dims, idx);
    return p->integer ? v * 2 : v;
}

/* The block of p for the region [first, first + count). */
static attn_block padded_block(const padded *p, const size_t *first, const size_t *count)
{
    attn_block b = {.precision = p->precision, .integer = p->integer};
    size_t at = 0;
    for (size_t i = 0; i < p->rank; i++) {
        b.first[i] = first[i];
        b.count[i] = count[i];
        b.stride[i] = p->stride[i];
        at += first[i] * p->stride[i];
    }
    const size_t elem = p->integer ? 4 : attn_precision_size(p->precision);
    b.base = (const char *)p->values + at * elem;
    return b;
}

/* "(a, b, ...)" of the first rank values of v, in out (64 bytes). */
static const char *tuple(char *out, size_t rank, const size_t *v)
{
    int at = snprintf(out, 64, "(");
    for (size_t i = 0; i < rank && at > 0 && at < 64; i++)
        at += snprintf(out + at, (size_t)(64 - at), i ? ", %zu" : "%zu", v[i]);
    if (at > 0 && at < 63)
        snprintf(out + at, (size_t)(64 - at), ")");
    return out;
}

/* One case of the chunk tests: a dataset, its chunks, how it is stored. */
typedef struct chunk_case {
    size_t rank, dims[4], chunk[4];
    attn_store type;
    attn_precision precision;
    bool integer;
    double fill;
} chunk_case;

static const chunk_case chunk_cases[] = {
    /* rank 2: rows and keys past the end (5 of 8 rows, 7 of 8 keys) */
    {2, {5, 7}, {4, 4}, ATTN_STORE_F32, ATTN_F32, false, -INFINITY},
    /* a map (H, n, m), one head per chunk, an edge row just past a tile */
    {3, {2, 5, 7}, {1, 4, 4}, ATTN_STORE_F16, ATTN_F32, false, -INFINITY},
    {3, {2, 5, 7}, {1, 4, 4}, ATTN_STORE_BF16, ATTN_F32, false, 0.0},
    /* (B, H, n, m), two heads a chunk of three */
    {4, {2, 3, 5, 6}, {1, 2, 4, 4}, ATTN_STORE_F64, ATTN_F64, false, -INFINITY},
    {4, {2, 3, 5, 6}, {1, 2, 4, 4}, ATTN_STORE_F16, ATTN_F64, false, 0.0},
    /* (B, n, D) of int32 */
    {3, {3, 5, 3}, {2, 2, 2}, ATTN_STORE_I32, ATTN_F32, true, 0.0},
};

/* Bytes of one chunk of c in its stored type. */
static size_t case_chunk_bytes(const chunk_case *c)
{
    size_t bytes = attn_store_size(c->type);
    for (size_t i = 0; i < c->rank; i++)
        bytes *= c->chunk[i];
    return bytes;
}

/* The chunk of job unpacked: its bytes as stored, or inflated and
 * unshuffled when compressed, into out (bytes long). */
static void unpack_chunk(const attn_chunk_job *job, size_t bytes, size_t elem, bool compressed,
                         unsigned char *out)
{
    if (!compressed) {
        assert_int_equal(job->bytes, bytes);
        memcpy(out, job->data, bytes);
        return;
    }
    unsigned char *shuffled = malloc(bytes);
    assert_non_null(shuffled);
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    assert_non_null(d);
    size_t got = 0;
    const enum libdeflate_result r =
        libdeflate_zlib_decompress(d, job->data, job->bytes, shuffled, bytes, &got);
    libdeflate_free_decompressor(d);
    if (r != LIBDEFLATE_SUCCESS || got != bytes) {
        char at[64];
        fail_msg("chunk at %s: %zu packed bytes inflate with result %d to %zu bytes, expected %zu",
                 tuple(at, job->stored->rank, job->offset), job->bytes, (int)r, got, bytes);
    }
    const size_t count = bytes / elem;
    for (size_t i = 0; i < count; i++)                 /* byte j of element i at j * count + i */
        for (size_t j = 0; j < elem; j++)
            out[i * elem + j] = shuffled[j * count + i];
    free(shuffled);
}

/* Lists and packs the chunks of block b of c (compressed at `level`, 0:
 * not), and checks each one element by element: the block's value where
 * inside the dataset, the fill past its end.  Returns the chunks packed. */
static size_t check_packed_block(const chunk_case *c, const padded *p, const attn_block *b,
                                 int level)
{
    attn_stored s = {.rank = c->rank, .type = c->type, .compress = level, .fill = c->fill,
                     .raw = true};
    memcpy(s.dims, c->dims, sizeof c->dims);
    memcpy(s.chunk, c->chunk, sizeof c->chunk);
    const size_t bytes = case_chunk_bytes(c), elem = attn_store_size(c->type);
    size_t room_bytes = 0;
    const size_t count = attn_store_list(&s, b, 0, NULL, NULL, &room_bytes, NULL);
    assert_true(count > 0);
    attn_chunk_job *jobs = calloc(count, sizeof *jobs);
    char *room = malloc(room_bytes), *carve = room;
    unsigned char *chunk = malloc(bytes);
    assert_true(jobs != NULL && room != NULL && chunk != NULL);
    size_t again = 0;
    assert_int_equal(attn_store_list(&s, b, 0, NULL, &carve, &again, jobs), count);
    attn_packer *packer = attn_packer_new(2, bytes, level);
    assert_non_null(packer);
    attn_store_pack(jobs, count, packer);
    attn_packer_free(packer);

    unsigned char fill[8], want[8];
    stored_bytes(c->type, c->fill, fill);
    for (size_t j = 0; j < count; j++) {
        const attn_chunk_job *job = &jobs[j];
        unpack_chunk(job, bytes, elem, level > 0, chunk);
        for (size_t e = 0; e < bytes / elem; e++) {
            size_t at[4] = {0}, idx[4] = {0}, rest = e;
            bool inside = true;
            for (size_t i = c->rank; i-- > 0;) {
                at[i] = rest % c->chunk[i];
                rest /= c->chunk[i];
                idx[i] = job->offset[i] + at[i];
                inside = inside && idx[i] < c->dims[i];
            }
            if (inside)
                stored_bytes(c->type, padded_value(p, idx), want);
            else
                memcpy(want, fill, elem);
            if (memcmp(chunk + e * elem, want, elem) != 0) {
                char where[4][64];
                fail_msg("%s, compress %d, block first %s: chunk at %s, element %s %s the dataset "
                         "%s: stored bytes differ from %s", attn_store_name(c->type), level,
                         tuple(where[0], c->rank, b->first), tuple(where[1], c->rank, job->offset),
                         tuple(where[2], c->rank, idx), inside ? "inside" : "past the end of",
                         tuple(where[3], c->rank, c->dims), inside ? "the value" : "the fill");
            }
        }
    }
    free(chunk);
    free(room);
    free(jobs);
    return count;
}

/* store.h: a chunk is whole even past the dataset's end, the padding is
 * the fill -- for blocks of the whole dataset and for blocks of rows (the
 * query axis, rank - 2) one chunk of rows high, the last one partial, as
 * the pipeline writes them; the runs past the end of the rows in a block
 * of the last rows would read rows that are not the dataset's. */
static void test_pack_pads_edge_chunks_with_the_fill(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof chunk_cases / sizeof chunk_cases[0]; k++) {
        const chunk_case *c = &chunk_cases[k];
        padded p = padded_new(c->rank, c->dims, c->chunk, c->precision, c->integer);
        const size_t q = c->rank - 2;
        for (int level = 0; level <= 1; level++) {
            const size_t zero[4] = {0};
            attn_block whole = padded_block(&p, zero, c->dims);
            size_t chunks = check_packed_block(c, &p, &whole, level), total = 1;
            for (size_t i = 0; i < c->rank; i++)
                total *= (c->dims[i] + c->chunk[i] - 1) / c->chunk[i];
            assert_int_equal(chunks, total);
            for (size_t row = 0; row < c->dims[q]; row += c->chunk[q]) {
                size_t first[4] = {0}, count[4];
                memcpy(count, c->dims, sizeof count);
                first[q] = row;
                count[q] = c->dims[q] - row < c->chunk[q] ? c->dims[q] - row : c->chunk[q];
                attn_block rows = padded_block(&p, first, count);
                check_packed_block(c, &p, &rows, level);
            }
        }
        free(p.values);
    }
}

/* A tiny PRNG (splitmix64) for incompressible data. */
static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* store.h: a chunk's room holds the compressor's worst case.  Random
 * int32 values do not compress: deflated at any level their zlib stream
 * is longer than the chunk (stored blocks and framing), and must still
 * come out whole. */
static void test_pack_incompressible_chunks_fit_their_room(void **state)
{
    (void)state;
    enum { ROWS = 48, COLS = 64 };
    static int32_t values[ROWS][COLS];
    uint64_t seed = 20260101;
    for (size_t i = 0; i < ROWS; i++)
        for (size_t j = 0; j < COLS; j++)
            values[i][j] = (int32_t)(uint32_t)splitmix(&seed);
    const size_t bytes = sizeof values;
    unsigned char *chunk = malloc(bytes);
    assert_non_null(chunk);
    for (int level = 1; level <= 9; level++) {
        attn_stored s = {.rank = 2, .dims = {ROWS, COLS}, .chunk = {ROWS, COLS},
                         .type = ATTN_STORE_I32, .compress = level, .raw = true};
        const attn_block b = {.base = values, .integer = true, .count = {ROWS, COLS},
                              .stride = {COLS, 1}};
        size_t room_bytes = 0;
        assert_int_equal(attn_store_list(&s, &b, 0, NULL, NULL, &room_bytes, NULL), 1);
        char *room = malloc(room_bytes), *carve = room;
        assert_non_null(room);
        attn_chunk_job job;
        size_t again = 0;
        assert_int_equal(attn_store_list(&s, &b, 0, NULL, &carve, &again, &job), 1);
        attn_packer *packer = attn_packer_new(1, bytes, level);
        assert_non_null(packer);
        attn_store_pack(&job, 1, packer);
        attn_packer_free(packer);
        if (job.bytes <= bytes)
            fail_msg("level %d: %zu random bytes deflate to %zu: the case is not incompressible",
                     level, bytes, job.bytes);
        assert_true(job.bytes <= room_bytes);
        unpack_chunk(&job, bytes, 4, true, chunk);
        if (memcmp(chunk, values, bytes) != 0)
            fail_msg("level %d: the chunk inflates to other values", level);
        free(room);
    }
    free(chunk);
}

/* store.h: the room of a chunk is its bytes, plus the compressor's worst
 * case (libdeflate's own bound) when compressed here (raw) -- and only
 * then: lib/plan/steps.c plans the memory of uncompressed chunks at their
 * bytes, which the room may exceed by its alignment (64) at most. */
static void test_slot_bytes_by_compression(void **state)
{
    (void)state;
    const size_t shapes[][2] = {{1, 1}, {16, 16}, {48, 64}, {256, 256}, {100, 333}, {1024, 1024}};
    const attn_store types[] = {ATTN_STORE_F16, ATTN_STORE_F32, ATTN_STORE_F64, ATTN_STORE_I32};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
            for (int level = 0; level <= 9; level++)
                for (int raw = 0; raw <= 1; raw++) {
                    const attn_stored s = {.rank = 2, .dims = {shapes[k][0], shapes[k][1]},
                                           .chunk = {shapes[k][0], shapes[k][1]},
                                           .type = types[t], .compress = level, .raw = raw != 0};
                    const size_t bytes = shapes[k][0] * shapes[k][1] * attn_store_size(types[t]);
                    const size_t slot = attn_store_slot_bytes(&s);
                    const size_t least = level > 0 && raw ? libdeflate_zlib_compress_bound(NULL, bytes)
                                                          : bytes;
                    if (slot < least || (!(level > 0 && raw) && slot >= bytes + 64))
                        fail_msg("%zu x %zu %s, compress %d, raw %d: room %zu bytes for a chunk of "
                                 "%zu, expected %s %zu", shapes[k][0], shapes[k][1],
                                 attn_store_name(types[t]), level, raw, slot, bytes,
                                 slot < least ? "at least" : "below", slot < least ? least : bytes + 64);
                }
}

/* attn_store_gather_block: the block row-major (count[0], ...) in the
 * stored type, whatever its first[] (chunk boundaries or not). */
static void test_gather_block_row_major(void **state)
{
    (void)state;
    static const struct {
        chunk_case c;
        size_t first[4], count[4];
    } cases[] = {
        {{2, {9, 11}, {4, 4}, ATTN_STORE_F32, ATTN_F32, false, 0.0}, {2, 3}, {5, 6}},
        {{3, {3, 9, 11}, {1, 4, 4}, ATTN_STORE_F16, ATTN_F32, false, 0.0}, {1, 2, 3}, {2, 5, 6}},
        {{3, {3, 9, 11}, {1, 4, 4}, ATTN_STORE_BF16, ATTN_F64, false, 0.0}, {0, 4, 0}, {3, 5, 11}},
        {{4, {2, 3, 9, 11}, {1, 1, 4, 4}, ATTN_STORE_F64, ATTN_F64, false, 0.0}, {1, 0, 2, 3},
         {1, 3, 5, 6}},
        {{3, {4, 7, 5}, {2, 2, 2}, ATTN_STORE_I32, ATTN_F32, true, 0.0}, {1, 3, 1}, {3, 4, 3}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const chunk_case *c = &cases[k].c;
        padded p = padded_new(c->rank, c->dims, c->chunk, c->precision, c->integer);
        attn_stored s = {.rank = c->rank, .type = c->type, .fill = c->fill};
        memcpy(s.dims, c->dims, sizeof c->dims);
        memcpy(s.chunk, c->chunk, sizeof c->chunk);
        const attn_block b = padded_block(&p, cases[k].first, cases[k].count);
        const size_t elem = attn_store_size(c->type), bytes = attn_store_block_bytes(&s, &b);
        size_t n = 1;
        for (size_t i = 0; i < c->rank; i++)
            n *= cases[k].count[i];
        assert_int_equal(bytes, n * elem);
        unsigned char *out = malloc(bytes), want[8];
        assert_non_null(out);
        memset(out, 0xA5, bytes);
        attn_store_gather_block(&s, &b, NULL, out);
        for (size_t e = 0; e < n; e++) {
            size_t idx[4] = {0}, rest = e;
            for (size_t i = c->rank; i-- > 0;) {
                idx[i] = cases[k].first[i] + rest % cases[k].count[i];
                rest /= cases[k].count[i];
            }
            stored_bytes(c->type, padded_value(&p, idx), want);
            if (memcmp(out + e * elem, want, elem) != 0)
                fail_msg("rank %zu %s, block first (%zu, %zu, %zu, %zu) count (%zu, %zu, %zu, %zu): "
                         "element %zu (dataset index %zu, %zu, %zu, %zu) differs",
                         c->rank, attn_store_name(c->type), cases[k].first[0], cases[k].first[1],
                         cases[k].first[2], cases[k].first[3], cases[k].count[0], cases[k].count[1],
                         cases[k].count[2], cases[k].count[3], e, idx[0], idx[1], idx[2], idx[3]);
        }
        free(out);
        free(p.values);
    }
}

/* attn_store_gather_block of a map with hidden tiles (skip_hidden, a
 * causal cfg): the tiles no query sees hold the fill, the others the
 * values -- tile by tile as the chunks are, the last ones partial. */
static void test_gather_block_hidden_tiles_hold_the_fill(void **state)
{
    (void)state;
    const chunk_case c = {3, {2, 9, 11}, {1, 4, 4}, ATTN_STORE_F32, ATTN_F32, false, -INFINITY};
    padded p = padded_new(c.rank, c.dims, c.chunk, c.precision, c.integer);
    const attn_config cfg = {.dims = {.n = 9, .m = 11}, .variant = {.causal = true}};
    const attn_stored s = {.rank = 3, .dims = {2, 9, 11}, .chunk = {1, 4, 4},
                           .type = ATTN_STORE_F32, .map = true, .skip_hidden = true,
                           .fill = -INFINITY};
    for (size_t row = 0; row < 9; row += 4) {
        const size_t rows = 9 - row < 4 ? 9 - row : 4;
        const size_t first[4] = {0, row, 0}, count[4] = {2, rows, 11};
        const attn_block b = padded_block(&p, first, count);
        float out[2 * 4 * 11];                 /* (2, rows, 11) */
        memset(out, 0xA5, sizeof out);
        attn_store_gather_block(&s, &b, &cfg, out);
        for (size_t h = 0; h < 2; h++)
            for (size_t r = 0; r < rows; r++)
                for (size_t key = 0; key < 11; key++) {
                    const size_t k0 = key - key % 4, keys = 11 - k0 < 4 ? 11 - k0 : 4;
                    const size_t idx[4] = {h, row + r, key};
                    const bool seen = tile_visible_by_hand(true, 0, 11, row, rows, k0, keys);
                    const float want = seen ? (float)padded_value(&p, idx) : -INFINITY;
                    const float got = out[(h * rows + r) * 11 + key];
                    if (memcmp(&got, &want, sizeof want) != 0)
                        fail_msg("head %zu row %zu key %zu (tile %s): %g, expected %g", h, row + r,
                                 key, seen ? "seen" : "hidden", got, want);
                }
    }
    free(p.values);
}

/* ---- the packer's compressors -------------------------------------------- */

/* Stand-ins for libdeflate's allocator and its free: the real ones
 * (dlsym RTLD_NEXT), counted. */
static int compressors_made, compressors_freed;

struct libdeflate_compressor *libdeflate_alloc_compressor(int level)
{
    struct libdeflate_compressor *(*real)(int);
    void *symbol = dlsym(RTLD_NEXT, "libdeflate_alloc_compressor");
    assert_non_null(symbol);
    memcpy(&real, &symbol, sizeof real);
    compressors_made++;
    return real(level);
}

void libdeflate_free_compressor(struct libdeflate_compressor *compressor)
{
    void (*real)(struct libdeflate_compressor *);
    void *symbol = dlsym(RTLD_NEXT, "libdeflate_free_compressor");
    assert_non_null(symbol);
    memcpy(&real, &symbol, sizeof real);
    compressors_freed += compressor != NULL;
    real(compressor);
}

/* attn_packer_new makes one compressor per thread when it compresses, none
 * at level 0; attn_packer_free frees every one it made. */
static void test_packer_one_compressor_per_thread(void **state)
{
    (void)state;
    for (size_t threads = 1; threads <= 4; threads++) {
        compressors_made = compressors_freed = 0;
        attn_packer *packer = attn_packer_new(threads, 4096, 1);
        assert_non_null(packer);
        assert_int_equal(compressors_made, threads);
        attn_packer_free(packer);
        assert_int_equal(compressors_freed, threads);
    }
    compressors_made = 0;
    attn_packer *plain = attn_packer_new(2, 4096, 0);
    assert_non_null(plain);
    attn_packer_free(plain);
    assert_int_equal(compressors_made, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_and_bf16_from_f32_every_step),
        cmocka_unit_test(test_packer_one_compressor_per_thread),
        cmocka_unit_test(test_f16_and_bf16_from_f32_random),
        cmocka_unit_test(test_f16_and_bf16_from_f64_round_once),
        cmocka_unit_test(test_f16_by_hand),
        cmocka_unit_test(test_tile_visible_matches_the_masks),
        cmocka_unit_test(test_pack_pads_edge_chunks_with_the_fill),
        cmocka_unit_test(test_pack_incompressible_chunks_fit_their_room),
        cmocka_unit_test(test_slot_bytes_by_compression),
        cmocka_unit_test(test_gather_block_row_major),
        cmocka_unit_test(test_gather_block_hidden_tiles_hold_the_fill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
