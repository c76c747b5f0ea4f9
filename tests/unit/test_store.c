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
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_and_bf16_from_f32_every_step),
        cmocka_unit_test(test_f16_and_bf16_from_f32_random),
        cmocka_unit_test(test_f16_and_bf16_from_f64_round_once),
        cmocka_unit_test(test_f16_by_hand),
        cmocka_unit_test(test_tile_visible_matches_the_masks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
