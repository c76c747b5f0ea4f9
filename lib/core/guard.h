/*
 * guard.h - the checks made before a run writes or computes, so that
 * what cannot work ends at once with a reason instead of halfway (or, in
 * OpenBLAS's case, never): room on the output's file system, address space
 * for the buffers and OpenBLAS, threads that can start, and a cap on the
 * memory HDF5 may take while it parses an untrusted file.
 *
 *     struct rlimit saved;
 *     bool capped = attn_guard_cap_parse_memory(&saved);
 *     ... open, describe and plan the input ...
 *     if (capped) attn_guard_restore_memory(&saved);
 *     attn_guard_threads(threads, &err);
 *     attn_guard_memory(buffer_bytes, threads, &err);
 *     attn_guard_free_space("out.h5", bytes, "the outputs", &err);
 *
 * Each check returns ATTN_OK or ATTN_EIO / ATTN_ENOMEM with err filled.
 */
#ifndef ATTN_GUARD_H
#define ATTN_GUARD_H

#include "attn_common.h"

#include <sys/resource.h>

/*
 * Caps the address space at its current size plus 1 GiB while HDF5
 * parses the input's metadata: a damaged file can make HDF5 allocate
 * gigabytes for one piece of it, and with the cap that allocation fails
 * at once.  Not under AddressSanitizer, whose shadow memory this would
 * upset.  Returns whether *saved must be given back to
 * attn_guard_restore_memory.
 */
bool attn_guard_cap_parse_memory(struct rlimit *saved);
void attn_guard_restore_memory(const struct rlimit *saved);

/*
 * Starts and joins threads - 1 threads with the stack size OpenMP gives
 * its own (OMP_STACKSIZE, else the default), so that the compute threads
 * are known to start before OpenMP tries: libgomp ends the process when
 * it cannot start one.  ATTN_EIO ("cannot start N threads") otherwise.
 */
int attn_guard_threads(int threads, attn_error *err);

/*
 * Reserves, and gives back, the address space the run will take: its own
 * buffers (buffer_bytes), an OpenBLAS buffer per thread, and each extra
 * thread's stack and malloc arena.  ATTN_ENOMEM ("out of memory", with
 * the figures and ulimit -v's) when the reservation fails.
 */
int attn_guard_memory(size_t buffer_bytes, int threads, attn_error *err);

/*
 * Compares need_bytes with the free space of the file system holding the
 * file `target` (its real directory: symbolic links are followed).
 * `what` names the need in the message ("the outputs").  ATTN_EIO when it
 * does not fit; ATTN_OK when it does, or when the file system gives no
 * figures.
 */
int attn_guard_free_space(const char *target, double need_bytes, const char *what,
                          attn_error *err);

#endif
