/* workloads.h - the benchmark's workloads, shared by the generator (gen.c),
 * the runner (bench.c) and the append and MPI benchmarks (append.c, mpi.c,
 * through run.h) so all agree on every shape; and the options that say
 * where the programs and files are.
 *
 *     for (size_t i = 0; i < BENCH_N_WORKLOADS; i++)
 *         printf("%s\n", bench_workloads[i].name);
 *
 * Legend: B batch, n sequence length (queries = keys), D d_model, H heads,
 * G K/V heads, d_k = d_v = D / H.  Every workload is self-attention on
 * X (B, n, D) with packed weights W_Q (D, D), W_K, W_V (D, G*d_k) and
 * W_O (D, D); G = H unless the row says otherwise.
 *
 * Rows can also share data and carry targets (PASS / MISS in the report):
 *   - seed: take the random values of another workload (its X, W_Q, W_O
 *     and, with repeat_kv, its W_K, W_V repeated per query head);
 *   - input: read another workload's input file instead of making one;
 *   - baseline: report this workload's time against another's, with a
 *     target;
 *   - max_rss_mib: a peak RSS target;
 *   - roof_target: time / roofline at most this;
 *   - sweep_target: the thread sweep's speed-up, time at 1 thread / time
 *     at all cores, at least this;
 *   - bytes_target: the output file's size on disk / the dense float32
 *     bytes of the maps it saves (bench_dense_map_bytes) at most this.
 */
#ifndef BENCH_WORKLOADS_H
#define BENCH_WORKLOADS_H

#include <stddef.h>
#include <string.h>

#define BENCH_MAX_ARGS 6   /* extra attnrun arguments per workload */

/* Where the benchmark programs find attnrun and the generator, and keep
 * their inputs and outputs, unless told otherwise; and the option rows
 * (cmd/cli/options.h) that tell them, for a program whose options struct
 * `type` has the fields attnrun, gen and dir. */
#define BENCH_ATTNRUN "build/attnrun"
#define BENCH_GEN "build/bench/attnbench-gen"
#define BENCH_DIR "build/bench/work"
#define BENCH_OPTION_ATTNRUN(type)                                                 \
    {"attnrun", 0, CLI_TEXT, offsetof(type, attnrun), .value = "PATH",            \
     .help = "attnrun to time (default " BENCH_ATTNRUN ")"}
#define BENCH_OPTION_GEN(type)                                                     \
    {"gen", 0, CLI_TEXT, offsetof(type, gen), .value = "PATH",                    \
     .help = "input generator (default " BENCH_GEN ")"}
#define BENCH_OPTION_DIR(type)                                                     \
    {"dir", 0, CLI_TEXT, offsetof(type, dir), .value = "DIR",                     \
     .help = "work directory (default " BENCH_DIR ")"}

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
    double roof_target;       /* x roof target (time / roofline), or 0 for none */
    double sweep_target;      /* thread sweep speed-up target, or 0 for none */
    double bytes_target;      /* bytes on disk / dense map bytes target, or 0 for
                                 none; meant for rows that save maps only, as
                                 any other dataset counts against the target */
    const char *note;         /* a line under the roofline table, or NULL */
    double cpu_target;        /* CPU seconds (user + sys) on every core over those on
                                 one thread (the sweep's last T over T=1), or 0 */
    int together;             /* copies run at once against the same copies in a
                                 row (the "at once" table), or 0 */
    double together_target;   /* the time of the copies at once over the time of
                                 the copies in a row, or 0 */
    int peerless;             /* no numpy peer and no sweep: the row measures
                                 something else (copies at once, memory) */
};

/* What the memory rows allow beyond --memory and the layer's parameters:
 * the program, its libraries, HDF5's caches and the threads' stacks
 * (docs/running.md, "Steps"). */
#define BENCH_RSS_ALLOWANCE_MIB 48

/* Defined here (a header used by two programs, each including it once) so
 * that the table has exactly one spelling. The positional fields are the
 * original columns; the rest are named (and zero when absent). */
static const struct bench_workload bench_workloads[] = {
    /* The three write-bound shapes: within 25 % of the roofline. */
    {"gpt2", 8, 512, 768, 12, 1, 1, NULL, .kv_heads = 12, .roof_target = 1.25,
     .cpu_target = 1.05},
    {"long", 1, 4096, 768, 12, 1, 0, NULL, .kv_heads = 12, .roof_target = 1.25},
    {"many", 4096, 32, 128, 4, 0, 0, NULL, .kv_heads = 4, .roof_target = 1.25},
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
    /* gpt2 without the maps: the compute must scale with the cores, at least
     * 1.8x from 1 thread to all (2 cores here). */
    {"gpt2-out", 8, 512, 768, 12, 1, 1, "output", .kv_heads = 12, .input = "gpt2",
     .sweep_target = 1.8},
    /* long with its maps stored as IEEE half: the maps are 98 % of long's
     * bytes, and half of them are left to write, so at most 0.6x long's time. */
    {"long-f16", 1, 4096, 768, 12, 1, 0, NULL, .kv_heads = 12, .args = {"--store", "f16"},
     .input = "long", .baseline = "long", .ratio = BENCH_RATIO_AT_MOST, .target = 0.6},
    /* gpt2 compressed (shuffle + deflate 1): at most 3x gpt2's time, and the
     * compression must scale with the cores as the compute does. */
    {"gpt2-z1", 8, 512, 768, 12, 1, 1, NULL, .kv_heads = 12, .args = {"--compress", "1"},
     .input = "gpt2", .baseline = "gpt2", .ratio = BENCH_RATIO_AT_MOST, .target = 3.0,
     .sweep_target = 1.8},
    /* long's maps alone, chunked in 256 x 256 tiles: the tiles the causal
     * mask hides are not stored, 136 of 16 x 16 kept (53 %). */
    {"tiles", 1, 4096, 768, 12, 1, 0, "scores,weights", .kv_heads = 12, .input = "long",
     .bytes_target = 0.56,
     .note = "disk bytes / dense: the whole file, HDF5 metadata included, over the\n"
             "        dense 2 x B*H*n*m float32 of scores and weights; heads and output\n"
             "        are not saved, so every byte of the file counts against the maps."},
    /* xl's weights under a 256-key window: the tiles outside the band are not
     * stored, 127 of 64 x 64 kept (3 %), so the 4.3 GB dense map takes at most
     * 5 % of that on disk, and the run at most 1 GiB. */
    {"window-maps", 1, 16384, 256, 4, 1, 0, "weights", .kv_heads = 4, .args = {"--window", "256"},
     .input = "xl", .max_rss_mib = 1024, .bytes_target = 0.05,
     .note = "disk bytes / dense: the whole file over the dense B*H*n*m float32 weights;\n"
             "        FLOPs as the dry run counts them (xl's full products), as for window."},
    /* Norm-based analysis beside the weights it scales: gpt2's weights and
     * norms in at most 1.15x the time of its weights alone (the issue's
     * target; the row writes twice the bytes), and norms alone -- the same
     * bytes as the weights -- in at most 1.15x: the computing of norms. */
    {"gpt2-weights", 8, 512, 768, 12, 1, 1, "weights", .kv_heads = 12, .input = "gpt2",
     .peerless = 1},
    {"gpt2-norms", 8, 512, 768, 12, 1, 1, "weights,norms", .kv_heads = 12, .input = "gpt2",
     .baseline = "gpt2-weights", .ratio = BENCH_RATIO_AT_MOST, .target = 1.15, .peerless = 1},
    {"gpt2-norms-only", 8, 512, 768, 12, 1, 1, "norms", .kv_heads = 12, .input = "gpt2",
     .baseline = "gpt2-weights", .ratio = BENCH_RATIO_AT_MOST, .target = 1.15, .peerless = 1},
    /* A shared machine: two gpt2 runs started at once finish in at most 0.9x
     * the time of the two in a row (the I/O of one beside the compute of the
     * other), and four --threads 2 runs at once on 2 cores take no longer
     * than the four in a row (threads that wait must not spin). */
    {"gpt2-two", 8, 512, 768, 12, 1, 1, NULL, .kv_heads = 12, .input = "gpt2", .together = 2,
     .together_target = 0.90, .peerless = 1},
    {"gpt2-four", 8, 512, 768, 12, 1, 1, NULL, .kv_heads = 12, .args = {"--threads", "2"},
     .input = "gpt2", .together = 4, .together_target = 1.00, .peerless = 1},
    /* --memory as a cap: one long item's result (B=1, n=4096, H=12,
     * d_model=768: 144 MiB of (n, H, D) alone) and its online path with every
     * summary, under 128 MiB (above the least step, 77 MiB), the layer's
     * parameters (9 MiB) and the allowance. */
    {"result-cap", 1, 4096, 768, 12, 1, 0, "result", .kv_heads = 12,
     .args = {"--memory", "128M"}, .input = "long",
     .max_rss_mib = 128 + 9 + BENCH_RSS_ALLOWANCE_MIB, .peerless = 1},
    {"online-cap", 1, 4096, 768, 12, 1, 0, "output,entropy,distance,argmax", .kv_heads = 12,
     .args = {"--memory", "128M"}, .input = "long",
     .max_rss_mib = 128 + 9 + BENCH_RSS_ALLOWANCE_MIB, .peerless = 1},
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

/* Whether w saves dataset `name` (attnrun's default set when w->save is
 * NULL: scores, weights, heads, output). */
static inline int bench_saves(const struct bench_workload *w, const char *name)
{
    const char *p = w->save ? w->save : "scores,weights,heads,output";
    size_t want = strlen(name);
    while (*p) {
        size_t len = strcspn(p, ",");
        if (len == want && strncmp(p, name, len) == 0)
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

/* Dense float32 bytes of the (B, H, n, m) maps, scores and weights, that w
 * saves: what w's bytes_target is measured against. */
static inline double bench_dense_map_bytes(const struct bench_workload *w)
{
    int maps = bench_saves(w, "scores") + bench_saves(w, "weights");
    return (double)maps * (double)w->batch * (double)w->heads * (double)w->seq
           * (double)w->seq * 4.0;
}

/* The workload whose input file w reads (w itself unless w->input). */
static inline const struct bench_workload *bench_input_of(const struct bench_workload *w)
{
    const struct bench_workload *owner = w->input ? bench_find_workload(w->input) : NULL;
    return owner ? owner : w;
}

#endif
