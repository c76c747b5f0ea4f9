/*
 * test_tokens.c - unit tests for attn_tokens (sources, the UTF-8 and token
 * rules) and for reading string arrays with attn_h5in_read_strings.
 *
 * UTF-8 validity is checked against a decoder written here from the bit
 * patterns of RFC 3629 (not from the range table the library uses), over
 * every string of one to three bytes; the offsets of the first bad byte
 * are checked on hand-made cases.  String files are written with the HDF5
 * C API directly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hdf5.h>

#include "h5/h5.h"
#include "attn_tokens.h"
#include "test_support.h"
#include "test_hdf5.h"

/* ---- the reference: RFC 3629 by bit patterns ----------------------------- */

/* Whether s[0, length) is a sequence of characters, each decoded from its
 * lead byte's high bits and its continuation bytes 10xxxxxx, encoded in as
 * few bytes as its code point needs, not a surrogate, at most U+10FFFF. */
static bool reference_utf8(const unsigned char *s, size_t length)
{
    static const uint32_t smallest[5] = {0, 0, 0x80, 0x800, 0x10000};
    for (size_t i = 0; i < length;) {
        size_t bytes = s[i] < 0x80 ? 1 : (s[i] >> 5) == 0x6 ? 2 : (s[i] >> 4) == 0xE ? 3
                     : (s[i] >> 3) == 0x1E ? 4 : 0;
        if (bytes == 0 || i + bytes > length)
            return false;
        uint32_t cp = bytes == 1 ? s[i] : s[i] & (0x7Fu >> bytes);
        for (size_t k = 1; k < bytes; k++) {
            if ((s[i + k] >> 6) != 0x2)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3Fu);
        }
        if (cp < smallest[bytes] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
            return false;
        i += bytes;
    }
    return true;
}

static void test_utf8_matches_the_reference_on_every_short_string(void **state)
{
    (void)state;
    unsigned char s[3];
    size_t at, valid = 0;
    for (uint32_t v = 0; v < (1u << 24); v++) {
        s[0] = (unsigned char)(v >> 16);
        s[1] = (unsigned char)(v >> 8);
        s[2] = (unsigned char)v;
        for (size_t length = 1; length <= 3; length++) {
            if (length < 3 && v % (1u << (8 * (3 - length))) != 0)
                continue;                     /* shorter strings once each */
            bool expected = reference_utf8(s, length);
            if (attn_utf8_valid((const char *)s, length, &at) != expected) {
                print_error("%02x %02x %02x (%zu bytes): expected %s\n", s[0], s[1], s[2],
                            length, expected ? "valid" : "invalid");
                fail();
            }
            valid += expected;
        }
    }
    /* 128 + 128^2 + 128^3 ASCII strings, and the two- and three-byte
     * characters alone or after/before ASCII: a count the table must hit */
    const size_t two = 0x800 - 0x80, three = 0x10000 - 0x800 - 0x800;
    assert_int_equal(valid, 128 + 128 * 128 + 128 * 128 * 128 + two + 2 * 128 * two + three);
}

static void test_utf8_four_byte_sequences_match_the_reference(void **state)
{
    (void)state;
    const unsigned char leads[] = {0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF7, 0xF8, 0xFF};
    const unsigned char tails[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0xBF, 0xC0, 0xFF};
    size_t at;
    for (size_t l = 0; l < sizeof leads; l++)
        for (unsigned second = 0; second < 256; second++)
            for (size_t t = 0; t < sizeof tails; t++)
                for (size_t u = 0; u < sizeof tails; u++) {
                    unsigned char s[4] = {leads[l], (unsigned char)second, tails[t], tails[u]};
                    assert_int_equal(attn_utf8_valid((const char *)s, 4, &at),
                                     reference_utf8(s, 4));
                }
}

/* valid(bytes) with the offset of the first bad byte */
static size_t first_bad(const char *bytes, size_t length)
{
    size_t at = (size_t)-1;
    assert_false(attn_utf8_valid(bytes, length, &at));
    return at;
}

static void test_utf8_boundaries_and_offsets(void **state)
{
    (void)state;
    size_t at;
    /* U+0000.. U+007F, U+0080, U+07FF, U+0800, U+FFFF, U+10000, U+10FFFF */
    const char *valid[] = {"", "plain", "\xC2\x80", "\xDF\xBF", "\xE0\xA0\x80", "\xEF\xBF\xBF",
                           "\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF", "\xC4\xA0the",
                           "\xE6\x97\xA5\xE6\x9C\xAC", "\xF0\x9F\x98\x80"};
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++)
        assert_true(attn_utf8_valid(valid[i], strlen(valid[i]), &at));
    assert_int_equal(first_bad("\x80", 1), 0);               /* a lone continuation */
    assert_int_equal(first_bad("ab\xC0\xAF", 4), 2);         /* overlong '/' */
    assert_int_equal(first_bad("\xC1\xBF", 2), 0);
    assert_int_equal(first_bad("\xE0\x9F\xBF", 3), 1);       /* overlong U+07FF */
    assert_int_equal(first_bad("\xED\xA0\x80", 3), 1);       /* surrogate U+D800 */
    assert_int_equal(first_bad("\xF4\x90\x80\x80", 4), 1);   /* U+110000 */
    assert_int_equal(first_bad("\xF5\x80\x80\x80", 4), 0);
    assert_int_equal(first_bad("x\xFF", 2), 1);
    assert_int_equal(first_bad("\xE6\x97", 2), 2);           /* cut short: at the end */
    assert_int_equal(first_bad("\xE6\x97x", 3), 2);
    assert_int_equal(first_bad("\xF0\x9F\x98", 3), 3);
    /* only `length` bytes are read: what follows them (here a byte no
     * UTF-8 has) is not the string's */
    assert_true(attn_utf8_valid("abc\xFF", 3, &at));
    assert_true(attn_utf8_valid("\xC2\x80\x80", 2, &at));
}

static void test_token_faults_in_order(void **state)
{
    (void)state;
    char *long_token = malloc(ATTN_TOKEN_MAX_BYTES + 1);
    assert_non_null(long_token);
    memset(long_token, 'a', ATTN_TOKEN_MAX_BYTES + 1);
    size_t at = 0;
    assert_int_equal(attn_token_check(long_token, ATTN_TOKEN_MAX_BYTES, &at), ATTN_TOKEN_OK);
    assert_int_equal(attn_token_check(long_token, ATTN_TOKEN_MAX_BYTES + 1, &at),
                     ATTN_TOKEN_TOO_LONG);
    assert_int_equal(at, ATTN_TOKEN_MAX_BYTES);
    free(long_token);
    assert_int_equal(attn_token_check("a\0b", 3, &at), ATTN_TOKEN_NUL);
    assert_int_equal(at, 1);
    assert_int_equal(attn_token_check("\xFF\0", 2, &at), ATTN_TOKEN_NUL);   /* NUL first */
    assert_int_equal(attn_token_check("ab\xFF", 3, &at), ATTN_TOKEN_NOT_UTF8);
    assert_int_equal(at, 2);
    assert_int_equal(attn_token_check("", 0, &at), ATTN_TOKEN_OK);
}

static void test_source_forms(void **state)
{
    (void)state;
    attn_error err;
    attn_token_source s;
    assert_int_equal(attn_token_source_parse("tok", &s, &err), ATTN_OK);
    assert_string_equal(s.object, "tok");
    assert_null(s.attribute);
    attn_token_source_free(&s);
    assert_int_equal(attn_token_source_parse("/text/X@tokens", &s, &err), ATTN_OK);
    assert_string_equal(s.object, "/text/X");
    assert_string_equal(s.attribute, "tokens");
    attn_token_source_free(&s);
    assert_int_equal(attn_token_source_parse("@tokens", &s, &err), ATTN_OK);
    assert_string_equal(s.object, "");                       /* the root group */
    assert_string_equal(s.attribute, "tokens");
    attn_token_source_free(&s);
    assert_int_equal(attn_token_source_parse("a@b@c", &s, &err), ATTN_OK);   /* the last '@' */
    assert_string_equal(s.object, "a@b");
    assert_string_equal(s.attribute, "c");
    attn_token_source_free(&s);
    assert_int_equal(attn_token_source_parse("X@t", NULL, &err), ATTN_OK);      /* a check only */
    assert_int_equal(attn_token_source_parse("X@", NULL, &err), ATTN_EUSAGE);
    assert_int_equal(attn_token_source_parse("", &s, &err), ATTN_EUSAGE);
    assert_null(s.object);
    assert_int_equal(attn_token_source_parse("X@", &s, &err), ATTN_EUSAGE);
    assert_non_null(strstr(err.msg, "no attribute name"));
    assert_null(strstr(err.msg, "--"));                      /* no flags in lib messages */
    assert_null(s.object);
}

/* ---- reading strings ------------------------------------------------------ */

typedef struct strings_fixture {
    test_dir tmp;
    char path[256];     /* dir/strings.h5 */
} strings_fixture;

static hid_t string_type(size_t size, H5T_str_t pad, H5T_cset_t cset)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    assert_true(t >= 0);
    assert_true(H5Tset_size(t, size) >= 0);
    assert_true(H5Tset_strpad(t, pad) >= 0);
    assert_true(H5Tset_cset(t, cset) >= 0);
    return t;
}

/* The file: "v" (2, 3) variable-length UTF-8, the same as attribute "a"
 * of the root group; "f" (3) null-padded of 4 bytes, "s" (3) space-padded,
 * "t" (3) null-terminated; "n" (3) integers. */
static int setup(void **state)
{
    if (test_h5_setup(state, sizeof(strings_fixture), "test_tokens") != 0)
        return -1;
    strings_fixture *f = *state;
    snprintf(f->path, sizeof f->path, "%s/strings.h5", f->tmp.dir);
    const char *v[6] = {"a", "\xC4\xA0the", "", "\xE6\x97\xA5\xE6\x9C\xAC", "\xF0\x9F\x98\x80", "z"};
    const hsize_t two[2] = {2, 3}, one[1] = {3};
    hid_t file = H5Fcreate(f->path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t vt = string_type(H5T_VARIABLE, H5T_STR_NULLTERM, H5T_CSET_UTF8);
    hid_t s2 = H5Screate_simple(2, two, NULL), s1 = H5Screate_simple(1, one, NULL);
    hid_t d = H5Dcreate2(file, "v", vt, s2, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t a = H5Acreate2(file, "a", vt, s2, H5P_DEFAULT, H5P_DEFAULT);
    int ok = file >= 0 && d >= 0 && a >= 0 && H5Dwrite(d, vt, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0 &&
             H5Awrite(a, vt, v) >= 0;
    H5Aclose(a);
    H5Dclose(d);
    const struct { const char *name; H5T_str_t pad; const char bytes[12]; } fixed[] = {
        {"f", H5T_STR_NULLPAD, "ab\0\0c\0\0\0dddd"},
        {"s", H5T_STR_SPACEPAD, "ab  c   d e "},
        {"t", H5T_STR_NULLTERM, "ab\0\0x\0y\0\0\0\0\0"},
    };
    for (size_t i = 0; i < 3; i++) {
        hid_t ft = string_type(4, fixed[i].pad, H5T_CSET_ASCII);
        d = H5Dcreate2(file, fixed[i].name, ft, s1, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        ok = ok && d >= 0 && H5Dwrite(d, ft, H5S_ALL, H5S_ALL, H5P_DEFAULT, fixed[i].bytes) >= 0;
        H5Dclose(d);
        H5Tclose(ft);
    }
    const int numbers[3] = {1, 2, 3};
    d = H5Dcreate2(file, "n", H5T_STD_I32LE, s1, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ok = ok && d >= 0 && H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, numbers) >= 0;
    H5Dclose(d);
    H5Sclose(s1);
    H5Sclose(s2);
    H5Tclose(vt);
    H5Fclose(file);
    return ok ? 0 : -1;
}

static int teardown(void **state)
{
    return test_dir_teardown(state);
}

/* The fixture's string file, opened. */
static attn_h5in *open_strings(void **state)
{
    strings_fixture *f = *state;
    attn_h5in *in = NULL;
    attn_error err;
    assert_int_equal(attn_h5in_open(f->path, &in, &err), ATTN_OK);
    return in;
}

/* Reads the block first, count of name (attribute when not NULL) and
 * compares it with expected[] (NUL-free strings). */
static void expect_block(attn_h5in *in, const char *name, const char *attribute,
                         const size_t *first, const size_t *count, const char *const *expected,
                         size_t n)
{
    attn_strings s;
    attn_error err;
    int status = attn_h5in_read_strings(in, name, attribute, first, count, &s, &err);
    if (status != ATTN_OK)
        print_error("%s\n", err.msg);
    assert_int_equal(status, ATTN_OK);
    assert_int_equal(s.count, n);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(s.strings[i], expected[i]);
        assert_int_equal(s.lengths[i], strlen(expected[i]));
    }
    attn_strings_free(&s);
}

static void test_read_blocks_of_datasets_and_attributes(void **state)
{
    attn_h5in *in = open_strings(state);
    attn_error err;
    attn_tensor_info info;
    size_t fixed = 99;
    assert_int_equal(attn_h5in_describe_strings(in, "v", NULL, "v", 16, &info, &fixed, &err),
                     ATTN_OK);
    assert_int_equal(info.rank, 2);
    assert_int_equal(info.dims[0], 2);
    assert_int_equal(info.dims[1], 3);
    assert_int_equal(fixed, 0);
    assert_int_equal(attn_h5in_describe_strings(in, "/", "a", "a", 16, &info, &fixed, &err),
                     ATTN_OK);
    assert_int_equal(info.rank, 2);
    const size_t all_first[2] = {0, 0}, all_count[2] = {2, 3};
    const char *all[6] = {"a", "\xC4\xA0the", "", "\xE6\x97\xA5\xE6\x9C\xAC", "\xF0\x9F\x98\x80", "z"};
    expect_block(in, "v", NULL, all_first, all_count, all, 6);
    expect_block(in, "", "a", all_first, all_count, all, 6);
    const size_t first[2] = {1, 1}, count[2] = {1, 2};
    const char *part[2] = {"\xF0\x9F\x98\x80", "z"};
    expect_block(in, "v", NULL, first, count, part, 2);
    expect_block(in, "/", "a", first, count, part, 2);
    const size_t column_first[2] = {0, 2}, column_count[2] = {2, 1};
    const char *column[2] = {"", "z"};
    expect_block(in, "v", NULL, column_first, column_count, column, 2);
    expect_block(in, "", "a", column_first, column_count, column, 2);
    attn_h5in_close(in);
}

static void test_fixed_length_padding(void **state)
{
    attn_h5in *in = open_strings(state);
    attn_error err;
    attn_tensor_info info;
    size_t fixed = 0, first = 0, count = 3;
    assert_int_equal(attn_h5in_describe_strings(in, "f", NULL, "f", 16, &info, &fixed, &err),
                     ATTN_OK);
    assert_int_equal(fixed, 4);
    assert_int_equal(attn_h5in_describe_strings(in, "f", NULL, "f", 3, &info, &fixed, &err),
                     ATTN_EINPUT);                      /* longer than allowed */
    const char *nullpad[3] = {"ab", "c", "dddd"}, *spacepad[3] = {"ab", "c", "d e"};
    expect_block(in, "f", NULL, &first, &count, nullpad, 3);
    expect_block(in, "s", NULL, &first, &count, spacepad, 3);
    /* null-terminated "x\0y": the NUL inside is kept, to be refused */
    attn_strings s;
    assert_int_equal(attn_h5in_read_strings(in, "t", NULL, &first, &count, &s, &err), ATTN_OK);
    assert_int_equal(s.lengths[0], 2);
    assert_int_equal(s.lengths[1], 3);
    assert_memory_equal(s.strings[1], "x\0y", 3);
    assert_int_equal(s.lengths[2], 0);
    attn_strings_free(&s);
    attn_h5in_close(in);
}

/* Sources of no string array: what describing them says. */
static const struct {
    const char *name, *attribute, *what, *message;
} refused_sources[] = {
    {"n", NULL, "the numbers", "the numbers has integer elements; strings expected"},
    {"missing", NULL, "the list", "the list does not exist"},
    {"v", "none", "the attribute", "does not exist"},
    {"nowhere", "a", "the attribute", "no object nowhere"},
};

static void test_refusals(void **state)
{
    attn_h5in *in = open_strings(state);
    for (size_t i = 0; i < COUNT(refused_sources); i++) {
        attn_error err;
        attn_tensor_info info;
        size_t fixed;
        assert_int_equal(attn_h5in_describe_strings(in, refused_sources[i].name,
                                                    refused_sources[i].attribute,
                                                    refused_sources[i].what, 16, &info, &fixed,
                                                    &err), ATTN_EINPUT);
        assert_non_null(strstr(err.msg, refused_sources[i].message));
    }
    attn_h5in_close(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_matches_the_reference_on_every_short_string),
        cmocka_unit_test(test_utf8_four_byte_sequences_match_the_reference),
        cmocka_unit_test(test_utf8_boundaries_and_offsets),
        cmocka_unit_test(test_token_faults_in_order),
        cmocka_unit_test(test_source_forms),
        test_with_fixture(test_read_blocks_of_datasets_and_attributes),
        test_with_fixture(test_fixed_length_padding),
        test_with_fixture(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
