/* ranks.c - the ranks of an MPI job (attn_ranks.h); one rank without MPI. */
#define _GNU_SOURCE     /* sched_getaffinity, CPU_COUNT */
#include "attn_ranks.h"

#include <sched.h>

#ifdef ATTN_MPI
#include <mpi.h>
#endif

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static size_t rank_index, rank_count = 1, host_count = 1;
static bool stranded;

#ifdef ATTN_MPI

static bool started;

bool attn_ranks_start(int *argc, char ***argv)
{
    int provided, rank, size, local = 1;
    MPI_Comm host;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return false;
    started = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host) ==
        MPI_SUCCESS) {
        MPI_Comm_size(host, &local);
        MPI_Comm_free(&host);
    }
    rank_index = (size_t)rank;
    rank_count = (size_t)size;
    host_count = (size_t)local;
    return true;
}

void attn_ranks_finish(void)
{
    if (started)
        MPI_Finalize();
    started = false;
}

bool attn_ranks_shared_file(void)
{
    return true;
}

/*
 * Waits for a request asleep: MPI's own waits poll, taking a core from
 * the ranks still computing when there are more ranks than cores.  The
 * naps grow from WAIT_NAP_FIRST to WAIT_NAP_MOST, so a short wait costs
 * little latency and a long one little CPU.
 */
#define WAIT_NAP_FIRST 20000L     /* ns */
#define WAIT_NAP_MOST 1000000L    /* ns */
static void wait_asleep(MPI_Request *request)
{
    long nap = WAIT_NAP_FIRST;
    for (;;) {
        int done = 0;
        MPI_Test(request, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        nanosleep(&(struct timespec){.tv_nsec = nap}, NULL);
        nap = nap * 2 < WAIT_NAP_MOST ? nap * 2 : WAIT_NAP_MOST;
    }
}

int attn_ranks_agree_sum(int status, size_t *sum, attn_error *err)
{
    unsigned long long totals[2] = {status != ATTN_OK, sum != NULL ? *sum : 0};
    if (rank_count == 1)
        return status;
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, totals, 2, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD,
                   &request);
    wait_asleep(&request);
    if (sum != NULL)
        *sum = (size_t)totals[1];
    if (totals[0] == 0)
        return ATTN_OK;
    /* The lowest rank that failed speaks for all. */
    int mine = status != ATTN_OK ? (int)rank_index : INT_MAX, lowest;
    MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    struct { int status; attn_error err; } verdict = {status, {.hint = ATTN_HINT_NONE}};
    if (mine == lowest)
        verdict.err = *err;
    MPI_Bcast(&verdict, (int)sizeof verdict, MPI_BYTE, lowest, MPI_COMM_WORLD);
    *err = verdict.err;
    return verdict.status;
}

void attn_ranks_broadcast(void *data, size_t bytes)
{
    if (rank_count > 1)
        MPI_Bcast(data, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
}

void attn_ranks_gather_rows(void *base, size_t items, size_t item_rows, size_t groups,
                            size_t width, size_t stride, size_t ld, size_t elem,
                            const size_t *bounds)
{
    if (rank_count == 1)
        return;
    MPI_Datatype part, row;
    int *counts = malloc(2 * rank_count * sizeof *counts);
    if (counts == NULL)
        attn_ranks_abort(1);     /* a collective cannot be left half done */
    int *displs = counts + rank_count;
    for (size_t r = 0; r < rank_count; r++) {
        counts[r] = (int)(bounds[r + 1] - bounds[r]);
        displs[r] = (int)bounds[r];
    }
    MPI_Type_vector((int)groups, (int)(width * elem), (int)(stride * elem), MPI_BYTE, &part);
    MPI_Type_create_resized(part, 0, (MPI_Aint)(ld * elem), &row);
    MPI_Type_commit(&row);
    /* The ranks arrive apart (their shares cost what they cost): wait for
     * the last asleep, then move the rows with the blocking collective,
     * which progresses by itself (a nonblocking one only in the MPI_Test
     * calls between naps). */
    MPI_Request request;
    MPI_Ibarrier(MPI_COMM_WORLD, &request);
    wait_asleep(&request);
    for (size_t b = 0; b < items; b++)
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL,
                       (char *)base + b * item_rows * ld * elem, counts, displs, row,
                       MPI_COMM_WORLD);
    MPI_Type_free(&row);
    MPI_Type_free(&part);
    free(counts);
}

void attn_ranks_abort(int code)
{
    if (rank_index == 0)
        MPI_Abort(MPI_COMM_WORLD, code);
    for (;;)
        pause();                     /* until rank 0's abort ends this rank */
}

#else

bool attn_ranks_start(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return true;
}

void attn_ranks_finish(void)
{
}

bool attn_ranks_shared_file(void)
{
    return false;
}

int attn_ranks_agree_sum(int status, size_t *sum, attn_error *err)
{
    (void)sum;
    (void)err;
    return status;
}

void attn_ranks_broadcast(void *data, size_t bytes)
{
    (void)data;
    (void)bytes;
}

void attn_ranks_gather_rows(void *base, size_t items, size_t item_rows, size_t groups,
                            size_t width, size_t stride, size_t ld, size_t elem,
                            const size_t *bounds)
{
    (void)base;
    (void)items;
    (void)item_rows;
    (void)groups;
    (void)width;
    (void)stride;
    (void)ld;
    (void)elem;
    (void)bounds;
}

void attn_ranks_abort(int code)
{
    _exit(code);
}

#endif

size_t attn_rank(void)
{
    return rank_index;
}

size_t attn_rank_count(void)
{
    return rank_count;
}

size_t attn_ranks_on_host(void)
{
    return host_count;
}

size_t attn_ranks_cores(size_t online)
{
    cpu_set_t cpus;
    if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) > 0 &&
        (size_t)CPU_COUNT(&cpus) < online)
        return (size_t)CPU_COUNT(&cpus);
    return online / host_count > 1 ? online / host_count : 1;
}

void attn_ranks_strand(void)
{
    stranded = true;
}

bool attn_ranks_stranded(void)
{
    return stranded;
}

int attn_ranks_agree(int status, attn_error *err)
{
    return attn_ranks_agree_sum(status, NULL, err);
}

void attn_ranks_divide(const double *cost, size_t units, size_t ranks, size_t *starts)
{
    double total = 0;
    for (size_t i = 0; i < units; i++)
        total += cost[i];
    starts[0] = 0;
    size_t k = 0;
    double before = 0;                 /* cost of units [0, k) */
    for (size_t r = 1; r < ranks; r++) {
        const double target = total * (double)r / (double)ranks;
        while (k < units && before + cost[k] <= target) {
            before += cost[k];
            k++;
        }
        /* k is now the last boundary at or below the target; the next one
         * up is taken when it comes nearer */
        if (k < units && before + cost[k] - target < target - before) {
            before += cost[k];
            k++;
        }
        starts[r] = k;
    }
    starts[ranks] = units;
}
