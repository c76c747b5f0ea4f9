/*
 * attn_threads.h - how many threads the kernels run, and the hook that lets
 * the pipeline's I/O run beside their compute on the calling thread.
 *
 * Process-wide state, kept apart from the math: the kernels only ask
 * attn_threads() and call attn_beside_run() at the start of each region.
 */
#ifndef ATTN_THREADS_H
#define ATTN_THREADS_H

#include <stddef.h>

/* Threads per core attnrun starts at most (--threads, OMP_NUM_THREADS),
 * and the most in any case. */
#define ATTN_THREADS_PER_CORE 4
#define ATTN_MAX_THREADS 4096

/*
 * Address space OpenBLAS takes in each thread that calls it: its work
 * buffer (BUFFER_SIZE, 32 << 22 bytes on x86-64 in OpenBLAS 0.3).  It
 * retries a failed allocation of it forever, so that one must not fail:
 * a program checks the room for it first.
 */
#define ATTN_BLAS_BUFFER_BYTES ((size_t)128 << 20)

/* ATTN_THREADS_PER_CORE x the online cores (at most ATTN_MAX_THREADS). */
int attn_thread_limit(void);

/*
 * Sets the number of threads the kernels use (1 to attn_thread_limit();
 * default: all cores, or OMP_NUM_THREADS capped at attn_thread_limit()).
 * The work is split into fixed blocks, each computed by one thread with
 * single-threaded BLAS, so the results are the same for every thread count.
 */
void attn_set_threads(int threads);

/* Threads the kernels will use: 1 when the OpenBLAS linked is the
 * sequential build, which is not safe to call from several threads. */
int attn_threads(void);

/*
 * Overlap for the caller: the next parallel region of a kernel called from
 * this thread runs job(context) on its thread 0 -- the calling thread
 * itself -- while the other threads start the region's blocks; thread 0
 * joins them when the job returns.  attn_beside_finish runs the job now if
 * no region took it.  The pipeline writes one step and reads the next
 * slice this way, keeping every HDF5 call on its own thread.
 * The job, like attn_set_threads, is process-wide: one pipeline at a time.
 */
void attn_beside(void (*job)(void *context), void *context);
void attn_beside_finish(void);

/* For the kernels: at the start of a parallel region, thread 0 runs the
 * job handed over by attn_beside, if any. */
void attn_beside_run(void);

/* The same at the start of a region of `tasks` independent tasks, but
 * only when they are many (ATTN_BESIDE_TASKS per thread): then the other
 * threads take them while thread 0 runs the job, and nobody waits for it
 * at the region's end.  Among a few large tasks (a projection of one long
 * item's 256-row blocks) a thread would idle for most of a task, so a
 * later region runs the job. */
void attn_beside_run_among(size_t tasks);
#define ATTN_BESIDE_TASKS 4

/*
 * Parallelism comes from OpenMP over blocks; BLAS runs one thread in each.
 * Called by every kernel entry point before its first region.
 */
void attn_blas_single(void);

#endif
