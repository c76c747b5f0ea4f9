/* workloads.h - the benchmark's workloads, shared by the generator (gen.c)
 * and the runner (bench.c) so both agree on every shape.
 *
 *     for (size_t i = 0; i < BENCH_N_WORKLOADS; i++)
 *         printf("%s\n", bench_workloads[i].name);
 *
 * Legend: B batch, n sequence length (queries = keys), D d_model, H heads,
 * d_k = d_v = D / H.  Every workload is self-attention on X (B, n, D) with
 * packed weights W_Q, W_K, W_V (D, D) and W_O (D, D).
 */
#ifndef BENCH_WORKLOADS_H
#define BENCH_WORKLOADS_H

#include <stddef.h>
#include <string.h>

struct bench_workload {
    const char *name;
    long batch;        /* B */
    long seq;          /* n = m */
    long d_model;      /* D */
    long heads;        /* H, divides D */
    int causal;        /* run with --causal */
    int biases;        /* the input holds b_Q, b_K, b_V, b_O */
    const char *save;  /* --save LIST, or NULL for attnrun's default set */
};

/* Defined here (a header used by two programs, each including it once) so
 * that the table has exactly one spelling. */
static const struct bench_workload bench_workloads[] = {
    {"gpt2", 8, 512, 768, 12, 1, 1, NULL},
    {"long", 1, 4096, 768, 12, 1, 0, NULL},
    {"many", 4096, 32, 128, 4, 0, 0, NULL},
    {"xl", 1, 16384, 256, 4, 1, 0, "output"},
};

#define BENCH_N_WORKLOADS (sizeof bench_workloads / sizeof bench_workloads[0])

/* The workload called `name`, or NULL. */
static inline const struct bench_workload *bench_find_workload(const char *name)
{
    for (size_t i = 0; i < BENCH_N_WORKLOADS; i++)
        if (strcmp(bench_workloads[i].name, name) == 0)
            return &bench_workloads[i];
    return NULL;
}

#endif
