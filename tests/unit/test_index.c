/*
 * test_index.c - unit tests for attn_index: part names (escaping, long
 * groups, generations read back), and appends committed into an index in
 * a temporary directory per test -- what the index holds, what a refused
 * or failed append leaves (nothing), part names of groups that differ only
 * in case apart once case is folded.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>

#include "h5/h5.h"
#include "h5/index.h"
#include "attn_results.h"
#include "test_support.h"

/* ---- part names ----------------------------------------------------------- */

static void expect_name(const char *group, unsigned long g, const char *want)
{
    char name[256];
    assert_true(attn_index_part_name(group, g, name, sizeof name));
    assert_string_equal(name, want);
    assert_int_equal(attn_index_part_generation(group, name), g);
}

static void test_names_escape_what_a_file_name_cannot_hold(void **state)
{
    (void)state;
    expect_name("/layer3", 1, "layer3.1.h5");
    expect_name("/model/layer3", 2, "model+layer3.2.h5");
    expect_name("/transformer/h.0/attn", 1, "transformer+h.0+attn.1.h5");
    expect_name("/a_b-c", 12, "a_b-c.12.h5");
    expect_name("/.hidden/x", 1, "@2Ehidden+x.1.h5");     /* no hidden part files */
    expect_name("/a+b@c d%", 1, "a@2Bb@40c@20d@25.1.h5");
    expect_name("/\xc3\xa9t\xc3\xa9", 3, "@C3@A9t@C3@A9.3.h5");  /* UTF-8 "été" */
    expect_name("/x~y", 1, "x@7Ey.1.h5");                 /* "~" marks a hash only */
}

static void test_names_refuse_root_relative_and_generation_zero(void **state)
{
    (void)state;
    char name[256];
    assert_false(attn_index_part_name("/", 1, name, sizeof name));
    assert_false(attn_index_part_name("", 1, name, sizeof name));
    assert_false(attn_index_part_name("layer3", 1, name, sizeof name));
    assert_false(attn_index_part_name(NULL, 1, name, sizeof name));
    assert_false(attn_index_part_name("/layer3", 0, name, sizeof name));
    assert_false(attn_index_part_name("/layer3", 1, name, 11));   /* "layer3.1.h5" + NUL is 12 */
    assert_true(attn_index_part_name("/layer3", 1, name, 12));
}

static void test_names_of_distinct_groups_differ(void **state)
{
    (void)state;
    /* Pairs a careless escape would merge: "/" against "+", "@" or "%2F"
     * spelled out, "." against a generation. */
    static const char *const groups[] = {
        "/a/b", "/a+b", "/a@2Bb", "/a%2Fb", "/a.b", "/a/.b", "/a.1", "/a", "/a/1", "/a.1.1",
        "/A/b", "/a/b/", "/a//b", "/a@", "/a@40",
    };
    const size_t count = sizeof groups / sizeof groups[0];
    char names[sizeof groups / sizeof groups[0]][2][256];
    for (size_t i = 0; i < count; i++)
        for (unsigned long g = 1; g <= 2; g++)
            assert_true(attn_index_part_name(groups[i], g, names[i][g - 1], sizeof names[i][g - 1]));
    for (size_t i = 0; i < count; i++)
        for (size_t j = 0; j < count; j++)
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 2; b++)
                    if (i != j || a != b)
                        assert_string_not_equal(names[i][a], names[j][b]);
}

static void test_generation_belongs_to_one_group(void **state)
{
    (void)state;
    assert_int_equal(attn_index_part_generation("/layer3", "layer3.7.h5"), 7);
    assert_int_equal(attn_index_part_generation("/layer3", "layer3.123456.h5"), 123456);
    assert_int_equal(attn_index_part_generation("/a", "a.1.1.h5"), 0);    /* /a.1's part */
    assert_int_equal(attn_index_part_generation("/a.1", "a.1.h5"), 0);    /* /a's part   */
    assert_int_equal(attn_index_part_generation("/a.1", "a.1.1.h5"), 1);
    assert_int_equal(attn_index_part_generation("/layer3", "layer3.01.h5"), 0);
    assert_int_equal(attn_index_part_generation("/layer3", "layer3.0.h5"), 0);
    assert_int_equal(attn_index_part_generation("/layer3", "layer3..h5"), 0);
    assert_int_equal(attn_index_part_generation("/layer3", "layer3.1.h5x"), 0);
    assert_int_equal(attn_index_part_generation("/layer3", "layer3.1"), 0);
    assert_int_equal(attn_index_part_generation("/layer3", "layer31.1.h5"), 0);
    assert_int_equal(attn_index_part_generation("/layer3", ".layer3.1.h5"), 0);
    assert_int_equal(attn_index_part_generation("/", "1.h5"), 0);
}

/* A group of `count` copies of `unit` after a "/" (caller frees). */
static char *long_group(const char *unit, size_t count, const char *tail)
{
    size_t len = 1 + strlen(unit) * count + strlen(tail) + 1;
    char *group = malloc(len);
    assert_non_null(group);
    strcpy(group, "/");
    for (size_t i = 0; i < count; i++)
        strcat(group, unit);
    strcat(group, tail);
    return group;
}

/* The prefix of a name before ".g.h5" holds only whole escapes. */
static void assert_escapes_whole(const char *name)
{
    const char *end = strchr(name, '~');
    assert_non_null(end);
    for (const char *c = name; c < end; c++)
        if (*c == '@') {
            assert_true(c + 2 < end);
            assert_non_null(strchr("0123456789ABCDEF", c[1]));
            assert_non_null(strchr("0123456789ABCDEF", c[2]));
            c += 2;
        }
}

static void test_long_groups_are_cut_and_hashed(void **state)
{
    (void)state;
    char a[256], b[256];
    /* 200 escaped bytes fit as they are; 201 do not. */
    char *fits = long_group("x", 200, ""), *over = long_group("x", 201, "");
    assert_true(attn_index_part_name(fits, 1, a, sizeof a));
    assert_int_equal(strlen(a), 200 + strlen(".1.h5"));
    assert_null(strchr(a, '~'));
    assert_true(attn_index_part_name(over, 1, b, sizeof b));
    assert_int_equal(strlen(b), ATTN_INDEX_PREFIX_MAX + strlen(".1.h5"));
    assert_non_null(strchr(b, '~'));
    assert_int_equal(attn_index_part_generation(over, b), 1);
    free(fits);
    free(over);
    /* Groups that differ only past the cut get different names; escapes
     * are never cut in the middle. */
    char *g1 = long_group("\xc3\xa9", 100, "/one"), *g2 = long_group("\xc3\xa9", 100, "/two");
    assert_true(attn_index_part_name(g1, 1, a, sizeof a));
    assert_true(attn_index_part_name(g2, 1, b, sizeof b));
    assert_string_not_equal(a, b);
    assert_true(strlen(a) <= ATTN_INDEX_PREFIX_MAX + strlen(".1.h5"));
    assert_escapes_whole(a);
    assert_escapes_whole(b);
    assert_int_equal(attn_index_part_generation(g1, a), 1);
    assert_int_equal(attn_index_part_generation(g2, a), 0);
    free(g1);
    free(g2);
}

/* ---- appends committed ------------------------------------------------------ */

typedef struct index_fixture {
    test_dir tmp;
    char index[256];        /* dir/results.h5, not created by setup */
    char parts[264];        /* the index's name + ".parts"            */
} index_fixture;

static int setup(void **state)
{
    attn_h5_prepare();
    if (test_dir_setup(state, sizeof(index_fixture), "test_index") != 0)
        return -1;
    index_fixture *f = *state;
    snprintf(f->index, sizeof f->index, "%s/results.h5", f->tmp.dir);
    snprintf(f->parts, sizeof f->parts, "%s.parts", f->index);
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int teardown(void **state)
{
    index_fixture *f = *state;
    int result = nftw(f->tmp.dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return result;
}

/* The entries of dir, sorted and joined by spaces ("" when empty). */
static void list_dir(const char *dir, char *out, size_t len)
{
    struct dirent **names;
    int count = scandir(dir, &names, NULL, alphasort);
    out[0] = '\0';
    assert_true(count >= 0);
    for (int i = 0; i < count; i++) {
        if (strcmp(names[i]->d_name, ".") != 0 && strcmp(names[i]->d_name, "..") != 0) {
            strncat(out, out[0] ? " " : "", len - strlen(out) - 1);
            strncat(out, names[i]->d_name, len - strlen(out) - 1);
        }
        free(names[i]);
    }
    free(names);
}

/* dir's entries, as list_dir joins them, are `expected`. */
static void assert_listing(const char *dir, const char *expected)
{
    char listing[1024];
    list_dir(dir, listing, sizeof listing);
    assert_string_equal(listing, expected);
}

/* A part's temporary beside the index: an HDF5 file holding `group`,
 * its attribute "layer" = value, flushed, as attn_run leaves it. */
static void make_part(const index_fixture *f, const char *group, long long value, attn_atomic *tx)
{
    attn_error err;
    assert_int_equal(attn_atomic_begin(tx, f->index, true, &err), ATTN_OK);
    hid_t file = H5Fcreate(tx->temp_path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    assert_true(file >= 0 && lcpl >= 0);
    assert_true(H5Pset_create_intermediate_group(lcpl, 1) >= 0);
    hid_t g = H5Gcreate2(file, group, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(g, "layer", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(g >= 0 && attr >= 0);
    assert_true(H5Awrite(attr, H5T_NATIVE_LLONG, &value) >= 0);
    H5Aclose(attr);
    H5Sclose(space);
    H5Gclose(g);
    H5Pclose(lcpl);
    assert_true(H5Fclose(file) >= 0);
    assert_int_equal(attn_atomic_flush(tx, &err), ATTN_OK);
}

/* check, then commit, of group's results (attribute layer = value). */
static int append(const index_fixture *f, const char *group, long long value, bool force,
                  attn_error *err)
{
    attn_index_target target;
    attn_atomic tx;
    int status = attn_index_check(&target, f->index, group, force, err);
    if (status != ATTN_OK)
        return status;
    make_part(f, group, value, &tx);
    status = attn_index_commit(&target, &tx, NULL, err);
    assert_string_equal(tx.temp_path, "");        /* gone whatever happened */
    return status;
}

/* The attribute "layer" of group, read through the index, or -1. */
static long long layer_through_index(const index_fixture *f, const char *group)
{
    long long value = -1;
    hid_t file = H5Fopen(f->index, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t g = file >= 0 ? H5Gopen2(file, group, H5P_DEFAULT) : H5I_INVALID_HID;
    hid_t attr = g >= 0 ? H5Aopen(g, "layer", H5P_DEFAULT) : H5I_INVALID_HID;
    if (attr < 0 || H5Aread(attr, H5T_NATIVE_LLONG, &value) < 0)
        value = -1;
    if (attr >= 0)
        H5Aclose(attr);
    if (g >= 0)
        H5Gclose(g);
    if (file >= 0)
        H5Fclose(file);
    H5Eclear2(H5E_DEFAULT);
    return value;
}

static void test_appends_gather_groups_in_one_index(void **state)
{
    index_fixture *f = *state;
    static const struct { const char *group; long long layer; } appended[] = {
        {"/layer0", 10}, {"/model/layer1", 11}, {"/model/h.2", 12},
    };
    attn_error err;
    for (size_t i = 0; i < COUNT(appended); i++)
        assert_int_equal(append(f, appended[i].group, appended[i].layer, false, &err), ATTN_OK);
    for (size_t i = 0; i < COUNT(appended); i++)
        assert_int_equal(layer_through_index(f, appended[i].group), appended[i].layer);
    assert_listing(f->tmp.dir, "results.h5 results.h5.parts");
    assert_listing(f->parts, "layer0.1.h5 model+h.2.1.h5 model+layer1.1.h5");
    /* the index marks itself with its format */
    hid_t file = H5Fopen(f->index, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t attr = H5Aopen_by_name(file, "/", ATTN_INDEX_ATTRIBUTE, H5P_DEFAULT, H5P_DEFAULT);
    long long format = 0;
    assert_true(attr >= 0 && H5Aread(attr, H5T_NATIVE_LLONG, &format) >= 0);
    assert_int_equal(format, ATTN_INDEX_FORMAT);
    H5Aclose(attr);
    H5Fclose(file);
}

/* Whether `path` is one of the listed groups. */
static bool listed(const attn_result_groups *g, const char *path)
{
    for (size_t i = 0; i < g->count; i++)
        if (strcmp(g->paths[i], path) == 0)
            return true;
    return false;
}

/* attn_results_groups: an index's appended groups (not its empty groups
 * above them); in a plain file, the groups holding a run's provenance,
 * reached by hard links only. */
static void test_results_groups_of_an_index_and_of_a_file(void **state)
{
    index_fixture *f = *state;
    attn_error err;
    attn_result_groups g;
    assert_int_equal(append(f, "/layer0", 10, false, &err), ATTN_OK);
    assert_int_equal(append(f, "/model/layer1", 11, false, &err), ATTN_OK);
    assert_int_equal(attn_results_groups(f->index, &g, &err), ATTN_OK);
    assert_true(g.index);
    assert_int_equal(g.count, 2);
    assert_true(listed(&g, "/layer0") && listed(&g, "/model/layer1"));
    attn_result_groups_free(&g);

    /* a plain file: /a and /b/c hold results, /d a dataset only, /e is an
     * external link to a group holding results (not followed) */
    char plain[300];
    snprintf(plain, sizeof plain, "%s/plain.h5", f->tmp.dir);
    hid_t file = H5Fcreate(plain, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE), space = H5Screate(H5S_SCALAR);
    assert_true(file >= 0 && lcpl >= 0 && space >= 0);
    assert_true(H5Pset_create_intermediate_group(lcpl, 1) >= 0);
    static const char *const groups[] = {"/a", "/b/c", "/d"};
    for (size_t i = 0; i < COUNT(groups); i++) {
        hid_t group = H5Gcreate2(file, groups[i], lcpl, H5P_DEFAULT, H5P_DEFAULT);
        hid_t attr = i < 2 ? H5Acreate2(group, "attnrun_version", H5T_NATIVE_INT, space,
                                        H5P_DEFAULT, H5P_DEFAULT)
                           : H5Dcreate2(group, "weights", H5T_NATIVE_FLOAT, space, H5P_DEFAULT,
                                        H5P_DEFAULT, H5P_DEFAULT);
        assert_true(group >= 0 && attr >= 0);
        if (i < 2)                  /* H5Oclose leaves an attribute open, */
            H5Aclose(attr);         /* and the file with it, locked       */
        else
            H5Dclose(attr);
        H5Gclose(group);
    }
    assert_true(H5Lcreate_external("results.h5.parts/layer0.1.h5", "/layer0", file, "e",
                                   H5P_DEFAULT, H5P_DEFAULT) >= 0);
    H5Sclose(space);
    H5Pclose(lcpl);
    assert_true(H5Fclose(file) >= 0);
    assert_int_equal(attn_results_groups(plain, &g, &err), ATTN_OK);
    assert_false(g.index);
    assert_int_equal(g.count, 2);
    assert_string_equal(g.paths[0], "/a");        /* by name */
    assert_string_equal(g.paths[1], "/b/c");
    attn_result_groups_free(&g);

    /* no file: the reason, nothing listed */
    char missing[300];
    snprintf(missing, sizeof missing, "%s/missing.h5", f->tmp.dir);
    assert_int_equal(attn_results_groups(missing, &g, &err), ATTN_EINPUT);
    assert_int_equal(g.count, 0);
    assert_null(g.paths);
}

/* attn_results_groups on a plain file with more result groups than its
 * list first holds: the list grows, and keeps every path, in name order. */
static void test_results_groups_of_many_groups(void **state)
{
    index_fixture *f = *state;
    enum { GROUPS = 70 };                 /* past a first list, and past it doubled */
    char plain[300];
    snprintf(plain, sizeof plain, "%s/many.h5", f->tmp.dir);
    hid_t file = H5Fcreate(plain, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate(H5S_SCALAR);
    assert_true(file >= 0 && space >= 0);
    for (int i = 0; i < GROUPS; i++) {
        char name[16];
        snprintf(name, sizeof name, "/g%02d", i);
        hid_t group = H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        hid_t attr = H5Acreate2(group, "attnrun_version", H5T_NATIVE_INT, space, H5P_DEFAULT,
                                H5P_DEFAULT);
        assert_true(group >= 0 && attr >= 0);
        H5Aclose(attr);
        H5Gclose(group);
    }
    H5Sclose(space);
    assert_true(H5Fclose(file) >= 0);

    attn_error err;
    attn_result_groups g;
    assert_int_equal(attn_results_groups(plain, &g, &err), ATTN_OK);
    assert_false(g.index);
    assert_int_equal(g.count, GROUPS);
    for (int i = 0; i < GROUPS; i++) {
        char name[16];
        snprintf(name, sizeof name, "/g%02d", i);
        assert_string_equal(g.paths[i], name);
    }
    attn_result_groups_free(&g);
}

/* Read, an index's links all go into one parts directory, the first
 * link's: a later link into another directory ending in ".parts" is
 * refused, even one whose name begins the first's (results.h5.parts
 * against results.h5.parts.parts). */
static void test_reading_an_index_of_two_parts_directories_is_refused(void **state)
{
    index_fixture *f = *state;
    attn_error err;
    attn_result_groups g;
    assert_int_equal(append(f, "/layer0", 10, false, &err), ATTN_OK);
    assert_int_equal(append(f, "/layer1", 11, false, &err), ATTN_OK);
    assert_int_equal(attn_results_groups(f->index, &g, &err), ATTN_OK);
    assert_int_equal(g.count, 2);
    attn_result_groups_free(&g);

    /* the links made again in their order: /layer0's first, into
     * results.h5.parts.parts; /layer1's into results.h5.parts */
    hid_t file = H5Fopen(f->index, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(file >= 0);
    assert_true(H5Ldelete(file, "layer0", H5P_DEFAULT) >= 0);
    assert_true(H5Ldelete(file, "layer1", H5P_DEFAULT) >= 0);
    assert_true(H5Lcreate_external("results.h5.parts.parts/layer0.1.h5", "/layer0", file,
                                   "layer0", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    assert_true(H5Lcreate_external("results.h5.parts/layer1.1.h5", "/layer1", file, "layer1",
                                   H5P_DEFAULT, H5P_DEFAULT) >= 0);
    assert_true(H5Fclose(file) >= 0);
    assert_int_equal(attn_results_groups(f->index, &g, &err), ATTN_EINPUT);
    assert_int_equal(g.count, 0);
    assert_non_null(strstr(err.msg, "/layer1 is an external link to another file or group"));
}

static void test_force_replaces_the_part_and_removes_the_old(void **state)
{
    index_fixture *f = *state;
    attn_error err;
    assert_int_equal(append(f, "/layer0", 1, false, &err), ATTN_OK);
    assert_int_equal(append(f, "/layer1", 2, false, &err), ATTN_OK);
    assert_int_equal(append(f, "/layer0", 3, false, &err), ATTN_EUSAGE);
    assert_non_null(strstr(err.msg, "already holds results at /layer0"));
    assert_int_equal(layer_through_index(f, "/layer0"), 1);
    assert_int_equal(append(f, "/layer0", 4, true, &err), ATTN_OK);
    assert_int_equal(layer_through_index(f, "/layer0"), 4);
    assert_int_equal(layer_through_index(f, "/layer1"), 2);
    assert_listing(f->parts, "layer0.2.h5 layer1.1.h5");
    assert_int_equal(append(f, "/layer0", 5, true, &err), ATTN_OK);
    assert_listing(f->parts, "layer0.3.h5 layer1.1.h5");
}

/* On a file system that folds case (macOS, Windows shares) "Layer0.1.h5"
 * and "layer0.1.h5" are one file: groups whose names differ only in case
 * take the first generation whose name no other part's folds to, also
 * with another group between them and when one is replaced with --force. */
static void test_groups_differing_only_in_case_get_parts_of_their_own(void **state)
{
    index_fixture *f = *state;
    attn_error err;
    assert_int_equal(append(f, "/Layer0", 1, false, &err), ATTN_OK);
    assert_int_equal(append(f, "/mid", 2, false, &err), ATTN_OK);
    assert_int_equal(append(f, "/layer0", 3, false, &err), ATTN_OK);
    assert_int_equal(append(f, "/LAYER0", 4, false, &err), ATTN_OK);
    assert_listing(f->parts, "LAYER0.3.h5 Layer0.1.h5 layer0.2.h5 mid.1.h5");
    assert_int_equal(layer_through_index(f, "/Layer0"), 1);
    assert_int_equal(layer_through_index(f, "/mid"), 2);
    assert_int_equal(layer_through_index(f, "/layer0"), 3);
    assert_int_equal(layer_through_index(f, "/LAYER0"), 4);
    /* Layer0.2 and .3 fold to its twins' parts */
    assert_int_equal(append(f, "/Layer0", 5, true, &err), ATTN_OK);
    assert_listing(f->parts, "LAYER0.3.h5 Layer0.4.h5 layer0.2.h5 mid.1.h5");
    assert_int_equal(layer_through_index(f, "/Layer0"), 5);
    assert_int_equal(layer_through_index(f, "/layer0"), 3);
    assert_int_equal(layer_through_index(f, "/LAYER0"), 4);
}

/* An empty group someone made in the index names no part: the next
 * appends choose their part names past it, and it is kept. */
static void test_an_empty_group_in_the_index_is_kept(void **state)
{
    index_fixture *f = *state;
    attn_error err;
    assert_int_equal(append(f, "/layer0", 1, false, &err), ATTN_OK);
    hid_t file = H5Fopen(f->index, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = file >= 0 ? H5Gcreate2(file, "/notes", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
                        : H5I_INVALID_HID;
    assert_true(g >= 0);
    H5Gclose(g);
    assert_true(H5Fclose(file) >= 0);
    assert_int_equal(append(f, "/layer1", 2, false, &err), ATTN_OK);
    assert_int_equal(append(f, "/Layer0", 3, false, &err), ATTN_OK);   /* past notes to .2 */
    assert_listing(f->parts, "Layer0.2.h5 layer0.1.h5 layer1.1.h5");
    assert_int_equal(layer_through_index(f, "/layer0"), 1);
    assert_int_equal(layer_through_index(f, "/layer1"), 2);
    assert_int_equal(layer_through_index(f, "/Layer0"), 3);
    H5G_info_t members;
    file = H5Fopen(f->index, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(file >= 0);
    assert_true(H5Gget_info_by_name(file, "/notes", &members, H5P_DEFAULT) >= 0);
    assert_int_equal(members.nlinks, 0);
    H5Fclose(file);
}

static void test_groups_above_or_inside_others_are_refused(void **state)
{
    index_fixture *f = *state;
    attn_error err;
    assert_int_equal(append(f, "/model/layer1", 1, false, &err), ATTN_OK);
    attn_index_target target;
    assert_int_equal(attn_index_check(&target, f->index, "/model", true, &err), ATTN_EUSAGE);
    assert_non_null(strstr(err.msg, "/model holds the results at /model/layer1"));
    assert_int_equal(attn_index_check(&target, f->index, "/model/layer1/x", true, &err), ATTN_EUSAGE);
    assert_non_null(strstr(err.msg, "inside the results at /model/layer1"));
    assert_int_equal(attn_index_check(&target, f->index, "/", false, &err), ATTN_EUSAGE);
    assert_int_equal(attn_index_check(&target, f->index, "/model/layer2", false, &err), ATTN_OK);
}

static void test_a_file_that_is_not_an_index_is_refused_untouched(void **state)
{
    index_fixture *f = *state;
    attn_error err;
    /* an HDF5 file of someone else's: never copied or rewritten */
    hid_t file = H5Fcreate(f->index, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(file >= 0);
    hid_t g = H5Gcreate2(file, "/data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(g);
    H5Fclose(file);
    assert_int_equal(append(f, "/layer0", 1, false, &err), ATTN_EUSAGE);
    assert_non_null(strstr(err.msg, "not a results index attnrun made"));
    assert_listing(f->tmp.dir, "results.h5");
    /* an index that someone wrote a dataset into */
    assert_int_equal(unlink(f->index), 0);
    assert_int_equal(append(f, "/layer0", 1, false, &err), ATTN_OK);
    file = H5Fopen(f->index, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t d = H5Dcreate2(file, "/notes", H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(d >= 0);
    H5Dclose(d);
    H5Sclose(space);
    H5Fclose(file);
    assert_int_equal(append(f, "/layer1", 2, false, &err), ATTN_EUSAGE);
    assert_non_null(strstr(err.msg, "/notes is a dataset"));
}

static void test_a_failed_commit_leaves_everything_as_it_was(void **state)
{
    index_fixture *f = *state;
    attn_error err;
    /* first append: a file where the parts directory would go, refused
     * by the check before any work */
    FILE *blocker = fopen(f->parts, "w");
    assert_non_null(blocker);
    fclose(blocker);
    assert_int_equal(append(f, "/layer0", 1, false, &err), ATTN_EUSAGE);
    assert_non_null(strstr(err.msg, "is not a directory"));
    assert_listing(f->tmp.dir, "results.h5.parts");         /* no index, no temporary */
    struct stat st;
    assert_int_equal(stat(f->parts, &st), 0);
    assert_true(S_ISREG(st.st_mode) && st.st_size == 0);
    /* later append: a directory where the part would go cannot be replaced */
    assert_int_equal(unlink(f->parts), 0);
    assert_int_equal(append(f, "/layer0", 1, false, &err), ATTN_OK);
    char blocked[512];
    snprintf(blocked, sizeof blocked, "%s/layer1.1.h5", f->parts);
    assert_int_equal(mkdir(blocked, 0700), 0);
    assert_int_equal(append(f, "/layer1", 2, false, &err), ATTN_EIO);
    assert_int_equal(layer_through_index(f, "/layer0"), 1);
    assert_int_equal(layer_through_index(f, "/layer1"), -1);
    assert_listing(f->tmp.dir, "results.h5 results.h5.parts");
    assert_listing(f->parts, "layer0.1.h5 layer1.1.h5");
    assert_int_equal(rmdir(blocked), 0);
}

static void test_a_cancelled_commit_writes_nothing(void **state)
{
    index_fixture *f = *state;
    attn_error err;
    attn_index_target target;
    attn_atomic tx;
    volatile sig_atomic_t cancel = 1;
    assert_int_equal(attn_index_check(&target, f->index, "/layer0", false, &err), ATTN_OK);
    make_part(f, "/layer0", 1, &tx);
    assert_int_equal(attn_index_commit(&target, &tx, &cancel, &err), ATTN_EINTR);
    assert_int_equal(tx.committing, 0);
    assert_listing(f->tmp.dir, "");
}

/* The signal handler of test_a_signal_while_waiting_for_the_lock: the
 * first signal asks to cancel, as attnrun's own handler does; a later one
 * lets the lock go, so that a commit that kept waiting would end. */
static volatile sig_atomic_t *waiting_cancel;
static volatile sig_atomic_t held_lock = -1;

static void cancel_then_release(int signo)
{
    (void)signo;
    if (!*waiting_cancel) {
        *waiting_cancel = 1;
    } else if (held_lock >= 0) {
        close(held_lock);
        held_lock = -1;
    }
}

/* Another append's commit holds the directory's lock; a signal (handled
 * without SA_RESTART, as a library user may) that asks to cancel ends the
 * wait: ATTN_EINTR, "interrupted while waiting for the lock", nothing
 * written.  Skipped when HDF5_USE_FILE_LOCKING turns the locks off. */
static void test_a_signal_while_waiting_for_the_lock(void **state)
{
    index_fixture *f = *state;
    bool best_effort;
    if (attn_h5_locking_disabled(&best_effort))
        skip();
    attn_error err = {0};
    attn_index_target target;
    attn_atomic tx;
    volatile sig_atomic_t cancel = 0;
    assert_int_equal(attn_index_check(&target, f->index, "/layer0", false, &err), ATTN_OK);
    make_part(f, "/layer0", 1, &tx);
    held_lock = open(f->tmp.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(held_lock >= 0);
    assert_int_equal(flock(held_lock, LOCK_EX), 0);
    waiting_cancel = &cancel;
    struct sigaction sa = {.sa_handler = cancel_then_release}, was;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGALRM, &sa, &was), 0);
    const struct itimerval every = {{0, 200000}, {0, 200000}}, off = {{0, 0}, {0, 0}};
    assert_int_equal(setitimer(ITIMER_REAL, &every, NULL), 0);
    const int status = attn_index_commit(&target, &tx, &cancel, &err);
    setitimer(ITIMER_REAL, &off, NULL);
    sigaction(SIGALRM, &was, NULL);
    if (held_lock >= 0)
        close(held_lock);
    held_lock = -1;
    if (status != ATTN_EINTR || strstr(err.msg, "interrupted while waiting for the lock") == NULL)
        fail_msg("status %d, '%s'", status, err.msg);
    assert_int_equal(tx.committing, 0);
    assert_listing(f->tmp.dir, "");
}

/* A parts directory on another file system than the index (here a link to
 * a directory of one, tmpfs /dev/shm say): parts are renamed into it, which
 * cannot cross file systems, so the append is refused before any work
 * ("PARTS: is on another file system than the index", ATTN_EUSAGE).
 * Skipped where no other writable file system is found. */
static void test_parts_on_another_file_system_are_refused(void **state)
{
    index_fixture *f = *state;
    struct stat here;
    assert_int_equal(stat(f->tmp.dir, &here), 0);
    const char *candidates[] = {"/dev/shm", getenv("TMPDIR"), "/tmp", "/var/tmp", "/run/user"};
    char other[PATH_MAX] = "";
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates && other[0] == '\0'; i++) {
        struct stat st;
        if (candidates[i] == NULL || stat(candidates[i], &st) != 0 || st.st_dev == here.st_dev)
            continue;
        snprintf(other, sizeof other, "%s/test_index_parts.XXXXXX", candidates[i]);
        if (mkdtemp(other) == NULL)
            other[0] = '\0';
    }
    if (other[0] == '\0')
        skip();
    assert_int_equal(symlink(other, f->parts), 0);
    attn_index_target target;
    attn_error err = {0};
    int status = attn_index_check(&target, f->index, "/layer0", false, &err);
    char want[600];
    snprintf(want, sizeof want, "%s: is on another file system than the index", f->parts);
    assert_int_equal(nftw(other, remove_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
    if (status != ATTN_EUSAGE || strstr(err.msg, want) == NULL)
        fail_msg("status %d, '%s'", status, err.msg);
    /* the same directory beside the index is fine */
    assert_int_equal(unlink(f->parts), 0);
    assert_int_equal(mkdir(f->parts, 0700), 0);
    assert_int_equal(attn_index_check(&target, f->index, "/layer0", false, &err), ATTN_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_escape_what_a_file_name_cannot_hold),
        cmocka_unit_test(test_names_refuse_root_relative_and_generation_zero),
        cmocka_unit_test(test_names_of_distinct_groups_differ),
        cmocka_unit_test(test_generation_belongs_to_one_group),
        cmocka_unit_test(test_long_groups_are_cut_and_hashed),
        test_with_fixture(test_appends_gather_groups_in_one_index),
        test_with_fixture(test_results_groups_of_an_index_and_of_a_file),
        test_with_fixture(test_results_groups_of_many_groups),
        test_with_fixture(test_reading_an_index_of_two_parts_directories_is_refused),
        test_with_fixture(test_force_replaces_the_part_and_removes_the_old),
        test_with_fixture(test_groups_differing_only_in_case_get_parts_of_their_own),
        test_with_fixture(test_an_empty_group_in_the_index_is_kept),
        test_with_fixture(test_groups_above_or_inside_others_are_refused),
        test_with_fixture(test_a_file_that_is_not_an_index_is_refused_untouched),
        test_with_fixture(test_a_failed_commit_leaves_everything_as_it_was),
        test_with_fixture(test_a_cancelled_commit_writes_nothing),
        test_with_fixture(test_a_signal_while_waiting_for_the_lock),
        test_with_fixture(test_parts_on_another_file_system_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
