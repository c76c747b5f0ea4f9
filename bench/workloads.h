/* workloads.h - the benchmark's workloads, shared by the generator (gen.c)
 * and the runner (bench.c) so both agree on every shape.
 *
 *     for (size_t i = 0; i < BENCH_N_WORKLOADS; i++)
 *         printf("%s\n", bench_workloads[i].name);
 *
 * Legend: B batch, n sequence length (queries = keys), D d_model, H heads,
 * G K/V heads, d_k = d_v = D / H.  Every workload is self-attention on
 * X (B, n, D) with packed weights W_Q (D, D), W_K, W_V (D, G*d_k) and
 * W_O (D, D); G = H unless the row says otherwise.
 *
 * Rows can also share data and compare with each other:
 *   - seed: take the random values of another workload (its X, W_Q, W_O
 *     and, with repeat_kv, its W_K, W_V repeated per query head);
 *   - input: read another workload's input file instead of making one;
 *   - baseline: report this workload's time against another's, with a
 *     target (PASS / MISS in the report), and optionally a peak RSS target.
 */
#ifndef BENCH_WORKLOADS_H
#define BENCH_WORKLOADS_H

#include <stddef.h>
#include <string.h>

#define BENCH_MAX_ARGS 6   /* extra attnrun arguments per workload */

/* How a workload's time is compared with its baseline's. */
enum bench_ratio {
    BENCH_RATIO_NONE,      /* no baseline */
    BENCH_RATIO_AT_MOST,   /* time / baseline's time <= target (an overhead) */
    BENCH_RATIO_AT_LEAST,  /* baseline's time / time >= target (a speed-up) */
};

struct bench_workload {
    const char *name;
    long batch;        /* B */
    long seq;          /* n = m */
    long d_model;      /* D */
    long heads;        /* H, divides D */
    int causal;        /* run with --causal */
    int biases;        /* the input holds b_Q, b_K, b_V, b_O */
    const char *save;  /* --save LIST, or NULL for attnrun's default set */
    long kv_heads;     /* G, divides H: W_K, W_V are (D, G*d_k), and attnrun gets
                          --kv-heads G when G < H; 0 also means G = H */
    int repeat_kv;     /* store W_K, W_V repeated per query head to (D, H*d_k), as
                          HF repeat_kv does: plain multi-head, no --kv-heads */
    const char *args[BENCH_MAX_ARGS];  /* more attnrun options (the numpy peer
                                          has none of them: it is skipped) */
    const char *seed;  /* the workload whose random values these are; NULL: own */
    const char *input; /* the workload whose input file this one reads; NULL: own */
    const char *baseline;     /* the workload this one is compared with, or NULL */
    enum bench_ratio ratio;   /* which ratio of the two times, and which way */
    double target;            /* the ratio's bound */
    double max_rss_mib;       /* peak RSS target in MiB, or 0 for none */
    const char *note;         /* a line under the roofline table, or NULL */
};

/* Defined here (a header used by two programs, each including it once) so
 * that the table has exactly one spelling. The positional fields are the
 * original columns; the rest are named (and zero when absent). */
static const struct bench_workload bench_workloads[] = {
    {"gpt2", 8, 512, 768, 12, 1, 1, NULL, .kv_heads = 12},
    {"long", 1, 4096, 768, 12, 1, 0, NULL, .kv_heads = 12},
    {"many", 4096, 32, 128, 4, 0, 0, NULL, .kv_heads = 4},
    {"xl", 1, 16384, 256, 4, 1, 0, "output", .kv_heads = 4},
    /* Llama-style GQA + RoPE against the same attention as plain MHA: the
     * variant machinery may cost at most 10 %. */
    {"llama", 4, 1024, 2048, 32, 1, 0, "output", .kv_heads = 8, .args = {"--rope", "10000"},
     .baseline = "llama-plain", .ratio = BENCH_RATIO_AT_MOST, .target = 1.10},
    {"llama-plain", 4, 1024, 2048, 32, 1, 0, "output", .kv_heads = 8, .repeat_kv = 1,
     .seed = "llama"},
    /* xl with a 256-key sliding window: at least 8x faster, under 1 GiB. */
    {"window", 1, 16384, 256, 4, 1, 0, "output", .kv_heads = 4, .args = {"--window", "256"},
     .input = "xl", .baseline = "xl", .ratio = BENCH_RATIO_AT_LEAST, .target = 8.0, .max_rss_mib = 1024,
     .note = "FLOPs as the dry run counts them: xl's full products, most of which the\n"
             "        window skips, so its GFLOP/s and x roof are not rates."},
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

/* G of workload w's generated W_K and W_V. */
static inline long bench_kv_heads(const struct bench_workload *w)
{
    return w->kv_heads > 0 ? w->kv_heads : w->heads;
}

/* The --kv-heads value attnrun gets for w, or 0 for none. */
static inline long bench_kv_heads_arg(const struct bench_workload *w)
{
    return !w->repeat_kv && bench_kv_heads(w) < w->heads ? bench_kv_heads(w) : 0;
}

/* The workload whose input file w reads (w itself unless w->input). */
static inline const struct bench_workload *bench_input_of(const struct bench_workload *w)
{
    const struct bench_workload *owner = w->input ? bench_find_workload(w->input) : NULL;
    return owner ? owner : w;
}

#endif
