/*
 * test_variants.c - unit tests for the model-family variants of attn_math:
 * rotary embeddings, ALiBi slopes, the per-head RMSNorm, and through
 * attn_forward the sliding window, the logit soft cap, grouped K/V heads
 * (GQA), ALiBi, an additive attention bias, the nn.Linear weight layout
 * and fused weights with q|k|v interleaved per head.
 *
 * Legend: c batch items in a slice, H heads, G K/V heads, n queries,
 *         m keys, D d_model, dk = d_k, dv = d_v.  Every buffer is
 *         row-major.
 *
 * Expected values come from hand computation or from the plain double
 * loop-nests below (reference_*), which share no code with lib/.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "attn_math.h"
#include "test_support.h"

#define F32_TOLERANCE 2e-6    /* one float rounding on values of order 1  */
#define F64_TOLERANCE 1e-13   /* one double rounding on values of order 1 */
#define F64_FORWARD_TOLERANCE 1e-12

/* ---- rotary position embeddings ---------------------------------------- */

/* (x1, x2) turned by angle a: (x1 cos a - x2 sin a, x2 cos a + x1 sin a). */
static void rotate_pair(double x1, double x2, double angle, double *y1, double *y2)
{
    *y1 = x1 * cos(angle) - x2 * sin(angle);
    *y2 = x2 * cos(angle) + x1 * sin(angle);
}

/*
 * One head's d features x turned in place at position p, straight from the
 * definitions: pair i (i < R/2) turns by p * theta^(-2i/R); NeoX pairs
 * feature i with i + R/2 (rotate_half), GPT-J feature 2i with 2i + 1
 * (rotate_every_two); features R .. d-1 stay.
 */
static void reference_rope_head(double *x, double p, double theta, size_t R,
                                attn_rope_style style)
{
    for (size_t i = 0; i < R / 2; i++) {
        size_t a = style == ATTN_ROPE_NEOX ? i : 2 * i;
        size_t b = style == ATTN_ROPE_NEOX ? i + R / 2 : 2 * i + 1;
        double angle = p * pow(theta, -2.0 * (double)i / (double)R);
        double y1, y2;
        rotate_pair(x[a], x[b], angle, &y1, &y2);
        x[a] = y1;
        x[b] = y2;
    }
}

/* d = 2, one head: the pair turns by p * theta^0 = p, whatever theta. */
static void test_rope_d2_turns_by_position(void **state)
{
    (void)state;
    const attn_rope rope = {.theta = 10000, .dim = 2, .style = ATTN_ROPE_NEOX};
    /* rows (4, 2), positions 0 .. 3 (pos NULL, first 0) */
    double x[4][2] = {{3, 4}, {1, 0}, {3, 4}, {-2, 0.5}};
    const double in[4][2] = {{3, 4}, {1, 0}, {3, 4}, {-2, 0.5}};
    attn_rope_rows_f64(&rope, &x[0][0], 2, 4, 1, 2, NULL, 0);
    /* position 0: the identity, bit for bit */
    assert_true(x[0][0] == 3.0 && x[0][1] == 4.0);
    /* position 1, (1, 0) -> (cos 1, sin 1), by hand */
    assert_near(x[1][0], 0.54030230586813972, F64_TOLERANCE);
    assert_near(x[1][1], 0.84147098480789651, F64_TOLERANCE);
    for (size_t r = 1; r < 4; r++) {
        double y1, y2;
        rotate_pair(in[r][0], in[r][1], (double)r, &y1, &y2);
        assert_near(x[r][0], y1, F64_TOLERANCE);
        assert_near(x[r][1], y2, F64_TOLERANCE);
    }
    /* position 2, (3, 4): (3 cos 2 - 4 sin 2, 4 cos 2 + 3 sin 2) */
    assert_near(x[2][0], 3 * -0.41614683654714241 - 4 * 0.90929742682568170, F64_TOLERANCE);
    assert_near(x[2][1], 4 * -0.41614683654714241 + 3 * 0.90929742682568170, F64_TOLERANCE);

    /* positions from the pos argument (0, 7, 100, -3), then from first */
    const int64_t pos[4] = {0, 7, 100, -3};
    double z[4][2] = {{3, 4}, {3, 4}, {3, 4}, {3, 4}};
    attn_rope_rows_f64(&rope, &z[0][0], 2, 4, 1, 2, pos, 99);   /* first ignored */
    assert_true(z[0][0] == 3.0 && z[0][1] == 4.0);
    for (size_t r = 1; r < 4; r++) {
        double y1, y2;
        rotate_pair(3, 4, (double)pos[r], &y1, &y2);
        assert_near(z[r][0], y1, F64_TOLERANCE);
        assert_near(z[r][1], y2, F64_TOLERANCE);
    }
    double w[2][2] = {{3, 4}, {3, 4}};
    attn_rope_rows_f64(&rope, &w[0][0], 2, 2, 1, 2, NULL, 5);   /* positions 5, 6 */
    for (size_t r = 0; r < 2; r++) {
        double y1, y2;
        rotate_pair(3, 4, 5.0 + (double)r, &y1, &y2);
        assert_near(w[r][0], y1, F64_TOLERANCE);
        assert_near(w[r][1], y2, F64_TOLERANCE);
    }

    /* float: the same rotations, rounded once */
    float f[3][2] = {{3, 4}, {3, 4}, {3, 4}};
    const int64_t fpos[3] = {0, 1, 7};
    attn_rope_rows_f32(&rope, &f[0][0], 2, 3, 1, 2, fpos, 0);
    assert_true(f[0][0] == 3.0f && f[0][1] == 4.0f);
    for (size_t r = 1; r < 3; r++) {
        double y1, y2;
        rotate_pair(3, 4, (double)fpos[r], &y1, &y2);
        assert_near(f[r][0], y1, 5 * F32_TOLERANCE);
        assert_near(f[r][1], y2, 5 * F32_TOLERANCE);
    }
}

/* d = dim = 4: two pairs, angles p * 1 and p * 10000^(-2/4) = p / 100. */
static void test_rope_d4_neox_and_gptj_pairs(void **state)
{
    (void)state;
    const double p = 3, slow = p / 100;   /* 10000^(-1/2) = 0.01, by hand */
    const int64_t pos[1] = {3};
    double neox[4] = {1, 2, 3, 4}, gptj[4] = {1, 2, 3, 4};
    const attn_rope rope_neox = {.theta = 10000, .dim = 4, .style = ATTN_ROPE_NEOX};
    const attn_rope rope_gptj = {.theta = 10000, .dim = 4, .style = ATTN_ROPE_GPTJ};
    attn_rope_rows_f64(&rope_neox, neox, 4, 1, 1, 4, pos, 0);
    attn_rope_rows_f64(&rope_gptj, gptj, 4, 1, 1, 4, pos, 0);

    /* NeoX: (x0, x2) by p, (x1, x3) by p/100 */
    assert_near(neox[0], 1 * cos(p) - 3 * sin(p), F64_TOLERANCE);
    assert_near(neox[2], 3 * cos(p) + 1 * sin(p), F64_TOLERANCE);
    assert_near(neox[1], 2 * cos(slow) - 4 * sin(slow), F64_TOLERANCE);
    assert_near(neox[3], 4 * cos(slow) + 2 * sin(slow), F64_TOLERANCE);
    /* GPT-J: (x0, x1) by p, (x2, x3) by p/100 */
    assert_near(gptj[0], 1 * cos(p) - 2 * sin(p), F64_TOLERANCE);
    assert_near(gptj[1], 2 * cos(p) + 1 * sin(p), F64_TOLERANCE);
    assert_near(gptj[2], 3 * cos(slow) - 4 * sin(slow), F64_TOLERANCE);
    assert_near(gptj[3], 4 * cos(slow) + 3 * sin(slow), F64_TOLERANCE);

    /* another base: theta 100, angles p and p * 100^(-1/2) = p / 10 */
    double other[4] = {1, 2, 3, 4};
    const attn_rope rope_100 = {.theta = 100, .dim = 4, .style = ATTN_ROPE_NEOX};
    attn_rope_rows_f64(&rope_100, other, 4, 1, 1, 4, pos, 0);
    assert_near(other[1], 2 * cos(p / 10) - 4 * sin(p / 10), F64_TOLERANCE);
    assert_near(other[3], 4 * cos(p / 10) + 2 * sin(p / 10), F64_TOLERANCE);

    /* float, GPT-J */
    float g32[4] = {1, 2, 3, 4};
    attn_rope_rows_f32(&rope_gptj, g32, 4, 1, 1, 4, pos, 0);
    for (size_t j = 0; j < 4; j++)
        assert_near(g32[j], gptj[j], 5 * F32_TOLERANCE);
}

/* Partial rotary: only the first R features of a head turn. */
static void test_rope_partial_leaves_the_rest(void **state)
{
    (void)state;
    for (int style = 0; style < 2; style++) {
        const attn_rope_style st = style == 0 ? ATTN_ROPE_NEOX : ATTN_ROPE_GPTJ;
        /* R = 2 of d_k = 4: one pair (0, 1) by p, features 2 and 3 stay */
        const attn_rope rope = {.theta = 10000, .dim = 2, .style = st};
        double x[3][4] = {{1, 2, 3, 4}, {1, 2, 3, 4}, {-5, 0.25, 7, -8}};
        attn_rope_rows_f64(&rope, &x[0][0], 4, 3, 1, 4, NULL, 0);
        assert_true(x[0][0] == 1 && x[0][1] == 2);
        assert_near(x[1][0], cos(1.0) - 2 * sin(1.0), F64_TOLERANCE);
        assert_near(x[1][1], 2 * cos(1.0) + sin(1.0), F64_TOLERANCE);
        assert_near(x[2][0], -5 * cos(2.0) - 0.25 * sin(2.0), F64_TOLERANCE);
        assert_near(x[2][1], 0.25 * cos(2.0) - 5 * sin(2.0), F64_TOLERANCE);
        for (size_t r = 0; r < 2; r++)
            assert_true(x[r][2] == 3 && x[r][3] == 4);
        assert_true(x[2][2] == 7 && x[2][3] == -8);

        /* R = 4 of d_k = 6: the pairs of R = 4, features 4 and 5 stay */
        const attn_rope rope4 = {.theta = 10000, .dim = 4, .style = st};
        double y[6] = {1, 2, 3, 4, 5, 6}, expected[6] = {1, 2, 3, 4, 5, 6};
        const int64_t pos[1] = {9};
        attn_rope_rows_f64(&rope4, y, 6, 1, 1, 6, pos, 0);
        reference_rope_head(expected, 9, 10000, 4, st);
        for (size_t j = 0; j < 4; j++)
            assert_near(y[j], expected[j], F64_TOLERANCE);
        assert_true(y[4] == 5 && y[5] == 6);
        assert_true(expected[0] != 1);              /* something did turn */
    }
}

/* Heads hs > d apart (q of [q|k|v] per head, hs = 3d), rows ld apart with
 * padding: each head's first d features turn, nothing else changes. */
static void test_rope_heads_with_gaps(void **state)
{
    (void)state;
    enum { ROWS = 3, HEADS = 2, DK = 4, HS = 3 * DK, LD = HEADS * HS + 2 };
    for (int style = 0; style < 2; style++) {
        const attn_rope_style st = style == 0 ? ATTN_ROPE_NEOX : ATTN_ROPE_GPTJ;
        const attn_rope rope = {.theta = 500, .dim = DK, .style = st};
        const int64_t pos[ROWS] = {4, 0, 11};
        double x[ROWS * LD], in[ROWS * LD];
        float x32[ROWS * LD];
        for (size_t i = 0; i < ROWS * LD; i++) {
            in[i] = x[i] = sin(0.7 * (double)i + 0.3) * 2;
            x32[i] = (float)in[i];
        }
        attn_rope_rows_f64(&rope, x, LD, ROWS, HEADS, HS, pos, 0);
        attn_rope_rows_f32(&rope, x32, LD, ROWS, HEADS, HS, pos, 0);
        for (size_t r = 0; r < ROWS; r++) {
            for (size_t h = 0; h < HEADS; h++) {
                double head[DK];
                memcpy(head, in + r * LD + h * HS, sizeof head);
                reference_rope_head(head, (double)pos[r], 500, DK, st);
                for (size_t j = 0; j < DK; j++) {
                    assert_near(x[r * LD + h * HS + j], head[j], F64_TOLERANCE);
                    assert_near(x32[r * LD + h * HS + j], head[j], 10 * F32_TOLERANCE);
                }
            }
            /* the gaps (k and v of each head) and the row padding */
            for (size_t i = 0; i < LD; i++) {
                bool in_head = (i % HS) < DK && i < HEADS * HS;
                if (!in_head) {
                    assert_true(x[r * LD + i] == in[r * LD + i]);
                    assert_true(x32[r * LD + i] == (float)in[r * LD + i]);
                }
            }
        }
        /* row 0 (position 4) did turn, in both heads */
        assert_true(fabs(x[0] - in[0]) > 1e-3 && fabs(x[HS] - in[HS]) > 1e-3);
    }
}

/* A rotation keeps the length of each pair it turns. */
static void test_rope_keeps_pair_lengths(void **state)
{
    (void)state;
    enum { ROWS = 5, DK = 8 };
    const int64_t pos[ROWS] = {1, 17, 1000, 123456, 3};
    for (int style = 0; style < 2; style++) {
        const attn_rope_style st = style == 0 ? ATTN_ROPE_NEOX : ATTN_ROPE_GPTJ;
        const attn_rope rope = {.theta = 10000, .dim = DK, .style = st};
        double x[ROWS * DK], in[ROWS * DK];
        for (size_t i = 0; i < ROWS * DK; i++)
            in[i] = x[i] = cos(1.3 * (double)i) * 3 - 0.5;
        attn_rope_rows_f64(&rope, x, DK, ROWS, 1, DK, pos, 0);
        double moved = 0;
        for (size_t r = 0; r < ROWS; r++)
            for (size_t i = 0; i < DK / 2; i++) {
                size_t a = st == ATTN_ROPE_NEOX ? i : 2 * i;
                size_t b = st == ATTN_ROPE_NEOX ? i + DK / 2 : 2 * i + 1;
                const double *u = in + r * DK, *v = x + r * DK;
                assert_near(hypot(v[a], v[b]), hypot(u[a], u[b]), F64_TOLERANCE);
                moved += fabs(v[a] - u[a]) + fabs(v[b] - u[b]);
            }
        assert_true(moved > 1.0);
    }
}

/* ---- ALiBi slopes ------------------------------------------------------- */

/*
 * BLOOM's build_alibi_tensor (transformers, modeling_bloom.py):
 *
 *     P = 2 ** floor(log2(H))                         # closest power of 2
 *     base = 2 ** (-(2 ** -(log2(P) - 3)))            # = 2^(-8/P)
 *     slopes = base ** [1, 2, ..., P]
 *     if P != H:
 *         extra_base = 2 ** (-(2 ** -(log2(2P) - 3)))  # = 2^(-4/P)
 *         r = min(P, H - P)
 *         slopes += extra_base ** [1, 3, ..., 2r - 1]
 *
 * By hand:
 *   H = 1:  P = 1, base 2^-8:                  2^-8
 *   H = 2:  P = 2, base 2^-4:                  2^-4, 2^-8
 *   H = 3:  P = 2, base 2^-4, extra 2^-2:      2^-4, 2^-8, then 2^-2
 *   H = 4:  P = 4, base 2^-2:                  2^-2, 2^-4, 2^-6, 2^-8
 *   H = 6:  P = 4, base 2^-2, extra 2^-1, r = 2:
 *           2^-2, 2^-4, 2^-6, 2^-8, then 2^-1, 2^-3
 *   H = 8:  P = 8, base 2^-1:                  2^-1, 2^-2, ..., 2^-8
 *   H = 12: P = 8, base 2^-1, extra 2^-0.5, r = 4:
 *           2^-1 .. 2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5
 *   H = 16: P = 16, base 2^-0.5:               2^-0.5, 2^-1, ..., 2^-8
 */
#define SQRT1_2 0.70710678118654752440   /* 2^-0.5 */

static void check_slopes(size_t heads, const double *expected)
{
    double slopes[16];
    for (size_t h = 0; h < 16; h++)
        slopes[h] = -1;                               /* must be overwritten */
    attn_alibi_slopes(heads, slopes);
    for (size_t h = 0; h < heads; h++) {
        if (fabs(slopes[h] - expected[h]) > 1e-16 * 4)
            fail_msg("H = %zu: slope %zu is %.17g, expected %.17g", heads, h, slopes[h],
                     expected[h]);
    }
    for (size_t h = heads; h < 16; h++)
        assert_true(slopes[h] == -1);                 /* nothing past H */
}

static void test_alibi_slopes_as_bloom(void **state)
{
    (void)state;
    const double h1[1] = {0x1p-8};
    const double h2[2] = {0x1p-4, 0x1p-8};
    const double h3[3] = {0x1p-4, 0x1p-8, 0x1p-2};
    const double h4[4] = {0x1p-2, 0x1p-4, 0x1p-6, 0x1p-8};
    const double h6[6] = {0x1p-2, 0x1p-4, 0x1p-6, 0x1p-8, 0x1p-1, 0x1p-3};
    const double h8[8] = {0x1p-1, 0x1p-2, 0x1p-3, 0x1p-4, 0x1p-5, 0x1p-6, 0x1p-7, 0x1p-8};
    const double h12[12] = {0x1p-1, 0x1p-2, 0x1p-3, 0x1p-4, 0x1p-5, 0x1p-6, 0x1p-7, 0x1p-8,
                            SQRT1_2, SQRT1_2 / 2, SQRT1_2 / 4, SQRT1_2 / 8};
    double h16[16];
    for (size_t k = 1; k <= 16; k++)   /* 2^(-k/2): odd k are 2^-0.5 / 2^((k-1)/2) */
        h16[k - 1] = k % 2 == 0 ? ldexp(1.0, -(int)(k / 2)) : ldexp(SQRT1_2, -(int)(k / 2));
    check_slopes(1, h1);
    check_slopes(2, h2);
    check_slopes(3, h3);
    check_slopes(4, h4);
    check_slopes(6, h6);
    check_slopes(8, h8);
    check_slopes(12, h12);
    check_slopes(16, h16);
}

/* ---- RMSNorm per head --------------------------------------------------- */

static void test_rms_norm_per_head(void **state)
{
    (void)state;
    /*
     * rows (2, . | ld 11), 2 heads of d = 2 features, hs = 5 apart; the
     * features between the heads and after them must stay.  eps = 3.5 and
     * w = (2, -1), by hand:
     *   (3, 4):   mean square 12.5, + 3.5 = 16, rms 4:  (0.75, 1) w  = (1.5, -1)
     *   (4, 7):   mean square 32.5, + 3.5 = 36, rms 6:  (4/6, 7/6) w = (4/3, -7/6)
     *   (0, 11):  mean square 60.5, + 3.5 = 64, rms 8:  (0, 11/8) w  = (0, -11/8)
     *   (12, -7): mean square 96.5, + 3.5 = 100, rms 10: (1.2, -0.7) w = (2.4, 0.7)
     */
    double x[2 * 11] = {3, 4, 91, 92, 93, 4, 7, 94, 95, 96, 97,
                        0, 11, 81, 82, 83, 12, -7, 84, 85, 86, 87};
    const double w[2] = {2, -1};
    const double expected[2][2][2] = {{{1.5, -1}, {4.0 / 3, -7.0 / 6}},
                                      {{0, -11.0 / 8}, {2.4, 0.7}}};
    attn_rms_norm_rows_f64(x, 11, 2, 2, 5, 2, w, 3.5);
    for (size_t r = 0; r < 2; r++) {
        for (size_t h = 0; h < 2; h++)
            for (size_t j = 0; j < 2; j++)
                assert_near(x[r * 11 + h * 5 + j], expected[r][h][j], F64_TOLERANCE);
        for (size_t i = 2; i < 5; i++)
            assert_true(x[r * 11 + i] == (double)(r == 0 ? 89 : 79) + (double)i);
        for (size_t i = 7; i < 11; i++)
            assert_true(x[r * 11 + i] == (double)(r == 0 ? 87 : 77) + (double)i);
    }

    /* eps 0, w 1: (3, 4) / sqrt(12.5); the mean is over d = 2, not hs */
    double y[5] = {3, 4, 100, 100, 100};
    const double ones[2] = {1, 1};
    attn_rms_norm_rows_f64(y, 5, 1, 1, 5, 2, ones, 0);
    assert_near(y[0], 3 / sqrt(12.5), F64_TOLERANCE);
    assert_near(y[1], 4 / sqrt(12.5), F64_TOLERANCE);
    assert_true(y[2] == 100 && y[3] == 100 && y[4] == 100);

    /* float: the first row of the case above */
    float z[11] = {3, 4, 91, 92, 93, 4, 7, 94, 95, 96, 97};
    const float w32[2] = {2, -1};
    attn_rms_norm_rows_f32(z, 11, 1, 2, 5, 2, w32, 3.5);
    assert_near(z[0], 1.5, F32_TOLERANCE);
    assert_near(z[1], -1, F32_TOLERANCE);
    assert_near(z[5], 4.0 / 3, F32_TOLERANCE);
    assert_near(z[6], -7.0 / 6, F32_TOLERANCE);
    assert_true(z[2] == 91 && z[10] == 97);
}

/* ---- the forward pass with the variants --------------------------------- */

/* One self-attention layer in double, x W layout (weights as in attn_weights
 * with linear false). */
typedef struct layer {
    size_t c, n, D, H, G, dk, dv;
    bool has_bias;
    double *x;                  /* (c, n, D)    */
    double *w_q, *w_k, *w_v;    /* (D, H*dk) (D, G*dk) (D, G*dv) */
    double *w_o;                /* (H*dv, D)    */
    double *b_q, *b_k, *b_v, *b_o;
    const double *q_norm, *k_norm;   /* (dk) RMSNorm weights or NULL (not owned) */
} layer;

static void make_layer(layer *L)
{
    const size_t G = L->G, D = L->D;
    L->x = fill_values(L->c * L->n * D, 0.1);
    L->w_q = fill_values(D * L->H * L->dk, 1.3);
    L->w_k = fill_values(D * G * L->dk, 2.9);
    L->w_v = fill_values(D * G * L->dv, 3.7);
    L->w_o = fill_values(L->H * L->dv * D, 4.1);
    /* larger q so that the logits spread (softcap, ALiBi, window matter) */
    for (size_t i = 0; i < D * L->H * L->dk; i++)
        L->w_q[i] *= 3;
    if (L->has_bias) {
        L->b_q = fill_values(L->H * L->dk, 5.3);
        L->b_k = fill_values(G * L->dk, 6.2);
        L->b_v = fill_values(G * L->dv, 7.9);
        L->b_o = fill_values(D, 8.6);
    }
}

static void free_layer(layer *L)
{
    double **all[] = {&L->x, &L->w_q, &L->w_k, &L->w_v, &L->w_o,
                      &L->b_q, &L->b_k, &L->b_v, &L->b_o};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        free(*all[i]);
        *all[i] = NULL;
    }
}

static attn_config layer_config(const layer *L)
{
    attn_config cfg = {
        .dims = {.batch = L->c, .n = L->n, .m = L->n, .d_model = L->D, .heads = L->H,
                 .kv_heads = L->G, .d_k = L->dk, .d_v = L->dv},
        .variant.scale = 1 / sqrt((double)L->dk), .precision = ATTN_F64,
    };
    return cfg;
}

static attn_weights layer_weights(const layer *L)
{
    attn_weights w = {.w_q = L->w_q, .w_k = L->w_k, .w_v = L->w_v, .w_o = L->w_o,
                      .b_q = L->b_q, .b_k = L->b_k, .b_v = L->b_v, .b_o = L->b_o,
                      .q_norm = L->q_norm, .k_norm = L->k_norm};
    return w;
}

/* A self-attention slice of L's c items with packed projections; the maps
 * when `maps`, else none (online softmax).  Free with free_slice. */
static attn_slice new_slice(const attn_config *cfg, const layer *L, bool maps)
{
    const size_t c = L->c, n = L->n, H = L->H, G = L->G;
    const size_t online_bytes = attn_attend_scratch_bytes(cfg, c, !maps);
    attn_slice s = {
        .count = c, .x = L->x, .y = L->x, .y_stride = n * L->D,
        .q = calloc(c * n * H * L->dk, sizeof(double)),
        .k = calloc(c * n * G * L->dk, sizeof(double)),
        .v = calloc(c * n * G * L->dv, sizeof(double)),
        .scores = maps ? calloc(c * H * n * n, sizeof(double)) : NULL,
        .weights = maps ? calloc(c * H * n * n, sizeof(double)) : NULL,
        .heads = calloc(c * H * n * L->dv, sizeof(double)),
        .concat = calloc(c * n * H * L->dv, sizeof(double)),
        .output = calloc(c * n * L->D, sizeof(double)),
        .scratch = aligned_alloc(64, (online_bytes + 63) / 64 * 64),
    };
    assert_true(s.q && s.k && s.v && s.heads && s.concat && s.output && s.scratch);
    assert_true(!maps || (s.scores && s.weights));
    return s;
}

static void free_slice(attn_slice *s)
{
    free(s->q); free(s->k); free(s->v); free(s->scores); free(s->weights);
    free(s->heads); free(s->concat); free(s->output); free(s->scratch);
}

/* What the reference computes for L under cfg, all in double. */
typedef struct reference {
    double *q, *k, *v;          /* (c, n, H*dk) (c, n, G*dk) (c, n, G*dv) */
    double *scores, *weights;   /* (c, H, n, n)                           */
    double *concat;             /* (c, n, H*dv)                           */
    double *output;             /* (c, n, D)                              */
} reference;

/* x (d) = x / sqrt(mean(x^2) + eps) * w, by the definition. */
static void reference_rms_norm(double *x, size_t d, const double *w, double eps)
{
    double squares = 0;
    for (size_t j = 0; j < d; j++)
        squares += x[j] * x[j];
    double rms = sqrt(squares / (double)d + eps);
    for (size_t j = 0; j < d; j++)
        x[j] = x[j] / rms * w[j];
}

/* Each head (dk features, `heads` of them side by side) of each of `rows`
 * rows of x: the RMSNorm when norm, then the rotary embedding. */
static void reference_position(double *x, size_t rows, size_t heads, size_t dk,
                               const double *norm, const attn_config *cfg, const int64_t *pos)
{
    for (size_t i = 0; i < rows; i++)
        for (size_t h = 0; h < heads; h++) {
            double *head = x + (i * heads + h) * dk;
            if (norm != NULL)
                reference_rms_norm(head, dk, norm, cfg->variant.norm_eps);
            if (cfg->variant.rope.theta != 0)
                reference_rope_head(head, pos ? (double)pos[i] : (double)i, cfg->variant.rope.theta,
                                    cfg->variant.rope.dim, cfg->variant.rope.style);
        }
}

/*
 * The layer written out: q and k per head through the RMSNorm (L's q_norm,
 * k_norm) and the rotary embedding (cfg->variant.rope); query head h reads K/V head h / (H/G) (HF
 * repeat_kv); logit = scale q.k, then softcap C tanh(logit / C), then
 * + slope_h (kpos - qpos) + bias[b, h, q, k]; -inf where k > q (causal)
 * or k <= q - window; softmax over keys; heads side by side; W_O.
 * bias (c, H, n, n) with the given strides, or NULL; positions NULL = indices.
 */
static void reference_layer(const layer *L, const attn_config *cfg, const double *bias,
                            size_t bias_item_stride, size_t bias_head_stride,
                            const int64_t *qpos, const int64_t *kpos, reference *r)
{
    const size_t c = L->c, n = L->n, D = L->D, H = L->H, G = L->G, dk = L->dk, dv = L->dv;
    const size_t hk = H * dk, gk = G * dk, gv = G * dv, hv = H * dv, per_group = H / G;
    r->q = calloc(c * n * hk, sizeof(double));
    r->k = calloc(c * n * gk, sizeof(double));
    r->v = calloc(c * n * gv, sizeof(double));
    r->scores = calloc(c * H * n * n, sizeof(double));
    r->weights = calloc(c * H * n * n, sizeof(double));
    r->concat = calloc(c * n * hv, sizeof(double));
    r->output = calloc(c * n * D, sizeof(double));
    assert_true(r->q && r->k && r->v && r->scores && r->weights && r->concat && r->output);
    for (size_t b = 0; b < c; b++) {
        const double *x = L->x + b * n * D;
        double *q = r->q + b * n * hk, *k = r->k + b * n * gk, *v = r->v + b * n * gv;
        reference_project(x, n, D, L->w_q, hk, L->b_q, q);
        reference_project(x, n, D, L->w_k, gk, L->b_k, k);
        reference_project(x, n, D, L->w_v, gv, L->b_v, v);
        reference_position(q, n, H, dk, L->q_norm, cfg, qpos);
        reference_position(k, n, G, dk, L->k_norm, cfg, kpos);
        for (size_t h = 0; h < H; h++) {
            const size_t g = h / per_group;
            double *scores = r->scores + (b * H + h) * n * n;
            double *weights = r->weights + (b * H + h) * n * n;
            for (size_t i = 0; i < n; i++) {
                double max = -INFINITY, sum = 0;
                for (size_t j = 0; j < n; j++) {
                    double dot = 0;
                    for (size_t t = 0; t < dk; t++)
                        dot += q[i * hk + h * dk + t] * k[j * gk + g * dk + t];
                    double logit = cfg->variant.scale * dot;
                    if (cfg->variant.softcap != 0)
                        logit = cfg->variant.softcap * tanh(logit / cfg->variant.softcap);
                    if (cfg->alibi != NULL) {
                        double pq = qpos ? (double)qpos[i] : (double)i;
                        double pk = kpos ? (double)kpos[j] : (double)j;
                        logit += cfg->alibi[h] * (pk - pq);
                    }
                    if (bias != NULL)
                        logit += bias[b * bias_item_stride + h * bias_head_stride + i * n + j];
                    bool hidden = (cfg->variant.causal && j > i) ||
                                  (cfg->variant.window != 0 && j + cfg->variant.window <= i);
                    scores[i * n + j] = hidden ? -INFINITY : logit;
                    if (scores[i * n + j] > max)
                        max = scores[i * n + j];
                }
                for (size_t j = 0; j < n; j++) {
                    weights[i * n + j] = exp(scores[i * n + j] - max);
                    sum += weights[i * n + j];
                }
                for (size_t j = 0; j < n; j++)
                    weights[i * n + j] /= sum;
                for (size_t t = 0; t < dv; t++) {
                    double acc = 0;
                    for (size_t j = 0; j < n; j++)
                        acc += weights[i * n + j] * v[j * gv + g * dv + t];
                    r->concat[(b * n + i) * hv + h * dv + t] = acc;
                }
            }
        }
        reference_project(r->concat + b * n * hv, n, hv, L->w_o, D, L->b_o,
                          r->output + b * n * D);
    }
}

static void free_reference(reference *r)
{
    free(r->q); free(r->k); free(r->v); free(r->scores); free(r->weights);
    free(r->concat); free(r->output);
}

/* Every buffer of a slice computed with maps against the reference. */
static void assert_slice_matches(const attn_slice *s, const layer *L, const reference *r)
{
    const size_t c = L->c, n = L->n, H = L->H, G = L->G;
    assert_doubles_near(s->q, r->q, c * n * H * L->dk, F64_FORWARD_TOLERANCE, "q");
    assert_doubles_near(s->k, r->k, c * n * G * L->dk, F64_FORWARD_TOLERANCE, "k");
    assert_doubles_near(s->v, r->v, c * n * G * L->dv, F64_FORWARD_TOLERANCE, "v");
    if (s->scores != NULL) {
        assert_doubles_near(s->scores, r->scores, c * H * n * n, F64_FORWARD_TOLERANCE, "scores");
        assert_doubles_near(s->weights, r->weights, c * H * n * n, F64_FORWARD_TOLERANCE,
                            "weights");
    }
    assert_doubles_near(s->concat, r->concat, c * n * H * L->dv, F64_FORWARD_TOLERANCE, "concat");
    assert_doubles_near(s->output, r->output, c * n * L->D, F64_FORWARD_TOLERANCE, "output");
}

/* scale q_h . k_g of item b, query i, key j, from a slice's packed q and k. */
static double raw_logit(const attn_slice *s, const layer *L, double scale, size_t b, size_t h,
                        size_t g, size_t i, size_t j)
{
    const double *q = s->q, *k = s->k;
    const size_t n = L->n, hk = L->H * L->dk, gk = L->G * L->dk;
    double dot = 0;
    for (size_t t = 0; t < L->dk; t++)
        dot += q[(b * n + i) * hk + h * L->dk + t] * k[(b * n + j) * gk + g * L->dk + t];
    return scale * dot;
}

/* The online path (no maps) on the same layer and config: its concat and
 * output equal the full path's. */
static void assert_online_matches(const attn_config *cfg, const attn_weights *w, const layer *L,
                                  const attn_slice *full, const void *bias,
                                  size_t bias_item_stride, size_t bias_head_stride)
{
    attn_slice s = new_slice(cfg, L, false);
    s.bias = bias;
    s.bias_item_stride = bias_item_stride;
    s.bias_head_stride = bias_head_stride;
    attn_forward(cfg, w, &s);
    const size_t rows = L->c * L->n;
    assert_doubles_near(s.concat, full->concat, rows * L->H * L->dv, F64_FORWARD_TOLERANCE,
                        "online concat");
    assert_doubles_near(s.output, full->output, rows * L->D, F64_FORWARD_TOLERANCE,
                        "online output");
    free_slice(&s);
}

/* The layer most tests run: two items of five tokens, D = 4, two heads of
 * d_k = d_v = 2 (G = H), with biases. */
static const layer small_layer = {.c = 2, .n = 5, .D = 4, .H = 2, .G = 2, .dk = 2, .dv = 2,
                                  .has_bias = true};

/* A layer run through attn_forward with its maps kept. */
typedef struct layer_run {
    layer L;
    attn_config cfg;
    attn_weights w;
    attn_slice s;
} layer_run;

/* Makes the layer of `sizes`, its config under variant (scale 1 / sqrt(d_k))
 * and ALiBi slopes (or NULL), and its weights; no slice yet. */
static layer_run start_layer(layer sizes, attn_variant variant, const double *alibi)
{
    layer_run run = {.L = sizes};
    make_layer(&run.L);
    run.cfg = layer_config(&run.L);
    variant.scale = run.cfg.variant.scale;
    run.cfg.variant = variant;
    run.cfg.alibi = alibi;
    run.w = layer_weights(&run.L);
    return run;
}

/* start_layer without ALiBi, then attn_forward on a slice with the maps,
 * with bias (H, n, n) for every item when not NULL. */
static layer_run run_layer(layer sizes, attn_variant variant, const double *bias)
{
    layer_run run = start_layer(sizes, variant, NULL);
    run.s = new_slice(&run.cfg, &run.L, true);
    run.s.bias = bias;
    run.s.bias_item_stride = 0;
    run.s.bias_head_stride = bias != NULL ? run.L.n * run.L.n : 0;
    attn_forward(&run.cfg, &run.w, &run.s);
    return run;
}

/* The run's slice against the reference, which goes into r, and the
 * online path against the full one. */
static void check_run(const layer_run *run, reference *r)
{
    const double *bias = run->s.bias;
    const size_t head_stride = run->s.bias_head_stride;
    reference_layer(&run->L, &run->cfg, bias, 0, head_stride, NULL, NULL, r);
    assert_slice_matches(&run->s, &run->L, r);
    assert_online_matches(&run->cfg, &run->w, &run->L, &run->s, bias, 0, head_stride);
}

static void free_run(layer_run *run)
{
    free_slice(&run->s);
    free_layer(&run->L);
}

static void check_and_free_run(layer_run *run)
{
    reference r;
    check_run(run, &r);
    free_reference(&r);
    free_run(run);
}

/* The maps (when `maps`), heads, concat and output of slices a and b of
 * one layer agree; `what` names b in a failure. */
static void assert_slices_agree(const attn_slice *a, const attn_slice *b, const layer *L,
                                bool maps, const char *what)
{
    const size_t map_count = L->c * L->H * L->n * L->n, rows = L->c * L->n;
    const struct {
        const char *name;
        const void *a, *b;
        size_t count;
    } buffers[] = {
        {"scores", a->scores, b->scores, maps ? map_count : 0},
        {"weights", a->weights, b->weights, maps ? map_count : 0},
        {"heads", a->heads, b->heads, map_count / L->n * L->dv},
        {"concat", a->concat, b->concat, rows * L->H * L->dv},
        {"output", a->output, b->output, rows * L->D},
    };
    for (size_t i = 0; i < COUNT(buffers); i++) {
        char name[64];
        snprintf(name, sizeof name, "%s %s", what, buffers[i].name);
        assert_doubles_near(buffers[i].b, buffers[i].a, buffers[i].count, F64_FORWARD_TOLERANCE,
                            name);
    }
}

/* The (H, n, n) attention bias the tests add: twice fill_values' (caller frees). */
static double *doubled_bias(const layer *L)
{
    double *bias = fill_values(L->H * L->n * L->n, 9.4);
    for (size_t i = 0; i < L->H * L->n * L->n; i++)
        bias[i] *= 2;
    return bias;
}

/* Sliding window of 2 with the causal mask: query q sees keys q-1 and q. */
static void test_forward_window_causal(void **state)
{
    (void)state;
    layer_run run = run_layer(small_layer, (attn_variant){.causal = true, .window = 2}, NULL);
    const layer *L = &run.L;
    const double *weights = run.s.weights, *scores = run.s.scores;
    for (size_t bh = 0; bh < L->c * L->H; bh++)
        for (size_t q = 0; q < L->n; q++)
            for (size_t k = 0; k < L->n; k++) {
                size_t at = (bh * L->n + q) * L->n + k;
                if (k + 2 <= q || k > q) {        /* k <= q - 2 or k > q */
                    if (weights[at] != 0.0 || scores[at] != -INFINITY)
                        fail_msg("item/head %zu q %zu k %zu: weight %g score %g, expected 0, -inf",
                                 bh, q, k, weights[at], scores[at]);
                } else {
                    assert_true(weights[at] > 0.0);
                    assert_true(isfinite(scores[at]));
                }
            }
    /* query 0 has one key: weight 1 */
    assert_near(weights[0], 1.0, 0.0);
    check_and_free_run(&run);
}

/* A window without the causal mask: keys after the query stay visible. */
static void test_forward_window_without_causal(void **state)
{
    (void)state;
    layer_run run = run_layer((layer){.c = 1, .n = 5, .D = 4, .H = 2, .G = 2, .dk = 2, .dv = 2},
                              (attn_variant){.window = 2}, NULL);
    const layer *L = &run.L;
    const double *weights = run.s.weights, *scores = run.s.scores;
    for (size_t h = 0; h < L->H; h++)
        for (size_t q = 0; q < L->n; q++)
            for (size_t k = 0; k < L->n; k++) {
                size_t at = (h * L->n + q) * L->n + k;
                if (k + 2 <= q) {
                    assert_true(weights[at] == 0.0);
                    assert_true(scores[at] == -INFINITY);
                } else {                          /* q-1, q and every k > q */
                    assert_true(weights[at] > 0.0);
                }
            }
    check_and_free_run(&run);
}

/* softcap C: every logit is C tanh(raw / C). */
static void test_forward_softcap(void **state)
{
    (void)state;
    layer_run run = run_layer(small_layer, (attn_variant){.softcap = 0.5, .causal = true}, NULL);
    const layer *L = &run.L;
    const double *scores = run.s.scores;
    size_t capped = 0;
    for (size_t b = 0; b < L->c; b++)
        for (size_t h = 0; h < L->H; h++)
            for (size_t q = 0; q < L->n; q++)
                for (size_t k = 0; k < L->n; k++) {
                    double got = scores[((b * L->H + h) * L->n + q) * L->n + k];
                    if (k > q) {
                        assert_true(got == -INFINITY);
                        continue;
                    }
                    double raw = raw_logit(&run.s, L, run.cfg.variant.scale, b, h, h, q, k);
                    assert_near(got, 0.5 * tanh(raw / 0.5), F64_TOLERANCE);
                    assert_true(fabs(got) < 0.5);
                    if (fabs(raw) > 0.75)             /* the cap took off > 0.1 */
                        capped++;
                }
    assert_true(capped >= 3);                         /* the cap mattered */
    check_and_free_run(&run);
}

/* L with W_K, W_V and their biases repeated from G to H heads, head h
 * holding K/V head kv_of_head[h] (free with free_repeated). */
static layer repeated_kv(const layer *L, const size_t *kv_of_head)
{
    layer R = *L;
    R.G = L->H;
    R.w_k = malloc(L->D * L->H * L->dk * sizeof(double));
    R.w_v = malloc(L->D * L->H * L->dv * sizeof(double));
    R.b_k = malloc(L->H * L->dk * sizeof(double));
    R.b_v = malloc(L->H * L->dv * sizeof(double));
    assert_true(R.w_k && R.w_v && R.b_k && R.b_v);
    for (size_t h = 0; h < L->H; h++) {
        const size_t g = kv_of_head[h];
        for (size_t t = 0; t < L->dk; t++) {
            for (size_t i = 0; i < L->D; i++)
                R.w_k[i * L->H * L->dk + h * L->dk + t] = L->w_k[i * L->G * L->dk + g * L->dk + t];
            R.b_k[h * L->dk + t] = L->b_k[g * L->dk + t];
        }
        for (size_t t = 0; t < L->dv; t++) {
            for (size_t i = 0; i < L->D; i++)
                R.w_v[i * L->H * L->dv + h * L->dv + t] = L->w_v[i * L->G * L->dv + g * L->dv + t];
            R.b_v[h * L->dv + t] = L->b_v[g * L->dv + t];
        }
    }
    return R;
}

static void free_repeated(layer *R)
{
    free(R->w_k); free(R->w_v); free(R->b_k); free(R->b_v);
}

/* H = 4 query heads over G = 2 K/V heads: heads 0, 1 read K/V head 0 and
 * heads 2, 3 K/V head 1 (HF repeat_kv), as K/V weights repeated per head. */
static void test_forward_gqa_head_map(void **state)
{
    (void)state;
    layer_run run = run_layer((layer){.c = 2, .n = 5, .D = 4, .H = 4, .G = 2, .dk = 2, .dv = 2,
                                      .has_bias = true},
                              (attn_variant){.causal = true}, NULL);
    const layer *L = &run.L;
    const size_t kv_of_head[4] = {0, 0, 1, 1};    /* by hand */
    const double *scores = run.s.scores;
    for (size_t b = 0; b < L->c; b++)
        for (size_t h = 0; h < L->H; h++)
            for (size_t q = 0; q < L->n; q++)
                for (size_t k = 0; k <= q; k++)
                    assert_near(scores[((b * L->H + h) * L->n + q) * L->n + k],
                                raw_logit(&run.s, L, run.cfg.variant.scale, b, h, kv_of_head[h],
                                          q, k),
                                F64_TOLERANCE);

    /* The same layer with W_K, W_V (and their biases) repeated to H heads. */
    layer R = repeated_kv(L, kv_of_head);
    attn_config rcfg = layer_config(&R);
    rcfg.variant.causal = true;
    assert_int_equal(attn_kv_heads(&rcfg.dims), 4);
    attn_weights rw = layer_weights(&R);
    attn_slice rs = new_slice(&rcfg, &R, true);
    attn_forward(&rcfg, &rw, &rs);
    assert_slices_agree(&run.s, &rs, L, true, "repeated");
    free_slice(&rs);
    free_repeated(&R);
    check_and_free_run(&run);
}

/* ALiBi: logit = raw + slope_h (pos_k - pos_q). */
static void test_forward_alibi(void **state)
{
    (void)state;
    const double slopes[2] = {0.5, 0.125};
    layer_run run = start_layer((layer){.c = 1, .n = 5, .D = 4, .H = 2, .G = 2, .dk = 2,
                                        .dv = 2, .has_bias = true},
                                (attn_variant){0}, slopes);
    const layer *L = &run.L;

    /* positions 0 .. n-1; then given positions for queries and keys */
    const int64_t qpos[5] = {10, 3, 7, 0, 2}, kpos[5] = {1, 2, 3, 4, 9};
    for (int given = 0; given < 2; given++) {
        attn_slice s = new_slice(&run.cfg, L, true);
        if (given) {
            s.positions = qpos;
            s.kv_positions = kpos;
        }
        attn_forward(&run.cfg, &run.w, &s);
        const double *scores = s.scores;
        for (size_t h = 0; h < L->H; h++)
            for (size_t q = 0; q < L->n; q++)
                for (size_t k = 0; k < L->n; k++) {
                    double offset = given ? (double)(kpos[k] - qpos[q]) : (double)k - (double)q;
                    assert_near(scores[(h * L->n + q) * L->n + k],
                                raw_logit(&s, L, run.cfg.variant.scale, 0, h, h, q, k) +
                                    slopes[h] * offset,
                                F64_TOLERANCE);
                }
        reference r;
        reference_layer(L, &run.cfg, NULL, 0, 0, given ? qpos : NULL, given ? kpos : NULL, &r);
        assert_slice_matches(&s, L, &r);
        free_reference(&r);
        if (!given)
            assert_online_matches(&run.cfg, &run.w, L, &s, NULL, 0, 0);
        free_slice(&s);
    }
    free_layer(&run.L);
}

/* An (H, n, m) bias for every item (item stride 0): logit = raw + bias. */
static void test_forward_attention_bias(void **state)
{
    (void)state;
    double *bias = doubled_bias(&small_layer);
    layer_run run = run_layer(small_layer, (attn_variant){.causal = true}, bias);
    const layer *L = &run.L;
    const size_t nm = L->n * L->n;
    const double *scores = run.s.scores;
    for (size_t b = 0; b < L->c; b++)
        for (size_t h = 0; h < L->H; h++)
            for (size_t q = 0; q < L->n; q++)
                for (size_t k = 0; k < L->n; k++) {
                    double got = scores[((b * L->H + h) * L->n + q) * L->n + k];
                    if (k > q)
                        assert_true(got == -INFINITY);
                    else
                        assert_near(got,
                                    raw_logit(&run.s, L, run.cfg.variant.scale, b, h, h, q, k) +
                                        bias[h * nm + q * L->n + k],
                                    F64_TOLERANCE);
                }
    check_and_free_run(&run);
    free(bias);
}

/*
 * Window, ALiBi and bias together, attended in blocks of query rows
 * (attn_attend, as the pipeline calls it): rows [0, 3) and [3, 5).  With
 * window 2 the block of rows 3, 4 sees no key before 2, so the online
 * softmax starts its keys at 2 and the ALiBi offsets and the bias must be
 * taken at key 2 + j, not j.  The full path's maps cover the block's rows.
 */
static void test_attend_row_blocks_window_alibi_bias(void **state)
{
    (void)state;
    const double slopes[2] = {0.5, 0.125};
    layer_run run = start_layer(small_layer, (attn_variant){.causal = true, .window = 2}, slopes);
    const layer L = run.L;
    const attn_config cfg = run.cfg;
    const size_t n = L.n, H = L.H, nm = n * n, hv = H * L.dv;
    double *bias = doubled_bias(&L);
    reference r;
    reference_layer(&L, &cfg, bias, 0, nm, NULL, NULL, &r);

    const size_t first[2] = {0, 3}, count[2] = {3, 2};
    for (int online = 0; online < 2; online++) {
        attn_slice s = new_slice(&cfg, &L, !online);
        s.bias = bias;
        s.bias_head_stride = nm;
        attn_project_inputs(&cfg, &run.w, &s);
        for (size_t blk = 0; blk < 2; blk++) {
            attn_attend(&cfg, &s, first[blk], count[blk]);
            if (online)
                continue;
            /* maps (c, H, rows, m) of rows first .. first + count */
            const double *scores = s.scores, *weights = s.weights;
            for (size_t b = 0; b < L.c; b++)
                for (size_t h = 0; h < H; h++)
                    for (size_t i = 0; i < count[blk]; i++)
                        for (size_t k = 0; k < n; k++) {
                            size_t at = ((b * H + h) * count[blk] + i) * n + k;
                            size_t ref = ((b * H + h) * n + first[blk] + i) * n + k;
                            assert_near(scores[at], r.scores[ref], F64_FORWARD_TOLERANCE);
                            assert_near(weights[at], r.weights[ref], F64_FORWARD_TOLERANCE);
                        }
        }
        attn_project_output(&cfg, &run.w, &s);
        assert_doubles_near(s.concat, r.concat, L.c * n * hv, F64_FORWARD_TOLERANCE,
                            online ? "online concat" : "concat");
        assert_doubles_near(s.output, r.output, L.c * n * L.D, F64_FORWARD_TOLERANCE,
                            online ? "online output" : "output");
        free_slice(&s);
    }
    free_reference(&r);
    free(bias);
    free_layer(&run.L);
}

/*
 * n = m = 600 keys, more than one block of the online softmax (512 keys):
 * the rows past 512 see a second key block, where ALiBi and the bias must
 * be taken at keys 512 + j; its concat matches the reference.
 */
static void test_online_alibi_bias_across_key_blocks(void **state)
{
    (void)state;
    const double slopes[2] = {0.02, 0.005};
    layer_run run = start_layer((layer){.c = 1, .n = 600, .D = 4, .H = 2, .G = 2, .dk = 2,
                                        .dv = 2, .has_bias = true},
                                (attn_variant){.causal = true}, slopes);
    const size_t nm = run.L.n * run.L.n;
    double *bias = fill_values(run.L.H * nm, 9.4);
    reference r;
    reference_layer(&run.L, &run.cfg, bias, 0, nm, NULL, NULL, &r);
    for (int online = 0; online < 2; online++) {
        attn_slice s = new_slice(&run.cfg, &run.L, !online);
        s.bias = bias;
        s.bias_head_stride = nm;
        attn_forward(&run.cfg, &run.w, &s);
        assert_slice_matches(&s, &run.L, &r);
        free_slice(&s);
    }
    free_reference(&r);
    free(bias);
    free_layer(&run.L);
}

/* W_QKV (D, 3*H*dk) and b_QKV (3*H*dk) of L's separate weights (G = H,
 * d_v = d_k), q|k|v interleaved per head: head h owns the columns
 * h*3dk .. h*3dk+3dk-1 as [q | k | v] (caller frees). */
static void interleaved_qkv(const layer *L, double **w_qkv, double **b_qkv)
{
    const size_t D = L->D, H = L->H, dk = L->dk, F = 3 * H * dk;
    *w_qkv = malloc(D * F * sizeof(double));
    *b_qkv = malloc(F * sizeof(double));
    assert_true(*w_qkv && *b_qkv);
    for (size_t h = 0; h < H; h++)
        for (size_t t = 0; t < dk; t++) {
            const size_t col = h * dk + t, at = h * 3 * dk + t;
            for (size_t i = 0; i < D; i++) {
                (*w_qkv)[i * F + at] = L->w_q[i * H * dk + col];
                (*w_qkv)[i * F + at + dk] = L->w_k[i * H * dk + col];
                (*w_qkv)[i * F + at + 2 * dk] = L->w_v[i * H * dk + col];
            }
            (*b_qkv)[at] = L->b_q[col];
            (*b_qkv)[at + dk] = L->b_k[col];
            (*b_qkv)[at + 2 * dk] = L->b_v[col];
        }
}

/* s's projections moved into one buffer, NaN until written: with
 * per_head (G = H, dv = dk), (c, n, 3*H*dk) q|k|v interleaved per head --
 * k = q + dk, v = q + 2dk, head stride 3dk; else (c, n, H*dk + G*dk +
 * G*dv) q | k | v side by side, as fused [Q | K | V] gives them.  Free s
 * with free_interleaved. */
static void fused_projections(attn_slice *s, const layer *L, bool per_head)
{
    const size_t dk = L->dk, qk = L->H * dk, kc = L->G * dk, all = qk + kc + L->G * L->dv;
    const size_t count = L->c * L->n * all;
    double *qkv = malloc(count * sizeof(double));
    assert_non_null(qkv);
    for (size_t i = 0; i < count; i++)
        qkv[i] = NAN;
    free(s->q); free(s->k); free(s->v);
    s->q = qkv;
    s->k = qkv + (per_head ? dk : qk);
    s->v = qkv + (per_head ? 2 * dk : qk + kc);
    s->ldq = s->ldk = s->ldv = all;
    if (per_head)
        s->hsq = s->hsk = s->hsv = 3 * dk;
}

static void free_interleaved(attn_slice *s)
{
    s->k = s->v = NULL;                 /* inside q's buffer */
    free_slice(s);
}

/* Item b of slice s (projections packed, or interleaved when fused) against
 * item `item` of reference r: q, k, v head by head, maps, concat, output. */
static void assert_item_matches(const attn_slice *s, const layer *L, bool fused, size_t b,
                                const reference *r, size_t item)
{
    const size_t n = L->n, H = L->H, dk = L->dk, D = L->D;
    const size_t ld = fused ? 3 * H * dk : H * dk, hs = fused ? 3 * dk : dk;
    const double *q = s->q, *k = s->k, *v = s->v;
    for (size_t i = 0; i < n; i++)
        for (size_t h = 0; h < H; h++)
            for (size_t t = 0; t < dk; t++) {
                const size_t ref = ((item * n + i) * H + h) * dk + t;
                const size_t at = (b * n + i) * ld + h * hs + t;
                assert_near(q[at], r->q[ref], F64_FORWARD_TOLERANCE);
                assert_near(k[at], r->k[ref], F64_FORWARD_TOLERANCE);
                assert_near(v[at], r->v[ref], F64_FORWARD_TOLERANCE);
            }
    const size_t maps = H * n * n, rows = n * H * L->dv;
    assert_doubles_near((const double *)s->scores + b * maps, r->scores + item * maps, maps,
                        F64_FORWARD_TOLERANCE, "scores");
    assert_doubles_near((const double *)s->weights + b * maps, r->weights + item * maps, maps,
                        F64_FORWARD_TOLERANCE, "weights");
    assert_doubles_near((const double *)s->concat + b * rows, r->concat + item * rows, rows,
                        F64_FORWARD_TOLERANCE, "concat");
    assert_doubles_near((const double *)s->output + b * n * D, r->output + item * n * D, n * D,
                        F64_FORWARD_TOLERANCE, "output");
}

/*
 * QK-norm then RoPE (GPT-J pairs, R = 4 of d_k = 6) inside attn_forward, on
 * packed projections and on fused weights with q|k|v interleaved per head
 * (head stride 3 d_k, so the norm and the rotation must skip k and v).
 */
static void test_forward_qk_norm_and_rope(void **state)
{
    (void)state;
    static const double q_norm[6] = {1.5, 0.5, -1, 2, 0.75, 1.25};
    static const double k_norm[6] = {0.5, 1, 1.5, -0.5, 2, 1};
    const attn_variant variant = {
        .causal = true, .norm_eps = 0.01,
        .rope = {.theta = 50, .dim = 4, .style = ATTN_ROPE_GPTJ},
    };
    layer_run run = start_layer((layer){.c = 2, .n = 5, .D = 4, .H = 2, .G = 2, .dk = 6,
                                        .dv = 6, .has_bias = true, .q_norm = q_norm,
                                        .k_norm = k_norm},
                                variant, NULL);
    const layer *L = &run.L;
    const int64_t pos[2 * 5] = {3, 4, 5, 6, 7, 0, 2, 4, 6, 8};   /* (c, n) */

    for (int given = 0; given < 2; given++) {
        /* the reference takes one item's positions: item 0 and item 1 apart */
        reference r[2] = {{0}};
        layer one = *L;
        one.c = 1;
        if (given) {
            reference_layer(&one, &run.cfg, NULL, 0, 0, pos, pos, &r[0]);
            one.x = L->x + L->n * L->D;
            reference_layer(&one, &run.cfg, NULL, 0, 0, pos + L->n, pos + L->n, &r[1]);
        } else {
            reference_layer(L, &run.cfg, NULL, 0, 0, NULL, NULL, &r[0]);
        }

        for (int fused = 0; fused < 2; fused++) {
            attn_weights fw = run.w;
            double *w_qkv = NULL, *b_qkv = NULL;
            attn_slice s = new_slice(&run.cfg, L, true);
            if (given) {
                s.positions = s.kv_positions = pos;
                s.positions_stride = s.kv_positions_stride = L->n;
            }
            if (fused) {
                interleaved_qkv(L, &w_qkv, &b_qkv);
                fw.w_qkv = w_qkv;
                fw.b_qkv = b_qkv;
                fw.heads_interleaved = true;
                fused_projections(&s, L, true);
            }
            attn_forward(&run.cfg, &fw, &s);
            for (size_t b = 0; b < L->c; b++)
                assert_item_matches(&s, L, fused, b, &r[given ? b : 0], given ? 0 : b);
            if (fused)
                free_interleaved(&s);
            else
                free_slice(&s);
            free(w_qkv);
            free(b_qkv);
        }
        free_reference(&r[0]);
        if (given)
            free_reference(&r[1]);
    }
    free_layer(&run.L);
}

/* [W_Q | W_K | W_V] (D, H*dk + G*dk + G*dv) and its bias, side by side. */
static void blocks_qkv(const layer *L, double **w_qkv, double **b_qkv)
{
    const size_t D = L->D, qk = L->H * L->dk, kc = L->G * L->dk, vc = L->G * L->dv;
    const size_t F = qk + kc + vc;
    *w_qkv = malloc(D * F * sizeof(double));
    *b_qkv = malloc(F * sizeof(double));
    assert_true(*w_qkv && *b_qkv);
    for (size_t i = 0; i < D; i++) {
        memcpy(*w_qkv + i * F, L->w_q + i * qk, qk * sizeof(double));
        memcpy(*w_qkv + i * F + qk, L->w_k + i * kc, kc * sizeof(double));
        memcpy(*w_qkv + i * F + qk + kc, L->w_v + i * vc, vc * sizeof(double));
    }
    memcpy(*b_qkv, L->b_q, qk * sizeof(double));
    memcpy(*b_qkv + qk, L->b_k, kc * sizeof(double));
    memcpy(*b_qkv + qk + kc, L->b_v, vc * sizeof(double));
}

/* Rows [r0, r0 + rows) of each item of a (c, n, width | ld) buffer against
 * a (c, rows, width | ld_block) one, bit for bit, head by head (hs apart,
 * w wide each; heads 1 for whole rows). */
static void assert_rows_same(const double *whole, size_t ld, size_t hs, const double *block,
                             size_t ld_block, size_t hs_block, size_t c, size_t n, size_t r0,
                             size_t rows, size_t heads, size_t w, const char *what)
{
    for (size_t b = 0; b < c; b++)
        for (size_t i = 0; i < rows; i++)
            for (size_t h = 0; h < heads; h++)
                if (memcmp(whole + (b * n + r0 + i) * ld + h * hs,
                           block + (b * rows + i) * ld_block + h * hs_block, w * sizeof(double)))
                    fail_msg("%s: item %zu row %zu head %zu differs: %.17g vs %.17g", what, b,
                             r0 + i, h, whole[(b * n + r0 + i) * ld + h * hs],
                             block[(b * rows + i) * ld_block + h * hs_block]);
}

/*
 * The layer of the block tests below: c = 2 items of n = 600, d_model 16,
 * 4 heads over G K/V heads (4 when fused per head), all biases, QK-norm
 * and RoPE at positions pos[i] = (i % n) * step + (i / n) * shift + 1;
 * w with the weights separate (fused 0), fused [Q | K | V] (1) or fused
 * per head [q | k | v] (2).
 */
typedef struct block_layer {
    layer_run run;
    attn_weights w;
    double *w_qkv, *b_qkv;
    int64_t *pos;                /* (c, n) */
} block_layer;

static block_layer start_block_layer(int fused, size_t G, int64_t step, int64_t shift)
{
    static const double q_norm[4] = {1.5, 0.5, -1, 2};
    static const double k_norm[4] = {0.5, 1, 1.5, -0.5};
    const attn_variant variant = {
        .causal = true, .norm_eps = 0.01, .rope = {.theta = 50, .dim = 4, .style = ATTN_ROPE_NEOX},
    };
    block_layer b = {
        .run = start_layer((layer){.c = 2, .n = 600, .D = 16, .H = 4, .G = fused == 2 ? 4 : G,
                                   .dk = 4, .dv = 4, .has_bias = true, .q_norm = q_norm,
                                   .k_norm = k_norm},
                           variant, NULL),
    };
    const size_t c = b.run.L.c, n = b.run.L.n;
    b.pos = malloc(c * n * sizeof *b.pos);
    assert_non_null(b.pos);
    for (size_t i = 0; i < c * n; i++)
        b.pos[i] = (int64_t)(i % n) * step + (int64_t)(i / n) * shift + 1;
    b.w = b.run.w;
    if (fused == 1)
        blocks_qkv(&b.run.L, &b.w_qkv, &b.b_qkv);
    if (fused == 2)
        interleaved_qkv(&b.run.L, &b.w_qkv, &b.b_qkv);
    b.w.w_qkv = b.w_qkv;
    b.w.b_qkv = b.b_qkv;
    b.w.heads_interleaved = fused == 2;
    return b;
}

static void free_block_layer(block_layer *b)
{
    free(b->w_qkv);
    free(b->b_qkv);
    free(b->pos);
    free_layer(&b->run.L);
}

/*
 * attn_project_rows in blocks of query rows (256, 256, 88 of n = 600, as
 * the pipeline's steps) against attn_project_inputs of the whole items,
 * then attend, output and result of each block: every value bit for bit
 * the whole's.  With QK-norm, RoPE at given positions (a block past the
 * first must turn its rows at their own positions, not from 0), GQA, and
 * the weights separate, fused [Q | K | V] (the one GEMM of q|k|v side by
 * side) and fused per head [q | k | v]; q in a buffer of the block's rows,
 * or of every row over a copy of x (q_over_x).
 */
static void test_project_rows_in_blocks_as_whole(void **state)
{
    (void)state;
    for (int kind = 0; kind < 6; kind++) {          /* separate, fused blocks, fused per head */
        const bool over_x = kind >= 3;
        block_layer bl = start_block_layer(kind % 3, 2, 2, 7);
        layer_run run = bl.run;
        const layer *L = &bl.run.L;
        const size_t c = L->c, n = L->n, D = L->D, H = L->H, G = L->G, dk = L->dk, dv = L->dv;
        const size_t qk = H * dk, kc = G * dk, vc = G * dv, hv = H * dv;
        int64_t *pos = bl.pos;
        const attn_weights w = bl.w;

        /* the whole items: q|k|v side by side with fused weights, as the
         * pipeline laid them out for its one GEMM */
        attn_slice whole = new_slice(&run.cfg, L, false);
        whole.positions = whole.kv_positions = pos;
        whole.positions_stride = whole.kv_positions_stride = n;
        whole.result = calloc(c * n * H * D, sizeof(double));
        if (kind % 3 != 0)
            fused_projections(&whole, L, kind % 3 == 2);
        attn_project_inputs(&run.cfg, &w, &whole);
        attn_attend(&run.cfg, &whole, 0, n);
        attn_project_output(&run.cfg, &w, &whole);
        attn_project_result(&run.cfg, &w, &whole);
        const size_t ldq = whole.ldq ? whole.ldq : qk, hsq = whole.hsq ? whole.hsq : dk;
        const size_t ldk = whole.ldk ? whole.ldk : kc, hsk = whole.hsk ? whole.hsk : dk;
        const size_t ldv = whole.ldv ? whole.ldv : vc, hsv = whole.hsv ? whole.hsv : dv;

        /* the same in blocks: q, concat, output, result of 256 rows; k and
         * v side by side (c, m, kc | vc) */
        const size_t R = 256;
        double *x = malloc(c * n * D * sizeof(double));     /* q over x writes it */
        assert_non_null(x);
        memcpy(x, L->x, c * n * D * sizeof(double));
        attn_slice s = {
            .count = c, .x = x, .y = x, .y_stride = n * D,
            .positions = pos, .kv_positions = pos, .positions_stride = n,
            .kv_positions_stride = n,
            .q = calloc(c * R * qk, sizeof(double)), .ldq = qk,
            .k = calloc(c * n * (kc + vc), sizeof(double)), .ldk = kc + vc, .ldv = kc + vc,
            .concat = calloc(c * R * hv, sizeof(double)),
            .output = calloc(c * R * D, sizeof(double)),
            .result = calloc(c * R * H * D, sizeof(double)),
            .scratch = aligned_alloc(64, (attn_attend_scratch_bytes(&run.cfg, c, true) + 63) /
                                             64 * 64),
        };
        assert_true(s.q && s.k && s.concat && s.output && s.result && s.scratch);
        s.v = (double *)s.k + kc;
        if (over_x) {
            s.q_over_x = true;
            free(s.q);                                     /* q goes into x's rows */
            s.q = x;
            s.ldq = D;
        }
        const size_t block_ldq = over_x ? D : qk;
        for (size_t r0 = 0; r0 < n; r0 += R) {
            const size_t rows = n - r0 < R ? n - r0 : R;
            s.block_first = r0;
            s.block_rows = rows;
            attn_project_rows(&run.cfg, &w, &s, r0 == 0);
            attn_attend(&run.cfg, &s, r0, rows);
            attn_project_output(&run.cfg, &w, &s);
            attn_project_result(&run.cfg, &w, &s);
            assert_int_equal(s.overflow, 0);
            const double *q_rows = (const double *)s.q + (over_x ? r0 * D : 0);
            for (size_t b = 0; b < c; b++)         /* item b's rows of the block */
                assert_rows_same((const double *)whole.q + b * n * ldq, ldq, hsq,
                                 q_rows + b * (over_x ? n : rows) * block_ldq,
                                 block_ldq, dk, 1, n, r0, rows, H, dk, "q");
            assert_rows_same(whole.concat, hv, 0, s.concat, hv, 0, c, n, r0, rows, 1, hv,
                             "concat");
            assert_rows_same(whole.output, D, 0, s.output, D, 0, c, n, r0, rows, 1, D, "output");
            assert_rows_same(whole.result, H * D, 0, s.result, H * D, 0, c, n, r0, rows, 1,
                             H * D, "result");
        }
        assert_rows_same(whole.k, ldk, hsk, s.k, kc + vc, dk, c, n, 0, n, G, dk, "k");
        assert_rows_same(whole.v, ldv, hsv, s.v, kc + vc, dv, c, n, 0, n, G, dv, "v");

        if (!over_x)
            free(s.q);
        free(x); free(s.k); free(s.concat); free(s.output); free(s.result); free(s.scratch);
        free(whole.result);
        if (kind % 3 != 0)                          /* q|k|v in one buffer */
            free_interleaved(&whole);
        else
            free_slice(&whole);
        free_block_layer(&bl);
    }
}

/*
 * attn_project_rows with keys restricted to one share of the rows
 * (attn_slice.keys_first/keys_end, what each MPI rank sharing an item
 * projects before the ranks exchange k and v): the shares [0, 256) and
 * [256, 600) of n = 600, each on fresh buffers as the share's first block
 * of query rows, give their rows' q, k and v bit for bit as
 * attn_project_inputs of the whole items does.  With
 * fused [Q | K | V] and fused per head [q | k | v] (GQA for the first),
 * QK-norm and RoPE at given positions; q|k|v side by side (the whole
 * item's layout), or q over a copy of x with k and v side by side.
 */
static void test_project_keys_in_shares_as_whole(void **state)
{
    (void)state;
    static const size_t shares[][2] = {{0, 256}, {256, 600}};
    for (int kind = 0; kind < 4; kind++) {
        const bool per_head = kind % 2 == 1, over_x = kind >= 2;
        block_layer bl = start_block_layer(per_head ? 2 : 1, 2, 3, 5);
        layer_run run = bl.run;
        const layer *L = &bl.run.L;
        const size_t c = L->c, n = L->n, D = L->D, H = L->H, G = L->G, dk = L->dk, dv = L->dv;
        const size_t qk = H * dk, kc = G * dk, vc = G * dv, all = qk + kc + vc;
        int64_t *pos = bl.pos;
        const attn_weights w = bl.w;

        attn_slice whole = new_slice(&run.cfg, L, false);
        whole.positions = whole.kv_positions = pos;
        whole.positions_stride = whole.kv_positions_stride = n;
        fused_projections(&whole, L, per_head);
        attn_project_inputs(&run.cfg, &w, &whole);
        const size_t hs = per_head ? 3 * dk : dk;
        const size_t k_at = per_head ? dk : qk, v_at = per_head ? 2 * dk : qk + kc;

        for (size_t i = 0; i < 2; i++) {
            const size_t lo = shares[i][0], hi = shares[i][1], rows = hi - lo;
            double *x = malloc(c * n * D * sizeof(double));
            double *buf = malloc(c * n * all * sizeof(double));
            assert_true(x && buf);
            memcpy(x, L->x, c * n * D * sizeof(double));
            for (size_t j = 0; j < c * n * all; j++)
                buf[j] = NAN;
            attn_slice s = {
                .count = c, .x = x, .y = x, .y_stride = n * D,
                .positions = pos, .kv_positions = pos, .positions_stride = n,
                .kv_positions_stride = n, .block_first = lo, .block_rows = rows,
                .keys_first = lo, .keys_end = hi,
                .scratch = aligned_alloc(64, (attn_attend_scratch_bytes(&run.cfg, c, true) + 63) /
                                                 64 * 64),
            };
            assert_non_null(s.scratch);
            if (over_x) {                           /* q over x, k|v side by side */
                s.q_over_x = true;
                s.q = x;
                s.ldq = D;
                s.k = buf;
                s.v = buf + kc;
                s.ldk = s.ldv = kc + vc;
            } else {                                /* the whole item's layout */
                s.q = buf;
                s.k = buf + k_at;
                s.v = buf + v_at;
                s.ldq = s.ldk = s.ldv = all;
                s.hsq = s.hsk = s.hsv = hs;
            }
            attn_project_rows(&run.cfg, &w, &s, true);
            assert_int_equal(s.overflow, 0);
            if (over_x) {
                assert_rows_same((const double *)whole.q, all, hs, x + lo * D, D, dk, 1, n, lo,
                                 rows, H, dk, "q of item 0 (over x)");
                assert_rows_same((const double *)whole.q + n * all, all, hs, x + (n + lo) * D, D,
                                 dk, 1, n, lo, rows, H, dk, "q of item 1 (over x)");
                for (size_t b = 0; b < c; b++) {
                    assert_rows_same((const double *)whole.k + b * n * all, all, hs,
                                     buf + (b * n + lo) * (kc + vc), kc + vc, dk, 1, n, lo,
                                     rows, G, dk, "k");
                    assert_rows_same((const double *)whole.v + b * n * all, all, hs,
                                     buf + (b * n + lo) * (kc + vc) + kc, kc + vc, dv, 1, n, lo,
                                     rows, G, dv, "v");
                }
            } else {
                /* k and v in their keys' rows; q, as the block's rows of
                 * each item, in the q columns of rows b * rows .. */
                for (size_t b = 0; b < c; b++) {
                    assert_rows_same((const double *)whole.q + b * n * all, all, hs,
                                     buf + b * rows * all, all, hs, 1, n, lo, rows, H, dk, "q");
                    assert_rows_same((const double *)whole.k + b * n * all, all, hs,
                                     buf + k_at + (b * n + lo) * all, all, hs, 1, n, lo, rows,
                                     G, dk, "k");
                    assert_rows_same((const double *)whole.v + b * n * all, all, hs,
                                     buf + v_at + (b * n + lo) * all, all, hs, 1, n, lo, rows,
                                     G, dv, "v");
                }
            }
            free(x);
            free(buf);
            free(s.scratch);
        }
        free_interleaved(&whole);                   /* q|k|v in one buffer */
        free_block_layer(&bl);
    }
}

/* rows x cols -> cols x rows */
static double *transposed(const double *a, size_t rows, size_t cols)
{
    double *t = malloc(rows * cols * sizeof *t);
    assert_non_null(t);
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++)
            t[j * rows + i] = a[i * cols + j];
    return t;
}

/* nn.Linear layout: every weight stored transposed gives the same layer. */
static void test_forward_linear_layout(void **state)
{
    (void)state;
    for (size_t G = 2; G <= 4; G += 2) {          /* GQA and not */
        layer_run run = run_layer((layer){.c = 2, .n = 5, .D = 4, .H = 4, .G = G, .dk = 2,
                                          .dv = 3, .has_bias = true},
                                  (attn_variant){.causal = true}, NULL);
        const layer *L = &run.L;
        attn_weights lw = run.w;
        lw.linear = true;
        lw.w_q = transposed(L->w_q, L->D, L->H * L->dk);    /* (H*dk, D) */
        lw.w_k = transposed(L->w_k, L->D, L->G * L->dk);    /* (G*dk, D) */
        lw.w_v = transposed(L->w_v, L->D, L->G * L->dv);    /* (G*dv, D) */
        lw.w_o = transposed(L->w_o, L->H * L->dv, L->D);    /* (D, H*dv) */
        attn_slice ls = new_slice(&run.cfg, L, true);
        attn_forward(&run.cfg, &lw, &ls);

        reference r;
        check_run(&run, &r);
        assert_slice_matches(&ls, L, &r);
        assert_slices_agree(&run.s, &ls, L, true, "linear");
        free((void *)lw.w_q); free((void *)lw.w_k); free((void *)lw.w_v); free((void *)lw.w_o);
        free_reference(&r);
        free_slice(&ls);
        free_run(&run);
    }
}

/*
 * Fused weights with q|k|v interleaved per head (NeoX, BLOOM): W_QKV
 * (D, 3*H*dk), head h owning columns h*3dk .. h*3dk+3dk-1 as [q | k | v],
 * and the projections in one buffer (c, n, 3*H*dk) with k = q + dk,
 * v = q + 2dk, ld = 3*H*dk, head stride 3dk: the same layer as separate
 * weights, in the x W layout and transposed (linear).
 */
static void test_forward_heads_interleaved_fused(void **state)
{
    (void)state;
    layer_run run = run_layer(small_layer, (attn_variant){.causal = true}, NULL);
    const layer *L = &run.L;
    const size_t D = L->D, H = L->H, dk = L->dk, F = 3 * H * dk;
    reference r;
    check_run(&run, &r);
    double *w_qkv, *b_qkv;
    interleaved_qkv(L, &w_qkv, &b_qkv);
    double *w_qkv_t = transposed(w_qkv, D, F), *w_o_t = transposed(L->w_o, H * L->dv, D);

    for (int variant = 0; variant < 3; variant++) {
        /* 0: x W, maps; 1: linear, maps; 2: x W, online */
        const bool linear = variant == 1, maps = variant != 2;
        attn_weights fw = {.linear = linear, .w_qkv = linear ? w_qkv_t : w_qkv, .b_qkv = b_qkv,
                           .heads_interleaved = true, .w_o = linear ? w_o_t : L->w_o,
                           .b_o = L->b_o};
        attn_slice fs = new_slice(&run.cfg, L, maps);
        fused_projections(&fs, L, true);         /* every element must be written */
        attn_forward(&run.cfg, &fw, &fs);

        /* the projections, head h of row i at i*F + h*3dk + (0 | dk | 2dk) */
        const double *qkv = fs.q;
        for (size_t i = 0; i < L->c * L->n; i++)
            for (size_t h = 0; h < H; h++)
                for (size_t t = 0; t < dk; t++) {
                    const double *row = qkv + i * F + h * 3 * dk;
                    const size_t col = i * H * dk + h * dk + t;
                    assert_near(row[t], r.q[col], F64_FORWARD_TOLERANCE);
                    assert_near(row[dk + t], r.k[col], F64_FORWARD_TOLERANCE);
                    assert_near(row[2 * dk + t], r.v[col], F64_FORWARD_TOLERANCE);
                }
        assert_slices_agree(&run.s, &fs, L, maps, "fused");
        free_interleaved(&fs);
    }
    free(w_qkv); free(b_qkv); free(w_qkv_t); free(w_o_t);
    free_reference(&r);
    free_run(&run);
}

/*
 * Norm-based analysis (Kobayashi et al. 2020) by hand: H = 2 heads over one
 * K/V head, d_v = D = 2, two keys with v_0 = (3, 4), v_1 = (1, 0).  W_O's
 * rows of head 0 are the identity, so || v W_O[0] || = || v ||: 5 and 1;
 * head 1's are ((2, 0), (0, 0)), so v_0 W_O[1] = (6, 0) and v_1 W_O[1] =
 * (2, 0): 6 and 2.  norms = weights times the key's length: head 0's rows
 * (1, 0) and (0.25, 0.75) give (5, 0) and (1.25, 0.75); head 1's (0, 0), a
 * row that sees no key, stays 0, and (0.5, 0.5) gives (3, 1).  The same in
 * torch.nn.Linear's layout (W_O stored transposed) and in float.
 */
static void test_value_norms_by_hand(void **state)
{
    (void)state;
    const double v[4] = {3, 4, 1, 0};                      /* (1, m, G*dv) */
    const double w_o[8] = {1, 0, 0, 1, 2, 0, 0, 0};        /* (H*dv, D)    */
    const double w_o_t[8] = {1, 0, 2, 0, 0, 1, 0, 0};      /* (D, H*dv)    */
    const double weights[8] = {1, 0, 0.25, 0.75, 0, 0, 0.5, 0.5};   /* (1, H, n, m) */
    const double value_norm[4] = {5, 1, 6, 2};             /* (1, H, m)    */
    const double norms[8] = {5, 0, 1.25, 0.75, 0, 0, 3, 1};
    for (int precision = 0; precision < 2; precision++) {
        for (int linear = 0; linear < 2; linear++) {
            const bool f64 = precision == 1;
            attn_config cfg = {.dims = {.batch = 1, .n = 2, .m = 2, .d_model = 2, .heads = 2,
                                        .kv_heads = 1, .d_k = 2, .d_v = 2},
                               .precision = f64 ? ATTN_F64 : ATTN_F32};
            float vf[4], wf[8], weightsf[8], outf[4], normsf[8];
            double out[4], normsd[8], gram[8], rows[4];
            for (size_t i = 0; i < 8; i++) {
                wf[i] = (float)(linear ? w_o_t : w_o)[i];
                weightsf[i] = (float)weights[i];
            }
            for (size_t i = 0; i < 4; i++)
                vf[i] = (float)v[i];
            attn_weights w = {.linear = linear, .w_o = f64 ? (const void *)(linear ? w_o_t : w_o)
                                                           : (const void *)wf};
            attn_value_gram(&cfg, &w, gram, rows);
            w.wo_gram = gram;
            attn_slice s = {.count = 1, .v = f64 ? (void *)v : (void *)vf,
                            .weights = f64 ? (void *)weights : (void *)weightsf,
                            .key_summary[ATTN_KEY_SUMMARY_VALUE_NORM] = f64 ? (void *)out
                                                                             : (void *)outf,
                            .weight_map[ATTN_WEIGHT_MAP_NORMS] = f64 ? (void *)normsd
                                                                     : (void *)normsf};
            attn_key_summaries(&cfg, &w, &s);
            attn_weight_maps(&cfg, &s, 2);
            for (size_t i = 0; i < 4; i++)
                assert_near(f64 ? out[i] : outf[i], value_norm[i], 1e-6);
            for (size_t i = 0; i < 8; i++)
                assert_near(f64 ? normsd[i] : normsf[i], norms[i], 1e-6);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_d2_turns_by_position),
        cmocka_unit_test(test_rope_d4_neox_and_gptj_pairs),
        cmocka_unit_test(test_rope_partial_leaves_the_rest),
        cmocka_unit_test(test_rope_heads_with_gaps),
        cmocka_unit_test(test_rope_keeps_pair_lengths),
        cmocka_unit_test(test_alibi_slopes_as_bloom),
        cmocka_unit_test(test_rms_norm_per_head),
        cmocka_unit_test(test_forward_window_causal),
        cmocka_unit_test(test_forward_window_without_causal),
        cmocka_unit_test(test_forward_softcap),
        cmocka_unit_test(test_forward_gqa_head_map),
        cmocka_unit_test(test_forward_alibi),
        cmocka_unit_test(test_forward_attention_bias),
        cmocka_unit_test(test_attend_row_blocks_window_alibi_bias),
        cmocka_unit_test(test_online_alibi_bias_across_key_blocks),
        cmocka_unit_test(test_forward_linear_layout),
        cmocka_unit_test(test_forward_heads_interleaved_fused),
        cmocka_unit_test(test_forward_qk_norm_and_rope),
        cmocka_unit_test(test_project_rows_in_blocks_as_whole),
        cmocka_unit_test(test_project_keys_in_shares_as_whole),
        cmocka_unit_test(test_value_norms_by_hand),
    };
    attn_set_threads(1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
