/*
 * tests/lib/blas_by_place.c - a BLAS that computes a row of C differently
 * by its place in the block, loaded with LD_PRELOAD by test_blocks.sh.
 *
 * attnrun promises the same bits whatever the steps, slices and threads
 * (docs/contract.md, section 2), though a BLAS may compute a row by the
 * block it sits in: OpenBLAS's Haswell and Zen kernels do, its SkylakeX
 * and SandyBridge ones mostly do not.  So attnrun fixes every row's block
 * and its place in it.  On a machine whose BLAS does not care, a row put
 * in the wrong place still gets the right bits and the promise goes
 * untested; this stand-in cares on every machine: it runs the real
 * cblas_sgemm or cblas_dgemm, then moves rows 1, 4, 7, ... of C (row-major
 * or not, row i of the block as the call sees it) one unit in the last
 * place up.  Only row-major C is used by attnrun; a column-major call is
 * passed through unchanged.
 *
 * The prototypes are OpenBLAS's with 32-bit integers (blasint of the LP64
 * builds Debian ships), written out so that no header is needed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

enum { ROW_MAJOR = 101 };             /* CblasRowMajor */

/* The next definition of name after this library's: the real BLAS. */
static void *real(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (f == NULL) {
        fprintf(stderr, "blas_by_place: no %s after this library\n", name);
        abort();
    }
    return f;
}

/* cblas_NAME on REAL elements: the real one, then rows 1, 4, 7, ... of a
 * row-major C one unit in the last place up (NEXT: nextafterf or
 * nextafter). */
#define BY_PLACE(NAME, REAL, NEXT)                                                           \
    typedef void NAME##_fn(int, int, int, int, int, int, REAL, const REAL *, int, const REAL *, \
                           int, REAL, REAL *, int);                                         \
    void NAME(int order, int ta, int tb, int m, int n, int k, REAL alpha, const REAL *a,      \
              int lda, const REAL *b, int ldb, REAL beta, REAL *c, int ldc);                 \
    void NAME(int order, int ta, int tb, int m, int n, int k, REAL alpha, const REAL *a,      \
              int lda, const REAL *b, int ldb, REAL beta, REAL *c, int ldc)                  \
    {                                                                                        \
        ((NAME##_fn *)real(#NAME))(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,   \
                                   ldc);                                                     \
        for (int i = 1; order == ROW_MAJOR && i < m; i += 3)                                 \
            for (int j = 0; j < n; j++) {                                                    \
                REAL *x = &c[(size_t)i * (size_t)ldc + (size_t)j];                           \
                *x = NEXT(*x, INFINITY);                                                     \
            }                                                                                \
    }

BY_PLACE(cblas_sgemm, float, nextafterf)
BY_PLACE(cblas_dgemm, double, nextafter)
