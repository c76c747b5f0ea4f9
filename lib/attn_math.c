/* attn_math.c - the attention kernels for float and double (attn_math.h). */
#include "attn_math.h"

#include <cblas.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#else                       /* built without OpenMP (the fuzzer): one thread */
static int omp_get_thread_num(void) { return 0; }
static int omp_get_max_threads(void) { return 1; }
#endif

/*
 * Vector versions of exp from glibc's libmvec: with these declarations the
 * compiler turns the exp loops (omp simd) into calls of _ZGV*_expf/_exp,
 * for the instruction set of each target clone.
 */
#pragma omp declare simd notinbranch
extern float expf(float);
#pragma omp declare simd notinbranch
extern double exp(double);

#if defined(__x86_64__) && !defined(__clang__)
#define ATTN_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ATTN_VECTOR_CLONES
#endif

/* Work blocks (see attn_kernels.inc): fixed, so that results do not depend
 * on the thread count.  Sizes from make bench: larger query blocks pack
 * each K block for more rows (xl: 1.13 s at 64 rows, 0.90 s at 256 with
 * 512 keys) but waste more of the causal diagonal. */
#define PROJECT_ROWS ((size_t)256)
#define QUERY_BLOCK ((size_t)128)
#define ONLINE_QUERY_BLOCK ((size_t)256)   /* the online softmax's rows */
#define KEY_BLOCK ((size_t)512)

int attn_threads(void);

/* Bytes of the (c, H) flags at the start of s->scratch, padded so that
 * the blocks after them stay aligned. */
static size_t attn_scratch_flags(size_t items, size_t heads)
{
    return (items * heads + 63) / 64 * 64;
}

/* The job attn_beside hands over, run once by thread 0 of a region. */
static void (*beside_job)(void *context);
static void *beside_context;

/* At the start of a parallel region: thread 0 runs the pending job, if
 * any, then joins the work the other threads have started (the loops are
 * scheduled dynamically, so nobody waits for it). */
static void attn_beside_run(void)
{
    if (omp_get_thread_num() != 0 || beside_job == NULL)
        return;
    void (*job)(void *) = beside_job;
    beside_job = NULL;
    job(beside_context);
}

/*
 * Parallelism comes from OpenMP over blocks; BLAS runs one thread in each.
 * (The OpenMP build of OpenBLAS does so by itself inside a parallel region;
 * a pthread build must be told.  Telling the OpenMP build sets OpenMP's
 * thread count of this thread to 1, so attn_threads reads the default
 * first.)
 */
static void attn_blas_single(void)
{
    (void)attn_threads();
    if (openblas_get_num_threads() != 1)
        openblas_set_num_threads(1);
}

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
    attn_blas_single();
    if (cfg->precision == ATTN_F64)
        forward_f64(cfg, w, s);
    else
        forward_f32(cfg, w, s);
}

void attn_project_inputs(const attn_config *cfg, const attn_weights *w, attn_slice *s)
{
    attn_blas_single();
    if (cfg->precision == ATTN_F64)
        project_inputs_f64(cfg, w, s);
    else
        project_inputs_f32(cfg, w, s);
}

void attn_attend(const attn_config *cfg, attn_slice *s, size_t row_first, size_t rows)
{
    attn_blas_single();
    if (cfg->precision == ATTN_F64)
        attend_f64(cfg, s, row_first, rows);
    else
        attend_f32(cfg, s, row_first, rows);
}

void attn_project_output(const attn_config *cfg, const attn_weights *w, attn_slice *s)
{
    attn_blas_single();
    if (cfg->precision == ATTN_F64)
        project_output_f64(cfg, w, s);
    else
        project_output_f32(cfg, w, s);
}

size_t attn_attend_scratch_bytes(const attn_config *cfg, size_t items, bool online)
{
    size_t bytes = attn_scratch_flags(items, cfg->dims.heads);
    if (online)
        bytes += (size_t)attn_threads() * ONLINE_QUERY_BLOCK * KEY_BLOCK *
                 attn_precision_size(cfg->precision);
    return bytes;
}

void attn_beside(void (*job)(void *context), void *context)
{
    beside_job = job;
    beside_context = context;
}

void attn_beside_finish(void)
{
    attn_beside_run();
}

/* Set by attn_set_threads; 0 = OpenMP's default.  A process-wide value
 * (so it holds for later runs in the same process too), not
 * omp_set_num_threads, which holds only for the calling thread. */
static int thread_count;

void attn_set_threads(int threads)
{
    thread_count = threads < 1 ? 1 : threads;
}

int attn_thread_limit(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1)
        cores = 1;
    return cores > ATTN_MAX_THREADS / ATTN_THREADS_PER_CORE ? ATTN_MAX_THREADS
                                                            : (int)cores * ATTN_THREADS_PER_CORE;
}

int attn_threads(void)
{
    static int default_count;
    /* A sequential OpenBLAS (openblas_get_parallel() == 0) is not safe to
     * call from several threads at once: one thread, whatever was asked. */
    if (openblas_get_parallel() == 0)
        return 1;
#pragma omp critical(attn_threads)
    if (default_count == 0) {
        /* OMP_NUM_THREADS may ask for more threads than can start. */
        int limit = attn_thread_limit(), asked = omp_get_max_threads();
        default_count = asked > limit ? limit : asked;
    }
    return thread_count > 0 ? thread_count : default_count;
}
