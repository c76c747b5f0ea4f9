/* attn_math.c - the attention kernels for float and double (attn_math.h). */
#include "attn_math.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#define REAL float
#define SUFFIX f32
#define GEMM cblas_sgemm
#define EXP expf
#include "attn_kernels.inc"
#undef REAL
#undef SUFFIX
#undef GEMM
#undef EXP

#define REAL double
#define SUFFIX f64
#define GEMM cblas_dgemm
#define EXP exp
#include "attn_kernels.inc"
#undef REAL
#undef SUFFIX
#undef GEMM
#undef EXP

void attn_forward(const attn_config *cfg, const attn_weights *w, attn_slice *s)
{
    if (cfg->precision == ATTN_F64)
        forward_f64(cfg, w, s);
    else
        forward_f32(cfg, w, s);
}

void attn_set_threads(int threads)
{
    openblas_set_num_threads(threads < 1 ? 1 : threads);
}
