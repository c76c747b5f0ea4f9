/*
 * flow_time.c - attn_flow alone, for bench/flow.py: the time libattn takes
 * to compute the flows of one item, without the process around it (its
 * start, the file read and written), as a reference's loop of maximum-flow
 * calls is timed without its own.
 *
 *     attnbench-flow A_HAT.bin [RUNS]
 *
 * A_HAT.bin holds n and L as two little-endian uint64, then the L layers'
 * Â (L, n, n) as float64, as attnrun flow makes them.  The threads are
 * attnrun's (OMP_NUM_THREADS, default every core).  Prints the median
 * seconds of RUNS calls (default 5) and the pairs searched.
 */
#include "attn_math.h"
#include "clock.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    uint64_t shape[2];
    FILE *f = argc > 1 ? fopen(argv[1], "rb") : NULL;
    if (f == NULL || fread(shape, sizeof shape, 1, f) != 1 || shape[0] == 0 || shape[1] == 0 ||
        shape[0] > 4096 || shape[1] > 1024) {
        fprintf(stderr, "usage: attnbench-flow A_HAT.bin [RUNS]: a file of n, L, then (L, n, n)\n");
        return 2;
    }
    const size_t n = shape[0], L = shape[1], runs = argc > 2 ? (size_t)atoi(argv[2]) : 5;
    double *a = malloc(L * n * n * sizeof *a), *flow = malloc(n * n * sizeof *flow);
    double times[64];
    if (a == NULL || flow == NULL || fread(a, sizeof *a, L * n * n, f) != L * n * n ||
        runs < 1 || runs > 64) {
        fprintf(stderr, "attnbench-flow: %s: cannot read (L, n, n) doubles\n", argv[1]);
        return 1;
    }
    fclose(f);
    attn_flow_report report = {0};
    for (size_t r = 0; r < runs; r++) {
        const double start = now_s();
        if (attn_flow(n, L, a, flow, &report, NULL, NULL) != ATTN_OK) {
            fprintf(stderr, "attnbench-flow: out of memory\n");
            return 1;
        }
        times[r] = now_s() - start;
    }
    printf("%.6f %zu\n", median(times, runs), report.pairs);
    free(a);
    free(flow);
    return 0;
}
