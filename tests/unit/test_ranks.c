/*
 * test_ranks.c - unit tests for the division of work among the ranks of
 * an MPI job (attn_ranks_divide) and for the one-rank build's collective
 * calls (what every serial run goes through).
 *
 * Expected divisions are worked out by hand in the comments.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "attn_math.h"
#include "attn_ranks.h"

#define COUNT(a) (sizeof (a) / sizeof (a)[0])

/* Equal costs: each boundary is the one nearest r/P of the total. */
static void test_equal_costs(void **state)
{
    (void)state;
    const double cost[] = {1, 1, 1, 1, 1, 1, 1, 1};
    size_t starts[4];
    attn_ranks_divide(cost, 8, 2, starts);        /* 8/2: 4 and 4 */
    assert_int_equal(starts[0], 0);
    assert_int_equal(starts[1], 4);
    assert_int_equal(starts[2], 8);
    attn_ranks_divide(cost, 8, 3, starts);        /* targets 2.67, 5.33: 3 | 5 */
    assert_int_equal(starts[1], 3);
    assert_int_equal(starts[2], 5);
    assert_int_equal(starts[3], 8);
}

/* Causal rows: unit i costs i + 1 (1 .. 8, total 36).  Halves at 18:
 * 1+2+3+4+5 = 15, +6 = 21; 15 is 3 short, 21 is 3 over -- a tie keeps
 * the lower boundary, 5 units and 3 units. */
static void test_growing_costs(void **state)
{
    (void)state;
    const double cost[] = {1, 2, 3, 4, 5, 6, 7, 8};
    size_t starts[3];
    attn_ranks_divide(cost, 8, 2, starts);
    assert_int_equal(starts[1], 5);
    /* thirds of 36 at 12 and 24: 1+..+4 = 10 (2 short), +5 = 15 (3 over):
     * 4; 1+..+6 = 21 (3 short), +7 = 28 (4 over): 6 */
    size_t thirds[4];
    attn_ranks_divide(cost, 8, 3, thirds);
    assert_int_equal(thirds[1], 4);
    assert_int_equal(thirds[2], 6);
    assert_int_equal(thirds[3], 8);
}

/* A boundary taken past its target (nearer than the one below) counts
 * the cost of the unit it takes: costs 9, 1, 7 (boundaries at 0, 9, 10,
 * 17) in thirds of 17 (targets 5.67 and 11.33) end at 9 (3.33 over,
 * nearer than 0) and at 10 (1.33 short, nearer than 17): 1 and 2. */
static void test_a_boundary_past_its_target(void **state)
{
    (void)state;
    const double cost[] = {9, 1, 7};
    size_t starts[4];
    attn_ranks_divide(cost, 3, 3, starts);
    assert_int_equal(starts[0], 0);
    assert_int_equal(starts[1], 1);
    assert_int_equal(starts[2], 2);
    assert_int_equal(starts[3], 3);
}

/* More ranks than units: the boundaries never go back, and some ranges
 * are empty; every unit is in exactly one range. */
static void test_more_ranks_than_units(void **state)
{
    (void)state;
    const double cost[] = {5, 5};
    size_t starts[6];
    attn_ranks_divide(cost, 2, 5, starts);
    assert_int_equal(starts[0], 0);
    assert_int_equal(starts[5], 2);
    for (size_t r = 0; r < 5; r++)
        assert_true(starts[r] <= starts[r + 1]);
    size_t nonempty = 0;
    for (size_t r = 0; r < 5; r++)
        nonempty += starts[r + 1] > starts[r];
    assert_int_equal(nonempty, 2);
}

/* One expensive unit among cheap ones: it stays whole in one range. */
static void test_one_heavy_unit(void **state)
{
    (void)state;
    const double cost[] = {1, 1, 100, 1, 1};
    size_t starts[3];
    attn_ranks_divide(cost, COUNT(cost), 2, starts);   /* half of 104 = 52: 2 (short 50) vs 3 (over 50): 2 */
    assert_int_equal(starts[1], 2);
    assert_int_equal(starts[2], 5);
}

/* Nothing to divide. */
static void test_no_units(void **state)
{
    (void)state;
    size_t starts[4];
    attn_ranks_divide(NULL, 0, 3, starts);
    for (size_t r = 0; r < 4; r++)
        assert_int_equal(starts[r], 0);
}

/* The one-rank build: rank 0 of 1, every status and error passed through
 * unchanged, the sum its own value. */
static void test_one_rank(void **state)
{
    (void)state;
    assert_int_equal(attn_rank(), 0);
    assert_int_equal(attn_rank_count(), 1);
    assert_false(attn_ranks_shared_file());
    attn_error err = {.hint = ATTN_HINT_NONE};
    strcpy(err.msg, "kept");
    size_t sum = 7;
    assert_int_equal(attn_ranks_agree_sum(ATTN_EINPUT, &sum, &err), ATTN_EINPUT);
    assert_int_equal(sum, 7);
    assert_string_equal(err.msg, "kept");
    assert_int_equal(attn_ranks_agree(ATTN_OK, &err), ATTN_OK);
}

/* The visible pairs that weight the division: causal rows 0..3 of a 4x4
 * map see 1+2+3+4 = 10 keys; a window of 2 caps each at 2: 1+2+2+2 = 7;
 * no mask: 16. */
static void test_visible_pairs(void **state)
{
    (void)state;
    attn_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.dims.n = cfg.dims.m = 4;
    assert_true(attn_visible_pairs(&cfg, 0, 4) == 16);
    cfg.variant.causal = true;
    assert_true(attn_visible_pairs(&cfg, 0, 4) == 10);
    assert_true(attn_visible_pairs(&cfg, 2, 2) == 7);     /* rows 2, 3: 3 + 4 */
    cfg.variant.window = 2;
    assert_true(attn_visible_pairs(&cfg, 0, 4) == 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal_costs),
        cmocka_unit_test(test_growing_costs),
        cmocka_unit_test(test_a_boundary_past_its_target),
        cmocka_unit_test(test_more_ranks_than_units),
        cmocka_unit_test(test_one_heavy_unit),
        cmocka_unit_test(test_no_units),
        cmocka_unit_test(test_one_rank),
        cmocka_unit_test(test_visible_pairs),
    };
    return cmocka_run_group_tests_name("ranks", tests, NULL, NULL);
}
