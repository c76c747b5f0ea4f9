/* threads.c - thread count and the I/O overlap hook (attn_threads.h). */
#include "attn_threads.h"

#include <cblas.h>
#include <stddef.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#else                       /* built without OpenMP (the fuzzer): one thread */
static int omp_get_thread_num(void) { return 0; }
static int omp_get_max_threads(void) { return 1; }
#endif

/* The job attn_beside hands over, run once by thread 0 of a region. */
static void (*beside_job)(void *context);
static void *beside_context;

/* At the start of a parallel region: thread 0 runs the pending job, if
 * any, then joins the work the other threads have started (the loops are
 * scheduled dynamically, so nobody waits for it). */
void attn_beside_run(void)
{
    if (omp_get_thread_num() != 0 || beside_job == NULL)
        return;
    void (*job)(void *) = beside_job;
    beside_job = NULL;
    job(beside_context);
}

void attn_beside_run_among(size_t tasks)
{
    if (tasks >= ATTN_BESIDE_TASKS * (size_t)attn_threads())
        attn_beside_run();
}

/*
 * Parallelism comes from OpenMP over blocks; BLAS runs one thread in each.
 * (The OpenMP build of OpenBLAS does so by itself inside a parallel region;
 * a pthread build must be told.  Telling the OpenMP build sets OpenMP's
 * thread count of this thread to 1, so attn_threads reads the default
 * first.)
 */
void attn_blas_single(void)
{
    (void)attn_threads();
    if (openblas_get_num_threads() != 1)
        openblas_set_num_threads(1);
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
