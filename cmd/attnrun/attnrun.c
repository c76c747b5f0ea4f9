/*
 * attnrun - multi-head scaled dot-product attention over HDF5 batches.
 *
 * This file is only the command line: parsing, messages and exit codes.
 * What the program does about its process (descriptors, signals) is
 * cmd/cli/process.c, the progress line cmd/attnrun/progress.c; everything else is
 * libattn (lib/).
 */
#define _GNU_SOURCE
#include "attn_ranks.h"
#include "attn_run.h"
#include "attnrun/attnrun.h"
#include "attnrun/plan_json.h"
#include "attn_tokens.h"
#include "cli/process.h"
#include "attnrun/progress.h"
#include "cli/cli.h"
#include "cli/hints.h"

#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Long options without a short form. */
enum {
    OPT_IN_PLACE = 256, OPT_SCALE, OPT_DATASET, OPT_GROUP, OPT_SAVE, OPT_PRECISION, OPT_STORE, OPT_COMPRESS,
    OPT_THREADS, OPT_BATCH_SLICE, OPT_MEMORY, OPT_DRY_RUN, OPT_PROGRESS, OPT_FORCE, OPT_ALLOW_NONFINITE, OPT_ALLOW_EXTERNAL, OPT_ALLOW_PLUGINS,
    OPT_WAIT, OPT_LAYOUT, OPT_QKV_SPLIT, OPT_WEIGHTS_GROUP, OPT_PRESET, OPT_KV_HEADS, OPT_ROPE,
    OPT_ROPE_DIM, OPT_ROPE_STYLE, OPT_ALIBI, OPT_WINDOW, OPT_SOFTCAP, OPT_NORM_EPS, OPT_MASK_INVERT,
    OPT_JSON,
    OPT_TOKENS, OPT_KV_TOKENS, OPT_APPEND
};

static const struct option long_options[] = {
    {"output", required_argument, NULL, 'o'},
    {"in-place", no_argument, NULL, OPT_IN_PLACE},
    {"append", no_argument, NULL, OPT_APPEND},
    {"heads", required_argument, NULL, 'H'},
    {"causal", no_argument, NULL, 'c'},
    {"scale", required_argument, NULL, OPT_SCALE},
    /* Every option naming an input dataset (the input table's `key`). */
    {"kv", required_argument, NULL, OPT_DATASET},
    {"mask", required_argument, NULL, OPT_DATASET},
    {"x", required_argument, NULL, OPT_DATASET},
    {"wq", required_argument, NULL, OPT_DATASET},
    {"wk", required_argument, NULL, OPT_DATASET},
    {"wv", required_argument, NULL, OPT_DATASET},
    {"wo", required_argument, NULL, OPT_DATASET},
    {"bq", required_argument, NULL, OPT_DATASET},
    {"bk", required_argument, NULL, OPT_DATASET},
    {"bv", required_argument, NULL, OPT_DATASET},
    {"bo", required_argument, NULL, OPT_DATASET},
    {"wqkv", required_argument, NULL, OPT_DATASET},
    {"bqkv", required_argument, NULL, OPT_DATASET},
    {"q-norm", required_argument, NULL, OPT_DATASET},
    {"k-norm", required_argument, NULL, OPT_DATASET},
    {"alibi-slopes", required_argument, NULL, OPT_DATASET},
    {"positions", required_argument, NULL, OPT_DATASET},
    {"kv-positions", required_argument, NULL, OPT_DATASET},
    {"attn-bias", required_argument, NULL, OPT_DATASET},
    {"tokens", required_argument, NULL, OPT_TOKENS},
    {"kv-tokens", required_argument, NULL, OPT_KV_TOKENS},
    {"layout", required_argument, NULL, OPT_LAYOUT},
    {"qkv-split", required_argument, NULL, OPT_QKV_SPLIT},
    {"weights-group", required_argument, NULL, OPT_WEIGHTS_GROUP},
    {"preset", required_argument, NULL, OPT_PRESET},
    {"kv-heads", required_argument, NULL, OPT_KV_HEADS},
    {"rope", required_argument, NULL, OPT_ROPE},
    {"rope-dim", required_argument, NULL, OPT_ROPE_DIM},
    {"rope-style", required_argument, NULL, OPT_ROPE_STYLE},
    {"alibi", no_argument, NULL, OPT_ALIBI},
    {"window", required_argument, NULL, OPT_WINDOW},
    {"softcap", required_argument, NULL, OPT_SOFTCAP},
    {"norm-eps", required_argument, NULL, OPT_NORM_EPS},
    {"mask-invert", no_argument, NULL, OPT_MASK_INVERT},
    {"group", required_argument, NULL, OPT_GROUP},
    {"save", required_argument, NULL, OPT_SAVE},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"store", required_argument, NULL, OPT_STORE},
    {"compress", required_argument, NULL, OPT_COMPRESS},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"batch-slice", required_argument, NULL, OPT_BATCH_SLICE},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"json", no_argument, NULL, OPT_JSON},
    {"progress", no_argument, NULL, OPT_PROGRESS},
    {"quiet", no_argument, NULL, 'q'},
    {"force", no_argument, NULL, OPT_FORCE},
    {"allow-nonfinite", no_argument, NULL, OPT_ALLOW_NONFINITE},
    {"allow-external", no_argument, NULL, OPT_ALLOW_EXTERNAL},
    {"allow-plugins", no_argument, NULL, OPT_ALLOW_PLUGINS},
    {"wait", no_argument, NULL, OPT_WAIT},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* The help text, in parts (each within what C compilers must support). */
static const char *const usage_text[] = {
    "Usage: attnrun [OPTIONS] IN.h5 (-o OUT.h5 | --in-place)\n"
    "       attnrun plot OUT.h5 -o FILE.png|.svg|.pdf [OPTIONS]  (see attnrun plot --help)\n"
    "       mpirun ... attnrun-mpi [OPTIONS] IN.h5 -o OUT.h5  (the MPI build, make MPI=1)\n"
    "\n"
    "Multi-head scaled dot-product attention for every sequence of a batch stored\n"
    "in IN.h5; writes scores, weights, heads and output as HDF5 datasets.\n"
    "\n"
    "Output:\n"
    "  -o, --output OUT     write a new file OUT (atomically: all or nothing)\n"
    "      --in-place       add the results to IN under --group (IN is replaced\n"
    "                       whole by an updated copy only when everything worked)\n"
    "      --group PATH     group for the results (default /)\n"
    "      --append         add the results to the results file OUT as --group\n"
    "                       (one file for a whole model; see README)\n"
    "      --save LIST      outputs to write, from scores,weights,heads,output,q,k,v\n"
    "                       and the summaries entropy,argmax,distance,mean,result\n"
    "                       (default scores,weights,heads,output)\n"
    "      --precision P    f32 (default) or f64: computed and stored type\n"
    "      --store T        f16, bf16, f32 or f64: stored type of scores and weights\n"
    "                       (default: the precision's; values round to nearest even)\n"
    "      --compress N     0-9: shuffle + deflate level for every output (default 0)\n"
    "      --force          replace an existing OUT, or existing names in --group\n"
    "\n"
    "Attention:\n"
    "  -H, --heads N        number of heads (required for packed 2-D weights)\n"
    "  -c, --causal         hide key k from query q when k > q\n"
    "      --scale S        multiply Q K^T by S instead of 1/sqrt(d_k)\n"
    "      --kv NAME        cross-attention: keys and values from dataset NAME\n"
    "      --mask NAME      key padding mask (B, m) or (m): nonzero = may attend\n"
    "      --mask-invert    the mask's nonzero entries are the masked keys (torch\n"
    "                       key_padding_mask)\n"
    "      --kv-heads G     K/V heads shared by H/G query heads each (GQA, MQA;\n"
    "                       default: from the K weight's shape)\n"
    "      --window W       sliding window: query q sees keys k > q - W\n"
    "      --softcap C      logits become C tanh(logit / C) (Gemma 2)\n"
    "      --alibi          add ALiBi biases slope_h (pos_k - pos_q) (BLOOM)\n"
    "      --alibi-slopes NAME  (H) slopes instead of the standard ones\n"
    "      --attn-bias NAME add a float dataset (n, m), (H, n, m) or (B, H, n, m)\n"
    "      --rope THETA     rotary position embeddings of q and k with base THETA\n"
    "      --rope-dim R     rotate the first R features of each head (default d_k)\n"
    "      --rope-style S   neox (halves, default) or gptj (adjacent pairs)\n"
    "      --positions NAME     integer positions (n) or (B, n) of the queries\n"
    "      --kv-positions NAME  the same for the keys of --kv (default 0..m-1)\n"
    "      --q-norm NAME, --k-norm NAME  RMSNorm weights (d_k) of each head's q, k\n"
    "      --norm-eps E     their epsilon (default 1e-6)\n"
    "\n"
    "Weights:\n"
    "      --preset NAME    a model family's names and semantics: gpt2, torch-mha,\n"
    "                       llama, mistral, qwen2, qwen3, gemma2, neox, gptj, bloom, bert\n"
    "      --weights-group PATH  look weight names up under PATH\n"
    "      --layout L       xw (x W, default) or linear (x W^T, torch.nn.Linear)\n"
    "      --wqkv NAME, --bqkv NAME  fused Q|K|V weights and bias\n"
    "      --qkv-split S    blocks ([Q K V], default) or heads (per head [q|k|v])\n",
    "\n"
    "Input dataset names (paths inside groups allowed; 'none' ignores a bias):\n"
    "      --x NAME         queries (default X)\n"
    "      --wq, --wk, --wv, --wo NAME   weights (default W_Q, W_K, W_V, W_O)\n"
    "      --bq, --bk, --bv, --bo NAME   biases (default b_Q, b_K, b_V, b_O, used\n"
    "                                    when present)\n"
    "      --tokens NAME    strings (n) or (B, n) labelling the queries (and the keys\n"
    "                       of self-attention), stored as query_token and key_token;\n"
    "                       OBJECT@ATTR names a string-array attribute (@ATTR: root's)\n"
    "      --kv-tokens NAME the same, (m) or (B, m), for the keys of --kv\n"
    "\n"
    "Running:\n"
    "      --dry-run        print shapes, FLOPs and output bytes; write nothing\n"
    "      --json           with --dry-run: the plan as one JSON object on stdout\n"
    "      --threads N      compute threads (default: all cores; at most 4 per core);\n"
    "                       the results are the same for every N\n"
    "      --batch-slice N  batch items per slice (default: sized for the threads)\n"
    "      --memory SIZE    cap on one step's buffers, e.g. 256M or 2G (default 128M\n"
    "                       per thread, at most 1/8 of RAM; two steps are in memory,\n"
    "                       one computed, one written)\n"
    "      --allow-nonfinite  accept NaN and infinities in the inputs\n"
    "      --allow-external   follow external links, external raw storage and\n"
    "                       virtual datasets (other files: only if you trust them)\n"
    "      --allow-plugins  let HDF5 load filter plugins (HDF5_PLUGIN_PATH)\n"
    "      --wait           wait while another program holds IN's lock (an HDF5\n"
    "                       writer, another attnrun --in-place) instead of failing\n"
    "      --progress       report progress on stderr (default: when it is a terminal)\n"
    "  -q, --quiet          no progress\n"
    "  -h, --help           this help\n"
    "  -V, --version        version\n"
    "\n"
    "Examples:\n"
    "  attnrun in.h5 -o out.h5 --heads 12 --causal\n"
    "  attnrun in.h5 -o out.h5 --heads 8 --kv memory --mask pad --save weights,output\n"
    "  attnrun model.h5 --in-place --group /layer3/results --x /layer3/input \\\n"
    "          --wq /layer3/attn/W_Q --wk /layer3/attn/W_K --wv /layer3/attn/W_V \\\n"
    "          --wo /layer3/attn/W_O --heads 12\n"
    "  attnrun in.h5 -o out.h5 --heads 12 --dry-run\n"
    "  attnrun llama.h5 -o out.h5 --preset llama --weights-group /layers.0.self_attn \\\n"
    "          --heads 32 --kv-heads 8 --rope 500000\n"
    "  attnrun layer3.h5 -o results.h5 --group /layer3 --append --preset gpt2 --heads 12 \\\n"
    "          --tokens tokens --save weights,entropy,output\n"
    "  attnrun plot results.h5 --group /layer3 --heads 0-3 -o layer3.png\n"
    "  h5dump -d /weights -s 0,0,0,0 -c 1,1,4,4 out.h5\n"
    "\n"
    "Exit status: 0 success, 1 runtime or I/O failure (or interrupted),\n"
    "2 usage error, 3 input rejected.\n",
};

/* A strict whole number within [min, max] (cli_parse_number). */
static bool parse_count(const char *text, size_t min, size_t max, size_t *value)
{
    size_t v;
    if (!cli_parse_number(text, max, &v, NULL) || v < min)
        return false;
    *value = v;
    return true;
}

/* A byte count: digits with an optional K, M or G (powers of 1024). */
static bool parse_size(const char *text, size_t *value)
{
    char digits[32];
    size_t len = strlen(text), shift = 0;
    if (len == 0 || len >= sizeof digits)
        return false;
    memcpy(digits, text, len + 1);
    const char *units = "KMG", *unit = strchr(units, digits[len - 1]);
    if (unit != NULL && *unit != '\0') {
        shift = 10 * (size_t)(unit - units + 1);
        digits[len - 1] = '\0';
    }
    size_t v;
    if (!parse_count(digits, 1, SIZE_MAX >> shift, &v))
        return false;
    *value = v << shift;
    return true;
}

/* Strict decimal parsing: digits, sign, point and exponent only (no
 * spaces, hex, inf or nan), all of text used, finite. */
static bool parse_real(const char *text, double *value)
{
    char *end;
    if (text[0] == '\0' || strspn(text, "0123456789+-.eE") != strlen(text))
        return false;
    errno = 0;
    double v = strtod(text, &end);
    if (text[0] == '\0' || errno != 0 || *end != '\0' || !isfinite(v))
        return false;
    *value = v;
    return true;
}

/* The command line, words joined by spaces, quoted where a shell would need it. */
static char *join_command_line(int argc, char **argv)
{
    size_t len = 1;
    for (int i = 0; i < argc; i++)
        len += 4 * strlen(argv[i]) + 3;
    char *line = attn_malloc(len), *p = line;
    if (line == NULL)
        return NULL;
    for (int i = 0; i < argc; i++) {
        bool plain = argv[i][0] != '\0' && strspn(argv[i], "abcdefghijklmnopqrstuvwxyz"
                                                           "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                           "0123456789-_./=,:+@%") == strlen(argv[i]);
        if (i > 0)
            *p++ = ' ';
        if (!plain)
            *p++ = '\'';
        for (const char *c = argv[i]; *c; c++) {
            if (*c == '\'' && !plain) {
                memcpy(p, "'\\''", 4);
                p += 4;
            } else {
                *p++ = *c;
            }
        }
        if (!plain)
            *p++ = '\'';
    }
    *p = '\0';
    return line;
}

static const char *human_bytes(double bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (bytes >= 1024 && u < 5) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, len, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
    return buf;
}

static void print_plan(const attn_run_options *opt, const attn_run_report *rep)
{
    const attn_dims *d = &rep->layout.dims;
    char h[32];
    printf("input      %s\n", opt->input);
    printf("batch      %zu%s\n", d->batch, rep->layout.batched ? "" : " (rank-2 X: no batch axis)");
    printf("queries    n = %zu\nkeys       m = %zu%s\n", d->n, d->m, rep->layout.cross ? " (--kv)" : "");
    const attn_config *cfg = &rep->config;
    printf("d_model    %zu\nheads      %zu (K/V heads %zu)\nd_k, d_v   %zu, %zu\n", d->d_model,
           d->heads, attn_kv_heads(d), d->d_k, d->d_v);
    printf("weights    %s%s\n", rep->layout.linear ? "x W^T (linear)" : "x W (xw)",
           !rep->layout.fused ? "" : rep->layout.heads_interleaved ? ", fused q|k|v per head"
                                                                   : ", fused [Q K V] blocks");
    printf("scale      %.9g\ncausal     %s\nprecision  %s\n", rep->scale, cfg->causal ? "yes" : "no",
           opt->precision == ATTN_F64 ? "f64" : "f32");
    if (cfg->window != 0)
        printf("window     %zu keys\n", cfg->window);
    if (cfg->softcap != 0)
        printf("softcap    %.9g\n", cfg->softcap);
    if (rep->alibi)
        printf("alibi      yes\n");
    if (cfg->rope.theta != 0)
        printf("rope       theta %.9g, %zu of %zu features, %s style\n", cfg->rope.theta,
               cfg->rope.dim, d->d_k, cfg->rope.style == ATTN_ROPE_GPTJ ? "gptj" : "neox");
    printf("FLOPs      %.6g (%.3f GFLOP)\n", rep->flops, rep->flops / 1e9);
    printf("store      maps (scores, weights, mean) as %s%s\n", attn_store_name(rep->store),
           opt->compress > 0 ? ", shuffled and deflated" : "");
    printf("slice      %zu batch items, %s of buffers (two slices in flight)\n", rep->slice_items,
           human_bytes((double)rep->slice_bytes, h, sizeof h));
    printf("steps      %zu blocks each, under a cap of %s (--memory)\n", rep->step_blocks,
           human_bytes((double)rep->memory_cap, h, sizeof h));
    if (rep->slice_rows < d->n)
        printf("rows       query rows in blocks of %zu (one item's maps exceed the step)\n",
               rep->slice_rows);
    printf("softmax    %s\n", rep->online ? "online, no maps kept (no scores, weights or mean saved)"
                                            : "full rows (scores, weights or mean saved)");
    printf("threads    %zu\n", rep->threads);
    printf("outputs in group %s:\n", opt->group);
    for (int i = 0; i < ATTN_OUT_COUNT; i++) {
        size_t dims[4];
        const char *labels[4];
        char shape[128];
        if (!((rep->save >> i) & 1u))
            continue;
        size_t rank = attn_output_shape(&rep->layout, (attn_output)i, dims, labels);
        printf("  %-8s %-26s %-8s %zu bytes (%s)\n", attn_output_name((attn_output)i),
               attn_format_shape(shape, sizeof shape, dims, rank),
               plan_dtype_name(rep->output_store[i]),
               rep->output_bytes[i], human_bytes((double)rep->output_bytes[i], h, sizeof h));
    }
    printf("  %-8s %-26s %-8s %zu bytes (%s)\n", "total", "", "", rep->total_bytes,
           human_bytes((double)rep->total_bytes, h, sizeof h));
}

typedef struct cli {
    attn_run_options run;
    bool progress, quiet, help, version;
    bool json;                          /* --json: the dry run's plan as JSON */
} cli;

/* The input a dataset-name option ("--wq") names: the input table's key
 * ("wq") after the dashes. */
static attn_input input_of_option(const char *name)
{
    for (int i = 0; i < ATTN_IN_COUNT; i++)
        if (strcmp(attn_input_spec_of((attn_input)i)->key, name + 2) == 0)
            return (attn_input)i;
    assert(!"a dataset option missing from the input table");
    return ATTN_IN_X;
}

/* Applies one option with its value (NULL for flags); `name` is how the
 * user wrote it ("--heads", "-H").  Returns EXIT_OK or EXIT_USAGE. */
static int apply_option(void *context, int opt, const char *name, const char *value)
{
    cli *c = context;
    size_t count;
    attn_error err;
    switch (opt) {
    case 'o': c->run.output = value; break;
    case OPT_IN_PLACE: c->run.in_place = true; break;
    case OPT_APPEND: c->run.append = true; break;
    case 'H':
        if (!parse_count(value, 1, 1u << 20, &count))
            return cli_usage_error("%s '%s': expected a whole number from 1 to 1048576", name, value);
        c->run.heads = count;
        break;
    case 'c': c->run.causal = true; break;
    case OPT_SCALE:
        if (!parse_real(value, &c->run.scale) || c->run.scale <= 0)
            return cli_usage_error("%s '%s': expected a finite positive number", name, value);
        c->run.has_scale = true;
        break;
    case OPT_DATASET: {
        attn_input which = input_of_option(name);
        if (value[0] == '\0')
            return cli_usage_error("%s '': expected a dataset name", name);
        if (strcmp(value, "none") == 0 && !attn_input_spec_of(which)->optional)
            return cli_usage_error("%s none: only a bias can be left out", name);
        c->run.names[which] = value;
        break;
    }
    case OPT_LAYOUT:
        if (strcmp(value, "xw") == 0)
            c->run.layout = ATTN_LAYOUT_XW;
        else if (strcmp(value, "linear") == 0)
            c->run.layout = ATTN_LAYOUT_LINEAR;
        else
            return cli_usage_error("%s '%s': expected xw (x W) or linear (x W^T, torch.nn.Linear)",
                               name, value);
        break;
    case OPT_QKV_SPLIT:
        if (strcmp(value, "blocks") != 0 && strcmp(value, "heads") != 0)
            return cli_usage_error("%s '%s': expected blocks ([Q;K;V]) or heads (per head [q|k|v])",
                               name, value);
        c->run.qkv_heads = strcmp(value, "heads") == 0;
        break;
    case OPT_WEIGHTS_GROUP:
        if (value[0] != '/')
            return cli_usage_error("%s '%s': expected an absolute group path such as /layer0/attn",
                               name, value);
        c->run.weights_group = value;
        break;
    case OPT_PRESET:
        if (attn_preset_find(value) == NULL)
            return cli_usage_error("%s '%s': unknown (choose from %s)", name, value, attn_preset_list());
        c->run.preset = value;
        break;
    case OPT_KV_HEADS:
        if (!parse_count(value, 1, 1u << 20, &count))
            return cli_usage_error("%s '%s': expected a whole number from 1 to 1048576", name, value);
        c->run.kv_heads = count;
        break;
    case OPT_ROPE:
        if (!parse_real(value, &c->run.rope_theta) || c->run.rope_theta <= 0)
            return cli_usage_error("%s '%s': expected RoPE's base theta, a positive number such as 10000",
                               name, value);
        break;
    case OPT_ROPE_DIM:
        if (!parse_count(value, 2, 1u << 20, &count) || count % 2 != 0)
            return cli_usage_error("%s '%s': expected an even number of features from 2", name, value);
        c->run.rope_dim = count;
        break;
    case OPT_ROPE_STYLE:
        if (strcmp(value, "neox") != 0 && strcmp(value, "gptj") != 0)
            return cli_usage_error("%s '%s': expected neox (halves) or gptj (adjacent pairs)", name, value);
        c->run.rope_style = strcmp(value, "gptj") == 0 ? ATTN_ROPE_GPTJ : ATTN_ROPE_NEOX;
        c->run.has_rope_style = true;
        break;
    case OPT_ALIBI: c->run.alibi = true; break;
    case OPT_WINDOW:
        if (!parse_count(value, 1, SIZE_MAX, &count))
            return cli_usage_error("%s '%s': expected a whole number of keys from 1", name, value);
        c->run.window = count;
        break;
    case OPT_SOFTCAP:
        if (!parse_real(value, &c->run.softcap) || c->run.softcap <= 0)
            return cli_usage_error("%s '%s': expected a finite positive number", name, value);
        break;
    case OPT_NORM_EPS:
        if (!parse_real(value, &c->run.norm_eps) || c->run.norm_eps < 0)
            return cli_usage_error("%s '%s': expected a small non-negative number such as 1e-6",
                               name, value);
        break;
    case OPT_MASK_INVERT: c->run.mask_invert = true; break;
    case OPT_TOKENS:
    case OPT_KV_TOKENS:
        if (attn_token_source_parse(value, NULL, &err) != ATTN_OK)
            return cli_usage_error("%s %s", name, err.msg);
        *(opt == OPT_TOKENS ? &c->run.tokens : &c->run.kv_tokens) = value;
        break;
    case OPT_GROUP: c->run.group = value; break;
    case OPT_SAVE:
        if (attn_parse_save_list(value, &c->run.save, &err) != ATTN_OK)
            return cli_usage_error("%s: %s", name, err.msg);
        break;
    case OPT_PRECISION:
        if (strcmp(value, "f32") == 0)
            c->run.precision = ATTN_F32;
        else if (strcmp(value, "f64") == 0)
            c->run.precision = ATTN_F64;
        else
            return cli_usage_error("%s '%s': expected f32 or f64", name, value);
        break;
    case OPT_STORE: {
        const attn_store types[] = {ATTN_STORE_F16, ATTN_STORE_BF16, ATTN_STORE_F32, ATTN_STORE_F64};
        c->run.store = ATTN_STORE_DEFAULT;
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            if (strcmp(value, attn_store_name(types[i])) == 0)
                c->run.store = types[i];
        if (c->run.store == ATTN_STORE_DEFAULT)
            return cli_usage_error("%s '%s': expected f16, bf16, f32 or f64", name, value);
        break;
    }
    case OPT_COMPRESS:
        if (!parse_count(value, 0, 9, &count))
            return cli_usage_error("%s '%s': expected a level from 0 to 9", name, value);
        c->run.compress = (int)count;
        break;
    case OPT_THREADS:
        if (!parse_count(value, 1, INT_MAX, &count))
            return cli_usage_error("%s '%s': expected a whole number from 1", name, value);
        c->run.threads = (int)count;
        break;
    case OPT_BATCH_SLICE:
        if (!parse_count(value, 1, SIZE_MAX, &count))
            return cli_usage_error("%s '%s': expected a whole number from 1", name, value);
        c->run.slice_items = count;
        break;
    case OPT_MEMORY:
        if (!parse_size(value, &c->run.memory_budget))
            return cli_usage_error("%s '%s': expected a size such as 512K, 256M or 2G", name, value);
        break;
    case OPT_DRY_RUN: c->run.dry_run = true; break;
    case OPT_JSON: c->json = true; break;
    case OPT_PROGRESS: c->progress = true; break;
    case 'q': c->quiet = true; break;
    case OPT_FORCE: c->run.force = true; break;
    case OPT_ALLOW_NONFINITE: c->run.allow_nonfinite = true; break;
    case OPT_ALLOW_EXTERNAL: c->run.allow_external = true; break;
    case OPT_ALLOW_PLUGINS: c->run.allow_plugins = true; break;
    case OPT_WAIT: c->run.wait = true; break;
    case 'h': c->help = true; break;
    case 'V': c->version = true; break;
    default: assert(!"an option without a case"); break;
    }
    return EXIT_OK;
}

/* Parses argv into cli; returns EXIT_OK or EXIT_USAGE (message printed). */
static int parse_arguments(int argc, char **argv, cli *c)
{
    int code = cli_parse_options(argc, argv, ":o:H:cqhV", long_options, apply_option, c);
    if (code != EXIT_OK)
        return code;
    if (c->help || c->version)
        return EXIT_OK;
    if (optind == argc)
        return cli_usage_error("no input file given");
    if (argc - optind > 1)
        return cli_usage_error("one input file expected, got %d ('%s', '%s' ...)", argc - optind,
                           argv[optind], argv[optind + 1]);
    c->run.input = argv[optind];
    if (c->run.in_place && c->run.output != NULL)
        return cli_usage_error("-o and --in-place exclude each other");
    if (c->run.kv_tokens != NULL && c->run.names[ATTN_IN_KV] == NULL)
        return cli_usage_error("--kv-tokens labels the keys of --kv; in self-attention the keys "
                           "take the queries' --tokens");
    if (c->run.append && (c->run.in_place || c->run.output == NULL))
        return cli_usage_error("--append adds to the results file -o OUT.h5%s",
                           c->run.in_place ? ", not to the input: not with --in-place" : "; give it");
    if (c->run.append && strcmp(c->run.group, "/") == 0)
        return cli_usage_error("--append needs --group PATH for the results (e.g. --group /layer3)");
    if (!c->run.in_place && c->run.output == NULL && !c->run.dry_run)
        return cli_usage_error("no output: give -o OUT.h5 or --in-place");
    if (c->json && !c->run.dry_run)
        return cli_usage_error("--json prints the plan of a dry run: use it with --dry-run");
    return EXIT_OK;
}

/* The run itself: the command line parsed, attn_run, its report. */
static int run_main(int argc, char **argv)
{
    cli c;
    memset(&c, 0, sizeof c);
    c.run = attn_run_defaults();
    char *command_line = join_command_line(argc, argv);   /* before getopt permutes argv */
    int code = parse_arguments(argc, argv, &c);
    if (code != EXIT_OK) {
        free(command_line);
        return code;
    }
    if (c.help || c.version) {
        free(command_line);
        if (c.help)
            for (size_t i = 0; i < sizeof usage_text / sizeof usage_text[0]; i++)
                fputs(usage_text[i], stdout);
        else
            printf("attnrun %s\n", ATTN_VERSION);
        return cli_finish_stdout(EXIT_OK);
    }

    if (command_line == NULL) {
        fprintf(stderr, "attnrun: out of memory\n");
        return EXIT_RUNTIME;
    }
    attn_run_report report;
    progress_line progress;
    progress_start(&progress, !c.quiet && (c.progress || isatty(STDERR_FILENO)),
                   isatty(STDERR_FILENO), &report);
    c.run.command_line = command_line;
    c.run.progress = progress_show;
    c.run.progress_context = &progress;
    bool target_is_input = c.run.in_place || c.run.output == NULL;
    c.run.transaction = process_watch(c.run.input, target_is_input ? c.run.input : c.run.output,
                                      target_is_input);

    attn_error err = {0};
    int status = attn_run(&c.run, &report, &err);
    process_run_ended();
    if (process_progress_line_is_open())
        fputc('\n', stderr);
    free(command_line);
    if (status != ATTN_OK) {
        if (progress.failure != 0)
            fprintf(stderr, "attnrun: cannot report progress on standard error: %s\n",
                    strerror(progress.failure));
        else
            fprintf(stderr, "attnrun: %s%s\n", err.msg, cli_hint(err.hint));
        return cli_exit_code(status);
    }
    if (c.run.dry_run && c.json)
        plan_json_print(stdout, &c.run, &report);
    else if (c.run.dry_run)
        print_plan(&c.run, &report);
    return cli_finish_stdout(EXIT_OK);
}

int attnrun_main(int argc, char **argv)
{
    /* Under MPI (attnrun-mpi) every rank runs this; rank 0 alone speaks,
     * for all (the others agree with it on how the run went). */
    if (!attn_ranks_start(&argc, &argv)) {
        fprintf(stderr, "attnrun: cannot start MPI\n");
        return EXIT_RUNTIME;
    }
    if (attn_rank() != 0)
        process_silence();
    int code = run_main(argc, argv);
    if (attn_ranks_stranded()) {       /* the shared file cannot be closed */
        fflush(NULL);
        attn_ranks_abort(code);
    }
    attn_ranks_finish();
    return code;
}
