/*
 * test_nearest.c - unit tests for cli_nearest and attn_edit_distance
 * (cmd/cli/options.h), the "did you mean" of every choice list of the
 * command line.  cmd/cli/options.c is libc only and is linked alone.
 *
 * Distances are counted by hand in the comments.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "attn_common.h"
#include "cli/options.h"

#define COUNT(a) (sizeof (a) / sizeof (a)[0])

static void test_edit_distance(void **state)
{
    (void)state;
    assert_int_equal(attn_edit_distance("", ""), 0);
    assert_int_equal(attn_edit_distance("abc", ""), 3);
    assert_int_equal(attn_edit_distance("", "abc"), 3);
    assert_int_equal(attn_edit_distance("causal", "causal"), 0);
    assert_int_equal(attn_edit_distance("casual", "causal"), 1);     /* "su" swapped */
    assert_int_equal(attn_edit_distance("linar", "linear"), 1);      /* e left out */
    assert_int_equal(attn_edit_distance("bf61", "bf16"), 1);         /* swapped */
    assert_int_equal(attn_edit_distance("F64", "f64"), 0);           /* case ignored */
    assert_int_equal(attn_edit_distance("kitten", "sitting"), 3);    /* k>s, e>i, +g */
    assert_int_equal(attn_edit_distance("ca", "abc"), 3);            /* a swap is not
                                                                       edited again */
    char long_name[300];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    assert_true(attn_edit_distance(long_name, "a") == SIZE_MAX);     /* too long to count */
}

/* Zeroes the stack below the caller's frame, where the next call's locals
 * will lie: a read of a location the callee never wrote then finds 0. */
static __attribute__((noinline)) void zero_stack(void)
{
    volatile unsigned char below[64 * 1024];
    memset((void *)below, 0, sizeof below);
    __asm__ volatile("" : : "r"(below) : "memory");
}

/* The distance reads only a and b, and the rows it has written: a name
 * whose byte before it would complete a swap ("...zy" passed from its "y"),
 * called on a zeroed stack, still counts as the name alone.  "xyz" to "y":
 * delete x and z, 2 (not 1, which a swap with the z before "y" and an
 * unwritten 0 in the rows would give).  The same with a as the name with
 * a byte before it: "x" (after a "y") to "zxy": insert z and y, 2. */
static void test_edit_distance_reads_only_its_names(void **state)
{
    (void)state;
    static const char zy[] = "zy", yx[] = "yx";
    zero_stack();
    assert_int_equal(attn_edit_distance("xyz", zy + 1), 2);
    zero_stack();
    assert_int_equal(attn_edit_distance("abxyz", zy + 1), 4);
    zero_stack();
    assert_int_equal(attn_edit_distance(yx + 1, "zxy"), 2);
}

static void test_nearest(void **state)
{
    (void)state;
    static const char *const options[] = {"causal", "scale", "kv", "heads", "precision", "wo"};
    assert_string_equal(cli_nearest("casual", options, COUNT(options)), "causal");
    assert_string_equal(cli_nearest("precison", options, COUNT(options)), "precision");
    assert_string_equal(cli_nearest("head", options, COUNT(options)), "heads");
    assert_string_equal(cli_nearest("HEADS", options, COUNT(options)), "heads");
    assert_null(cli_nearest("zzz", options, COUNT(options)));
    assert_null(cli_nearest("", options, COUNT(options)));
    /* a third of the length: 2 edits for 6 letters, no more */
    assert_string_equal(cli_nearest("cxusxl", options, COUNT(options)), "causal");
    assert_null(cli_nearest("cuasl", options, COUNT(options)));        /* 2 edits of 5 */
    assert_null(cli_nearest("cxxxal", options, COUNT(options)));       /* 3 edits */
    /* one letter: one edit */
    assert_string_equal(cli_nearest("k", options, COUNT(options)), "kv");
    static const char *const presets[] = {"gpt2", "llama", "qwen2", "qwen3", "neox"};
    assert_string_equal(cli_nearest("lama", presets, COUNT(presets)), "llama");
    assert_string_equal(cli_nearest("qwen", presets, COUNT(presets)), "qwen2");  /* tie: first */
    assert_string_equal(cli_nearest("gpt-2", presets, COUNT(presets)), "gpt2");
    /* beginning a name counts beyond the edits (two letters or more) */
    static const char *const outputs[] = {"scores", "weights", "entropy", "argmax"};
    assert_string_equal(cli_nearest("ent", outputs, COUNT(outputs)), "entropy");
    assert_null(cli_nearest("e", (const char *const[]){"entropy"}, 1));
    /* empty and missing names are skipped */
    static const char *const holes[] = {"", NULL, "xw", "linear"};
    assert_string_equal(cli_nearest("linaer", holes, COUNT(holes)), "linear");
    assert_null(cli_nearest("abc", holes, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edit_distance),
        cmocka_unit_test(test_edit_distance_reads_only_its_names),
        cmocka_unit_test(test_nearest),
    };
    return cmocka_run_group_tests_name("nearest", tests, NULL, NULL);
}
