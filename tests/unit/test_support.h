/*
 * test_support.h - the cmocka tests' shared harness: scratch directories
 * (a fixture per test), whole files written and read back, deterministic
 * test values, and NaN-strict float comparisons.  Include it after
 * <cmocka.h>.
 *
 *     typedef struct my_fixture {
 *         test_dir tmp;                 // first: the scratch directory
 *         char out[256];
 *     } my_fixture;
 *
 *     static int setup(void **state)
 *     {
 *         return test_dir_setup(state, sizeof(my_fixture), "test_mine");
 *     }
 *     static int teardown(void **state) { return test_dir_teardown(state); }
 *     ...
 *     test_with_fixture(test_something),     // in main's list of tests
 */
#ifndef TEST_SUPPORT_H
#define TEST_SUPPORT_H

#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The number of elements of array a. */
#define COUNT(a) (sizeof (a) / sizeof (a)[0])

/* ---- scratch directories ------------------------------------------------ */

/* Makes a new directory "$TMPDIR/<prefix>.XXXXXX" (TMPDIR defaults to /tmp)
 * and writes its path into dir.  Returns 0, or -1 on failure. */
static inline int test_make_dir(char *dir, size_t len, const char *prefix)
{
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0')
        base = "/tmp";
    int n = snprintf(dir, len, "%s/%s.XXXXXX", base, prefix);
    if (n < 0 || (size_t)n >= len)
        return -1;
    return mkdtemp(dir) == NULL ? -1 : 0;
}

/* Removes dir and the plain files in it.  Returns 0, or -1 when anything
 * could not be removed (so a test that leaves more fails its teardown). */
static inline int test_remove_dir(const char *dir)
{
    int result = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[1024];
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0)
            result = -1;
    }
    closedir(d);
    if (rmdir(dir) != 0)
        result = -1;
    return result;
}

/* The first member of a per-test fixture: its scratch directory. */
typedef struct test_dir {
    char dir[128];
    char path[256];     /* scratch for test_path */
} test_dir;

/* dir/name in t's scratch path (valid until the next call). */
static inline const char *test_path(test_dir *t, const char *name)
{
    snprintf(t->path, sizeof t->path, "%s/%s", t->dir, name);
    return t->path;
}

/* cmocka setup: *state becomes a zeroed fixture of `size` bytes starting
 * with a test_dir, whose directory "<prefix>.XXXXXX" is made.  Returns 0,
 * or -1 on failure. */
static inline int test_dir_setup(void **state, size_t size, const char *prefix)
{
    test_dir *t = calloc(1, size);
    if (t == NULL)
        return -1;
    if (test_make_dir(t->dir, sizeof t->dir, prefix) != 0) {
        free(t);
        return -1;
    }
    *state = t;
    return 0;
}

/* cmocka teardown of test_dir_setup: removes the directory (plain files
 * only) and frees the fixture. */
static inline int test_dir_teardown(void **state)
{
    test_dir *t = *state;
    int result = test_remove_dir(t->dir);
    free(t);
    return result;
}

/* A test run between the including file's setup and teardown. */
#define test_with_fixture(test) cmocka_unit_test_setup_teardown(test, setup, teardown)

/* ---- whole files --------------------------------------------------------- */

static inline void test_write_file(const char *path, const void *data, size_t len)
{
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    assert_int_equal(fwrite(data, 1, len, file), len);
    assert_int_equal(fclose(file), 0);
}

/* The whole content of path (caller frees); *len receives its size. */
static inline unsigned char *test_read_file(const char *path, size_t *len)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    unsigned char *data = malloc((size_t)st.st_size + 1);
    assert_non_null(data);
    FILE *file = fopen(path, "rb");
    assert_non_null(file);
    *len = fread(data, 1, (size_t)st.st_size + 1, file);
    assert_int_equal(fclose(file), 0);
    assert_int_equal(*len, (size_t)st.st_size);
    return data;
}

/* path holds exactly the len bytes of expected. */
static inline void assert_file_bytes(const char *path, const void *expected, size_t len)
{
    size_t found;
    unsigned char *data = test_read_file(path, &found);
    assert_int_equal(found, len);
    assert_memory_equal(data, expected, len);
    free(data);
}

/* Counts the entries of dir other than . and ..; *marked counts those whose
 * name contains `marker`.  Returns (size_t)-1 when dir cannot be read. */
static inline size_t test_count_entries(const char *dir, const char *marker, size_t *marked)
{
    size_t count = 0;
    DIR *d = opendir(dir);
    *marked = 0;
    if (d == NULL)
        return (size_t)-1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        count++;
        if (strstr(e->d_name, marker) != NULL)
            (*marked)++;
    }
    closedir(d);
    return count;
}

/* dir holds `count` entries besides . and .., `marked` of them with
 * `marker` in their name. */
static inline void assert_dir_entries(const char *dir, const char *marker, size_t count,
                                      size_t marked)
{
    size_t found_marked;
    size_t found = test_count_entries(dir, marker, &found_marked);
    assert_true(found != (size_t)-1);
    assert_int_equal(found, count);
    assert_int_equal(found_marked, marked);
}

/* ---- test values ---------------------------------------------------------- */

/* count smooth, deterministic values in about [-1, 1], different for
 * each seed (the caller frees them); fails the test when out of memory. */
static inline double *fill_values(size_t count, double seed)
{
    double *values = malloc(count * sizeof *values);
    assert_non_null(values);
    for (size_t i = 0; i < count; i++)
        values[i] = sin(seed + 0.61 * (double)i) * cos(0.37 * seed * (double)(i + 1));
    return values;
}

/* out (rows, cols) = in (rows, d) . w (d, cols) + bias, by the definition:
 * the references' projection, in double, sharing no code with lib/. */
static inline void reference_project(const double *in, size_t rows, size_t d, const double *w,
                                     size_t cols, const double *bias, double *out)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < cols; j++) {
            double sum = bias ? bias[j] : 0.0;
            for (size_t i = 0; i < d; i++)
                sum += in[r * d + i] * w[i * cols + j];
            out[r * cols + j] = sum;
        }
}

/* ---- NaN-strict comparisons ------------------------------------------------ */

/*
 * cmocka 1.1.5's assert_float_equal rounds to float and lets NaN (and an
 * infinity against a finite value) pass, so values are compared in double
 * here: an infinite expectation must match exactly, a finite one within
 * tolerance, and NaN never matches.
 */
static inline bool test_near(double actual, double expected, double tolerance)
{
    return isinf(expected) ? actual == expected : fabs(actual - expected) <= tolerance;
}

#define assert_near(actual, expected, tolerance)                                \
    assert_near_at((double)(actual), (double)(expected), (tolerance), #actual, \
                   __FILE__, __LINE__)

static inline void assert_near_at(double actual, double expected, double tolerance,
                                  const char *what, const char *file, int line)
{
    if (!test_near(actual, expected, tolerance)) {
        print_error("%s is %.17g, expected %.17g (tolerance %g)\n", what, actual, expected,
                    tolerance);
        _fail(file, line);
    }
}

/* Each of count doubles (or floats) of actual against expected, as
 * assert_near does; a failure names what[i]. */
static inline void assert_doubles_near(const double *actual, const double *expected, size_t count,
                                       double tolerance, const char *what)
{
    for (size_t i = 0; i < count; i++)
        if (!test_near(actual[i], expected[i], tolerance))
            fail_msg("%s[%zu] is %.17g, expected %.17g (tolerance %g)", what, i, actual[i],
                     expected[i], tolerance);
}

static inline void assert_floats_near(const float *actual, const double *expected, size_t count,
                                      double tolerance, const char *what)
{
    for (size_t i = 0; i < count; i++)
        if (!test_near(actual[i], expected[i], tolerance))
            fail_msg("%s[%zu] is %.17g, expected %.17g (tolerance %g)", what, i,
                     (double)actual[i], expected[i], tolerance);
}

#endif
