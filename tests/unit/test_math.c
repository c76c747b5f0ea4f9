/*
 * test_math.c - unit tests for attn_math (softmax, masks, projections, head
 * scores, head reordering, non-finite search and the whole forward pass).
 *
 * Legend: c batch items in a slice, H heads, n queries, m keys, D d_model,
 *         dk = d_k, dv = d_v.  Every buffer is row-major.
 *
 * Expected values come from hand computation or from reference_forward
 * below, a plain loop-nest in double that shares no code with lib/.
 */
#include <math.h>
#include <pthread.h>
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
#define F32_FORWARD_TOLERANCE 2e-5   /* a few float sums of order-1 terms */
#define F64_FORWARD_TOLERANCE 1e-12


/* ---- softmax ----------------------------------------------------------- */

/* weights (m) = softmax of scores (m), in long double, straight from the
 * definition exp(s_k - max) / sum_j exp(s_j - max). */
static void softmax_long_double(const double *scores, size_t m, long double *weights)
{
    long double max = -INFINITY, sum = 0;
    for (size_t k = 0; k < m; k++)
        if (scores[k] > max)
            max = scores[k];
    for (size_t k = 0; k < m; k++)
        sum += expl((long double)scores[k] - max);
    for (size_t k = 0; k < m; k++)
        weights[k] = expl((long double)scores[k] - max) / sum;
}

/* Logits of both signs near 1e4: exp without the max subtracted would give
 * inf/inf or 0/0.  rows (3, 4) of exactly representable floats. */
static const double large_logits[3][4] = {
    {10000.0, 9999.0, 9997.5, 9970.0},
    {-10000.0, -9999.0, -9996.0, -10000.0},
    {10000.0, -10000.0, 0.0, 9999.5},
};

/* weights (3, 4), widened to double, against the long double softmax of
 * large_logits within tolerance, finite, each row summing to 1 within
 * sum_tolerance; as floats also by cmocka's own comparison. */
static void check_large_logit_weights(const double *weights, bool as_float, double tolerance,
                                      double sum_tolerance)
{
    for (size_t q = 0; q < 3; q++) {
        long double expected[4];
        double sum = 0;
        softmax_long_double(large_logits[q], 4, expected);
        for (size_t k = 0; k < 4; k++) {
            const double w = weights[q * 4 + k];
            assert_true(isfinite(w));
            if (as_float)
                assert_float_equal(w, (float)expected[k], tolerance);
            assert_near(w, expected[k], tolerance);
            sum += w;
        }
        assert_near(sum, 1.0, sum_tolerance);
    }
}

static void test_softmax_f64_large_logits_match_long_double(void **state)
{
    (void)state;
    double weights[3][4];
    attn_softmax_rows_f64(&large_logits[0][0], &weights[0][0], 3, 4);
    check_large_logit_weights(&weights[0][0], false, F64_TOLERANCE, F64_TOLERANCE);
    /* By hand: row 2 is dominated by e^0 and e^-0.5 over 1e4 vs -1e4. */
    assert_near(weights[2][0], 1 / (1 + exp(-0.5)), F64_TOLERANCE);
    assert_near(weights[2][1], 0.0, F64_TOLERANCE);
}

static void test_softmax_f32_large_logits_match_long_double(void **state)
{
    (void)state;
    float scores[3][4], weights[3][4];
    double widened[3 * 4];
    for (size_t i = 0; i < 3 * 4; i++)
        (&scores[0][0])[i] = (float)(&large_logits[0][0])[i];
    attn_softmax_rows_f32(&scores[0][0], &weights[0][0], 3, 4);
    for (size_t i = 0; i < 3 * 4; i++)
        widened[i] = (&weights[0][0])[i];
    check_large_logit_weights(widened, true, F32_TOLERANCE, 4 * F32_TOLERANCE);
}

static void test_softmax_negative_infinity_gets_exactly_zero(void **state)
{
    (void)state;
    /* row (4): keys 1 and 3 masked; the rest is softmax of (1, 2). */
    double scores64[4] = {1.0, -INFINITY, 2.0, -INFINITY}, weights64[4];
    float scores32[4] = {1.0f, -INFINITY, 2.0f, -INFINITY}, weights32[4];
    double e = exp(1.0);   /* w0 = 1 / (1 + e), w2 = e / (1 + e) */

    attn_softmax_rows_f64(scores64, weights64, 1, 4);
    attn_softmax_rows_f32(scores32, weights32, 1, 4);
    assert_true(weights64[1] == 0.0 && weights64[3] == 0.0);
    assert_true(weights32[1] == 0.0f && weights32[3] == 0.0f);
    assert_near(weights64[0], 1 / (1 + e), F64_TOLERANCE);
    assert_near(weights64[2], e / (1 + e), F64_TOLERANCE);
    assert_near(weights32[0], 1 / (1 + e), F32_TOLERANCE);
    assert_near(weights32[2], e / (1 + e), F32_TOLERANCE);
}

static void test_softmax_single_key_gets_weight_one(void **state)
{
    (void)state;
    /* scores (3, 1): whatever the value, one key takes all the weight. */
    double scores64[3] = {-1e4, 0.0, 1e4}, weights64[3];
    float scores32[3] = {-1e4f, 0.0f, 1e4f}, weights32[3];
    attn_softmax_rows_f64(scores64, weights64, 3, 1);
    attn_softmax_rows_f32(scores32, weights32, 3, 1);
    for (size_t q = 0; q < 3; q++) {
        assert_true(weights64[q] == 1.0);
        assert_true(weights32[q] == 1.0f);
    }
}

static void test_softmax_all_masked_row_is_zero_not_nan(void **state)
{
    (void)state;
    /* scores (2, 3): row 0 fully masked, row 1 uniform. */
    double scores64[6] = {-INFINITY, -INFINITY, -INFINITY, 5.0, 5.0, 5.0};
    float scores32[6] = {-INFINITY, -INFINITY, -INFINITY, 5.0f, 5.0f, 5.0f};
    double weights64[6];
    float weights32[6];
    memset(weights64, 0xff, sizeof weights64);   /* NaN garbage beforehand */
    memset(weights32, 0xff, sizeof weights32);
    attn_softmax_rows_f64(scores64, weights64, 2, 3);
    attn_softmax_rows_f32(scores32, weights32, 2, 3);
    for (size_t k = 0; k < 3; k++) {
        assert_true(weights64[k] == 0.0);
        assert_true(weights32[k] == 0.0f);
        assert_near(weights64[3 + k], 1.0 / 3, F64_TOLERANCE);
        assert_near(weights32[3 + k], 1.0 / 3, F32_TOLERANCE);
    }
}

static void test_softmax_nan_row_stays_nan(void **state)
{
    (void)state;
    /* scores (2, 3): a NaN among -inf in row 0 (as --allow-nonfinite can
     * give) must not pass for a fully masked row; row 1 is unaffected. */
    double scores64[6] = {-INFINITY, NAN, -INFINITY, 0.0, 0.0, 0.0};
    float scores32[6] = {-INFINITY, NAN, -INFINITY, 0.0f, 0.0f, 0.0f};
    double weights64[6];
    float weights32[6];
    attn_softmax_rows_f64(scores64, weights64, 2, 3);
    attn_softmax_rows_f32(scores32, weights32, 2, 3);
    for (size_t k = 0; k < 3; k++) {
        assert_true(isnan(weights64[k]));
        assert_true(isnan(weights32[k]));
        assert_near(weights64[3 + k], 1.0 / 3, F64_TOLERANCE);
        assert_near(weights32[3 + k], 1.0 / 3, F32_TOLERANCE);
    }
}

static void test_softmax_in_place(void **state)
{
    (void)state;
    /* scores (1, 3) = (0, ln 2, ln 5): weights (1, 2, 5) / 8. */
    double row64[3] = {0.0, log(2.0), log(5.0)};
    float row32[3] = {0.0f, (float)log(2.0), (float)log(5.0)};
    attn_softmax_rows_f64(row64, row64, 1, 3);
    attn_softmax_rows_f32(row32, row32, 1, 3);
    const double expected[3] = {1.0 / 8, 2.0 / 8, 5.0 / 8};
    for (size_t k = 0; k < 3; k++) {
        assert_near(row64[k], expected[k], F64_TOLERANCE);
        assert_near(row32[k], expected[k], F32_TOLERANCE);
    }
}

/* ---- masks ------------------------------------------------------------- */

/* A mask and the entries of scores (n, m) it must hide, row by row: 'x'
 * hidden (-inf), '.' untouched. */
typedef struct mask_case {
    const char *what;
    size_t n, m;
    bool causal;
    const unsigned char *keep;      /* (m) or NULL */
    const char *hidden;             /* (n, m) */
} mask_case;

static const mask_case mask_cases[] = {
    {"causal, square: hidden where k > q", 3, 3, true, NULL, ".xx" "..x" "..."},
    {"causal, more keys than queries", 2, 4, true, NULL, ".xxx" "..xx"},
    {"causal, more queries than keys: only (0, 1)", 3, 2, true, NULL, ".x" ".." ".."},
    {"keep: any nonzero keeps", 2, 4, false, (const unsigned char[]){1, 0, 7, 0},
     ".x.x" ".x.x"},
    {"column 0 by keep, upper triangle by causality: row 0 fully hidden", 3, 3, true,
     (const unsigned char[]){0, 1, 1}, "xxx" "x.x" "x.."},
    {"nothing to hide changes nothing", 2, 3, false, NULL, "..." "..."},
};

/* Each case in both precisions on scores filled with 1 + q*m + k, so that
 * untouched entries are known. */
static void test_masks_hide_by_causality_and_keep(void **state)
{
    (void)state;
    for (size_t i = 0; i < COUNT(mask_cases); i++) {
        const mask_case *c = &mask_cases[i];
        double scores[4 * 4];
        float scores32[4 * 4];
        for (size_t j = 0; j < c->n * c->m; j++) {
            scores[j] = 1.0 + (double)j;
            scores32[j] = (float)scores[j];
        }
        attn_mask_f64(scores, c->n, c->m, c->causal, c->keep);
        attn_mask_f32(scores32, c->n, c->m, c->causal, c->keep);
        for (size_t j = 0; j < c->n * c->m; j++) {
            const double expected = c->hidden[j] == 'x' ? -INFINITY : 1.0 + (double)j;
            if (!test_near(scores[j], expected, 0.0) || !test_near(scores32[j], expected, 0.0))
                fail_msg("%s: entry %zu is %g (double), %g (float), expected %g", c->what, j,
                         scores[j], (double)scores32[j], expected);
        }
    }
}

/* ---- projections and head scores -------------------------------------- */

/* in (2, 3) . w (3, 2):
 *   [1 2 3]   [1 0]   [1+3  2+3]   [ 4  5]
 *   [4 5 6] . [0 1] = [4+6  5+6] = [10 11]
 *             [1 1]                          + bias (0.5, -1) */
static const double project_in[6] = {1, 2, 3, 4, 5, 6};
static const double project_w[6] = {1, 0, 0, 1, 1, 1};
static const double project_bias[2] = {0.5, -1};
static const double project_expected[4] = {4, 5, 10, 11};
static const double project_expected_bias[4] = {4.5, 4, 10.5, 10};

static void test_project_without_and_with_bias(void **state)
{
    (void)state;
    const struct {
        const double *bias;         /* (2) or NULL */
        const double *expected;     /* (2, 2) */
    } cases[] = {{NULL, project_expected}, {project_bias, project_expected_bias}};
    float in32[6], w32[6], bias32[2] = {(float)project_bias[0], (float)project_bias[1]};
    for (size_t i = 0; i < 6; i++) {
        in32[i] = (float)project_in[i];
        w32[i] = (float)project_w[i];
    }
    for (size_t c = 0; c < COUNT(cases); c++) {
        double out64[4];
        float out32[4];
        memset(out64, 0xff, sizeof out64);   /* garbage must be overwritten */
        memset(out32, 0xff, sizeof out32);
        attn_project_f64(project_in, 2, 3, project_w, 2, cases[c].bias, out64);
        attn_project_f32(in32, 2, 3, w32, 2, cases[c].bias ? bias32 : NULL, out32);
        assert_doubles_near(out64, cases[c].expected, 4, F64_TOLERANCE, "double projection");
        assert_floats_near(out32, cases[c].expected, 4, F32_TOLERANCE, "float projection");
    }
}

static void test_head_scores_strided_views(void **state)
{
    (void)state;
    /* q (n = 2, d = 2) in columns 1..2 of a (2, 5) buffer;
     * k (m = 3, d = 2) in columns 2..3 of a (3, 4) buffer; 99 is padding.
     *   q = [1 2; 3 -1],  k = [1 0; 0 1; 2 2]
     *   q k^T = [1 2 6; 3 -1 4],  times scale 0.5 */
    const double q[2 * 5] = {99, 1, 2, 99, 99, 99, 3, -1, 99, 99};
    const double k[3 * 4] = {99, 99, 1, 0, 99, 99, 0, 1, 99, 99, 2, 2};
    const double expected[2 * 3] = {0.5, 1, 3, 1.5, -0.5, 2};
    double scores64[6];
    float q32[10], k32[12], scores32[6];
    for (size_t i = 0; i < 10; i++)
        q32[i] = (float)q[i];
    for (size_t i = 0; i < 12; i++)
        k32[i] = (float)k[i];
    attn_head_scores_f64(q + 1, 5, k + 2, 4, 2, 3, 2, 0.5, scores64);
    attn_head_scores_f32(q32 + 1, 5, k32 + 2, 4, 2, 3, 2, 0.5, scores32);
    for (size_t i = 0; i < 6; i++) {
        assert_near(scores64[i], expected[i], F64_TOLERANCE);
        assert_near(scores32[i], expected[i], F32_TOLERANCE);
    }
}

static void test_head_output_strided_views(void **state)
{
    (void)state;
    /* weights (n = 2, m = 2) = [0.25 0.75; 1 0];
     * v (m = 2, dv = 2) in columns 1..2 of a (2, 3) buffer: [2 4; 6 8];
     * out (2, 2) into columns 0..1 of a (2, 3) buffer, column 2 untouched:
     *   [0.5+4.5  1+6] = [5 7],  [2 4] */
    const double weights[4] = {0.25, 0.75, 1, 0};
    const double v[6] = {99, 2, 4, 99, 6, 8};
    double out[6] = {0, 0, -7, 0, 0, -7};
    attn_head_output_f64(weights, v + 1, 3, 2, 2, 2, out, 3);
    const double expected[6] = {5, 7, -7, 2, 4, -7};
    for (size_t i = 0; i < 6; i++)
        assert_near(out[i], expected[i], F64_TOLERANCE);
}

static void test_split_heads_reorders_head_major(void **state)
{
    (void)state;
    /* packed (rows = 2, H = 3, d = 2) holding 0..11:
     *   row 0: h0 (0 1)  h1 (2 3)  h2 (4 5)
     *   row 1: h0 (6 7)  h1 (8 9)  h2 (10 11)
     * split (3, 2, 2): h0 rows (0 1) (6 7), h1 (2 3) (8 9), h2 (4 5) (10 11) */
    const double expected[12] = {0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11};
    double packed64[12], split64[12];
    float packed32[12], split32[12];
    for (size_t i = 0; i < 12; i++) {
        packed64[i] = (double)i;
        packed32[i] = (float)i;
    }
    attn_split_heads_f64(packed64, 2, 3, 2, split64);
    attn_split_heads_f32(packed32, 2, 3, 2, split32);
    for (size_t i = 0; i < 12; i++) {
        assert_near(split64[i], expected[i], 0.0);
        assert_near(split32[i], expected[i], 0.0);
    }
}

static void test_find_nonfinite(void **state)
{
    (void)state;
    const double finite64[4] = {0.0, -1e308, 1e308, 5e-324};
    const float finite32[4] = {0.0f, -3.4e38f, 3.4e38f, 1e-45f};
    const double nan_at_2[4] = {1, 2, NAN, INFINITY};
    const float inf_at_0[3] = {INFINITY, 1, 2};
    const float neg_inf_at_3[4] = {1, 2, 3, -INFINITY};
    const double neg_inf_at_1[2] = {0, -INFINITY};

    assert_int_equal(attn_find_nonfinite_f64(finite64, 4), 4);
    assert_int_equal(attn_find_nonfinite_f32(finite32, 4), 4);
    assert_int_equal(attn_find_nonfinite_f64(nan_at_2, 4), 2);
    assert_int_equal(attn_find_nonfinite_f64(nan_at_2, 2), 2);   /* only the first 2 */
    assert_int_equal(attn_find_nonfinite_f32(inf_at_0, 3), 0);
    assert_int_equal(attn_find_nonfinite_f32(neg_inf_at_3, 4), 3);
    assert_int_equal(attn_find_nonfinite_f64(neg_inf_at_1, 2), 1);
    assert_int_equal(attn_find_nonfinite_f64(finite64, 0), 0);

    /* Long arrays are scanned in blocks: hits in later blocks, at block
     * edges, and the first of two hits. */
    enum { LONG = 10007 };
    static float long32[LONG];
    static double long64[LONG];
    const size_t at[] = {4095, 4096, 8191, 8192, LONG - 1};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        for (size_t j = 0; j < LONG; j++) {
            long32[j] = (float)j;
            long64[j] = (double)j;
        }
        assert_int_equal(attn_find_nonfinite_f32(long32, LONG), LONG);
        long32[at[i]] = NAN;
        long64[at[i]] = -INFINITY;
        if (at[i] + 3 < LONG) {
            long32[at[i] + 3] = INFINITY;
            long64[at[i] + 3] = NAN;
        }
        assert_int_equal(attn_find_nonfinite_f32(long32, LONG), at[i]);
        assert_int_equal(attn_find_nonfinite_f64(long64, LONG), at[i]);
        assert_int_equal(attn_find_nonfinite_f32(long32, at[i]), at[i]);   /* not counted */
    }
    /* the last block ends at count, not a block further: a NaN just past
     * count, in the same block, is not the array's */
    for (size_t j = 0; j < LONG; j++)
        long64[j] = (double)j;
    long64[4101] = NAN;
    assert_int_equal(attn_find_nonfinite_f64(long64, 4100), 4100);
    assert_int_equal(attn_find_nonfinite_f64(long64, 4102), 4101);
}

/* ---- the whole forward pass against a reference ----------------------- */

/* One attention problem, in double, with the sizes of attn_math.h. */
typedef struct forward_case {
    size_t c, n, m, D, H, dk, dv;
    double scale;
    bool causal;
    bool shared_y;               /* y is one (m, D) block: y_stride 0      */
    bool has_bias;
    const unsigned char *keep;   /* (c, m), (m) when shared_keep, or NULL  */
    bool shared_keep;
    double *x;                   /* (c, n, D)                              */
    double *y;                   /* (c, m, D), or (m, D) when shared_y     */
    double *w_q, *w_k;           /* (D, H*dk)                              */
    double *w_v;                 /* (D, H*dv)                              */
    double *w_o;                 /* (H*dv, D)                              */
    double *b_q, *b_k, *b_v, *b_o;   /* (H*dk) (H*dk) (H*dv) (D) or NULL   */
} forward_case;

/* What the reference computes, all in double. */
typedef struct forward_result {
    double *q;         /* (c, n, H*dk) */
    double *k;         /* (c, m, H*dk) */
    double *v;         /* (c, m, H*dv) */
    double *scores;    /* (c, H, n, m) */
    double *weights;   /* (c, H, n, m) */
    double *heads;     /* (c, H, n, dv) */
    double *output;    /* (c, n, D)    */
} forward_result;

static size_t y_rows(const forward_case *fc)
{
    return fc->shared_y ? fc->m : fc->c * fc->m;
}

static void make_case(forward_case *fc)
{
    size_t hk = fc->H * fc->dk, hv = fc->H * fc->dv;
    fc->x = fill_values(fc->c * fc->n * fc->D, 0.1);
    fc->y = fill_values(y_rows(fc) * fc->D, 0.7);
    fc->w_q = fill_values(fc->D * hk, 1.3);
    fc->w_k = fill_values(fc->D * hk, 2.9);
    fc->w_v = fill_values(fc->D * hv, 3.7);
    fc->w_o = fill_values(hv * fc->D, 4.1);
    if (fc->has_bias) {
        fc->b_q = fill_values(hk, 5.3);
        fc->b_k = fill_values(hk, 6.2);
        fc->b_v = fill_values(hv, 7.9);
        fc->b_o = fill_values(fc->D, 8.6);
    }
}

static void free_case(forward_case *fc)
{
    double **all[] = {&fc->x, &fc->y, &fc->w_q, &fc->w_k, &fc->w_v, &fc->w_o,
                      &fc->b_q, &fc->b_k, &fc->b_v, &fc->b_o};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        free(*all[i]);
        *all[i] = NULL;
    }
}

static void reference_forward(const forward_case *fc, forward_result *r)
{
    const size_t c = fc->c, n = fc->n, m = fc->m, D = fc->D, H = fc->H;
    const size_t dk = fc->dk, dv = fc->dv, hk = H * dk, hv = H * dv;
    r->q = calloc(c * n * hk, sizeof(double));
    r->k = calloc(c * m * hk, sizeof(double));
    r->v = calloc(c * m * hv, sizeof(double));
    r->scores = calloc(c * H * n * m, sizeof(double));
    r->weights = calloc(c * H * n * m, sizeof(double));
    r->heads = calloc(c * H * n * dv, sizeof(double));
    r->output = calloc(c * n * D, sizeof(double));
    assert_true(r->q && r->k && r->v && r->scores && r->weights && r->heads && r->output);

    for (size_t b = 0; b < c; b++) {
        const double *y = fc->y + (fc->shared_y ? 0 : b * m * D);
        const unsigned char *keep =
            fc->keep == NULL ? NULL : fc->keep + (fc->shared_keep ? 0 : b * m);
        double *q = r->q + b * n * hk, *k = r->k + b * m * hk, *v = r->v + b * m * hv;
        reference_project(fc->x + b * n * D, n, D, fc->w_q, hk, fc->b_q, q);
        reference_project(y, m, D, fc->w_k, hk, fc->b_k, k);
        reference_project(y, m, D, fc->w_v, hv, fc->b_v, v);

        for (size_t h = 0; h < H; h++) {
            double *scores = r->scores + (b * H + h) * n * m;
            double *weights = r->weights + (b * H + h) * n * m;
            double *head = r->heads + (b * H + h) * n * dv;
            for (size_t i = 0; i < n; i++) {
                double max = -INFINITY;
                for (size_t j = 0; j < m; j++) {
                    double dot = 0;
                    for (size_t t = 0; t < dk; t++)
                        dot += q[i * hk + h * dk + t] * k[j * hk + h * dk + t];
                    bool hidden = (fc->causal && j > i) || (keep != NULL && keep[j] == 0);
                    scores[i * m + j] = hidden ? -INFINITY : fc->scale * dot;
                    if (scores[i * m + j] > max)
                        max = scores[i * m + j];
                }
                double sum = 0;
                for (size_t j = 0; j < m; j++) {
                    weights[i * m + j] = max == -INFINITY ? 0.0 : exp(scores[i * m + j] - max);
                    sum += weights[i * m + j];
                }
                for (size_t j = 0; j < m; j++)
                    weights[i * m + j] = sum > 0 ? weights[i * m + j] / sum : 0.0;
                for (size_t t = 0; t < dv; t++) {
                    double acc = 0;
                    for (size_t j = 0; j < m; j++)
                        acc += weights[i * m + j] * v[j * hv + h * dv + t];
                    head[i * dv + t] = acc;
                }
            }
        }
        /* output (n, D) = sum over heads of head (n, dv) . W_O rows h*dv.. + b_O */
        for (size_t i = 0; i < n; i++)
            for (size_t o = 0; o < D; o++) {
                double acc = fc->b_o ? fc->b_o[o] : 0.0;
                for (size_t h = 0; h < H; h++)
                    for (size_t t = 0; t < dv; t++)
                        acc += r->heads[((b * H + h) * n + i) * dv + t] * fc->w_o[(h * dv + t) * D + o];
                r->output[(b * n + i) * D + o] = acc;
            }
    }
}

static void free_result(forward_result *r)
{
    free(r->q);
    free(r->k);
    free(r->v);
    free(r->scores);
    free(r->weights);
    free(r->heads);
    free(r->output);
}

/* A copy of values (count) in the given precision (NULL stays NULL). */
static void *converted(const double *values, size_t count, attn_precision precision)
{
    if (values == NULL)
        return NULL;
    void *out = malloc(count * attn_precision_size(precision));
    assert_non_null(out);
    for (size_t i = 0; i < count; i++) {
        if (precision == ATTN_F64)
            ((double *)out)[i] = values[i];
        else
            ((float *)out)[i] = (float)values[i];
    }
    return out;
}

static double element(const void *buf, size_t i, attn_precision precision)
{
    return precision == ATTN_F64 ? ((const double *)buf)[i] : (double)((const float *)buf)[i];
}

static void assert_buffer_near(const void *actual, const double *expected, size_t count,
                               attn_precision precision, double tolerance, const char *what)
{
    if (precision == ATTN_F64)
        assert_doubles_near(actual, expected, count, tolerance, what);
    else
        assert_floats_near(actual, expected, count, tolerance, what);
}

/* Runs attn_forward on fc in `precision`, checks every buffer against
 * reference r, and returns the library's output (c, n, D) in double
 * (caller frees). */
static double *run_forward_and_compare(const forward_case *fc, const forward_result *r,
                                       attn_precision precision)
{
    const size_t c = fc->c, n = fc->n, m = fc->m, D = fc->D, H = fc->H;
    const size_t hk = H * fc->dk, hv = H * fc->dv, es = attn_precision_size(precision);
    const double tolerance = precision == ATTN_F64 ? F64_FORWARD_TOLERANCE : F32_FORWARD_TOLERANCE;
    attn_config cfg = {
        .dims = {.batch = c, .n = n, .m = m, .d_model = D, .heads = H, .d_k = fc->dk, .d_v = fc->dv},
        .variant = {.scale = fc->scale, .causal = fc->causal}, .precision = precision,
    };
    void *x = converted(fc->x, c * n * D, precision);
    void *y = converted(fc->y, y_rows(fc) * D, precision);
    attn_weights w = {
        .w_q = converted(fc->w_q, D * hk, precision), .w_k = converted(fc->w_k, D * hk, precision),
        .w_v = converted(fc->w_v, D * hv, precision), .w_o = converted(fc->w_o, hv * D, precision),
        .b_q = converted(fc->b_q, hk, precision), .b_k = converted(fc->b_k, hk, precision),
        .b_v = converted(fc->b_v, hv, precision), .b_o = converted(fc->b_o, D, precision),
    };
    attn_slice s = {
        .count = c, .x = x, .y = y, .y_stride = fc->shared_y ? 0 : m * D,
        .keep = fc->keep, .keep_stride = fc->shared_keep ? 0 : m,
        .q = calloc(c * n * hk, es), .k = calloc(c * m * hk, es), .v = calloc(c * m * hv, es),
        .scores = calloc(c * H * n * m, es), .weights = calloc(c * H * n * m, es),
        .heads = calloc(c * H * n * fc->dv, es), .concat = calloc(c * n * hv, es),
        .output = calloc(c * n * D, es),
        .scratch = aligned_alloc(64, (attn_attend_scratch_bytes(&cfg, c, false) + 63) / 64 * 64),
    };
    assert_true(x && y && s.q && s.k && s.v && s.scores && s.weights && s.heads && s.concat &&
                s.output && s.scratch);

    attn_forward(&cfg, &w, &s);

    assert_buffer_near(s.q, r->q, c * n * hk, precision, tolerance, "q");
    assert_buffer_near(s.k, r->k, c * m * hk, precision, tolerance, "k");
    assert_buffer_near(s.v, r->v, c * m * hv, precision, tolerance, "v");
    assert_buffer_near(s.scores, r->scores, c * H * n * m, precision, tolerance, "scores");
    assert_buffer_near(s.weights, r->weights, c * H * n * m, precision, tolerance, "weights");
    assert_buffer_near(s.heads, r->heads, c * H * n * fc->dv, precision, tolerance, "heads");
    assert_buffer_near(s.output, r->output, c * n * D, precision, tolerance, "output");

    double *output = malloc(c * n * D * sizeof *output);
    assert_non_null(output);
    for (size_t i = 0; i < c * n * D; i++)
        output[i] = element(s.output, i, precision);

    free(x);
    free(y);
    free((void *)w.w_q); free((void *)w.w_k); free((void *)w.w_v); free((void *)w.w_o);
    free((void *)w.b_q); free((void *)w.b_k); free((void *)w.b_v); free((void *)w.b_o);
    free(s.q); free(s.k); free(s.v); free(s.scores); free(s.weights);
    free(s.heads); free(s.concat); free(s.output); free(s.scratch);
    return output;
}

/* The library in both precisions against reference r of fc. */
static void run_both_precisions(const forward_case *fc, const forward_result *r)
{
    free(run_forward_and_compare(fc, r, ATTN_F64));
    free(run_forward_and_compare(fc, r, ATTN_F32));
}

static void test_forward_matches_reference(void **state)
{
    (void)state;
    static const unsigned char keep[4] = {1, 1, 0, 1};
    const forward_case cases[] = {
        /* two heads, d_k != d_v so that a mix-up of the two shows */
        {.c = 2, .n = 3, .m = 3, .D = 4, .H = 2, .dk = 2, .dv = 3, .scale = 1 / sqrt(2.0),
         .has_bias = true},
        /* without biases */
        {.c = 1, .n = 3, .m = 3, .D = 4, .H = 2, .dk = 2, .dv = 2, .scale = 0.5},
        /* cross: n = 2 queries, m = 4 keys from one shared (m, D) block and
         * one shared keep row, causal with m != n */
        {.c = 3, .n = 2, .m = 4, .D = 4, .H = 2, .dk = 3, .dv = 2, .scale = 0.4, .causal = true,
         .shared_y = true, .has_bias = true, .keep = keep, .shared_keep = true},
    };
    for (size_t i = 0; i < COUNT(cases); i++) {
        forward_case fc = cases[i];
        forward_result r = {0};
        make_case(&fc);
        reference_forward(&fc, &r);
        run_both_precisions(&fc, &r);
        free_result(&r);
        free_case(&fc);
    }
}

static void test_forward_causal_matches_reference(void **state)
{
    (void)state;
    forward_case fc = {.c = 2, .n = 3, .m = 3, .D = 4, .H = 2, .dk = 2, .dv = 3,
                       .scale = 1 / sqrt(2.0), .causal = true, .has_bias = true};
    forward_result r = {0};
    make_case(&fc);
    reference_forward(&fc, &r);
    /* The reference itself: query 0 sees only key 0, whatever the scores. */
    for (size_t bh = 0; bh < fc.c * fc.H; bh++) {
        assert_near(r.weights[bh * 9 + 0], 1.0, 0.0);
        assert_near(r.scores[bh * 9 + 1], -INFINITY, 0.0);
    }
    run_both_precisions(&fc, &r);
    free_result(&r);
    free_case(&fc);
}

static void test_forward_item_with_every_key_masked_gives_bias(void **state)
{
    (void)state;
    /* keep (c = 2, m = 3): item 0 keeps keys 0 and 2, item 1 keeps none. */
    static const unsigned char keep[2 * 3] = {1, 0, 1, 0, 0, 0};
    forward_case fc = {.c = 2, .n = 3, .m = 3, .D = 4, .H = 2, .dk = 2, .dv = 3,
                       .scale = 1 / sqrt(2.0), .has_bias = true, .keep = keep};
    forward_result r = {0};
    make_case(&fc);
    reference_forward(&fc, &r);
    for (int p = 0; p < 2; p++) {
        attn_precision precision = p == 0 ? ATTN_F64 : ATTN_F32;
        double tolerance = p == 0 ? F64_FORWARD_TOLERANCE : F32_FORWARD_TOLERANCE;
        double *output = run_forward_and_compare(&fc, &r, precision);
        /* item 1: heads are 0, so output (n, D) is b_O on every row */
        for (size_t i = 0; i < fc.n; i++)
            for (size_t o = 0; o < fc.D; o++) {
                double value = output[(1 * fc.n + i) * fc.D + o];
                assert_true(isfinite(value));
                assert_near(value, fc.b_o[o], tolerance);
            }
        /* item 0 attends, so its output is not just b_O */
        double distance = 0;
        for (size_t o = 0; o < fc.D; o++)
            distance += fabs(output[o] - fc.b_o[o]);
        assert_true(distance > 1e-3);
        free(output);
    }
    /* the reference agrees, independently of the library */
    for (size_t i = 0; i < fc.H * fc.n * fc.m; i++) {
        assert_near(r.weights[fc.H * fc.n * fc.m + i], 0.0, 0.0);
        assert_near(r.scores[fc.H * fc.n * fc.m + i], -INFINITY, 0.0);
    }
    free_result(&r);
    free_case(&fc);
}

/* Uniform attention, computed by hand: W_Q = 0 makes every logit 0, so
 * under the causal mask query q spreads 1/(q+1) over keys 0..q.  Then
 * entropy = log(q+1), argmax = 0 (every logit ties: the first),
 * distance = sum_k (q-k)/(q+1) = q/2, mean = 1/(q+1) on k <= q, and
 * result[q][h] = (mean of v_h over k <= q) * W_O row h.  Both softmax
 * paths: the maps kept (weights set) and the online one (no maps). */
static void test_forward_summaries_of_uniform_attention(void **state)
{
    (void)state;
    enum { N = 5, D = 2, H = 2 };
    static const double x[N * D] = {1, -2, 3, 0.5, -1, 4, 2, 2, 0.25, -3};
    static const double w_q[D * H] = {0, 0, 0, 0}, w_k[D * H] = {1, 0, 0, 1};
    static const double w_v[D * H] = {1, 0, 0, 1};          /* v_h = x[:, h] */
    static const double w_o[H * D] = {1, 2, 3, 4};          /* (H*dv, D)     */
    for (int online = 0; online < 2; online++) {
        double weights[H * N * N], concat[N * H], output[N * D], q[N * H], k[N * H], v[N * H];
        double entropy[H * N], distance[H * N], mean[N * N], result[N * H * D];
        int32_t argmax[H * N];
        attn_config cfg = {
            .dims = {.batch = 1, .n = N, .m = N, .d_model = D, .heads = H, .d_k = 1, .d_v = 1},
            .variant = {.scale = 1, .causal = true}, .precision = ATTN_F64,
        };
        attn_weights w = {.w_q = w_q, .w_k = w_k, .w_v = w_v, .w_o = w_o};
        attn_slice sl = {
            .count = 1, .x = x, .y = x, .y_stride = N * D, .q = q, .k = k, .v = v,
            .weights = online ? NULL : weights, .concat = concat, .output = output,
            .summary = {[ATTN_SUMMARY_ENTROPY] = entropy, [ATTN_SUMMARY_ARGMAX] = argmax,
                        [ATTN_SUMMARY_DISTANCE] = distance},
            .mean = online ? NULL : mean, .result = result,
            .scratch = aligned_alloc(64, (attn_attend_scratch_bytes(&cfg, 1, online) + 63) / 64 * 64),
        };
        assert_non_null(sl.scratch);
        attn_forward(&cfg, &w, &sl);
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < N; i++) {
                assert_near(entropy[h * N + i], log((double)(i + 1)), 1e-14);
                assert_int_equal(argmax[h * N + i], 0);
                assert_near(distance[h * N + i], (double)i / 2, 1e-14);
                double v_mean = 0;
                for (size_t j = 0; j <= i; j++)
                    v_mean += x[j * D + h] / (double)(i + 1);
                for (size_t o = 0; o < D; o++)
                    assert_near(result[(i * H + h) * D + o], v_mean * w_o[h * D + o], 1e-13);
            }
        for (size_t i = 0; i < N && !online; i++)
            for (size_t j = 0; j < N; j++)
                assert_near(mean[i * N + j], j <= i ? 1.0 / (double)(i + 1) : 0.0, 1e-15);
        free(sl.scratch);
    }
}

/* ---- progress from inside attn_attend (attn_progress) -------------------- */

/* What attn_progress.report saw. */
typedef struct pairs_log {
    pthread_t caller;            /* the thread that called attn_attend     */
    size_t calls;
    uint64_t last;
    bool rising;                 /* every report at or above the one before */
    bool elsewhere;              /* a report from another thread           */
} pairs_log;

static void log_pairs(uint64_t pairs, void *context)
{
    pairs_log *log = context;
    if (!pthread_equal(pthread_self(), log->caller))
        log->elsewhere = true;
    if (pairs < log->last)
        log->rising = false;
    log->last = pairs;
    log->calls++;
}

/* (query, key) pairs of rows [row0, row0 + rows) that a causal mask and a
 * window leave visible, n = m, counted key by key. */
static uint64_t pairs_seen(size_t row0, size_t rows, size_t m, bool causal, size_t window)
{
    uint64_t pairs = 0;
    for (size_t q = row0; q < row0 + rows; q++)
        for (size_t k = 0; k < m; k++)
            pairs += (!causal || k <= q) && (window == 0 || k + window > q);
    return pairs;
}

/* Each task of attn_attend counts the pairs its rows see: after a call,
 * c H times those of its rows, on both softmax paths, for the causal mask,
 * a window and both; the reports rise and come from the calling thread
 * only, at least one with `every` 0, and none before `every` seconds
 * have passed. */
static void test_attend_counts_and_reports_pairs(void **state)
{
    (void)state;
    enum { C = 2, N = 600, D = 4, H = 2 };
    const struct { bool causal; size_t window; } variants[] = {{true, 0}, {true, 100}, {false, 50}};
    static double x[C * N * D], w[D * H], q[C * N * H], k[C * N * H], v[C * N * H];
    static double concat[C * N * H], output[C * N * D];
    double *maps = calloc((size_t)C * H * N * N, sizeof *maps);
    assert_non_null(maps);
    for (int online = 0; online < 2; online++)
        for (size_t i = 0; i < COUNT(variants); i++) {
            pairs_log log = {.caller = pthread_self(), .rising = true};
            attn_progress progress = {.report = log_pairs, .context = &log};
            attn_config cfg = {
                .dims = {.batch = C, .n = N, .m = N, .d_model = D, .heads = H, .d_k = 1, .d_v = 1},
                .variant = {.scale = 1, .causal = variants[i].causal, .window = variants[i].window},
                .precision = ATTN_F64, .progress = &progress,
            };
            attn_weights weights = {.w_q = w, .w_k = w, .w_v = w, .w_o = w};
            attn_slice s = {
                .count = C, .x = x, .y = x, .y_stride = N * D, .q = q, .k = k, .v = v,
                .weights = online ? NULL : maps, .concat = concat, .output = output,
                .scratch = aligned_alloc(64, (attn_attend_scratch_bytes(&cfg, C, online) + 63) /
                                                 64 * 64),
            };
            assert_non_null(s.scratch);
            attn_forward(&cfg, &weights, &s);
            const bool causal = variants[i].causal;
            const size_t window = variants[i].window;
            assert_int_equal(progress.pairs, C * H * pairs_seen(0, N, N, causal, window));
            assert_true(log.calls >= 1 && log.rising && !log.elsewhere);
            assert_true(log.last <= progress.pairs);

            /* rows [100, 400): from 0 again; no report within a day */
            const size_t calls = log.calls;
            progress.pairs = 0;
            progress.every = 86400;
            attn_attend(&cfg, &s, 100, 300);
            assert_int_equal(progress.pairs, C * H * pairs_seen(100, 300, N, causal, window));
            assert_int_equal(log.calls, calls);

            /* every a microsecond, on one thread: the clock is read to its
             * nanoseconds, so each task after the first (there are several,
             * each longer than that) reports again, within one second */
            progress.pairs = 0;
            progress.last = 0;
            progress.every = 1e-6;
            const int threads = attn_threads();
            attn_set_threads(1);
            attn_attend(&cfg, &s, 0, N);
            attn_set_threads(threads);
            assert_true(log.calls >= calls + 2);
            free(s.scratch);
        }
    free(maps);
}

/* attn_forward in float32 on fc with X, W_V and W_O times x_factor,
 * v_factor and o_factor; returns the slice's overflow bits. */
static int overflow_bits(const forward_case *fc, double x_factor, double v_factor,
                         double o_factor, bool check)
{
    const size_t c = fc->c, n = fc->n, m = fc->m, D = fc->D, H = fc->H;
    const size_t hk = H * fc->dk, hv = H * fc->dv;
    attn_config cfg = {
        .dims = {.batch = c, .n = n, .m = m, .d_model = D, .heads = H, .d_k = fc->dk, .d_v = fc->dv},
        .variant.scale = fc->scale, .precision = ATTN_F32, .check_overflow = check,
    };
    float *x = converted(fc->x, c * n * D, ATTN_F32), *w_o = converted(fc->w_o, hv * D, ATTN_F32);
    float *w_v = converted(fc->w_v, D * hv, ATTN_F32);
    assert_true(x != NULL && w_o != NULL && w_v != NULL);
    for (size_t i = 0; i < c * n * D; i++)
        x[i] = (float)(x[i] * x_factor);
    for (size_t i = 0; i < hv * D; i++) {
        w_o[i] = (float)(w_o[i] * o_factor);
        w_v[i] = (float)(w_v[i] * v_factor);
    }
    for (size_t i = 0; i < c * n * D; i++)
        assert_true(isfinite(x[i]));              /* the inputs stay finite */
    attn_weights w = {
        .w_q = converted(fc->w_q, D * hk, ATTN_F32), .w_k = converted(fc->w_k, D * hk, ATTN_F32),
        .w_v = w_v, .w_o = w_o,
    };
    attn_slice s = {
        .count = c, .x = x, .y = x, .y_stride = n * D,
        .q = calloc(c * n * hk, 4), .k = calloc(c * m * hk, 4), .v = calloc(c * m * hv, 4),
        .scores = calloc(c * H * n * m, 4), .weights = calloc(c * H * n * m, 4),
        .concat = calloc(c * n * hv, 4), .output = calloc(c * n * D, 4),
        .scratch = aligned_alloc(64, (attn_attend_scratch_bytes(&cfg, c, false) + 63) / 64 * 64),
    };
    assert_true(w.w_q && w.w_k && w.w_v && s.q && s.k && s.v && s.scores && s.weights && s.concat &&
                s.output && s.scratch);
    attn_forward(&cfg, &w, &s);
    free(x);
    free(w_o);
    free(w_v);
    free((void *)w.w_q); free((void *)w.w_k);
    free(s.q); free(s.k); free(s.v); free(s.scores); free(s.weights);
    free(s.concat); free(s.output); free(s.scratch);
    return s.overflow;
}

/* Finite inputs whose products exceed float32 are flagged where they
 * overflow, and only when asked. */
static void test_forward_flags_overflow_of_finite_inputs(void **state)
{
    (void)state;
    forward_case fc = {.c = 2, .n = 3, .m = 3, .D = 4, .H = 2, .dk = 2, .dv = 2, .scale = 1};
    make_case(&fc);
    /* the values of make_case are below 1: X of 1e17 keeps q and k below
     * 1e18, and their products of about 1e34 times 2 terms in float32 */
    assert_int_equal(overflow_bits(&fc, 1, 1, 1, true), 0);
    assert_int_equal(overflow_bits(&fc, 1e17, 1, 1, true), 0);
    /* X around 1e21: q and k near 1e21, logits near 1e42 > 3.4e38 (and
     * the NaN weights that follow reach the output) */
    int bits = overflow_bits(&fc, 1e21, 1, 1, true);
    assert_true(bits & ATTN_OVERFLOW_SCORES);
    assert_false(bits & ATTN_OVERFLOW_PROJECTIONS);
    /* X around 3e38: the projections themselves overflow */
    assert_true(overflow_bits(&fc, 3e38, 1, 1, true) & ATTN_OVERFLOW_PROJECTIONS);
    /* W_V around 1e6 (heads near 1e5, finite) and W_O around 3e38: each
     * product of the output projection passes 3.4e38 */
    assert_int_equal(overflow_bits(&fc, 1, 1e6, 3e38, true), ATTN_OVERFLOW_OUTPUT);
    /* not asked (--allow-nonfinite): nothing flagged */
    assert_int_equal(overflow_bits(&fc, 1e21, 1, 3e38, false), 0);
    free_case(&fc);
}

/* ---- head census --------------------------------------------------------- */

/*
 * One head, n = m = 3, tokens A B A (ids 7 3 7), two items; p is a row,
 * q its query.  Item 0 (block of rows 0-1, then row 2):
 *     q0 [1    0    0   ]
 *     q1 [0.75 0.25 0   ]
 *     q2 [0.25 0.5  0.25]
 * item 1:
 *     q0 [0    0    0   ]   all zero: left out of every score
 *     q1 [0    1    0   ]
 *     q2 [0.5  0    0.5 ]
 * Five rows count.  By hand:
 *   entropy  = (0 + h(.75,.25) + h(.25,.5,.25) + 0 + h(.5,.5)) / 5,
 *              h = -sum p ln p
 *   distance = (0 + .75 + (.25*2 + .5*1) + 0 + .5*2) / 5 = 2.75 / 5 = 0.55
 *   first    = (1 + .75 + .25 + 0 + .5) / 5 = 0.5
 *   previous = rows q >= 1: (.75 + .5 + 0 + 0) / 4 = 0.3125
 *   self     = (1 + .25 + .25 + 1 + .5) / 5 = 0.6
 *   duplicate: only q2 (A) has an earlier A, key 0: (.25 + .5) / 2 = 0.375
 *   induction: only q2 has a key k <= 2 after an A (k = 1, token 0 is A;
 *              k = 2 follows B): (.5 + 0) / 2 = 0.25
 */
static void test_census_by_hand(void **state)
{
    (void)state;
    static const float item0[3][3] = {{1, 0, 0}, {0.75f, 0.25f, 0}, {0.25f, 0.5f, 0.25f}};
    static const float item1[3][3] = {{0, 0, 0}, {0, 1, 0}, {0.5f, 0, 0.5f}};
    static const int32_t ids[3] = {7, 3, 7};
    attn_census census = {0}, plain = {0};
    attn_census_tokens tokens;
    attn_error err;
    assert_int_equal(attn_census_tokens_build(&tokens, 3, 3, ids, ids, &err), ATTN_OK);
    attn_census_add(&census, 0, 2, 3, &item0[0][0], &tokens);     /* rows 0-1 */
    attn_census_add(&census, 2, 1, 3, &item0[2][0], &tokens);     /* row 2    */
    attn_census_add(&census, 0, 3, 3, &item1[0][0], &tokens);
    attn_census_add(&plain, 0, 3, 3, &item0[0][0], NULL);
    attn_census_add(&plain, 0, 3, 3, &item1[0][0], NULL);
    attn_census_tokens_free(&tokens);

    const double entropy = (-(0.75 * log(0.75) + 0.25 * log(0.25)) -
                            (0.5 * log(0.25) + 0.5 * log(0.5)) - log(0.5)) / 5;
    const double expected[ATTN_CENSUS_COUNT] = {
        [ATTN_CENSUS_ENTROPY] = entropy, [ATTN_CENSUS_DISTANCE] = 0.55,
        [ATTN_CENSUS_FIRST] = 0.5, [ATTN_CENSUS_PREVIOUS] = 0.3125, [ATTN_CENSUS_SELF] = 0.6,
        [ATTN_CENSUS_DUPLICATE] = 0.375, [ATTN_CENSUS_INDUCTION] = 0.25,
    };
    const size_t rows[ATTN_CENSUS_COUNT] = {5, 5, 5, 4, 5, 2, 2};
    for (int k = 0; k < ATTN_CENSUS_COUNT; k++) {
        assert_near(attn_census_score(&census, (attn_census_kind)k), expected[k], F64_TOLERANCE);
        assert_int_equal(census.rows[k], rows[k]);
        if (attn_census_needs_tokens((attn_census_kind)k)) {     /* without tokens: none */
            assert_true(isnan(attn_census_score(&plain, (attn_census_kind)k)));
        } else {
            assert_near(attn_census_score(&plain, (attn_census_kind)k), expected[k],
                        F64_TOLERANCE);
        }
    }
    for (int k = 0; k < ATTN_CENSUS_COUNT; k++)              /* every row of the table */
        assert_true(attn_census_name((attn_census_kind)k) != NULL &&
                    attn_census_definition((attn_census_kind)k) != NULL &&
                    strstr(attn_census_description((attn_census_kind)k), "mean of") != NULL);
    assert_string_equal(attn_census_name(ATTN_CENSUS_INDUCTION), "induction");
    assert_true(strstr(attn_census_description(ATTN_CENSUS_PREVIOUS), "p_(q-1)") != NULL);
}

/* ---- attention rollout --------------------------------------------------- */

/*
 * n = 3, two layers, r = 0.5 (attn_rollout_accumulate, _layer, _step).
 * Layer 1, two heads, summed with weight 1/2:
 *     h0 [1 0 0; 1 0 0; 0 1 0],  h1 = I  ->  mean W1 [1 0 0; .5 .5 0; 0 .5 .5]
 *     A1 = .5 W1 + .5 I = [1 0 0; .25 .75 0; 0 .25 .75]   (rows sum to 1)
 * Layer 2, its mean W2 = [0 1 0; 0 0 1; .5 .25 .25]:
 *     A2 = .5 W2 + .5 I = [.5 .5 0; 0 .5 .5; .25 .125 .625]
 *     R2 = A2 A1: row 0  .5 [1 0 0] + .5 [.25 .75 0]           = [.625 .375 0]
 *                 row 1  .5 [.25 .75 0] + .5 [0 .25 .75]       = [.125 .5 .375]
 *                 row 2  .25 [1 0 0] + .125 [.25 .75 0]
 *                        + .625 [0 .25 .75]                    = [.28125 .25 .46875]
 * Then rows that do not sum to 1: mean [2 2 0; 0 0 0; 1 0 3] with r = 0
 * gives [.5 .5 0; 0 0 0; .25 0 .75] (the row of 0 stays 0); with r = 1
 * the identity; the row of 0 with r = .5 is I's row, [0 1 0].
 * Every value is a binary fraction: the results are exact.
 */
/* attn_rollout_accumulate adds exactly count values: the element past
 * them, in sum and in values, is neither written nor read. */
static void test_rollout_accumulate_stops_at_count(void **state)
{
    (void)state;
    static const float values[4] = {1, 2, 4, 1000};
    double sum[4] = {0.5, 0.5, 0.5, 7};
    attn_rollout_accumulate(3, 0.25, values, sum);
    static const double want[4] = {0.75, 1, 1.5, 7};
    assert_doubles_near(sum, want, 4, 0, "sum");
}

static void test_rollout_by_hand(void **state)
{
    (void)state;
    static const float h0[9] = {1, 0, 0, 1, 0, 0, 0, 1, 0};
    static const float h1[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    static const float w2[9] = {0, 1, 0, 0, 0, 1, 0.5f, 0.25f, 0.25f};
    static const double a1[9] = {1, 0, 0, 0.25, 0.75, 0, 0, 0.25, 0.75};
    static const double r2[9] = {0.625, 0.375, 0, 0.125, 0.5, 0.375, 0.28125, 0.25, 0.46875};
    double mean[9] = {0}, prev[9], a_hat[9], next[9];        /* (3, 3) each */
    attn_rollout_accumulate(9, 0.5, h0, mean);
    attn_rollout_accumulate(9, 0.5, h1, mean);
    attn_rollout_layer(3, 0.5, mean, prev);                  /* R1 = A1 */
    assert_doubles_near(prev, a1, 9, 0, "A1");
    memset(mean, 0, sizeof mean);
    attn_rollout_accumulate(9, 1.0, w2, mean);
    attn_rollout_layer(3, 0.5, mean, mean);                  /* in place */
    attn_rollout_step(3, mean, prev, next);
    assert_doubles_near(next, r2, 9, 1e-15, "A2 A1");

    static const double odd[9] = {2, 2, 0, 0, 0, 0, 1, 0, 3};
    static const double normed[9] = {0.5, 0.5, 0, 0, 0, 0, 0.25, 0, 0.75};
    static const double identity[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    attn_rollout_layer(3, 0, odd, a_hat);
    assert_doubles_near(a_hat, normed, 9, 0, "rownorm, r = 0");
    attn_rollout_layer(3, 1, odd, a_hat);
    assert_doubles_near(a_hat, identity, 9, 0, "r = 1");
    attn_rollout_layer(3, 0.5, odd, a_hat);
    assert_doubles_near(a_hat + 3, identity + 3, 3, 0, "a row of 0, r = 0.5");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_f64_large_logits_match_long_double),
        cmocka_unit_test(test_softmax_f32_large_logits_match_long_double),
        cmocka_unit_test(test_softmax_negative_infinity_gets_exactly_zero),
        cmocka_unit_test(test_softmax_single_key_gets_weight_one),
        cmocka_unit_test(test_softmax_all_masked_row_is_zero_not_nan),
        cmocka_unit_test(test_softmax_nan_row_stays_nan),
        cmocka_unit_test(test_softmax_in_place),
        cmocka_unit_test(test_masks_hide_by_causality_and_keep),
        cmocka_unit_test(test_project_without_and_with_bias),
        cmocka_unit_test(test_head_scores_strided_views),
        cmocka_unit_test(test_head_output_strided_views),
        cmocka_unit_test(test_split_heads_reorders_head_major),
        cmocka_unit_test(test_find_nonfinite),
        cmocka_unit_test(test_forward_matches_reference),
        cmocka_unit_test(test_forward_causal_matches_reference),
        cmocka_unit_test(test_forward_item_with_every_key_masked_gives_bias),
        cmocka_unit_test(test_forward_flags_overflow_of_finite_inputs),
        cmocka_unit_test(test_forward_summaries_of_uniform_attention),
        cmocka_unit_test(test_attend_counts_and_reports_pairs),
        cmocka_unit_test(test_census_by_hand),
        cmocka_unit_test(test_rollout_accumulate_stops_at_count),
        cmocka_unit_test(test_rollout_by_hand),
    };
    attn_set_threads(1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
