/*
 * test_plan.c - unit tests for attn_plan (shape validation, checked sizes,
 * output shapes, --save lists, slice sizing, chunk shapes) and the checked
 * size helpers of attn_common.
 *
 * Legend: B batch, H heads, n queries, m keys, D d_model, dk = d_k,
 *         dv = d_v.  Expected values are worked out by hand in comments.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "attn_plan.h"
#include "test_support.h"

#define FILE_NAME "in.h5"
#define MIB ((size_t)1 << 20)

/* Dataset names distinct enough that a message naming one is unambiguous. */
static const char *const input_names[ATTN_IN_COUNT] = {
    "/inputs/X", "/inputs/KV", "/inputs/MASK",
    "/weights/W_Q", "/weights/W_K", "/weights/W_V", "/weights/W_O",
    "/bias/b_Q", "/bias/b_K", "/bias/b_V", "/bias/b_O",
    /* not "W_QKV"/"b_QKV": a message naming those would also contain "W_Q"/"b_Q" */
    "/weights/fused_qkv", "/bias/fused_qkv", "/weights/q_norm", "/weights/k_norm",
    "/weights/alibi_slopes", "/inputs/positions", "/inputs/kv_positions", "/inputs/attn_bias",
};

static void set_tensor(attn_tensor_info in[ATTN_IN_COUNT], attn_input which, size_t rank,
                       const size_t *dims)
{
    in[which].present = true;
    in[which].rank = rank;
    memcpy(in[which].dims, dims, rank * sizeof *dims);
}

#define SET(in, which, ...)                                                   \
    set_tensor((in), (which), sizeof((size_t[]){__VA_ARGS__}) / sizeof(size_t), \
               (size_t[]){__VA_ARGS__})

/*
 * The packed layout every test starts from (--heads 2):
 *   X (B = 2, n = 3, D = 8), W_Q W_K (8, 2*4), W_V (8, 2*6), W_O (2*6, 8)
 * so H = 2, d_k = 4, d_v = 6; no KV, mask or biases.
 */
static void packed_inputs(attn_tensor_info in[ATTN_IN_COUNT])
{
    memset(in, 0, ATTN_IN_COUNT * sizeof *in);
    for (int i = 0; i < ATTN_IN_COUNT; i++)
        in[i].name = input_names[i];
    SET(in, ATTN_IN_X, 2, 3, 8);
    SET(in, ATTN_IN_WQ, 8, 8);
    SET(in, ATTN_IN_WK, 8, 8);
    SET(in, ATTN_IN_WV, 8, 12);
    SET(in, ATTN_IN_WO, 12, 8);
}

/* A dataset given the shape dims (rank); rank 0 ends a list of them. */
typedef struct reshape {
    attn_input which;
    size_t rank;
    size_t dims[5];
} reshape;

#define RESHAPE(which, ...)                                                            \
    {(which), sizeof((size_t[]){__VA_ARGS__}) / sizeof(size_t), {__VA_ARGS__}}

/* The layouts the tests start from: the packed layer with its weights
 * reshaped. */
typedef enum base_inputs {
    PACKED,
    PER_HEAD,       /* the same layer with per-head weights (H, ., .) */
    GQA,            /* grouped-query attention, below */
    LINEAR_GQA,     /* the same stored for x W^T (torch.nn.Linear): (out, in) */
    PER_HEAD_GQA,   /* the same per head: H = 4 from W_Q and W_O, G = 2 from W_K */
    FUSED,          /* fused Q|K|V weights, below */
    BASE_COUNT
} base_inputs;

/*
 * Grouped-query attention, packed x W (--heads 4), every size distinct:
 *   X (2, 3, 8): B = 2, n = 3, D = 8
 *   W_Q (8, 4*3)  -> d_k = 12 / 4 = 3
 *   W_K (8, 6)    -> G = 6 / d_k = 2
 *   W_V (8, 2*5)  -> d_v = 10 / G = 5
 *   W_O (4*5, 8)
 * Fused: W_QKV (D, F) = (8, 36), packed W_O (H*dv, D) = (12, 8) and no
 * separate W_Q, W_K, W_V.
 */
static const reshape base_weights[BASE_COUNT][4] = {
    [PACKED] = {{0}},
    [PER_HEAD] = {RESHAPE(ATTN_IN_WQ, 2, 8, 4), RESHAPE(ATTN_IN_WK, 2, 8, 4),
                  RESHAPE(ATTN_IN_WV, 2, 8, 6), RESHAPE(ATTN_IN_WO, 2, 6, 8)},
    [GQA] = {RESHAPE(ATTN_IN_WQ, 8, 12), RESHAPE(ATTN_IN_WK, 8, 6), RESHAPE(ATTN_IN_WV, 8, 10),
             RESHAPE(ATTN_IN_WO, 20, 8)},
    [LINEAR_GQA] = {RESHAPE(ATTN_IN_WQ, 12, 8), RESHAPE(ATTN_IN_WK, 6, 8),
                    RESHAPE(ATTN_IN_WV, 10, 8), RESHAPE(ATTN_IN_WO, 8, 20)},
    [PER_HEAD_GQA] = {RESHAPE(ATTN_IN_WQ, 4, 8, 3), RESHAPE(ATTN_IN_WK, 2, 8, 3),
                      RESHAPE(ATTN_IN_WV, 2, 8, 5), RESHAPE(ATTN_IN_WO, 4, 5, 8)},
    [FUSED] = {RESHAPE(ATTN_IN_WQKV, 8, 36), RESHAPE(ATTN_IN_WO, 12, 8)},
};

/* Sets in[] to the datasets of the list `set` (up to `count`, or its rank
 * 0 entry). */
static void reshape_inputs(attn_tensor_info in[ATTN_IN_COUNT], const reshape *set, size_t count)
{
    for (size_t j = 0; j < count && set[j].rank > 0; j++)
        set_tensor(in, set[j].which, set[j].rank, set[j].dims);
}

static void start_inputs(attn_tensor_info in[ATTN_IN_COUNT], base_inputs base)
{
    packed_inputs(in);
    if (base == FUSED)
        in[ATTN_IN_WQ].present = in[ATTN_IN_WK].present = in[ATTN_IN_WV].present = false;
    reshape_inputs(in, base_weights[base], COUNT(base_weights[base]));
}

/* Fused inputs of F = `features`. */
static void fused_inputs(attn_tensor_info in[ATTN_IN_COUNT], size_t features)
{
    start_inputs(in, FUSED);
    SET(in, ATTN_IN_WQKV, 8, features);
}

/* in[] planned with request by attn_plan_layout_for, or when !for_request
 * by attn_plan_layout with request->heads as --heads. */
static int plan_layout(const attn_tensor_info in[ATTN_IN_COUNT], const attn_plan_request *request,
                       bool for_request, attn_layout *layout, attn_error *err)
{
    return for_request ? attn_plan_layout_for(in, FILE_NAME, request, layout, err)
                       : attn_plan_layout(in, FILE_NAME, request->heads, layout, err);
}

/* The layout planned so; fails the test when it is refused. */
static attn_layout accepted_as(const attn_tensor_info in[ATTN_IN_COUNT],
                               const attn_plan_request *request, bool for_request)
{
    attn_layout layout;
    attn_error err = {0};
    int status = plan_layout(in, request, for_request, &layout, &err);
    if (status != ATTN_OK)
        fail_msg("status %d, message '%s'", status, err.msg);
    return layout;
}

/* Planned with --heads heads_flag, or for a request (GQA, linear or fused). */
static attn_layout accepted(const attn_tensor_info in[ATTN_IN_COUNT], size_t heads_flag)
{
    return accepted_as(in, &(attn_plan_request){.heads = heads_flag}, false);
}

static attn_layout accepted_for(const attn_tensor_info in[ATTN_IN_COUNT],
                                const attn_plan_request *request)
{
    return accepted_as(in, request, true);
}

static void assert_head_sizes(const attn_layout *layout, size_t heads, size_t d_k, size_t d_v)
{
    assert_int_equal(layout->dims.heads, heads);
    assert_int_equal(layout->dims.d_k, d_k);
    assert_int_equal(layout->dims.d_v, d_v);
}

/* ---- attn_plan_layout: accepted shapes -------------------------------- */

static void test_layout_packed_weights_derive_sizes(void **state)
{
    (void)state;
    attn_tensor_info in[ATTN_IN_COUNT];
    start_inputs(in, PACKED);
    attn_layout layout = accepted(in, 2);
    assert_int_equal(layout.dims.batch, 2);
    assert_int_equal(layout.dims.n, 3);
    assert_int_equal(layout.dims.m, 3);
    assert_int_equal(layout.dims.d_model, 8);
    assert_head_sizes(&layout, 2, 4, 6);
    assert_true(layout.batched);
    assert_false(layout.cross);
    assert_false(layout.kv_shared);
    assert_false(layout.mask_shared);
    for (int i = 0; i < 4; i++)
        assert_false(layout.per_head[i]);
    /* the same (8, 8) W_Q under --heads 4 gives d_k = 2; W_V (8, 12) d_v = 3 */
    layout = accepted(in, 4);
    assert_head_sizes(&layout, 4, 2, 3);
}

static void test_layout_per_head_and_mixed_weights_derive_heads(void **state)
{
    (void)state;
    attn_tensor_info in[ATTN_IN_COUNT];
    start_inputs(in, PER_HEAD);
    attn_layout layout = accepted(in, 0);
    assert_head_sizes(&layout, 2, 4, 6);
    for (int i = 0; i < 4; i++)
        assert_true(layout.per_head[i]);
    /* an agreeing --heads is fine too */
    layout = accepted(in, 2);
    assert_int_equal(layout.dims.heads, 2);

    /* W_Q per head (2, 8, 4), the rest packed: H comes from W_Q */
    start_inputs(in, PACKED);
    SET(in, ATTN_IN_WQ, 2, 8, 4);
    layout = accepted(in, 0);
    assert_head_sizes(&layout, 2, 4, 6);
    assert_true(layout.per_head[0]);
    assert_false(layout.per_head[1]);
}

static void test_layout_rank2_x_is_one_unbatched_item(void **state)
{
    (void)state;
    attn_tensor_info in[ATTN_IN_COUNT];
    start_inputs(in, PACKED);
    SET(in, ATTN_IN_X, 5, 8);
    SET(in, ATTN_IN_MASK, 5);
    attn_layout layout = accepted(in, 2);
    assert_false(layout.batched);
    assert_int_equal(layout.dims.batch, 1);
    assert_int_equal(layout.dims.n, 5);
    assert_int_equal(layout.dims.m, 5);
    assert_true(layout.mask_shared);

    /* a scalar mask (rank 0) is no mask of keys: refused by its rank */
    attn_error err = {0};
    set_tensor(in, ATTN_IN_MASK, 0, (size_t[]){0});
    assert_int_equal(attn_plan_layout(in, FILE_NAME, 2, &layout, &err), ATTN_EINPUT);
    assert_non_null(strstr(err.msg, "has rank 0, shape (); expected (m,) for a rank-2 X"));
}

static void test_layout_cross_attention_and_biases(void **state)
{
    (void)state;
    attn_tensor_info in[ATTN_IN_COUNT];
    start_inputs(in, PACKED);
    SET(in, ATTN_IN_KV, 2, 5, 8);      /* m = 5, per item */
    SET(in, ATTN_IN_MASK, 2, 5);       /* (B, m) */
    SET(in, ATTN_IN_BQ, 8);            /* (H*dk) */
    SET(in, ATTN_IN_BK, 2, 4);         /* (H, dk) */
    SET(in, ATTN_IN_BV, 2, 6);         /* (H, dv) */
    SET(in, ATTN_IN_BO, 8);            /* (D) */
    attn_layout layout = accepted(in, 2);
    assert_true(layout.cross);
    assert_false(layout.kv_shared);
    assert_false(layout.mask_shared);
    assert_int_equal(layout.dims.n, 3);
    assert_int_equal(layout.dims.m, 5);

    SET(in, ATTN_IN_KV, 5, 8);         /* one (m, D) block for every item */
    SET(in, ATTN_IN_MASK, 5);          /* one (m) row for every item */
    SET(in, ATTN_IN_BV, 12);
    layout = accepted(in, 2);
    assert_true(layout.cross);
    assert_true(layout.kv_shared);
    assert_true(layout.mask_shared);
    assert_int_equal(layout.dims.m, 5);
}

/* A missing heads count says which setting is missing, in the library's
 * words (no option names); the next failure's hint replaces it. */
static void test_layout_hints_the_heads_setting(void **state)
{
    (void)state;
    attn_tensor_info in[ATTN_IN_COUNT];
    attn_layout layout;
    attn_error err = {0};
    start_inputs(in, PACKED);
    assert_int_equal(attn_plan_layout(in, FILE_NAME, 0, &layout, &err), ATTN_EINPUT);
    assert_int_equal(err.hint, ATTN_HINT_HEADS);
    assert_non_null(strstr(err.msg, "number of heads is required"));
    assert_null(strstr(err.msg, "--"));
    start_inputs(in, PER_HEAD);
    SET(in, ATTN_IN_WV, 3, 8, 6);
    assert_int_equal(attn_plan_layout(in, FILE_NAME, 0, &layout, &err), ATTN_EINPUT);
    assert_int_equal(err.hint, ATTN_HINT_NONE);
}

/* Weights stored for the other layout (x W^T where x W is asked, or the
 * reverse) name it: the hint's value is the layout's name.  A shape
 * neither layout fits names none. */
static void test_layout_hints_the_other_layout(void **state)
{
    (void)state;
    attn_tensor_info in[ATTN_IN_COUNT];
    attn_layout layout;
    attn_error err = {0};
    const attn_plan_request xw = {.heads = 4}, linear = {.heads = 4, .linear = true};
    start_inputs(in, LINEAR_GQA);                   /* W_Q (12, 8) for x W^T */
    assert_int_equal(attn_plan_layout_for(in, FILE_NAME, &xw, &layout, &err), ATTN_EINPUT);
    assert_int_equal(err.hint, ATTN_HINT_LAYOUT);
    assert_string_equal(err.hint_arg, "linear");
    assert_non_null(strstr(err.msg, "W_Q has shape (12, 8); axis 0 must be d_model = 8"));
    assert_null(strstr(err.msg, "--"));
    start_inputs(in, GQA);                          /* W_Q (8, 12) for x W */
    assert_int_equal(attn_plan_layout_for(in, FILE_NAME, &linear, &layout, &err), ATTN_EINPUT);
    assert_int_equal(err.hint, ATTN_HINT_LAYOUT);
    assert_string_equal(err.hint_arg, "xw");
    fused_inputs(in, 36);                           /* fused (8, 36) for x W */
    assert_int_equal(attn_plan_layout_for(in, FILE_NAME, &linear, &layout, &err), ATTN_EINPUT);
    assert_int_equal(err.hint, ATTN_HINT_LAYOUT);
    assert_string_equal(err.hint_arg, "xw");
    start_inputs(in, LINEAR_GQA);                   /* 10 rows in 4 heads: neither */
    SET(in, ATTN_IN_WQ, 10, 8);
    assert_int_equal(attn_plan_layout_for(in, FILE_NAME, &xw, &layout, &err), ATTN_EINPUT);
    assert_int_equal(err.hint, ATTN_HINT_NONE);
    assert_string_equal(err.hint_arg, "");
    start_inputs(in, GQA);                          /* (7, 12): neither axis is D */
    SET(in, ATTN_IN_WQ, 7, 12);
    assert_int_equal(attn_plan_layout_for(in, FILE_NAME, &xw, &layout, &err), ATTN_EINPUT);
    assert_int_equal(err.hint, ATTN_HINT_NONE);
    assert_string_equal(err.msg, FILE_NAME ": /weights/W_Q has shape (7, 12); axis 0 must be d_model = 8");
    assert_int_equal(attn_plan_layout_for(in, FILE_NAME, &linear, &layout, &err), ATTN_EINPUT);
    assert_int_equal(err.hint, ATTN_HINT_NONE);
    assert_string_equal(err.msg, FILE_NAME ": /weights/W_Q has shape (7, 12); axis 1 must be d_model = 8");
    /* W_K for x W under --layout linear: the hint only when its columns
     * are whole K/V heads of W_Q's d_k = 3 (no --kv-heads given) */
    start_inputs(in, LINEAR_GQA);
    SET(in, ATTN_IN_WK, 8, 7);
    assert_int_equal(attn_plan_layout_for(in, FILE_NAME, &linear, &layout, &err), ATTN_EINPUT);
    assert_int_equal(err.hint, ATTN_HINT_NONE);
    assert_string_equal(err.msg, FILE_NAME ": /weights/W_K has shape (8, 7); axis 1 must be d_model = 8");
    SET(in, ATTN_IN_WK, 8, 6);
    assert_int_equal(attn_plan_layout_for(in, FILE_NAME, &linear, &layout, &err), ATTN_EINPUT);
    assert_int_equal(err.hint, ATTN_HINT_LAYOUT);
    assert_string_equal(err.hint_arg, "xw");
}

/* ---- attn_plan_layout_for: GQA, linear and fused weights, accepted ------ */

static void assert_gqa_sizes(const attn_layout *layout)
{
    assert_head_sizes(layout, 4, 3, 5);
    assert_int_equal(layout->dims.kv_heads, 2);
    assert_int_equal(attn_kv_heads(&layout->dims), 2);
    assert_int_equal(layout->dims.d_model, 8);
}

static void test_layout_gqa_kv_heads_from_packed_w_k(void **state)
{
    (void)state;
    attn_tensor_info in[ATTN_IN_COUNT];
    start_inputs(in, GQA);
    attn_layout layout = accepted_for(in, &(attn_plan_request){.heads = 4});
    assert_gqa_sizes(&layout);
    assert_false(layout.linear);
    assert_false(layout.fused);

    /* one K/V head (multi-query): W_K (8, 3), W_V (8, 5) */
    SET(in, ATTN_IN_WK, 8, 3);
    SET(in, ATTN_IN_WV, 8, 5);
    layout = accepted_for(in, &(attn_plan_request){.heads = 4});
    assert_int_equal(layout.dims.kv_heads, 1);
    assert_int_equal(layout.dims.d_k, 3);
    assert_int_equal(layout.dims.d_v, 5);

    /* as many K/V heads as heads: W_K (8, 12), W_V (8, 20) give G = H = 4 */
    SET(in, ATTN_IN_WK, 8, 12);
    SET(in, ATTN_IN_WV, 8, 20);
    layout = accepted_for(in, &(attn_plan_request){.heads = 4});
    assert_int_equal(attn_kv_heads(&layout.dims), 4);
    assert_int_equal(layout.dims.d_v, 5);
}

/* Sizes of GQA and fused layers, by hand: the GQA layer (H = 4, G = 2,
 * d_k = 3, d_v = 5) from linear weights, an agreeing --kv-heads and
 * weights per head; fused F = (H + 2G) d_k with d_k = d_v = 3: G = 2,
 * F = 24 and G = 1, F = 18, and the linear form of G = 2. */
static const struct {
    base_inputs base;
    reshape set[2];
    attn_plan_request request;
    size_t kv_heads, d_v;       /* H = 4, d_k = 3 */
    bool per_head;
} gqa_forms[] = {
    {LINEAR_GQA, {{0}}, {.heads = 4, .linear = true}, 2, 5, false},
    {GQA, {{0}}, {.heads = 4, .kv_heads = 2}, 2, 5, false},    /* agreeing with W_K (8, 6) */
    {LINEAR_GQA, {{0}}, {.heads = 4, .kv_heads = 2, .linear = true}, 2, 5, false},
    {PER_HEAD_GQA, {{0}}, {0}, 2, 5, true},
    {PER_HEAD_GQA, {{0}}, {.heads = 4, .kv_heads = 2}, 2, 5, true},
    {FUSED, {RESHAPE(ATTN_IN_WQKV, 8, 24)}, {.heads = 4, .kv_heads = 2}, 2, 3, false},
    {FUSED, {RESHAPE(ATTN_IN_WQKV, 8, 18)}, {.heads = 4, .kv_heads = 1}, 1, 3, false},
    {FUSED, {RESHAPE(ATTN_IN_WQKV, 24, 8), RESHAPE(ATTN_IN_WO, 8, 12)},
     {.heads = 4, .kv_heads = 2, .linear = true}, 2, 3, false},
};

static void test_layout_gqa_and_fused_sizes_from_every_weight_form(void **state)
{
    (void)state;
    for (size_t i = 0; i < COUNT(gqa_forms); i++) {
        attn_tensor_info in[ATTN_IN_COUNT];
        start_inputs(in, gqa_forms[i].base);
        reshape_inputs(in, gqa_forms[i].set, COUNT(gqa_forms[i].set));
        attn_layout layout = accepted_for(in, &gqa_forms[i].request);
        assert_head_sizes(&layout, 4, 3, gqa_forms[i].d_v);
        assert_int_equal(layout.dims.kv_heads, gqa_forms[i].kv_heads);
        assert_int_equal(attn_kv_heads(&layout.dims), gqa_forms[i].kv_heads);
        assert_int_equal(layout.dims.d_model, 8);
        assert_true(layout.linear == gqa_forms[i].request.linear);
        for (int w = 0; w < 4; w++)
            assert_true(layout.per_head[w] == gqa_forms[i].per_head);
    }
}

static void test_layout_fused_blocks(void **state)
{
    (void)state;
    attn_tensor_info in[ATTN_IN_COUNT];
    /* G = H = 4: F = (4 + 2*4) * d_k = 36 -> d_k = d_v = 3; W_O (12, 8) */
    fused_inputs(in, 36);
    attn_layout layout = accepted_for(in, &(attn_plan_request){.heads = 4});
    assert_true(layout.fused);
    assert_false(layout.heads_interleaved);
    assert_head_sizes(&layout, 4, 3, 3);
    assert_int_equal(attn_kv_heads(&layout.dims), 4);

    /* linear: (F, D) = (36, 8), W_O (D, H*dv) = (8, 12) */
    SET(in, ATTN_IN_WQKV, 36, 8);
    SET(in, ATTN_IN_WO, 8, 12);
    layout = accepted_for(in, &(attn_plan_request){.heads = 4, .linear = true});
    assert_true(layout.fused);
    assert_true(layout.linear);
    assert_int_equal(attn_kv_heads(&layout.dims), 4);
    assert_int_equal(layout.dims.d_k, 3);
    assert_int_equal(layout.dims.d_v, 3);

    /* H from a 3-D W_O (4, 3, 8) without --heads */
    fused_inputs(in, 36);
    SET(in, ATTN_IN_WO, 4, 3, 8);
    layout = accepted_for(in, &(attn_plan_request){0});
    assert_int_equal(layout.dims.heads, 4);
    assert_int_equal(layout.dims.d_k, 3);
}

static void test_layout_fused_heads_interleaved(void **state)
{
    (void)state;
    attn_tensor_info in[ATTN_IN_COUNT];
    fused_inputs(in, 36);              /* H * 3 * d_k = 4 * 3 * 3 */
    attn_layout layout = accepted_for(in, &(attn_plan_request){.heads = 4,
                                                               .heads_interleaved = true});
    assert_true(layout.heads_interleaved);
    assert_int_equal(attn_kv_heads(&layout.dims), 4);
    assert_int_equal(layout.dims.d_k, 3);
    layout = accepted_for(in, &(attn_plan_request){.heads = 4, .kv_heads = 4,
                                                   .heads_interleaved = true});
    assert_true(layout.heads_interleaved);
}

/* ---- attn_plan_layout_for: norms, slopes, positions, attention bias ---- */

/* Accepted, by hand: b_QKV of (H + G) * d_k + G * d_v with H = 4, d_k =
 * d_v = 3: 24 for G = 2, 36 for G = H; q and k norms of d_k; one ALiBi
 * slope per query head. */
static void test_layout_fused_bias_norm_and_slope_lengths(void **state)
{
    (void)state;
    attn_tensor_info in[ATTN_IN_COUNT];
    fused_inputs(in, 24);
    SET(in, ATTN_IN_BQKV, 24);
    accepted_for(in, &(attn_plan_request){.heads = 4, .kv_heads = 2});
    fused_inputs(in, 36);
    SET(in, ATTN_IN_BQKV, 36);
    accepted_for(in, &(attn_plan_request){.heads = 4});
    start_inputs(in, GQA);                    /* d_k = 3, G = 2, H = 4 */
    SET(in, ATTN_IN_Q_NORM, 3);
    SET(in, ATTN_IN_K_NORM, 3);
    accepted_for(in, &(attn_plan_request){.heads = 4});
    start_inputs(in, GQA);
    SET(in, ATTN_IN_ALIBI_SLOPES, 4);
    accepted_for(in, &(attn_plan_request){.heads = 4});
}

static void test_layout_positions_shapes(void **state)
{
    (void)state;
    attn_tensor_info in[ATTN_IN_COUNT];
    const attn_plan_request req = {.heads = 4};
    /* B = 2, n = 3; --kv (2, 5, 8) gives m = 5 */
    start_inputs(in, GQA);
    SET(in, ATTN_IN_KV, 2, 5, 8);
    SET(in, ATTN_IN_POSITIONS, 3);
    SET(in, ATTN_IN_KV_POSITIONS, 2, 5);
    attn_layout layout = accepted_for(in, &req);
    assert_true(layout.positions_shared);
    assert_false(layout.kv_positions_shared);
    SET(in, ATTN_IN_POSITIONS, 2, 3);
    SET(in, ATTN_IN_KV_POSITIONS, 5);
    layout = accepted_for(in, &req);
    assert_false(layout.positions_shared);
    assert_true(layout.kv_positions_shared);

    /* a rank-2 X (3, 8): positions (n) only */
    start_inputs(in, GQA);
    SET(in, ATTN_IN_X, 3, 8);
    SET(in, ATTN_IN_POSITIONS, 3);
    layout = accepted_for(in, &req);
    assert_true(layout.positions_shared);
}

static void test_layout_attention_bias_ranks(void **state)
{
    (void)state;
    const attn_plan_request req = {.heads = 4};
    /* B = 2, H = 4, n = 3, m = 5 (G = 2): none, (n, m), (H, n, m), (B, H, n, m) */
    const struct {
        size_t rank, dims[4];
        bool heads_shared;
    } biases[] = {{0, {0}, false}, {2, {3, 5}, false}, {3, {4, 3, 5}, false},
                  {4, {2, 4, 3, 5}, false},
                  /* a head axis of 1: every head adds it (Hugging Face's (B, 1, n, m)) */
                  {3, {1, 3, 5}, true}, {4, {2, 1, 3, 5}, true}};
    for (size_t i = 0; i < COUNT(biases); i++) {
        attn_tensor_info in[ATTN_IN_COUNT];
        start_inputs(in, GQA);
        SET(in, ATTN_IN_KV, 2, 5, 8);
        if (biases[i].rank > 0)
            set_tensor(in, ATTN_IN_ATTN_BIAS, biases[i].rank, biases[i].dims);
        attn_layout layout = accepted_for(in, &req);
        assert_int_equal(layout.bias_rank, biases[i].rank);
        assert_int_equal(layout.bias_heads_shared, biases[i].heads_shared);
    }
    /* a rank-2 X (3, 8), self-attention m = 3: up to (H, n, m) */
    attn_tensor_info in[ATTN_IN_COUNT];
    start_inputs(in, GQA);
    SET(in, ATTN_IN_X, 3, 8);
    SET(in, ATTN_IN_ATTN_BIAS, 4, 3, 3);
    attn_layout layout = accepted_for(in, &req);
    assert_int_equal(layout.bias_rank, 3);
}

/* ---- shapes refused ------------------------------------------------------ */

/* A layout that must be refused, naming the culprit and the file: `base`
 * with up to three datasets reshaped, planned with request (by
 * attn_plan_layout with request.heads as --heads, or attn_plan_layout_for). */
typedef struct refusal {
    const char *what;
    base_inputs base;
    attn_plan_request request;
    reshape set[3];
    attn_input culprit;
} refusal;

static void check_refusals(const refusal *cases, size_t count, bool for_request)
{
    for (size_t i = 0; i < count; i++) {
        const refusal *c = &cases[i];
        attn_tensor_info in[ATTN_IN_COUNT];
        start_inputs(in, c->base);
        reshape_inputs(in, c->set, COUNT(c->set));
        attn_layout layout;
        attn_error err = {0};
        int status = plan_layout(in, &c->request, for_request, &layout, &err);
        const char *culprit = input_names[c->culprit];
        if (status != ATTN_EINPUT)
            fail_msg("%s: status %d, expected ATTN_EINPUT for %s (message: '%s')", c->what,
                     status, culprit, err.msg);
        if (strstr(err.msg, culprit) == NULL)
            fail_msg("%s: message '%s' does not name %s", c->what, err.msg, culprit);
        if (strstr(err.msg, FILE_NAME) == NULL)
            fail_msg("%s: message '%s' does not name the file", c->what, err.msg);
    }
}

#define BIG ((size_t)1 << 40)

/* attn_plan_layout with a --heads flag (request.heads), from the packed or
 * per-head layer. */
static const refusal layout_refusals[] = {
    {"X of rank 4", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_X, 1, 2, 3, 8)}, ATTN_IN_X},
    {"X of rank 1", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_X, 8)}, ATTN_IN_X},
    {"X with a zero-length axis", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_X, 2, 0, 8)}, ATTN_IN_X},
    {"KV with a zero-length axis", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_KV, 2, 0, 8)},
     ATTN_IN_KV},
    {"W_V with a zero-length axis", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_WV, 8, 0)}, ATTN_IN_WV},
    {"W_Q rows not D = 8", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_WQ, 7, 8)}, ATTN_IN_WQ},
    {"W_V rows not D = 8", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_WV, 9, 12)}, ATTN_IN_WV},
    {"KV's D not X's D", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_KV, 2, 5, 7)}, ATTN_IN_KV},
    {"per-head W_K's axis 1 not D", PER_HEAD, {0}, {RESHAPE(ATTN_IN_WK, 2, 7, 4)}, ATTN_IN_WK},
    {"W_Q, W_K columns not divisible by the heads", PACKED, {.heads = 2},
     {RESHAPE(ATTN_IN_WQ, 8, 9), RESHAPE(ATTN_IN_WK, 8, 9)}, ATTN_IN_WQ},
    {"W_V columns not divisible by the heads", PACKED, {.heads = 2},
     {RESHAPE(ATTN_IN_WV, 8, 13)}, ATTN_IN_WV},
    {"--heads disagreeing with 3-D weights", PER_HEAD, {.heads = 3}, {{0}}, ATTN_IN_WQ},
    {"3-D weights disagreeing on the heads", PER_HEAD, {0}, {RESHAPE(ATTN_IN_WV, 3, 8, 6)},
     ATTN_IN_WV},
    {"packed weights without --heads", PACKED, {0}, {{0}}, ATTN_IN_WQ},
    {"W_K's d_k 3 against W_Q's 4", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_WK, 8, 6)},
     ATTN_IN_WK},
    {"per-head W_K's d_k 5 against W_Q's 4", PER_HEAD, {0}, {RESHAPE(ATTN_IN_WK, 2, 8, 5)},
     ATTN_IN_WK},
    {"W_O rows not H*dv = 12", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_WO, 8, 8)}, ATTN_IN_WO},
    {"W_O columns not D = 8", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_WO, 12, 7)}, ATTN_IN_WO},
    {"per-head W_O not (H, dv = 6, D)", PER_HEAD, {0}, {RESHAPE(ATTN_IN_WO, 2, 4, 8)},
     ATTN_IN_WO},
    {"b_Q neither (8) nor (2, 4)", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_BQ, 7)}, ATTN_IN_BQ},
    {"b_K (4, 2)", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_BK, 4, 2)}, ATTN_IN_BK},
    {"b_V neither (12) nor (2, 6)", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_BV, 8)}, ATTN_IN_BV},
    {"b_O not (8)", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_BO, 12)}, ATTN_IN_BO},
    {"b_O has no per-head form", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_BO, 1, 8)}, ATTN_IN_BO},
    {"b_Q of rank 3", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_BQ, 2, 4, 1)}, ATTN_IN_BQ},
    {"mask length not m = 3", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_MASK, 4)}, ATTN_IN_MASK},
    {"mask items not B = 2", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_MASK, 3, 3)}, ATTN_IN_MASK},
    {"rank-2 X takes only an (m) mask", PACKED, {.heads = 2},
     {RESHAPE(ATTN_IN_X, 3, 8), RESHAPE(ATTN_IN_MASK, 1, 3)}, ATTN_IN_MASK},
    {"KV items not X's B = 2", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_KV, 3, 5, 8)}, ATTN_IN_KV},
    {"rank-2 X takes only an (m, D) KV", PACKED, {.heads = 2},
     {RESHAPE(ATTN_IN_X, 3, 8), RESHAPE(ATTN_IN_KV, 1, 5, 8)}, ATTN_IN_KV},
    {"X of 2^80 elements", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_X, BIG, BIG)}, ATTN_IN_X},
    {"X of 2^64 elements, 0 when wrapped", PACKED, {.heads = 2},
     {RESHAPE(ATTN_IN_X, (size_t)1 << 32, (size_t)1 << 32)}, ATTN_IN_X},
    {"X of 2^64 elements over three axes", PACKED, {.heads = 2},
     {RESHAPE(ATTN_IN_X, (size_t)1 << 22, (size_t)1 << 21, (size_t)1 << 21)}, ATTN_IN_X},
    {"KV of 2^81 elements", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_KV, 2, BIG, BIG)},
     ATTN_IN_KV},
    {"W_V of 2^80 elements", PACKED, {.heads = 2}, {RESHAPE(ATTN_IN_WV, BIG, BIG)}, ATTN_IN_WV},
};

static void test_layout_refuses_wrong_shapes(void **state)
{
    (void)state;
    check_refusals(layout_refusals, COUNT(layout_refusals), false);
}

/* attn_plan_layout_for: GQA, linear and fused weights.  The GQA layer has
 * H = 4, G = 2, d_k = 3 (W_K 6 columns), d_v = 5; fused F = 36 is
 * (H + 2G) d_k with G = H = 4, d_k = 3. */
static const refusal request_refusals[] = {
    {"--kv-heads 3: 6 columns are 3 heads of width 2, not d_k = 3", GQA,
     {.heads = 4, .kv_heads = 3}, {{0}}, ATTN_IN_WK},
    {"--kv-heads 4: 6 columns do not split into 4", GQA, {.heads = 4, .kv_heads = 4}, {{0}},
     ATTN_IN_WK},
    {"--kv-heads 1 against linear W_K's 6 rows", LINEAR_GQA,
     {.heads = 4, .kv_heads = 1, .linear = true}, {{0}}, ATTN_IN_WK},
    {"W_K of 9 / 3 = 3 K/V heads, 4 % 3 != 0", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_WK, 8, 9), RESHAPE(ATTN_IN_WV, 8, 15)}, ATTN_IN_WK},
    {"W_K of 8 K/V heads, more than H = 4", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_WK, 8, 24), RESHAPE(ATTN_IN_WV, 8, 40)}, ATTN_IN_WK},
    {"--kv-heads 3 against W_K (8, 9)", GQA, {.heads = 4, .kv_heads = 3},
     {RESHAPE(ATTN_IN_WK, 8, 9), RESHAPE(ATTN_IN_WV, 8, 15)}, ATTN_IN_WK},
    {"W_K of 7 columns, d_k = 3", GQA, {.heads = 4}, {RESHAPE(ATTN_IN_WK, 8, 7)}, ATTN_IN_WK},
    {"linear W_K of 4 rows, d_k = 3", LINEAR_GQA, {.heads = 4, .linear = true},
     {RESHAPE(ATTN_IN_WK, 4, 8)}, ATTN_IN_WK},
    {"--kv-heads 4 against per-head W_K's 2 heads", PER_HEAD_GQA, {.kv_heads = 4}, {{0}},
     ATTN_IN_WK},
    {"per-head W_V of 3 heads, W_K of 2", PER_HEAD_GQA, {0}, {RESHAPE(ATTN_IN_WV, 3, 8, 5)},
     ATTN_IN_WV},
    {"per-head W_V of H = 4 heads, W_K of 2", PER_HEAD_GQA, {0},
     {RESHAPE(ATTN_IN_WV, 4, 8, 5)}, ATTN_IN_WV},
    {"packed W_V not splitting into G = 2 heads", PER_HEAD_GQA, {0},
     {RESHAPE(ATTN_IN_WV, 8, 9)}, ATTN_IN_WV},
    {"--linear W_O of the x W shape, not (D, H*dv) = (8, 20)", LINEAR_GQA,
     {.heads = 4, .linear = true}, {RESHAPE(ATTN_IN_WO, 20, 8)}, ATTN_IN_WO},
    {"--linear W_Q's axis 1 not D = 8", LINEAR_GQA, {.heads = 4, .linear = true},
     {RESHAPE(ATTN_IN_WQ, 8, 12)}, ATTN_IN_WQ},
    {"the linear shapes without --linear", LINEAR_GQA, {.heads = 4}, {{0}}, ATTN_IN_WQ},
    {"--linear 3-D W_Q", LINEAR_GQA, {.heads = 4, .linear = true},
     {RESHAPE(ATTN_IN_WQ, 4, 3, 8)}, ATTN_IN_WQ},
    {"--linear 3-D W_K", LINEAR_GQA, {.heads = 4, .linear = true},
     {RESHAPE(ATTN_IN_WK, 2, 3, 8)}, ATTN_IN_WK},
    {"--linear 3-D W_V", LINEAR_GQA, {.heads = 4, .linear = true},
     {RESHAPE(ATTN_IN_WV, 2, 5, 8)}, ATTN_IN_WV},
    {"--linear 3-D W_O", LINEAR_GQA, {.heads = 4, .linear = true},
     {RESHAPE(ATTN_IN_WO, 4, 8, 5)}, ATTN_IN_WO},
    {"--linear fused weights of the x W shape: axis 1 (36) is not D", FUSED,
     {.heads = 4, .linear = true}, {RESHAPE(ATTN_IN_WQKV, 8, 36), RESHAPE(ATTN_IN_WO, 8, 12)},
     ATTN_IN_WQKV},
    {"fused weights, packed W_O and no --heads", FUSED, {0}, {{0}}, ATTN_IN_WQKV},
    {"fused weights' axis 0 not D = 8", FUSED, {.heads = 4}, {RESHAPE(ATTN_IN_WQKV, 36, 8)},
     ATTN_IN_WQKV},
    {"fused weights of rank 3", FUSED, {.heads = 4}, {RESHAPE(ATTN_IN_WQKV, 3, 8, 12)},
     ATTN_IN_WQKV},
    {"fused F = 35: 35 % (4 + 8) != 0", FUSED, {.heads = 4}, {RESHAPE(ATTN_IN_WQKV, 8, 35)},
     ATTN_IN_WQKV},
    {"fused F = 36 with --kv-heads 2: 36 % (4 + 2*2) = 4", FUSED, {.heads = 4, .kv_heads = 2},
     {{0}}, ATTN_IN_WQKV},
    {"fused F = 24 with G = H: d_k = 2, then W_O is wrong", FUSED, {.heads = 4},
     {RESHAPE(ATTN_IN_WQKV, 8, 24)}, ATTN_IN_WO},
    {"linear fused F = 20: 20 % 12 != 0", FUSED, {.heads = 4, .linear = true},
     {RESHAPE(ATTN_IN_WQKV, 20, 8), RESHAPE(ATTN_IN_WO, 8, 12)}, ATTN_IN_WQKV},
    {"interleaved per head means G = H: --kv-heads 2", FUSED,
     {.heads = 4, .kv_heads = 2, .heads_interleaved = true}, {{0}}, ATTN_IN_WQKV},
    {"interleaved, --kv-heads 2, even where F = 24 would split as blocks", FUSED,
     {.heads = 4, .kv_heads = 2, .heads_interleaved = true}, {RESHAPE(ATTN_IN_WQKV, 8, 24)},
     ATTN_IN_WQKV},
    {"b_QKV of the G = H length 36 for G = 2", FUSED, {.heads = 4, .kv_heads = 2},
     {RESHAPE(ATTN_IN_WQKV, 8, 24), RESHAPE(ATTN_IN_BQKV, 36)}, ATTN_IN_BQKV},
    {"b_QKV of 23 for G = 2 (24)", FUSED, {.heads = 4, .kv_heads = 2},
     {RESHAPE(ATTN_IN_WQKV, 8, 24), RESHAPE(ATTN_IN_BQKV, 23)}, ATTN_IN_BQKV},
    {"b_QKV has no per-head form", FUSED, {.heads = 4, .kv_heads = 2},
     {RESHAPE(ATTN_IN_WQKV, 8, 24), RESHAPE(ATTN_IN_BQKV, 1, 24)}, ATTN_IN_BQKV},
    {"b_QKV of the G = 2 length 24 for G = H (36)", FUSED, {.heads = 4},
     {RESHAPE(ATTN_IN_BQKV, 24)}, ATTN_IN_BQKV},
};

static void test_layout_for_refuses_wrong_gqa_linear_fused_shapes(void **state)
{
    (void)state;
    check_refusals(request_refusals, COUNT(request_refusals), true);
}

/* attn_plan_layout_for --heads 4 on the GQA layer (B = 2, n = 3, d_k = 3,
 * G = 2, H = 4), with --kv (2, 5, 8) (m = 5) where positions or an
 * attention bias need one. */
static const refusal extra_refusals[] = {
    {"q norm of H, not d_k", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_Q_NORM, 4), RESHAPE(ATTN_IN_K_NORM, 3)}, ATTN_IN_Q_NORM},
    {"q norm of H * d_k", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_Q_NORM, 12), RESHAPE(ATTN_IN_K_NORM, 3)}, ATTN_IN_Q_NORM},
    {"q norm of rank 2", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_Q_NORM, 1, 3), RESHAPE(ATTN_IN_K_NORM, 3)}, ATTN_IN_Q_NORM},
    {"k norm of G * d_k", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_Q_NORM, 3), RESHAPE(ATTN_IN_K_NORM, 6)}, ATTN_IN_K_NORM},
    {"k norm of d_v", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_Q_NORM, 3), RESHAPE(ATTN_IN_K_NORM, 5)}, ATTN_IN_K_NORM},
    {"ALiBi slopes of G, not H", GQA, {.heads = 4}, {RESHAPE(ATTN_IN_ALIBI_SLOPES, 2)},
     ATTN_IN_ALIBI_SLOPES},
    {"ALiBi slopes of 5", GQA, {.heads = 4}, {RESHAPE(ATTN_IN_ALIBI_SLOPES, 5)},
     ATTN_IN_ALIBI_SLOPES},
    {"ALiBi slopes of rank 2", GQA, {.heads = 4}, {RESHAPE(ATTN_IN_ALIBI_SLOPES, 1, 4)},
     ATTN_IN_ALIBI_SLOPES},
    {"positions of m, not n", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_KV, 2, 5, 8), RESHAPE(ATTN_IN_POSITIONS, 5),
      RESHAPE(ATTN_IN_KV_POSITIONS, 5)}, ATTN_IN_POSITIONS},
    {"positions of 3 items, B = 2", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_KV, 2, 5, 8), RESHAPE(ATTN_IN_POSITIONS, 3, 3),
      RESHAPE(ATTN_IN_KV_POSITIONS, 5)}, ATTN_IN_POSITIONS},
    {"positions of rank 3", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_KV, 2, 5, 8), RESHAPE(ATTN_IN_POSITIONS, 2, 1, 3),
      RESHAPE(ATTN_IN_KV_POSITIONS, 5)}, ATTN_IN_POSITIONS},
    {"KV positions of n, not m", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_KV, 2, 5, 8), RESHAPE(ATTN_IN_POSITIONS, 3),
      RESHAPE(ATTN_IN_KV_POSITIONS, 3)}, ATTN_IN_KV_POSITIONS},
    {"KV positions (B, n)", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_KV, 2, 5, 8), RESHAPE(ATTN_IN_POSITIONS, 3),
      RESHAPE(ATTN_IN_KV_POSITIONS, 2, 3)}, ATTN_IN_KV_POSITIONS},
    {"rank-2 X (3, 8) takes no (1, n) positions", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_X, 3, 8), RESHAPE(ATTN_IN_POSITIONS, 1, 3)}, ATTN_IN_POSITIONS},
    {"rank-2 X (3, 8) takes no (1, m) KV positions", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_X, 3, 8), RESHAPE(ATTN_IN_POSITIONS, 3),
      RESHAPE(ATTN_IN_KV_POSITIONS, 1, 3)}, ATTN_IN_KV_POSITIONS},
    {"attention bias (m, n)", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_KV, 2, 5, 8), RESHAPE(ATTN_IN_ATTN_BIAS, 5, 3)}, ATTN_IN_ATTN_BIAS},
    {"attention bias of G heads, not H", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_KV, 2, 5, 8), RESHAPE(ATTN_IN_ATTN_BIAS, 2, 3, 5)}, ATTN_IN_ATTN_BIAS},
    {"attention bias of 3 items, B = 2", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_KV, 2, 5, 8), RESHAPE(ATTN_IN_ATTN_BIAS, 3, 4, 3, 5)},
     ATTN_IN_ATTN_BIAS},
    {"attention bias of 4 keys, m = 5", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_KV, 2, 5, 8), RESHAPE(ATTN_IN_ATTN_BIAS, 2, 4, 3, 4)},
     ATTN_IN_ATTN_BIAS},
    {"attention bias of rank 1", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_KV, 2, 5, 8), RESHAPE(ATTN_IN_ATTN_BIAS, 5)}, ATTN_IN_ATTN_BIAS},
    {"attention bias of rank 5", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_KV, 2, 5, 8), RESHAPE(ATTN_IN_ATTN_BIAS, 1, 2, 4, 3, 5)},
     ATTN_IN_ATTN_BIAS},
    {"rank-2 X (3, 8) takes up to an (H, n, m) bias", GQA, {.heads = 4},
     {RESHAPE(ATTN_IN_X, 3, 8), RESHAPE(ATTN_IN_ATTN_BIAS, 1, 4, 3, 3)}, ATTN_IN_ATTN_BIAS},
};

static void test_layout_for_refuses_wrong_norm_slope_position_bias_shapes(void **state)
{
    (void)state;
    check_refusals(extra_refusals, COUNT(extra_refusals), true);
}

/* ---- checked sizes ------------------------------------------------------ */

static void test_size_mul_edges(void **state)
{
    (void)state;
    size_t out = 42;
    assert_true(attn_size_mul(&out, 0, SIZE_MAX));
    assert_int_equal(out, 0);
    assert_true(attn_size_mul(&out, SIZE_MAX, 0));
    assert_int_equal(out, 0);
    assert_true(attn_size_mul(&out, SIZE_MAX, 1));
    assert_true(out == SIZE_MAX);
    assert_true(attn_size_mul(&out, SIZE_MAX / 2, 2));
    assert_true(out == SIZE_MAX - 1);
    assert_true(attn_size_mul(&out, 6, 7));
    assert_int_equal(out, 42);

    out = 42;
    assert_false(attn_size_mul(&out, SIZE_MAX, 2));
    assert_false(attn_size_mul(&out, SIZE_MAX / 2 + 1, 2));
    assert_false(attn_size_mul(&out, (size_t)1 << 32, (size_t)1 << 32));   /* 0 mod 2^64 */
    assert_false(attn_size_mul(&out, SIZE_MAX, SIZE_MAX));
    assert_int_equal(out, 42);          /* untouched on overflow */
}

static void test_size_add_edges(void **state)
{
    (void)state;
    size_t out = 42;
    assert_true(attn_size_add(&out, SIZE_MAX, 0));
    assert_true(out == SIZE_MAX);
    assert_true(attn_size_add(&out, SIZE_MAX - 1, 1));
    assert_true(out == SIZE_MAX);
    out = 42;
    assert_false(attn_size_add(&out, SIZE_MAX, 1));
    assert_false(attn_size_add(&out, 1, SIZE_MAX));
    assert_int_equal(out, 42);
}

static void test_size_product_edges(void **state)
{
    (void)state;
    size_t out = 42;
    assert_true(attn_size_product(&out, NULL, 0));
    assert_int_equal(out, 1);           /* empty product */
    assert_true(attn_size_product(&out, (size_t[]){0, SIZE_MAX}, 2));
    assert_int_equal(out, 0);
    assert_true(attn_size_product(&out, (size_t[]){SIZE_MAX, 1, 1}, 3));
    assert_true(out == SIZE_MAX);
    assert_true(attn_size_product(&out, (size_t[]){2, 3, 4, 5}, 4));
    assert_int_equal(out, 120);

    out = 42;
    assert_false(attn_size_product(&out, (size_t[]){SIZE_MAX, 2}, 2));
    assert_false(attn_size_product(&out, (size_t[]){(size_t)1 << 16, (size_t)1 << 16,
                                                    (size_t)1 << 16, (size_t)1 << 16}, 4));
    assert_int_equal(out, 42);
}

static void test_format_shape(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(attn_format_shape(buf, sizeof buf, (size_t[]){4, 6}, 2), "(4, 6)");
    assert_string_equal(attn_format_shape(buf, sizeof buf, (size_t[]){5}, 1), "(5,)");
    assert_string_equal(attn_format_shape(buf, sizeof buf, NULL, 0), "()");
}

/* Like snprintf, attn_format_shape writes at most buflen bytes: for every
 * buflen, the first buflen - 1 bytes of the whole text and a NUL, and the
 * bytes after buf[buflen - 1] untouched. */
static void assert_shape_truncates(const size_t *dims, size_t rank, const char *whole)
{
    char buf[32];
    const size_t len = strlen(whole);
    for (size_t buflen = 1; buflen <= len + 1; buflen++) {
        memset(buf, '#', sizeof buf);
        assert_ptr_equal(attn_format_shape(buf, buflen, dims, rank), buf);
        assert_memory_equal(buf, whole, buflen - 1);
        assert_int_equal(buf[buflen - 1], '\0');
        for (size_t i = buflen; i < sizeof buf; i++)
            if (buf[i] != '#')
                fail_msg("%s in %zu bytes: byte %zu written", whole, buflen, i);
    }
}

static void test_format_shape_stays_in_its_buffer(void **state)
{
    (void)state;
    assert_shape_truncates((size_t[]){4, 6}, 2, "(4, 6)");
    assert_shape_truncates((size_t[]){5}, 1, "(5,)");
    assert_shape_truncates((size_t[]){12, 3, 7}, 3, "(12, 3, 7)");
    assert_shape_truncates(NULL, 0, "()");
}

/* ---- output shapes and bytes ------------------------------------------ */

/* B = 2, H = 3, n = 4, m = 5, d_k = 6, d_v = 7, D = 8 */
static attn_layout shape_layout(bool batched)
{
    attn_layout layout = {
        .dims = {.batch = batched ? 2 : 1, .n = 4, .m = 5, .d_model = 8, .heads = 3,
                 .d_k = 6, .d_v = 7},
        .batched = batched,
    };
    return layout;
}

typedef struct expected_shape {
    attn_output which;
    size_t rank;
    size_t dims[4];
    const char *labels[4];
} expected_shape;

static const expected_shape batched_shapes[] = {
    {ATTN_OUT_SCORES, 4, {2, 3, 4, 5}, {"batch", "head", "query", "key"}},
    {ATTN_OUT_WEIGHTS, 4, {2, 3, 4, 5}, {"batch", "head", "query", "key"}},
    {ATTN_OUT_HEADS, 4, {2, 3, 4, 7}, {"batch", "head", "query", "d_v"}},
    {ATTN_OUT_OUTPUT, 3, {2, 4, 8}, {"batch", "query", "d_model"}},
    {ATTN_OUT_Q, 4, {2, 3, 4, 6}, {"batch", "head", "query", "d_k"}},
    {ATTN_OUT_K, 4, {2, 3, 5, 6}, {"batch", "head", "key", "d_k"}},
    {ATTN_OUT_V, 4, {2, 3, 5, 7}, {"batch", "head", "key", "d_v"}},
};

static void check_output_shape(const attn_layout *layout, const expected_shape *e,
                               size_t skip)
{
    size_t dims[4];
    const char *labels[4];
    size_t rank = attn_output_shape(layout, e->which, dims, labels);
    assert_int_equal(rank, e->rank - skip);
    for (size_t i = 0; i < rank; i++) {
        assert_int_equal(dims[i], e->dims[i + skip]);
        assert_string_equal(labels[i], e->labels[i + skip]);
    }
}

static void test_output_shape_with_batch_axis(void **state)
{
    (void)state;
    attn_layout layout = shape_layout(true);
    for (size_t i = 0; i < sizeof batched_shapes / sizeof batched_shapes[0]; i++)
        check_output_shape(&layout, &batched_shapes[i], 0);
}

static void test_output_shape_without_batch_axis(void **state)
{
    (void)state;
    attn_layout layout = shape_layout(false);
    for (size_t i = 0; i < sizeof batched_shapes / sizeof batched_shapes[0]; i++)
        check_output_shape(&layout, &batched_shapes[i], 1);
}

static void test_output_names(void **state)
{
    (void)state;
    const char *names[ATTN_OUT_COUNT] = {"scores", "weights", "heads", "output", "q", "k", "v",
                                         "entropy", "argmax", "distance", "mean", "result",
                                         "norms", "value_norm"};
    for (int i = 0; i < ATTN_OUT_COUNT; i++) {
        assert_string_equal(attn_output_name((attn_output)i), names[i]);
        assert_non_null(attn_output_description((attn_output)i));
    }
}

static void test_output_bytes(void **state)
{
    (void)state;
    attn_layout layout = shape_layout(true);
    attn_error err = {0};
    size_t bytes = 0;
    /* scores (2, 3, 4, 5) = 120 elements; output (2, 4, 8) = 64 */
    assert_int_equal(attn_output_bytes(&layout, ATTN_OUT_SCORES, ATTN_F32, &bytes, &err), ATTN_OK);
    assert_int_equal(bytes, 480);
    assert_int_equal(attn_output_bytes(&layout, ATTN_OUT_SCORES, ATTN_F64, &bytes, &err), ATTN_OK);
    assert_int_equal(bytes, 960);
    assert_int_equal(attn_output_bytes(&layout, ATTN_OUT_OUTPUT, ATTN_F64, &bytes, &err), ATTN_OK);
    assert_int_equal(bytes, 512);
}

/* The summaries: (B, H, n) in the precision, argmax int32 whatever the
 * precision, mean (B, n, m) as the maps are stored, result (B, n, H, D). */
static void test_summary_outputs_shapes_and_types(void **state)
{
    (void)state;
    attn_layout layout = shape_layout(true);      /* B 2, H 3, n 4, m 5, D 8 */
    attn_error err = {0};
    size_t dims[4], bytes = 0;
    const char *labels[4];
    assert_int_equal(attn_output_shape(&layout, ATTN_OUT_ENTROPY, dims, labels), 3);
    assert_int_equal(dims[1], 3);
    assert_int_equal(dims[2], 4);
    assert_string_equal(labels[2], "query");
    assert_int_equal(attn_output_shape(&layout, ATTN_OUT_MEAN, dims, labels), 3);
    assert_string_equal(labels[1], "query");
    assert_string_equal(labels[2], "key");
    assert_int_equal(dims[2], 5);
    assert_int_equal(attn_output_shape(&layout, ATTN_OUT_RESULT, dims, labels), 4);
    assert_string_equal(labels[2], "head");
    assert_int_equal(dims[3], 8);
    assert_int_equal(attn_output_bytes(&layout, ATTN_OUT_ARGMAX, ATTN_F64, &bytes, &err), ATTN_OK);
    assert_int_equal(bytes, 2 * 3 * 4 * 4);
    assert_int_equal(attn_output_bytes(&layout, ATTN_OUT_ENTROPY, ATTN_F64, &bytes, &err), ATTN_OK);
    assert_int_equal(bytes, 2 * 3 * 4 * 8);
    assert_int_equal(attn_output_type(ATTN_OUT_ARGMAX, ATTN_STORE_F16, ATTN_F32), ATTN_STORE_I32);
    assert_int_equal(attn_output_type(ATTN_OUT_MEAN, ATTN_STORE_F16, ATTN_F32), ATTN_STORE_F16);
    assert_int_equal(attn_output_type(ATTN_OUT_RESULT, ATTN_STORE_F16, ATTN_F64), ATTN_STORE_F64);
    assert_true(attn_output_is_map(ATTN_OUT_MEAN));
    assert_false(attn_output_is_map(ATTN_OUT_ENTROPY));
    /* mean needs the weights in memory; the others run online */
    assert_int_equal(attn_plan_map_count(1u << ATTN_OUT_MEAN), 1);
    assert_int_equal(attn_plan_map_count((1u << ATTN_OUT_ENTROPY) | (1u << ATTN_OUT_ARGMAX) |
                                         (1u << ATTN_OUT_DISTANCE) | (1u << ATTN_OUT_RESULT)), 0);
}

static void test_output_bytes_overflow_is_rejected(void **state)
{
    (void)state;
    /* scores (2^21, 4, 2^21, 2^21) = 2^65 elements */
    attn_layout layout = {
        .dims = {.batch = (size_t)1 << 21, .n = (size_t)1 << 21, .m = (size_t)1 << 21,
                 .d_model = 1, .heads = 4, .d_k = 1, .d_v = 1},
        .batched = true,
    };
    attn_error err = {0};
    size_t bytes = 42;
    assert_int_equal(attn_output_bytes(&layout, ATTN_OUT_SCORES, ATTN_F32, &bytes, &err),
                     ATTN_EINPUT);
    assert_non_null(strstr(err.msg, "scores"));
    /* output (2^21, 2^21, 1) = 2^42 elements fits */
    assert_int_equal(attn_output_bytes(&layout, ATTN_OUT_OUTPUT, ATTN_F64, &bytes, &err), ATTN_OK);
    assert_true(bytes == ((size_t)1 << 45));
}

/* ---- --save lists ------------------------------------------------------- */

static void test_parse_save_list_good(void **state)
{
    (void)state;
    attn_error err = {0};
    unsigned save = 0;
    assert_int_equal(attn_parse_save_list("weights,output", &save, &err), ATTN_OK);
    assert_int_equal(save, (1u << ATTN_OUT_WEIGHTS) | (1u << ATTN_OUT_OUTPUT));
    assert_int_equal(attn_parse_save_list("q", &save, &err), ATTN_OK);
    assert_int_equal(save, 1u << ATTN_OUT_Q);
    assert_int_equal(attn_parse_save_list("scores,weights,heads,output,q,k,v", &save, &err), ATTN_OK);
    assert_int_equal(save, 0x7fu);
    assert_int_equal(attn_parse_save_list("v,v,k", &save, &err), ATTN_OK);
    assert_int_equal(save, (1u << ATTN_OUT_V) | (1u << ATTN_OUT_K));
    assert_int_equal(attn_parse_save_list("scores,weights,heads,output", &save, &err), ATTN_OK);
    assert_int_equal(save, ATTN_SAVE_DEFAULT);
}

static void test_parse_save_list_unknown_name(void **state)
{
    (void)state;
    attn_error err = {0};
    unsigned save = 0;
    assert_int_equal(attn_parse_save_list("weights,attention", &save, &err), ATTN_EUSAGE);
    assert_non_null(strstr(err.msg, "attention"));
    assert_int_equal(attn_parse_save_list("weight", &save, &err), ATTN_EUSAGE);   /* prefix */
    assert_int_equal(attn_parse_save_list("outputs", &save, &err), ATTN_EUSAGE); /* longer */
    assert_int_equal(attn_parse_save_list("Q", &save, &err), ATTN_EUSAGE);
}

static void test_parse_save_list_empty_item(void **state)
{
    (void)state;
    attn_error err = {0};
    unsigned save = 0;
    assert_int_equal(attn_parse_save_list("", &save, &err), ATTN_EUSAGE);
    assert_int_equal(attn_parse_save_list("weights,,output", &save, &err), ATTN_EUSAGE);
    assert_int_equal(attn_parse_save_list("weights,", &save, &err), ATTN_EUSAGE);
    assert_int_equal(attn_parse_save_list(",weights", &save, &err), ATTN_EUSAGE);
}

/* ---- slices of the batch ----------------------------------------------- */

/* B = 10, n = m = 3, D = 8, H = 2, d_k = 4, d_v = 6 (self-attention) */
static attn_layout slice_layout(void)
{
    attn_layout layout = {
        .dims = {.batch = 10, .n = 3, .m = 3, .d_model = 8, .heads = 2, .d_k = 4, .d_v = 6},
        .batched = true,
    };
    return layout;
}

/* attn_plan_slice of layout, which must succeed: its item count, and its
 * buffer sizes in *sizes. */
static size_t sliced(const attn_layout *layout, attn_precision precision, unsigned save,
                     size_t budget, size_t forced, attn_slice_sizes *sizes)
{
    attn_error err = {0};
    size_t items = 0;
    assert_int_equal(attn_plan_slice(layout, precision, save, budget, forced, sizes, &items, &err),
                     ATTN_OK);
    return items;
}

static void test_plan_slice_buffer_sizes(void **state)
{
    (void)state;
    attn_layout layout = slice_layout();
    attn_slice_sizes sizes;
    sliced(&layout, ATTN_F32, ATTN_SAVE_DEFAULT, 0, 0, &sizes);
    assert_int_equal(sizes.x, 3 * 8);          /* n * D        */
    assert_int_equal(sizes.y, 0);              /* no --kv      */
    assert_int_equal(sizes.q, 3 * 8);          /* n * H*dk     */
    assert_int_equal(sizes.k, 3 * 8);          /* m * H*dk     */
    assert_int_equal(sizes.v, 3 * 12);         /* m * H*dv     */
    assert_int_equal(sizes.maps, 2 * 3 * 3);   /* H * n * m    */
    assert_int_equal(sizes.heads, 3 * 12);     /* H * n * dv   */
    assert_int_equal(sizes.concat, 3 * 12);
    assert_int_equal(sizes.output, 3 * 8);
    assert_int_equal(sizes.keep, 3);
    /* at least every buffer once, scores and weights twice, in float */
    size_t floor = (24 + 24 + 24 + 36 + 2 * 18 + 36 + 36 + 24) * 4 + 3;
    assert_true(sizes.bytes_per_item >= floor);

    layout.cross = true;
    layout.dims.m = 5;
    sliced(&layout, ATTN_F64, ATTN_SAVE_DEFAULT, 0, 0, &sizes);
    assert_int_equal(sizes.y, 5 * 8);          /* m * D        */
    assert_int_equal(sizes.k, 5 * 8);
    assert_int_equal(sizes.maps, 2 * 3 * 5);
    assert_int_equal(sizes.keep, 5);
}

/* The item count of a budget in bytes (0: none) and a forced count (0:
 * none), of the batch of 10. */
typedef struct slice_count {
    size_t budget, forced, items;
} slice_count;

/* Each case's item count; a failure names the case and the bytes per item. */
static void check_slice_counts(const attn_layout *layout, const slice_count *cases, size_t count,
                               size_t per_item)
{
    for (size_t i = 0; i < count; i++) {
        attn_slice_sizes sizes;
        size_t items = sliced(layout, ATTN_F32, ATTN_SAVE_DEFAULT, cases[i].budget,
                              cases[i].forced, &sizes);
        if (items != cases[i].items)
            fail_msg("budget %zu bytes (%zu per item), forced %zu: %zu items, expected %zu",
                     cases[i].budget, per_item, cases[i].forced, items, cases[i].items);
        assert_int_equal(sizes.bytes_per_item, per_item);
    }
}

static void test_plan_slice_budget_picks_item_count(void **state)
{
    (void)state;
    attn_layout layout = slice_layout();
    attn_slice_sizes sizes;
    sliced(&layout, ATTN_F32, ATTN_SAVE_DEFAULT, 0, 0, &sizes);
    size_t per_item = sizes.bytes_per_item;
    assert_true(per_item > 0);
    /* What steps of items hold: both slots' inputs below the batch, one
     * slot for the whole batch (one slice). */
    const size_t held = attn_plan_held_bytes(&layout, &sizes, 1);
    const size_t whole = attn_plan_held_bytes(&layout, &sizes, 10);
    assert_true(held > per_item);
    assert_int_equal(whole, 10 * (held - sizes.bytes_per_slot));

    /* Below the batch (10): the largest power of two of items that fits. */
    const slice_count cases[] = {
        {2 * held - 1, 0, 1}, {2 * held, 0, 2}, {4 * held - 1, 0, 2},
        {4 * held, 0, 4}, {7 * held, 0, 4}, {8 * held, 0, 8},
        {whole - 1, 0, 8},
        {whole, 0, 10},            /* the whole batch fits: all of it */
        {64 * held, 0, 10},
    };
    check_slice_counts(&layout, cases, COUNT(cases), per_item);

    /* double takes more bytes per item than float */
    attn_slice_sizes sizes64;
    size_t items = sliced(&layout, ATTN_F64, ATTN_SAVE_DEFAULT, 4 * held, 0, &sizes64);
    assert_true(sizes64.bytes_per_item > per_item);
    assert_true(items < 4);

    /* at least one item, never above the batch; a forced count wins */
    static const slice_count bounds[] = {
        {0, 0, 1},          /* nothing fits: still one item */
        {1, 0, 1},
        {SIZE_MAX, 0, 10},  /* everything fits: the batch */
        {0, 4, 4},          /* forced wins over a budget of 0 */
        {SIZE_MAX, 2, 2},   /* and over a huge budget */
        {0, 3, 3},          /* forced need not be a power of two */
        {0, 50, 10},        /* never above the batch */
    };
    check_slice_counts(&layout, bounds, COUNT(bounds), per_item);
}

/* Long sequences: one item exceeds the budget, so its query rows go in
 * power-of-two blocks, never fewer than one chunk of the maps holds --
 * with or without saved maps: q, heads and output go by rows too. */
static void test_plan_slice_query_row_blocks(void **state)
{
    (void)state;
    attn_layout layout = {
        .dims = {.batch = 3, .n = 1024, .m = 1024, .d_model = 16, .heads = 2, .d_k = 8, .d_v = 8},
        .batched = true,
    };
    attn_slice_sizes sizes;
    size_t items = 0;
    const unsigned output_only = 1u << ATTN_OUT_OUTPUT;
    const unsigned weights_only = (1u << ATTN_OUT_WEIGHTS) | output_only;

    /* q, heads and output of a row: H*dk + H*dv + D = 48 floats, and the
     * packed room of heads and output (their chunks hold whole rows) */
    const size_t row_outputs = 48 * 4 + (2 * 8 + 16) * 4;
    /* both maps: 2 maps * 2 heads * 1024 keys * 4 bytes per query row,
     * computed, and as much again packed in chunks for writing */
    items = sliced(&layout, ATTN_F32, ATTN_SAVE_DEFAULT, 1, 0, &sizes);
    assert_int_equal(sizes.map_count, 2);
    assert_int_equal(sizes.bytes_per_row, 2 * (2 * 2 * 1024 * 4) + row_outputs);
    assert_int_equal(items, 1);
    assert_int_equal(sizes.rows, 256);          /* (256, 256) tiles: 256 rows */
    assert_int_equal(sizes.least_rows, 256);

    /* room for 600 rows beyond one item's other buffers: 512 (a power of
     * two); the packed rows of two steps are held */
    sizes.rows = 0;
    size_t base = attn_plan_held_bytes(&layout, &sizes, 1);
    const size_t per_row = sizes.bytes_per_row + sizes.bytes_twice_per_row;
    items = sliced(&layout, ATTN_F32, ATTN_SAVE_DEFAULT, base + 600 * per_row, 0, &sizes);
    assert_int_equal(items, 1);
    assert_int_equal(sizes.rows, 512);
    assert_true(attn_plan_held_bytes(&layout, &sizes, 1) <= base + 600 * per_row);

    /* the whole item fits: every row at once */
    sizes.rows = 1024;
    const size_t item = attn_plan_held_bytes(&layout, &sizes, 1);
    items = sliced(&layout, ATTN_F32, ATTN_SAVE_DEFAULT, item, 0, &sizes);
    assert_int_equal(items, 1);
    assert_int_equal(sizes.rows, 1024);
    items = sliced(&layout, ATTN_F32, ATTN_SAVE_DEFAULT, item - 1, 0, &sizes);
    assert_int_equal(sizes.rows, 512);

    /* weights only: one map kept; no map at all: blocks of rows all the same */
    sliced(&layout, ATTN_F32, weights_only, 1, 0, &sizes);
    assert_int_equal(sizes.map_count, 1);
    assert_int_equal(sizes.bytes_per_row, 2 * (2 * 1024 * 4) + 48 * 4 + 16 * 4);
    assert_int_equal(sizes.rows, 256);
    sliced(&layout, ATTN_F32, output_only, 1, 0, &sizes);
    assert_int_equal(sizes.map_count, 0);
    assert_int_equal(sizes.bytes_per_row, 48 * 4 + 16 * 4);
    assert_int_equal(sizes.rows, 256);

    /* --batch-slice keeps whole rows */
    items = sliced(&layout, ATTN_F32, ATTN_SAVE_DEFAULT, 1, 2, &sizes);
    assert_int_equal(items, 2);
    assert_int_equal(sizes.rows, 1024);
}

/* A step's rows as the buffers count them: a block of rows as it is, a
 * whole item rounded up to whole tiles (the maps' chunks) -- 1000 rows in
 * tiles of 256 count as 1024. */
static void test_plan_whole_item_counts_whole_tiles(void **state)
{
    (void)state;
    attn_layout layout = {
        .dims = {.batch = 3, .n = 1000, .m = 1000, .d_model = 16, .heads = 2, .d_k = 8, .d_v = 8},
        .batched = true,
    };
    attn_slice_sizes sizes;
    sliced(&layout, ATTN_F32, ATTN_SAVE_DEFAULT, 1, 0, &sizes);
    const size_t tile = sizes.least_rows;
    assert_int_equal(tile, 256);
    sizes.rows = 1000;                          /* the whole item */
    assert_int_equal(attn_plan_step_bytes(&layout, &sizes, 1),
                     sizes.bytes_per_base + 1024 * sizes.bytes_per_row);
    sizes.rows = 512;                           /* a block: as it is */
    assert_int_equal(attn_plan_step_bytes(&layout, &sizes, 1),
                     sizes.bytes_per_base + 512 * sizes.bytes_per_row);
}

/* The benchmark's shapes (bench/workloads.h), as the planner sees them. */
typedef struct bench_shape {
    const char *name;
    size_t batch, n, d_model, heads, kv_heads, window;
    unsigned save;
} bench_shape;

static const bench_shape bench_shapes[] = {
    {"gpt2", 8, 512, 768, 12, 12, 0, ATTN_SAVE_DEFAULT},
    {"gpt2 --save output", 8, 512, 768, 12, 12, 0, 1u << ATTN_OUT_OUTPUT},
    {"long", 1, 4096, 768, 12, 12, 0, ATTN_SAVE_DEFAULT},
    {"many", 4096, 32, 128, 4, 4, 0, ATTN_SAVE_DEFAULT},
    {"xl", 1, 16384, 256, 4, 4, 0, 1u << ATTN_OUT_OUTPUT},
    {"llama", 4, 1024, 2048, 32, 8, 0, 1u << ATTN_OUT_OUTPUT},
    {"window", 1, 16384, 256, 4, 4, 256, 1u << ATTN_OUT_OUTPUT},
    {"window maps", 1, 16384, 256, 4, 4, 256, 1u << ATTN_OUT_WEIGHTS},
};

/* Bytes the steps hold at once (the cap's measure): items whole, or one
 * item's rows, two steps in flight. */
static size_t step_bytes(const attn_layout *layout, const attn_slice_sizes *sizes, size_t items)
{
    return attn_plan_held_bytes(layout, sizes, items);
}

/* The plan of shape for `threads` threads under the default cap of a
 * machine with `physical` bytes; fails the test on error. */
static size_t plan_for(const bench_shape *shape, size_t threads, size_t physical,
                       attn_layout *layout, attn_slice_sizes *sizes, size_t *cap)
{
    *layout = (attn_layout){
        .dims = {.batch = shape->batch, .n = shape->n, .m = shape->n, .d_model = shape->d_model,
                 .heads = shape->heads, .kv_heads = shape->kv_heads,
                 .d_k = shape->d_model / shape->heads, .d_v = shape->d_model / shape->heads},
        .batched = true,
    };
    const attn_config cfg = {.dims = layout->dims,
                             .variant = {.causal = true, .window = shape->window}};
    const bool online = (shape->save & ((1u << ATTN_OUT_SCORES) | (1u << ATTN_OUT_WEIGHTS))) == 0;
    *cap = attn_plan_default_memory(threads, physical);
    const attn_step_request req = {
        .precision = ATTN_F32, .save = shape->save, .memory = *cap, .threads = threads,
        .task_rows = attn_task_rows(&cfg, online),
    };
    attn_error err = {0};
    size_t items = 0;
    assert_int_equal(attn_plan_steps(layout, &req, sizes, &items, &err), ATTN_OK);
    return items;
}

/* The weight map that takes the weights' buffer (attn_plan.h): norms, when
 * it is saved and the weights are not; none when the weights are saved
 * (they keep their buffer) or no such map is. */
static void test_plan_map_in_weights_place(void **state)
{
    (void)state;
    const unsigned norms = 1u << ATTN_OUT_NORMS, weights = 1u << ATTN_OUT_WEIGHTS;
    assert_int_equal(attn_plan_map_in_weights_place(norms), ATTN_WEIGHT_MAP_NORMS);
    assert_int_equal(attn_plan_map_in_weights_place(norms | (1u << ATTN_OUT_OUTPUT)),
                     ATTN_WEIGHT_MAP_NORMS);
    assert_int_equal(attn_plan_map_in_weights_place(norms | weights), -1);
    assert_int_equal(attn_plan_map_in_weights_place(weights), -1);
    assert_int_equal(attn_plan_map_in_weights_place(1u << ATTN_OUT_OUTPUT), -1);
    assert_int_equal(attn_plan_map_in_weights_place(0), -1);
}

/* items * H * ceil(rows / task_rows) blocks, by hand for 2 items of 3
 * heads and 5 rows; a task_rows of 0 counts as 1 (the header). */
static void test_plan_step_blocks_by_hand(void **state)
{
    (void)state;
    attn_layout layout = {.dims = {.batch = 4, .n = 5, .m = 5, .heads = 3}};
    const attn_slice_sizes sizes = {.rows = 5};
    assert_int_equal(attn_plan_step_blocks(&layout, &sizes, 2, 1), 2 * 3 * 5);
    assert_int_equal(attn_plan_step_blocks(&layout, &sizes, 2, 0), 2 * 3 * 5);
    assert_int_equal(attn_plan_step_blocks(&layout, &sizes, 2, 2), 2 * 3 * 3);
    assert_int_equal(attn_plan_step_blocks(&layout, &sizes, 2, 5), 2 * 3 * 1);
    assert_int_equal(attn_plan_step_blocks(&layout, &sizes, 2, 128), 2 * 3 * 1);
}

/*
 * For 1 to 64 threads, on a machine of 2 GiB per thread (at least 24
 * GiB): each step of every bench shape holds at least
 * ATTN_BLOCKS_PER_THREAD blocks per thread, or is the whole batch, and
 * stays under the default cap, which grows with the threads and never
 * passes an eighth of the memory.
 */
static void test_plan_steps_feed_every_thread(void **state)
{
    (void)state;
    for (size_t s = 0; s < sizeof bench_shapes / sizeof bench_shapes[0]; s++) {
        size_t last_cap = 0;
        for (size_t threads = 1; threads <= 64; threads++) {
            const size_t physical = threads < 12 ? (size_t)24 << 30 : threads * ((size_t)2 << 30);
            attn_layout layout;
            attn_slice_sizes sizes;
            size_t cap, items = plan_for(&bench_shapes[s], threads, physical, &layout, &sizes, &cap);
            const size_t blocks = attn_plan_step_blocks(&layout, &sizes, items,
                                                        attn_task_rows(&(attn_config){
                                                            .dims = layout.dims,
                                                            .variant.window = bench_shapes[s].window},
                                                            (bench_shapes[s].save & 3u) == 0));
            const bool whole = items == layout.dims.batch && sizes.rows == layout.dims.n;
            if (blocks < ATTN_BLOCKS_PER_THREAD * threads && !whole)
                fail_msg("%s, %zu threads: %zu blocks per step", bench_shapes[s].name, threads, blocks);
            /* Over the cap only as the least step there is: one item's
             * X, K and V, and one tile of rows. */
            const bool least = items == 1 && sizes.rows == sizes.least_rows &&
                               step_bytes(&layout, &sizes, items) == sizes.least_bytes;
            if (step_bytes(&layout, &sizes, items) > cap && !least)
                fail_msg("%s, %zu threads: a step of %zu bytes over the cap %zu",
                         bench_shapes[s].name, threads, step_bytes(&layout, &sizes, items), cap);
            assert_true(cap >= last_cap);
            assert_true(cap <= physical / ATTN_MEMORY_SHARE);
            last_cap = cap;
        }
    }
}

/* The default cap by hand: 256 MiB a thread, at least 32 MiB, at most
 * a quarter of the memory (0: unknown, no bound). */
static void test_plan_default_memory(void **state)
{
    (void)state;
    assert_int_equal(attn_plan_default_memory(1, 0), 256 * MIB);
    assert_int_equal(attn_plan_default_memory(2, (size_t)24 << 30), 512 * MIB);
    assert_int_equal(attn_plan_default_memory(64, (size_t)24 << 30), (size_t)6 << 30);
    assert_int_equal(attn_plan_default_memory(4, (size_t)1 << 30), 256 * MIB);
    assert_int_equal(attn_plan_default_memory(1, 64 * MIB), 32 * MIB);
    assert_int_equal(attn_plan_default_memory(0, 0), 256 * MIB);
}

/* A --memory below what feeds the threads stays the cap: the step does
 * not grow past it; and a cap above ATTN_STEP_BYTES is not filled when a
 * smaller step already feeds the threads. */
static void test_plan_steps_memory_is_a_cap(void **state)
{
    (void)state;
    attn_layout layout;
    attn_slice_sizes sizes;
    size_t cap, items = plan_for(&bench_shapes[0], 64, (size_t)24 << 30, &layout, &sizes, &cap);
    assert_true(attn_plan_step_blocks(&layout, &sizes, items, 128) >= 4 * 64);

    attn_error err = {0};
    attn_step_request req = {
        .precision = ATTN_F32, .save = ATTN_SAVE_DEFAULT, .memory = 64 * MIB, .threads = 64,
        .task_rows = 128,
    };
    assert_int_equal(attn_plan_steps(&layout, &req, &sizes, &items, &err), ATTN_OK);
    assert_true(step_bytes(&layout, &sizes, items) <= 64 * MIB);
    assert_true(attn_plan_step_blocks(&layout, &sizes, items, 128) < 4 * 64);

    /* one thread, a cap of 1 GiB: the step ATTN_STEP_BYTES gives */
    req.memory = (size_t)1 << 30;
    req.threads = 1;
    assert_int_equal(attn_plan_steps(&layout, &req, &sizes, &items, &err), ATTN_OK);
    attn_slice_sizes preferred;
    size_t preferred_items = 0;
    assert_int_equal(attn_plan_slice(&layout, ATTN_F32, ATTN_SAVE_DEFAULT, ATTN_STEP_BYTES, 0,
                                     &preferred, &preferred_items, &err), ATTN_OK);
    assert_int_equal(items, preferred_items);
    assert_int_equal(sizes.rows, preferred.rows);
    assert_true(step_bytes(&layout, &sizes, items) < 256 * MIB);
    assert_true(attn_plan_step_blocks(&layout, &sizes, items, 128) >= 4);
}

/*
 * MPI ranks (attn_step_request.ranks).  xl, one item, is shared by rows
 * among 2 ranks: its steps hold the whole item (the cap allows it), so
 * that each rank can cut its rows into steps of equal cost; under a cap
 * too small for that, the cap still rules.
 */
static void test_plan_steps_for_ranks(void **state)
{
    (void)state;
    attn_layout layout;
    attn_slice_sizes sizes;
    size_t cap, items = plan_for(&bench_shapes[4], 1, (size_t)24 << 30, &layout, &sizes, &cap);
    assert_true(sizes.rows < layout.dims.n);          /* alone: blocks of rows */
    attn_error err = {0};
    attn_step_request req = {
        .precision = ATTN_F32, .save = 1u << ATTN_OUT_OUTPUT, .memory = 512 * MIB, .threads = 1,
        .task_rows = 256, .ranks = 2,
    };
    assert_int_equal(attn_plan_steps(&layout, &req, &sizes, &items, &err), ATTN_OK);
    assert_int_equal(items, 1);
    assert_int_equal(sizes.rows, layout.dims.n);
    assert_true(attn_plan_held_bytes(&layout, &sizes, items) <= 512 * MIB);
    req.memory = 64 * MIB;                            /* the cap still rules */
    assert_int_equal(attn_plan_steps(&layout, &req, &sizes, &items, &err), ATTN_OK);
    assert_true(sizes.rows < layout.dims.n);
    assert_true(attn_plan_held_bytes(&layout, &sizes, items) <= 64 * MIB);
}

/*
 * Sliding keys (attn_step_request.slide_window) in blocks of rows: a row
 * of a step holds, beyond what it holds without them, its q, k and v
 * (H d_k + G d_k + G d_v) and its row of X for each step parity (2 D),
 * counted by hand here: 64 + 32 + 32 + 2 x 64 = 256 floats.
 */
static void test_plan_sliding_row_bytes(void **state)
{
    (void)state;
    attn_layout layout = {
        .dims = {.batch = 1, .n = 8192, .m = 8192, .d_model = 64, .heads = 4, .kv_heads = 2,
                 .d_k = 16, .d_v = 16},
        .batched = true,
    };
    attn_step_request req = {
        .precision = ATTN_F32, .save = 1u << ATTN_OUT_OUTPUT, .memory = 4 * MIB, .threads = 1,
        .task_rows = 256,
    };
    attn_slice_sizes plain, sliding;
    size_t items = 0;
    attn_error err = {0};
    assert_int_equal(attn_plan_steps(&layout, &req, &plain, &items, &err), ATTN_OK);
    req.slide_window = 256;
    assert_int_equal(attn_plan_steps(&layout, &req, &sliding, &items, &err), ATTN_OK);
    assert_true(sliding.rows < layout.dims.n && sliding.slide_keys > 0);
    assert_int_equal(sliding.bytes_per_row - plain.bytes_per_row, 256 * sizeof(float));
}

static void test_plan_slice_overflow_is_rejected(void **state)
{
    (void)state;
    /* scores per item: H * n * m = 2 * 2^32 * 2^32 */
    attn_layout layout = slice_layout();
    layout.dims.n = (size_t)1 << 32;
    layout.dims.m = (size_t)1 << 32;
    attn_slice_sizes sizes;
    attn_error err = {0};
    size_t items = 0;
    assert_int_equal(attn_plan_slice(&layout, ATTN_F32, ATTN_SAVE_DEFAULT, MIB, 0, &sizes, &items, &err), ATTN_EINPUT);
    assert_true(strlen(err.msg) > 0);
}

/* ---- grouped-query attention: output shapes, slices, FLOPs -------------- */

/* The planned GQA layer with --kv (2, 5, 8): B = 2, n = 3, m = 5, D = 8,
 * H = 4, G = 2, d_k = 3, d_v = 5. */
static attn_layout planned_gqa_layout(size_t kv_heads_in_w_k)
{
    attn_tensor_info in[ATTN_IN_COUNT];
    start_inputs(in, GQA);
    SET(in, ATTN_IN_KV, 2, 5, 8);
    if (kv_heads_in_w_k == 4) {        /* G = H: W_K (8, 12), W_V (8, 20) */
        SET(in, ATTN_IN_WK, 8, 12);
        SET(in, ATTN_IN_WV, 8, 20);
    }
    attn_layout layout = accepted_for(in, &(attn_plan_request){.heads = 4});
    assert_int_equal(attn_kv_heads(&layout.dims), kv_heads_in_w_k);
    return layout;
}

/* The planned GQA layer's outputs with its G = 2 K/V heads, and with
 * G = H = 4, where k and v keep the "head" label. */
static const struct {
    size_t kv_heads;
    expected_shape shape;
} gqa_shapes[] = {
    {2, {ATTN_OUT_SCORES, 4, {2, 4, 3, 5}, {"batch", "head", "query", "key"}}},
    {2, {ATTN_OUT_HEADS, 4, {2, 4, 3, 5}, {"batch", "head", "query", "d_v"}}},
    {2, {ATTN_OUT_OUTPUT, 3, {2, 3, 8}, {"batch", "query", "d_model"}}},
    {2, {ATTN_OUT_Q, 4, {2, 4, 3, 3}, {"batch", "head", "query", "d_k"}}},
    {2, {ATTN_OUT_K, 4, {2, 2, 5, 3}, {"batch", "kv_head", "key", "d_k"}}},
    {2, {ATTN_OUT_V, 4, {2, 2, 5, 5}, {"batch", "kv_head", "key", "d_v"}}},
    {4, {ATTN_OUT_K, 4, {2, 4, 5, 3}, {"batch", "head", "key", "d_k"}}},
    {4, {ATTN_OUT_V, 4, {2, 4, 5, 5}, {"batch", "head", "key", "d_v"}}},
};

/* The shapes of gqa_shapes for G = kv_heads, without the batch axis when
 * skip is 1. */
static void check_gqa_shapes(const attn_layout *layout, size_t kv_heads, size_t skip)
{
    for (size_t i = 0; i < COUNT(gqa_shapes); i++)
        if (gqa_shapes[i].kv_heads == kv_heads)
            check_output_shape(layout, &gqa_shapes[i].shape, skip);
}

static void test_output_shape_gqa_kv_heads(void **state)
{
    (void)state;
    attn_layout layout = planned_gqa_layout(2);
    check_gqa_shapes(&layout, 2, 0);
    assert_string_equal(attn_axis_label(&layout, ATTN_AXIS_KV_HEAD), "kv_head");
    assert_string_equal(attn_axis_label(&layout, ATTN_AXIS_HEAD), "head");
    /* k (2, 2, 5, 3) = 60 floats */
    attn_error err = {0};
    size_t bytes = 0;
    assert_int_equal(attn_output_bytes(&layout, ATTN_OUT_K, ATTN_F32, &bytes, &err), ATTN_OK);
    assert_int_equal(bytes, 240);
    /* without the batch axis */
    layout.batched = false;
    layout.dims.batch = 1;
    check_gqa_shapes(&layout, 2, 1);

    /* G = H: k and v keep the "head" label, with H = 4 heads */
    layout = planned_gqa_layout(4);
    check_gqa_shapes(&layout, 4, 0);
    assert_string_equal(attn_axis_label(&layout, ATTN_AXIS_KV_HEAD), "head");
    /* and so with kv_heads left 0 in hand-made dims */
    layout.dims.kv_heads = 0;
    check_gqa_shapes(&layout, 4, 0);
}

static void test_plan_slice_gqa_kv_buffers(void **state)
{
    (void)state;
    attn_slice_sizes sizes;
    attn_layout layout = planned_gqa_layout(2);
    sliced(&layout, ATTN_F32, ATTN_SAVE_DEFAULT, 0, 0, &sizes);
    assert_int_equal(sizes.q, 3 * 4 * 3);      /* n * H*dk = 36 */
    assert_int_equal(sizes.k, 5 * 2 * 3);      /* m * G*dk = 30 */
    assert_int_equal(sizes.v, 5 * 2 * 5);      /* m * G*dv = 50 */
    assert_int_equal(sizes.projections, 36 + 30 + 50);
    assert_int_equal(sizes.y, 5 * 8);
    assert_int_equal(sizes.maps, 4 * 3 * 5);   /* maps keep H heads */
    assert_int_equal(sizes.heads, 3 * 4 * 5);  /* n * H*dv = 60 */
    size_t gqa_bytes = sizes.bytes_per_item;

    layout = planned_gqa_layout(4);
    sliced(&layout, ATTN_F32, ATTN_SAVE_DEFAULT, 0, 0, &sizes);
    assert_int_equal(sizes.q, 36);
    assert_int_equal(sizes.k, 5 * 4 * 3);      /* 60 */
    assert_int_equal(sizes.v, 5 * 4 * 5);      /* 100 */
    assert_int_equal(sizes.projections, 36 + 60 + 100);
    /* 80 more projection floats = 320 bytes; k and v are not saved, so
     * nothing more is packed for writing */
    assert_int_equal(sizes.bytes_per_item - gqa_bytes, 320);
}

static void test_plan_flops_gqa(void **state)
{
    (void)state;
    /* B = 2, n = 3, m = 5, D = 8, H = 4, d_k = 3, d_v = 5, per item:
     *   Q projection      2 n D H dk        = 2*3*8*4*3   =  576
     *   K, V projections  2 m D G (dk + dv) = 2*5*8*G*8   =  640 G
     *   Q K^T, weights V  2 H n m (dk + dv) = 2*4*3*5*8   =  960
     *   output            2 n H dv D        = 2*3*4*5*8   =  960
     * G = 4: 576 + 2560 + 1920 = 5056, times B: 10112
     * G = 2: 576 + 1280 + 1920 = 3776, times B:  7552 (2560 fewer)
     * G = 1: 576 +  640 + 1920 = 3136, times B:  6272 */
    attn_dims d = {.batch = 2, .n = 3, .m = 5, .d_model = 8, .heads = 4, .kv_heads = 4,
                   .d_k = 3, .d_v = 5};
    assert_true(attn_plan_flops(&d) == 10112.0);
    d.kv_heads = 0;                            /* 0 means G = H */
    assert_true(attn_plan_flops(&d) == 10112.0);
    d.kv_heads = 2;
    assert_true(attn_plan_flops(&d) == 7552.0);
    d.kv_heads = 1;
    assert_true(attn_plan_flops(&d) == 6272.0);

    /* the planned layer agrees with the hand-made dims */
    attn_layout gqa = planned_gqa_layout(2), mha = planned_gqa_layout(4);
    assert_true(attn_plan_flops(&mha.dims) - attn_plan_flops(&gqa.dims) == 2560.0);
}

/* ---- chunks ------------------------------------------------------------- */

static size_t chunk_bytes(const size_t *chunk, size_t rank, size_t elem_size)
{
    size_t bytes = elem_size;
    for (size_t i = 0; i < rank; i++)
        bytes *= chunk[i];
    return bytes;
}

static void assert_chunk_within(const size_t *chunk, const size_t *dims, size_t rank)
{
    for (size_t i = 0; i < rank; i++) {
        assert_true(chunk[i] >= 1);
        assert_true(chunk[i] <= dims[i]);
    }
}

/* attn_chunk_shape of a dataset and the chunk it must give, by hand. */
typedef struct chunk_case {
    const char *what;
    size_t rank, dims[4], elem_size, target, cap, chunk[4];
} chunk_case;

static const chunk_case chunk_cases[] = {
    {"(64, 512, 1024) float: one (512, 1024) plane is 2 MiB, so exactly 1 MiB",
     3, {64, 512, 1024}, 4, MIB, 0, {1, 256, 1024}},
    {"(8, 12, 1000, 1000) double: 131072 elements allowed; a 1000 row fits, leaving "
     "room for 131 rows, of which a power of two: 128, then 1 elsewhere: 1024000 bytes",
     4, {8, 12, 1000, 1000}, 8, MIB, 0, {1, 1, 128, 1000}},
    {"(100, 3, 4, 5) float: a (3, 4, 5) block is 240 bytes, so 4369 blocks would fit "
     "and the 100 are taken whole", 4, {100, 3, 4, 5}, 4, MIB, 0, {100, 3, 4, 5}},
    {"(50000, 2, 16) double: (2, 16) is 256 bytes; 4096 of them fit",
     3, {50000, 2, 16}, 8, MIB, 0, {4096, 2, 16}},
    {"a first-axis cap of 7", 2, {100, 10}, 4, MIB, 7, {7, 10}},
    {"a cap above the axis", 2, {100, 10}, 4, MIB, 1000, {100, 10}},
    {"the cap applies to axis 0 only", 2, {4, 100000}, 4, MIB, 2, {2, 100000}},
    {"a target below one element", 3, {10, 10, 10}, 8, 4, 0, {1, 1, 1}},
    {"a target of 0", 3, {10, 10, 10}, 8, 0, 0, {1, 1, 1}},
    {"no limit: the dims", 3, {10, 10, 10}, 4, SIZE_MAX, 0, {10, 10, 10}},
    {"an axis longer than the target alone: (3, 10^7) float", 2, {3, 10000000}, 4, MIB, 0,
     {1, 262144}},
    {"a zero-length axis still gets an extent of 1 (HDF5 refuses 0) and does not stop "
     "the other axes being sized", 2, {0, 5}, 4, MIB, 0, {1, 5}},
};

static void test_chunk_shape_by_hand(void **state)
{
    (void)state;
    for (size_t i = 0; i < COUNT(chunk_cases); i++) {
        const chunk_case *c = &chunk_cases[i];
        size_t chunk[4] = {99, 99, 99, 99};
        attn_chunk_shape(c->rank, c->dims, c->elem_size, c->target, c->cap, chunk);
        for (size_t a = 0; a < c->rank; a++)
            if (chunk[a] != c->chunk[a])
                fail_msg("%s: axis %zu of the chunk is %zu, expected %zu", c->what, a, chunk[a],
                         c->chunk[a]);
    }
    /* the 1024000 bytes: within the dims, between half the target and all of it */
    const chunk_case *c = &chunk_cases[1];
    size_t chunk[4];
    attn_chunk_shape(c->rank, c->dims, c->elem_size, c->target, c->cap, chunk);
    assert_chunk_within(chunk, c->dims, 4);
    size_t bytes = chunk_bytes(chunk, 4, 8);
    assert_true(bytes <= MIB && bytes > MIB / 2);
}

static void test_chunk_shape_never_zero_never_above_dims(void **state)
{
    (void)state;
    /* a spread of shapes: always within [1, dims] and at most the target
     * unless a single element is larger */
    const size_t shapes[][4] = {{1, 1, 1, 1}, {7, 300, 1, 4096}, {2, 12, 1024, 1024},
                                {100000, 1, 3, 1}, {5, 5, 5, 5}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t c4[4];
        attn_chunk_shape(4, shapes[s], 8, MIB, 3, c4);
        assert_chunk_within(c4, shapes[s], 4);
        assert_true(c4[0] <= 3);
        assert_true(chunk_bytes(c4, 4, 8) <= MIB);
    }
}

static void test_chunk_shape_holds_half_to_all_of_target(void **state)
{
    (void)state;
    /* datasets larger than the target, no cap: a chunk holds between half
     * of the target and all of it */
    const size_t shapes[][4] = {{7, 300, 3, 4096}, {2, 12, 1024, 1000}, {9, 999, 997, 3},
                                {3, 5, 7, 1 << 22}, {1 << 20, 1, 1, 3}};
    const size_t targets[] = {MIB, 3 * MIB / 2, 4096};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
            size_t chunk[4];
            attn_chunk_shape(4, shapes[s], 4, targets[t], 0, chunk);
            assert_chunk_within(chunk, shapes[s], 4);
            size_t bytes = chunk_bytes(chunk, 4, 4);
            if (bytes > targets[t] || 2 * bytes < targets[t])
                fail_msg("shape %zu target %zu: chunk (%zu, %zu, %zu, %zu) holds %zu bytes", s,
                         targets[t], chunk[0], chunk[1], chunk[2], chunk[3], bytes);
        }
}

/* ---- unravel ------------------------------------------------------------ */

static void test_unravel_index(void **state)
{
    (void)state;
    const size_t dims[3] = {2, 3, 4};
    size_t idx[3];
    attn_unravel_index(0, dims, 3, idx);
    assert_int_equal(idx[0], 0);
    assert_int_equal(idx[1], 0);
    assert_int_equal(idx[2], 0);
    attn_unravel_index(13, dims, 3, idx);      /* 13 = 1*12 + 0*4 + 1 */
    assert_int_equal(idx[0], 1);
    assert_int_equal(idx[1], 0);
    assert_int_equal(idx[2], 1);
    attn_unravel_index(23, dims, 3, idx);      /* the last element */
    assert_int_equal(idx[0], 1);
    assert_int_equal(idx[1], 2);
    assert_int_equal(idx[2], 3);
    /* every index once: ravelling back gives the flat index */
    for (size_t flat = 0; flat < 24; flat++) {
        attn_unravel_index(flat, dims, 3, idx);
        assert_true(idx[0] < 2 && idx[1] < 3 && idx[2] < 4);
        assert_int_equal((idx[0] * 3 + idx[1]) * 4 + idx[2], flat);
    }
    const size_t one[1] = {7};
    attn_unravel_index(5, one, 1, idx);
    assert_int_equal(idx[0], 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_packed_weights_derive_sizes),
        cmocka_unit_test(test_layout_per_head_and_mixed_weights_derive_heads),
        cmocka_unit_test(test_layout_rank2_x_is_one_unbatched_item),
        cmocka_unit_test(test_layout_cross_attention_and_biases),
        cmocka_unit_test(test_layout_hints_the_heads_setting),
        cmocka_unit_test(test_layout_hints_the_other_layout),
        cmocka_unit_test(test_layout_gqa_kv_heads_from_packed_w_k),
        cmocka_unit_test(test_layout_gqa_and_fused_sizes_from_every_weight_form),
        cmocka_unit_test(test_layout_fused_blocks),
        cmocka_unit_test(test_layout_fused_heads_interleaved),
        cmocka_unit_test(test_layout_fused_bias_norm_and_slope_lengths),
        cmocka_unit_test(test_layout_positions_shapes),
        cmocka_unit_test(test_layout_attention_bias_ranks),
        cmocka_unit_test(test_layout_refuses_wrong_shapes),
        cmocka_unit_test(test_layout_for_refuses_wrong_gqa_linear_fused_shapes),
        cmocka_unit_test(test_layout_for_refuses_wrong_norm_slope_position_bias_shapes),
        cmocka_unit_test(test_size_mul_edges),
        cmocka_unit_test(test_size_add_edges),
        cmocka_unit_test(test_size_product_edges),
        cmocka_unit_test(test_format_shape),
        cmocka_unit_test(test_format_shape_stays_in_its_buffer),
        cmocka_unit_test(test_output_shape_with_batch_axis),
        cmocka_unit_test(test_output_shape_without_batch_axis),
        cmocka_unit_test(test_output_names),
        cmocka_unit_test(test_output_bytes),
        cmocka_unit_test(test_output_bytes_overflow_is_rejected),
        cmocka_unit_test(test_summary_outputs_shapes_and_types),
        cmocka_unit_test(test_parse_save_list_good),
        cmocka_unit_test(test_parse_save_list_unknown_name),
        cmocka_unit_test(test_parse_save_list_empty_item),
        cmocka_unit_test(test_plan_slice_buffer_sizes),
        cmocka_unit_test(test_plan_slice_budget_picks_item_count),
        cmocka_unit_test(test_plan_slice_query_row_blocks),
        cmocka_unit_test(test_plan_whole_item_counts_whole_tiles),
        cmocka_unit_test(test_plan_sliding_row_bytes),
        cmocka_unit_test(test_plan_slice_overflow_is_rejected),
        cmocka_unit_test(test_plan_step_blocks_by_hand),
        cmocka_unit_test(test_plan_map_in_weights_place),
        cmocka_unit_test(test_plan_steps_feed_every_thread),
        cmocka_unit_test(test_plan_default_memory),
        cmocka_unit_test(test_plan_steps_memory_is_a_cap),
        cmocka_unit_test(test_plan_steps_for_ranks),
        cmocka_unit_test(test_output_shape_gqa_kv_heads),
        cmocka_unit_test(test_plan_slice_gqa_kv_buffers),
        cmocka_unit_test(test_plan_flops_gqa),
        cmocka_unit_test(test_chunk_shape_by_hand),
        cmocka_unit_test(test_chunk_shape_never_zero_never_above_dims),
        cmocka_unit_test(test_chunk_shape_holds_half_to_all_of_target),
        cmocka_unit_test(test_unravel_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
