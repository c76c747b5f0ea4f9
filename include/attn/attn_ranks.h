/*
 * attn_ranks.h - the processes of one MPI job (its ranks) running one
 * attnrun together: which part of the batch this rank computes, and the
 * collective decisions that keep every rank's run in step.
 *
 * Built with MPI (make MPI=1, ATTN_MPI), every rank reads the input and
 * the parameters, computes its own contiguous share of the work and writes
 * it into the one shared output file (attn_h5out_open_shared).  Built
 * without, there is one rank and each call below is a no-op, so the
 * pipeline reads the same either way.
 *
 *     attn_ranks_start(&argc, &argv);          // first thing in main
 *     ...
 *     status = attn_ranks_agree(status, &err); // same status on every rank
 *     ...
 *     attn_ranks_finish();
 *
 * Every function marked collective must be called by every rank, in the
 * same order; a rank that failed calls them too (with its status), which
 * is how the others learn of it.
 */
#ifndef ATTN_RANKS_H
#define ATTN_RANKS_H

#include "attn_common.h"

#include <stddef.h>

/* Starts MPI (one thread calls it: every MPI and HDF5 call stays on the
 * main thread).  false when it cannot start; then attn_rank_count() is 1.
 * Without MPI: true. */
bool attn_ranks_start(int *argc, char ***argv);

/* Ends MPI, if it was started.  Collective. */
void attn_ranks_finish(void);

/* This process's rank, 0 to attn_rank_count() - 1. */
size_t attn_rank(void);
size_t attn_rank_count(void);

/* Whether outputs go through one file that every rank writes with MPI-IO
 * (built with MPI, even with one rank). */
bool attn_ranks_shared_file(void);

/* Ranks of this job on this machine (they share its cores). */
size_t attn_ranks_on_host(void);

/* The cores this rank should use when nothing asks otherwise: those it is
 * bound to, when mpirun bound it to fewer than `online`, else `online`
 * shared among the ranks on this machine; at least one. */
size_t attn_ranks_cores(size_t online);

/*
 * Collective.  Every rank gets the same status: ATTN_OK when every rank
 * passed ATTN_OK, else the status and message of the lowest rank that
 * failed (into *err on every rank).
 */
int attn_ranks_agree(int status, attn_error *err);

/* Collective: attn_ranks_agree, and *sum becomes the sum over ranks of
 * each rank's *sum (one exchange when nothing failed). */
int attn_ranks_agree_sum(int status, size_t *sum, attn_error *err);

/*
 * A write to the shared file failed on some rank (an agreed ATTN_EIO):
 * HDF5's view of the file may now differ between the ranks, so closing
 * it together -- H5Fclose, or MPI_Finalize and HDF5's own clean-up at exit,
 * which close it too -- could leave them waiting for each other forever.
 * attn_ranks_strand marks the job so; the caller, once its temporary is
 * removed and its message printed, ends it with attn_ranks_abort.
 */
void attn_ranks_strand(void);
bool attn_ranks_stranded(void);

/* Ends a stranded job with exit status `code`: rank 0 aborts every rank
 * (MPI_Abort), the others wait for that. */
void attn_ranks_abort(int code) __attribute__((noreturn));

/* Collective: rank 0's `bytes` bytes at data, into every rank's data. */
void attn_ranks_broadcast(void *data, size_t bytes);

/*
 * Collective: rows that each rank computed a share of, gathered on every
 * rank.  `items` blocks of `item_rows` rows, `ld` elements of `elem`
 * bytes apart, from base; of each row `groups` runs of `width` elements,
 * `stride` apart (the k and v of each head, say); rank r computed rows
 * [bounds[r], bounds[r + 1]) of every item.  Waits asleep for the last
 * rank to come.  Without MPI, or with one rank: nothing.
 */
void attn_ranks_gather_rows(void *base, size_t items, size_t item_rows, size_t groups,
                            size_t width, size_t stride, size_t ld, size_t elem,
                            const size_t *bounds);

/*
 * Divides `units` units of work, unit i costing cost[i] >= 0, among
 * `ranks` ranks in contiguous ranges, in rank order: rank r has units
 * [starts[r], starts[r + 1]), starts[0] = 0, starts[ranks] = units, each
 * boundary where the cost before it comes nearest to r/ranks of the total
 * (a range may be empty when units are few or uneven).  A pure function:
 * every rank computes the same division.
 */
void attn_ranks_divide(const double *cost, size_t units, size_t ranks, size_t *starts);

#endif
