/*
 * options.c - the run command's options, one table (cli/options.h): what
 * each sets in the run's options, how its value is checked, and its line
 * of `attnrun --help`.
 */
#include "attnrun/attnrun.h"

#include "attn_tokens.h"
#include "cli/options.h"

#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define RUN(field) offsetof(attnrun_cli, run.field)

/* Prints `title` (its line), then the names name(0 .. count-1), ", "
 * between, in lines of at most 79 characters. */
static void print_names(FILE *out, const char *title, size_t count, const char *(*name)(size_t))
{
    size_t column = 1;
    fprintf(out, "%s\n ", title);
    for (size_t i = 0; i < count; i++) {
        const char *word = name(i);
        if (column + strlen(word) + 2 > 79) {
            fputs("\n ", out);
            column = 1;
        }
        column += (size_t)fprintf(out, " %s%s", word, i + 1 < count ? "," : "");
    }
    fputc('\n', out);
}

static const char *preset_name(size_t i) { return attn_preset_at(i)->name; }
static const char *output_name(size_t i) { return attn_output_name((attn_output)i); }

/* --kv, --wq, ...: the dataset of an input (the row's .first is the
 * input, attn_input). */
static int parse_dataset(void *settings, const cli_option *option, const char *name,
                         const char *value)
{
    attnrun_cli *c = settings;
    const attn_input which = (attn_input)option->first;
    if (value[0] == '\0')
        return cli_usage_error("%s '': expected a dataset name", name);
    if (strcmp(value, "none") == 0 && !attn_input_spec_of(which)->optional)
        return cli_usage_error("%s none: only a bias can be left out", name);
    c->run.names[which] = value;
    return EXIT_OK;
}

/* "; did you mean NAME?" for the name(0 .. count-1) nearest to value
 * (cli_nearest), or "". */
static const char *did_you_mean(const char *value, size_t count, const char *(*name)(size_t))
{
    static char text[128];
    const char *names[64];
    for (size_t i = 0; i < count && i < sizeof names / sizeof names[0]; i++)
        names[i] = name(i);
    const char *near = cli_nearest(value, names, count < 64 ? count : 64);
    if (near == NULL)
        return "";
    snprintf(text, sizeof text, "; did you mean %s?", near);
    return text;
}

static const char *split_name(size_t i) { return attn_qkv_split_name((attn_qkv_split)i); }

static int parse_qkv_split(void *settings, const cli_option *option, const char *name,
                           const char *value)
{
    attnrun_cli *c = settings;
    (void)option;
    for (int split = 0; split < ATTN_QKV_SPLIT_COUNT; split++)
        if (strcmp(value, attn_qkv_split_name((attn_qkv_split)split)) == 0) {
            c->run.qkv_heads = split == ATTN_QKV_HEADS;
            return EXIT_OK;
        }
    return cli_usage_error("%s '%s': expected blocks ([Q;K;V]) or heads (per head [q|k|v])%s",
                           name, value, did_you_mean(value, ATTN_QKV_SPLIT_COUNT, split_name));
}

static int parse_preset(void *settings, const cli_option *option, const char *name,
                        const char *value)
{
    attnrun_cli *c = settings;
    (void)option;
    if (attn_preset_find(value) == NULL)
        return cli_usage_error("%s '%s': unknown (choose from %s)%s", name, value,
                               attn_preset_list(),
                               did_you_mean(value, attn_preset_count(), preset_name));
    c->run.preset = value;
    return EXIT_OK;
}

static int parse_rope_dim(void *settings, const cli_option *option, const char *name,
                          const char *value)
{
    attnrun_cli *c = settings;
    size_t dim;
    (void)option;
    if (!cli_parse_number(value, 1u << 20, &dim, NULL) || dim < 2 || dim % 2 != 0)
        return cli_usage_error("%s '%s': expected an even number of features from 2", name,
                               value);
    c->run.variant.rope.dim = dim;
    return EXIT_OK;
}

/* --tokens and --kv-tokens: a dataset, or OBJECT@ATTRIBUTE (the row's
 * .first: 1 for the keys of --kv). */
static int parse_tokens(void *settings, const cli_option *option, const char *name,
                        const char *value)
{
    attnrun_cli *c = settings;
    attn_error err;
    if (attn_token_source_parse(value, NULL, &err) != ATTN_OK)
        return cli_usage_error("%s %s", name, err.msg);
    *(option->first ? &c->run.kv_tokens : &c->run.tokens) = value;
    return EXIT_OK;
}

static int parse_save(void *settings, const cli_option *option, const char *name,
                      const char *value)
{
    attnrun_cli *c = settings;
    attn_error err;
    (void)option;
    if (attn_parse_save_list(value, &c->run.save, &err) == ATTN_OK)
        return EXIT_OK;
    /* the first name of the list that is no output's */
    const char *unknown = "";
    char word[128];
    for (const char *p = value;; p += strcspn(p, ",") + 1) {
        snprintf(word, sizeof word, "%.*s", (int)strcspn(p, ","), p);
        bool known = false;
        for (size_t i = 0; i < ATTN_OUT_COUNT; i++)
            known = known || strcmp(word, output_name(i)) == 0;
        if (!known) {
            unknown = word;
            break;
        }
        if (p[strcspn(p, ",")] == '\0')
            break;
    }
    return cli_usage_error("%s: %s%s", name, err.msg,
                           did_you_mean(unknown, ATTN_OUT_COUNT, output_name));
}

static int parse_expect(void *settings, const cli_option *option, const char *name,
                        const char *value)
{
    attnrun_cli *c = settings;
    (void)option;
    (void)name;
    return expect_parse(&c->expect, value);
}

/* The names of the choices, as the library names them. */
static const char *layout_name(int v) { return attn_weight_layout_name((attn_weight_layout)v); }
static const char *rope_style_name(int v) { return attn_rope_style_name((attn_rope_style)v); }
static const char *precision_name(int v) { return attn_precision_name((attn_precision)v); }
static const char *store_name(int v) { return attn_store_name((attn_store)v); }

#define DATASET(long_name, input, text)                                         \
    {long_name, 0, CLI_CUSTOM, 0, .first = input, .parse = parse_dataset, .value = "NAME",   \
     .help = text}

static const cli_option options[] = {
    {"output", 'o', CLI_TEXT, RUN(output), .value = "OUT", .section = "Output",
     .help = "write a new file OUT (atomically: all or nothing)"},
    {"in-place", 0, CLI_FLAG, RUN(in_place),
     .help = "add the results to IN under --group (IN is replaced\n"
             "whole by an updated copy only when everything worked)"},
    {"group", 0, CLI_TEXT, RUN(group), .value = "PATH", .help = "group for the results (default /)"},
    {"append", 0, CLI_FLAG, RUN(append),
     .help = "add the results to the results file OUT as --group\n"
             "(one file for a whole model; see docs/append.md)"},
    {"save", 0, CLI_CUSTOM, 0, .parse = parse_save, .value = "LIST",
     .help = "the outputs to write, comma separated (see below;\n"
             "default scores,weights,heads,output)"},
    {"precision", 0, CLI_CHOICE, RUN(precision), .choice = precision_name, .first = ATTN_F32,
     .last = ATTN_F64, .value = "P", .expected = "f32 or f64",
     .help = "f32 (default) or f64: computed and stored type"},
    {"store", 0, CLI_CHOICE, RUN(store), .choice = store_name, .first = ATTN_STORE_F16,
     .last = ATTN_STORE_F64, .value = "T", .expected = "f16, bf16, f32 or f64",
     .help = "f16, bf16, f32 or f64: stored type of scores and weights\n"
             "(default: the precision's; values round to nearest even)"},
    {"compress", 0, CLI_INT, RUN(compress), .min = 0, .max = 9, .value = "N",
     .expected = "a level from 0 to 9",
     .help = "0-9: shuffle + deflate level for every output (default 0)"},
    {"force", 0, CLI_FLAG, RUN(force),
     .help = "replace an existing OUT, or existing names in --group"},
    {"expect", 0, CLI_CUSTOM, 0, .parse = parse_expect, .value = "OUT=DATASET,...",
     .help = "compare each output OUT (saved) with DATASET of IN;\n"
             "beyond the tolerance: exit 4, and the convention that\n"
             "explains the difference named (docs/running.md)"},
    {"expect-tol", 0, CLI_REAL, offsetof(attnrun_cli, expect.tol), .min = 0, .value = "T",
     .expected = "a finite positive number",
     .help = "largest |a - b| / max(1, |b|) --expect accepts\n"
             "(default 1e-5; 1e-10 for f64 against float64 values)"},

    {"heads", 'H', CLI_COUNT, RUN(heads), .min = 1, .max = 1u << 20, .value = "N",
     .expected = "a whole number from 1 to 1048576", .section = "Attention",
     .help = "number of heads (required for packed 2-D weights)"},
    {"causal", 'c', CLI_FLAG, RUN(variant.causal), .help = "hide key k from query q when k > q"},
    {"scale", 0, CLI_REAL, RUN(variant.scale), .min = 0, .value = "S",
     .expected = "a finite positive number", .help = "multiply Q K^T by S instead of 1/sqrt(d_k)"},
    DATASET("kv", ATTN_IN_KV, "cross-attention: keys and values from dataset NAME"),
    DATASET("mask", ATTN_IN_MASK, "key padding mask (B, m) or (m): nonzero = may attend"),
    {"mask-invert", 0, CLI_FLAG, RUN(mask_invert),
     .help = "the mask's nonzero entries are the masked keys (torch\nkey_padding_mask)"},
    {"kv-heads", 0, CLI_COUNT, RUN(kv_heads), .min = 1, .max = 1u << 20, .value = "G",
     .expected = "a whole number from 1 to 1048576",
     .help = "K/V heads shared by H/G query heads each (GQA, MQA;\n"
             "default: from the K weight's shape)"},
    {"window", 0, CLI_COUNT, RUN(variant.window), .min = 1, .value = "W",
     .expected = "a whole number of keys from 1", .help = "sliding window: query q sees keys k > q - W"},
    {"softcap", 0, CLI_REAL, RUN(variant.softcap), .min = 0, .value = "C",
     .expected = "a finite positive number", .help = "logits become C tanh(logit / C) (Gemma 2)"},
    {"alibi", 0, CLI_FLAG, RUN(alibi), .help = "add ALiBi biases slope_h (pos_k - pos_q) (BLOOM)"},
    DATASET("alibi-slopes", ATTN_IN_ALIBI_SLOPES, "(H) slopes instead of the standard ones"),
    DATASET("attn-bias", ATTN_IN_ATTN_BIAS, "add a float dataset (n, m), (H, n, m) or (B, H, n, m)\n"
            "to the logits (H may be 1: every head adds it)"),
    {"rope", 0, CLI_REAL, RUN(variant.rope.theta), .min = 0, .value = "THETA",
     .expected = "RoPE's base theta, a positive number such as 10000",
     .help = "rotary position embeddings of q and k with base THETA"},
    {"rope-dim", 0, CLI_CUSTOM, 0, .parse = parse_rope_dim, .value = "R",
     .help = "rotate the first R features of each head (default d_k)"},
    {"rope-style", 0, CLI_CHOICE, RUN(variant.rope.style), .choice = rope_style_name,
     .first = ATTN_ROPE_NEOX, .last = ATTN_ROPE_GPTJ, .value = "S",
     .expected = "neox (halves) or gptj (adjacent pairs)",
     .help = "neox (halves, default) or gptj (adjacent pairs)"},
    DATASET("positions", ATTN_IN_POSITIONS, "integer positions (n) or (B, n) of the queries"),
    DATASET("kv-positions", ATTN_IN_KV_POSITIONS, "the same for the keys of --kv (default 0..m-1)"),
    DATASET("q-norm", ATTN_IN_Q_NORM, "RMSNorm weights (d_k) of each head's q"),
    DATASET("k-norm", ATTN_IN_K_NORM, "RMSNorm weights (d_k) of each head's k"),
    {"norm-eps", 0, CLI_REAL_FROM, RUN(variant.norm_eps), .min = 0, .value = "E",
     .expected = "a small non-negative number such as 1e-6",
     .help = "their epsilon (default 1e-6)"},

    {"preset", 0, CLI_CUSTOM, 0, .parse = parse_preset, .value = "NAME", .section = "Weights",
     .help = "a model family's names and semantics (see below)"},
    {"weights-group", 0, CLI_GROUP, RUN(weights_group), .value = "PATH",
     .expected = "an absolute group path such as /layer0/attn",
     .help = "look weight names up under PATH"},
    {"layout", 0, CLI_CHOICE, RUN(layout), .choice = layout_name, .first = ATTN_LAYOUT_XW,
     .last = ATTN_LAYOUT_LINEAR, .value = "L",
     .expected = "xw (x W) or linear (x W^T, torch.nn.Linear)",
     .help = "xw (x W, default) or linear (x W^T, torch.nn.Linear)"},
    DATASET("wqkv", ATTN_IN_WQKV, "fused Q|K|V weights"),
    DATASET("bqkv", ATTN_IN_BQKV, "fused Q|K|V bias"),
    {"qkv-split", 0, CLI_CUSTOM, 0, .parse = parse_qkv_split, .value = "S",
     .help = "blocks ([Q K V], default) or heads (per head [q|k|v])"},

    {"x", 0, CLI_CUSTOM, 0, .first = ATTN_IN_X, .parse = parse_dataset, .value = "NAME",
     .help = "queries (default X)",
     .section = "Input dataset names (paths inside groups allowed; 'none' ignores a bias)"},
    DATASET("wq", ATTN_IN_WQ, "query weights (default W_Q)"),
    DATASET("wk", ATTN_IN_WK, "key weights (default W_K)"),
    DATASET("wv", ATTN_IN_WV, "value weights (default W_V)"),
    DATASET("wo", ATTN_IN_WO, "output weights (default W_O)"),
    DATASET("bq", ATTN_IN_BQ, "query bias (default b_Q, used when present)"),
    DATASET("bk", ATTN_IN_BK, "key bias (default b_K, used when present)"),
    DATASET("bv", ATTN_IN_BV, "value bias (default b_V, used when present)"),
    DATASET("bo", ATTN_IN_BO, "output bias (default b_O, used when present)"),
    {"tokens", 0, CLI_CUSTOM, 0, .parse = parse_tokens, .first = 0, .value = "NAME",
     .help = "strings (n) or (B, n) labelling the queries (and the keys\n"
             "of self-attention), stored as query_token and key_token;\n"
             "OBJECT@ATTR names a string-array attribute (@ATTR: root's)"},
    {"kv-tokens", 0, CLI_CUSTOM, 0, .parse = parse_tokens, .first = 1, .value = "NAME",
     .help = "the same, (m) or (B, m), for the keys of --kv"},

    {"dry-run", 0, CLI_FLAG, RUN(dry_run), .section = "Running",
     .help = "print shapes, FLOPs and output bytes; write nothing"},
    {"json", 0, CLI_FLAG, offsetof(attnrun_cli, json),
     .help = "with --dry-run: the plan as one JSON object on stdout"},
    {"threads", 0, CLI_INT, RUN(threads), .min = 1, .value = "N",
     .expected = "a whole number from 1",
     .help = "compute threads (default: all cores; at most 4 per core);\n"
             "the results are the same for every N"},
    {"batch-slice", 0, CLI_COUNT, RUN(slice_items), .min = 1, .value = "N",
     .expected = "a whole number from 1",
     .help = "batch items per slice (default: sized for the threads)"},
    {"memory", 0, CLI_SIZE, RUN(memory_budget), .value = "SIZE",
     .expected = "a size such as 512K, 256M or 2G",
     .help = "cap on what the steps hold at once, e.g. 256M or 2G: two\n"
             "steps, one computed, one written (default 256M per thread,\n"
             "at most 1/4 of RAM)"},
    {"allow-nonfinite", 0, CLI_FLAG, RUN(allow_nonfinite),
     .help = "accept NaN and infinities in the inputs"},
    {"allow-external", 0, CLI_FLAG, RUN(allow_external),
     .help = "follow external links, external raw storage and\n"
             "virtual datasets (other files: only if you trust them)"},
    {"allow-plugins", 0, CLI_FLAG, RUN(allow_plugins),
     .help = "let HDF5 load filter plugins (HDF5_PLUGIN_PATH)"},
    {"wait", 0, CLI_FLAG, RUN(wait),
     .help = "wait while another program holds IN's lock (an HDF5\n"
             "writer, another attnrun --in-place) instead of failing"},
    {"progress", 0, CLI_FLAG, offsetof(attnrun_cli, progress),
     .help = "report progress on stderr (default: when it is a terminal)"},
    {"quiet", 'q', CLI_FLAG, offsetof(attnrun_cli, quiet), .help = "no progress"},
    {"help", 'h', CLI_FLAG, offsetof(attnrun_cli, help), .help = "this help"},
    {"version", 'V', CLI_FLAG, offsetof(attnrun_cli, version), .help = "version"},
    {NULL},
};

int attnrun_parse_options(int argc, char **argv, attnrun_cli *c)
{
    cli_set_command("attnrun", "attnrun --help");
    return cli_parse(options, argc, argv, c);
}

void attnrun_print_usage(FILE *out)
{
    fputs("Usage: attnrun [OPTIONS] IN.h5 (-o OUT.h5 | --in-place)\n"
          "       attnrun plot OUT.h5 -o FILE.png|.svg|.pdf [OPTIONS]  (see attnrun plot --help)\n"
          "       attnrun rollout OUT.h5 -o ROLLOUT.h5 [OPTIONS]  (see attnrun rollout --help)\n"
          "       attnrun flow OUT.h5 -o FLOW.h5 [OPTIONS]  (see attnrun flow --help)\n"
          "       attnrun heads OUT.h5 [-o CENSUS.h5] [OPTIONS]  (see attnrun heads --help)\n"
          "       attnrun view OUT.h5 -o VIEW.html [OPTIONS]  (see attnrun view --help)\n"
          "       mpirun ... attnrun-mpi [OPTIONS] IN.h5 -o OUT.h5  (the MPI build, make MPI=1)\n"
          "\n"
          "Multi-head scaled dot-product attention for every sequence of a batch stored\n"
          "in IN.h5; writes scores, weights, heads and output as HDF5 datasets.\n"
          "\n", out);
    cli_print_options(options, out);
    print_names(out, "\nOutputs (--save):", ATTN_OUT_COUNT, output_name);
    print_names(out, "\nPresets (--preset):", attn_preset_count(), preset_name);
    fputs("\n"
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
          "  attnrun rollout results.h5 -o rollout.h5\n"
          "  attnrun flow results.h5 -o flow.h5\n"
          "  attnrun heads results.h5 -o census.h5 >census.csv\n"
          "  h5dump -d /weights -s 0,0,0,0 -c 1,1,4,4 out.h5\n"
          "\n"
          "Exit status: 0 success, 1 runtime or I/O failure (or interrupted),\n"
          "2 usage error, 3 input rejected.\n", out);
}
