/*
 * rollout.c - attention rollout (Abnar & Zuidema 2020, "Quantifying
 * Attention Flow in Transformers") on plain buffers (attn_math.h): a
 * layer's head maps summed into their mean, the residual connection mixed
 * in and each row normalised, and the product that carries the rollout one
 * layer further.
 *
 * Legend: n tokens (self-attention: queries = keys), count values of a
 * block.  Every buffer is row-major and dense, in float64 but the maps
 * read (float).
 */
#include "attn_math.h"

#include <assert.h>
#include <cblas.h>
#include <limits.h>

/* sum (count) += weight * values (count). */
void attn_rollout_accumulate(size_t count, double weight, const float *values, double *sum)
{
    for (size_t i = 0; i < count; i++)
        sum[i] += weight * (double)values[i];
}

/* a_hat (n, n) = rownorm((1 - residual) mean + residual I), mean (n, n);
 * a row summing to 0 stays 0, one summing to NaN becomes NaN. */
void attn_rollout_layer(size_t n, double residual, const double *mean, double *a_hat)
{
    const double keep = 1.0 - residual;
    for (size_t q = 0; q < n; q++) {
        const double *in = mean + q * n;        /* (n) row q of the mean */
        double *out = a_hat + q * n;            /* (n) row q of Â        */
        double sum = 0;
        for (size_t k = 0; k < n; k++) {
            out[k] = keep * in[k] + (k == q ? residual : 0.0);
            sum += out[k];
        }
        if (sum != 0)
            for (size_t k = 0; k < n; k++)
                out[k] /= sum;
    }
}

/* next (n, n) = a_hat (n, n) . prev (n, n), by BLAS. */
void attn_rollout_step(size_t n, const double *a_hat, const double *prev, double *next)
{
    assert(n <= INT_MAX);
    if (n == 0)
        return;                 /* BLAS takes a leading dimension of 0 as an error */
    const int size = (int)n;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, size, size, size, 1.0, a_hat, size,
                prev, size, 0.0, next, size);
}
