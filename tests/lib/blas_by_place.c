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

typedef void sgemm_fn(int order, int ta, int tb, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc);
typedef void dgemm_fn(int order, int ta, int tb, int m, int n, int k, double alpha,
                      const double *a, int lda, const double *b, int ldb, double beta, double *c,
                      int ldc);

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

void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    ((sgemm_fn *)real("cblas_sgemm"))(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    for (int i = 1; order == ROW_MAJOR && i < m; i += 3)
        for (int j = 0; j < n; j++)
            c[(size_t)i * (size_t)ldc + (size_t)j] = nextafterf(c[(size_t)i * (size_t)ldc + (size_t)j],
                                                                INFINITY);
}

void cblas_dgemm(int order, int ta, int tb, int m, int n, int k, double alpha, const double *a,
                 int lda, const double *b, int ldb, double beta, double *c, int ldc)
{
    ((dgemm_fn *)real("cblas_dgemm"))(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    for (int i = 1; order == ROW_MAJOR && i < m; i += 3)
        for (int j = 0; j < n; j++)
            c[(size_t)i * (size_t)ldc + (size_t)j] = nextafter(c[(size_t)i * (size_t)ldc + (size_t)j],
                                                               INFINITY);
}
