/*
 * test_support.h - scratch directories, deterministic test values and a
 * NaN-strict float comparison for the cmocka tests.  Include it after <cmocka.h>.
 *
 *     char dir[256];
 *     if (test_make_dir(dir, sizeof dir, "test_h5") != 0) return -1;  // setup
 *     ...
 *     return test_remove_dir(dir);                                     // teardown
 */
#ifndef TEST_SUPPORT_H
#define TEST_SUPPORT_H

#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
 * could not be removed. */
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

/*
 * cmocka 1.1.5's assert_float_equal rounds to float and lets NaN (and an
 * infinity against a finite value) pass, so values are compared in double
 * here: an infinite expectation must match exactly, a finite one within
 * tolerance, and NaN never matches.
 */
#define assert_near(actual, expected, tolerance)                                \
    assert_near_at((double)(actual), (double)(expected), (tolerance), #actual, \
                   __FILE__, __LINE__)

static inline void assert_near_at(double actual, double expected, double tolerance,
                                  const char *what, const char *file, int line)
{
    bool ok = isinf(expected) ? actual == expected : fabs(actual - expected) <= tolerance;
    if (!ok) {
        print_error("%s is %.17g, expected %.17g (tolerance %g)\n", what, actual, expected,
                    tolerance);
        _fail(file, line);
    }
}

#endif
