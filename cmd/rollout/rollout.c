/*
 * rollout.c - the command lines of `attnrun rollout` and `attnrun flow`
 * (rollout.h): options, messages, exit codes, and the output file -- its
 * datasets, their axes and labels, its attributes -- written to a
 * temporary file renamed into place (attn_atomic.h), so that OUT is whole
 * or absent.
 *
 * Legend: B items, L layers, n tokens.
 */
#define _GNU_SOURCE
#include "rollout/rollout.h"
#include "cli/cli.h"

#include "attn_atomic.h"
#include "attn_threads.h"
#include "cli/process.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The exit statuses of both commands. */
#define EXIT_STATUS_TEXT                                                                      \
    "Exit status: 0 success, 1 runtime or I/O failure (or interrupted, or the\n"              \
    "working set over --memory), 2 usage error (OUT exists without --force, a\n"             \
    "bad option), 3 input rejected (missing file or group, no weights, layers\n"             \
    "that differ in shape or tokens, cross-attention, a negative or non-finite\n"            \
    "weight for the flow).\n"

/* The help text, in parts (each within what C compilers must support). */
static const char *const rollout_usage[] = {
    "Usage: attnrun rollout RESULTS.h5 -o OUT.h5 [OPTIONS]\n"
    "\n"
    "Attention rollout (Abnar & Zuidema 2020, \"Quantifying Attention Flow in\n"
    "Transformers\") through the layers of RESULTS.h5, item by item: how much\n"
    "each position draws on each input token through the layers, attention and\n"
    "residual connections both.  With W_l the mean over the heads of layer l's\n"
    "attention weights (n, n) and R the --residual share:\n"
    "\n"
    "    A_l = rownorm((1 - R) W_l + R I)     (each row divided by its sum)\n"
    "    rollout_1 = A_1,  rollout_l = A_l rollout_(l-1)\n"
    "\n"
    "The layers are the groups of a results file of --append in the order they\n"
    "were appended (of another results file: by name, /layer10 before /layer2)\n"
    "that hold weights or mean; --groups names them in an order of your choice\n"
    "(any groups holding either).  A layer's mean (--save mean) is used in place\n"
    "of its weights.  A row summing to 0 (a query that sees no key, with\n"
    "--residual 0) stays 0.  The layers must share their items, queries and\n"
    "tokens, and be self-attention (square maps).\n"
    "\n",
    /* ... the options (the table below), then: */
    "\n"
    "OUT.h5 holds, computed in float64 and stored as float32:\n"
    "  rollout       (batch, layer, query, key): at layer index l the rollout\n"
    "                through the first l + 1 layers\n"
    "  layer_group   (layer): each layer's group, in order\n"
    "  query_token, key_token   the layers' tokens, when they carry them\n"
    "and the attributes attnrun_version, attnrun_analysis (\"rollout\"),\n"
    "residual and source (RESULTS.h5 as given).  It holds three (n, n) float64\n"
    "matrices and one (n, n) float32 map at a time, whatever the items and\n"
    "layers; over --memory it stops before writing anything.\n"
    "\n"
    "Examples:\n"
    "  attnrun in.h5 -o results.h5 --append --group /layer0 --heads 12 --save weights\n"
    "  attnrun rollout results.h5 -o rollout.h5\n"
    "  attnrun rollout results.h5 --groups /layer0,/layer1,/layer2 --residual 0.3 \\\n"
    "          -o rollout.h5\n"
    "\n"
    EXIT_STATUS_TEXT,
};

/* The help text of attnrun flow, in the same parts. */
static const char *const flow_usage[] = {
    "Usage: attnrun flow RESULTS.h5 -o OUT.h5 [OPTIONS]\n"
    "\n"
    "Attention flow (Abnar & Zuidema 2020, \"Quantifying Attention Flow in\n"
    "Transformers\") through the layers of RESULTS.h5, item by item: the layers\n"
    "as a graph with a node per (layer boundary, token) and an edge from key k\n"
    "below layer l to query q above it of capacity A_l[q, k], with\n"
    "\n"
    "    A_l = rownorm((1 - R) W_l + R I)     (as attnrun rollout takes it)\n"
    "\n"
    "and flow[q, j] the value of a maximum flow from input token j below the\n"
    "first layer to position q above the last (or above --to's).  Each is\n"
    "computed exactly in float64 and proved maximal by a cut of the same value.\n"
    "When every layer is causal the flows to earlier positions are 0 and are\n"
    "not searched.  The layers are chosen, read and checked as attnrun rollout\n"
    "does (see attnrun rollout --help).\n"
    "\n",
    "\n"
    "OUT.h5 holds:\n"
    "  flow          (batch, query, key) float64: flow[b, q, j] from input token j\n"
    "                to position q\n"
    "  layer_group   (layer): the layers' groups, in order\n"
    "  query_token, key_token   the layers' tokens, when they carry them\n"
    "and the attributes attnrun_version, attnrun_analysis (\"flow\"), residual,\n"
    "source (RESULTS.h5 as given) and certificate_gap (the largest difference\n"
    "between a flow and its cut).  It holds every layer of one item, its flows\n"
    "and one search of the graph on each thread; over --memory it stops before\n"
    "writing anything.  Progress is reported on stderr when it takes long.\n"
    "\n"
    "Examples:\n"
    "  attnrun flow results.h5 -o flow.h5\n"
    "  attnrun flow results.h5 --to /layer5 --residual 0.3 -o flow.h5\n"
    "\n"
    EXIT_STATUS_TEXT,
};

/* What the output's datasets say of themselves. */
#define FLOW_DESCRIPTION                                                                      \
    "attention flow (Abnar & Zuidema 2020): flow[b, q, j] is the value of a maximum flow "   \
    "from input token j below the first layer to position q above the last, through edges " \
    "of capacity A_l[q, k] with A = rownorm((1 - residual) mean over heads of the weights " \
    "+ residual I)"
#define ROLLOUT_DESCRIPTION                                                                   \
    "attention rollout (Abnar & Zuidema 2020): at layer index l, A_l ... A_1 A_0 with "      \
    "A = rownorm((1 - residual) mean over heads of the weights + residual I); a row of A "   \
    "summing to 0 stays 0"
#define LAYER_DESCRIPTION "the results group of each layer, in the order rolled out"
static const char *const token_descriptions[2] = {
    "the token of each query (UTF-8 text), a coordinate of the results",
    "the token of each key (UTF-8 text), a coordinate of the results",
};

/* The output's axes: rollout's, of which flow has all but the layer. */
static const char *const axes[4] = {"batch", "layer", "query", "key"};

typedef struct rollout_cli {
    rollout_request rq;
    const char *output;
    int threads;                  /* flow's --threads, 0: attn_threads()   */
    bool force, help;
} rollout_cli;

/* --groups LIST: absolute group paths separated by commas, into
 * rq.groups (owned). */
static int parse_groups(void *settings, const cli_option *option, const char *name,
                        const char *text)
{
    rollout_cli *c = settings;
    (void)option;
    return cli_parse_groups(name, text, false, &c->rq.groups, &c->rq.group_count);
}

/* --residual R: a number from 0 to 1. */
static int parse_residual(void *settings, const cli_option *option, const char *name,
                          const char *text)
{
    rollout_cli *c = settings;
    (void)option;
    if (!cli_parse_real(text, &c->rq.residual) || !(c->rq.residual >= 0 && c->rq.residual <= 1))
        return cli_usage_error("%s '%s': expected a number from 0 to 1", name, text);
    return EXIT_OK;
}

/* --to GROUP: an absolute group path. */
static int parse_to(void *settings, const cli_option *option, const char *name,
                    const char *text)
{
    rollout_cli *c = settings;
    (void)option;
    if (text[0] != '/')
        return cli_usage_error("%s '%s': expected a group's absolute path, e.g. /layer5", name,
                               text);
    c->rq.to = text;
    return EXIT_OK;
}

#define ROLLOUT(field) offsetof(rollout_cli, field)

/* The options both commands take, the table of each ending with its own. */
#define WHOLE_MODEL_OPTIONS(analysis)                                                         \
    {"output", 'o', CLI_TEXT, ROLLOUT(output), .value = "OUT", .section = "Options",          \
     .help = "the file to write (atomically: all or nothing)"},                               \
    {"groups", 0, CLI_CUSTOM, 0, .parse = parse_groups, .value = "LIST",                      \
     .help = "the layers' groups in order, comma separated, e.g.\n"                          \
             "/layer0,/layer1 (default: the file's groups holding\n"                         \
             "weights or mean, in the order appended)"},                                      \
    {"to", 0, CLI_CUSTOM, 0, .parse = parse_to, .value = "GROUP",                             \
     .help = "the last layer " analysis " (default: the\n"                                   \
             "last of the layers)"},                                                          \
    {"residual", 0, CLI_CUSTOM, 0, .parse = parse_residual, .value = "R",                     \
     .help = "the residual connection's share, from 0 (attention\n"                          \
             "alone) to 1 (the identity) (default 0.5)"},                                     \
    {"memory", 0, CLI_SIZE, ROLLOUT(rq.memory), .value = "SIZE",                              \
     .expected = "a size such as 512K, 256M or 2G",                                           \
     .help = "cap on the working set (below), e.g. 512M or 4G\n"                             \
             "(default: half the physical memory)"},                                          \
    {"force", 0, CLI_FLAG, ROLLOUT(force),                                                    \
     .help = "replace an existing OUT (a file, never a directory)"}

/* ... and the last of each table. */
#define WHOLE_MODEL_LAST_OPTIONS(said)                                                        \
    {"quiet", 'q', CLI_FLAG, ROLLOUT(rq.quiet), .help = said},                                \
    {"help", 'h', CLI_FLAG, ROLLOUT(help), .help = "this help"},                              \
    {NULL}

/* The options of attnrun rollout. */
static const cli_option rollout_options[] = {
    WHOLE_MODEL_OPTIONS("to roll out"),
    WHOLE_MODEL_LAST_OPTIONS("no warnings"),
};

/* The options of attnrun flow. */
static const cli_option flow_options[] = {
    WHOLE_MODEL_OPTIONS("the flow goes through"),
    {"threads", 0, CLI_INT, ROLLOUT(threads), .min = 1, .value = "N",
     .expected = "a whole number from 1",
     .help = "threads searching the pairs (default: all cores);\n"
             "the flows are the same for every N"},
    WHOLE_MODEL_LAST_OPTIONS("no warnings, no progress"),
};

/* What tells the two commands apart on the command line. */
static const struct {
    const char *name;
    const char *const *usage;
    const cli_option *options;
} commands[] = {
    [ROLLOUT_ROLLOUT] = {"rollout", rollout_usage, rollout_options},
    [ROLLOUT_FLOW] = {"flow", flow_usage, flow_options},
};

/* Half the physical memory; SIZE_MAX when the system does not say. */
static size_t default_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    size_t bytes;
    if (pages <= 0 || size <= 0 || !attn_size_mul(&bytes, (size_t)pages / 2, (size_t)size))
        return SIZE_MAX;
    return bytes;
}

static int parse_arguments(int argc, char **argv, rollout_cli *c)
{
    int code = cli_parse(commands[c->rq.analysis].options, argc, argv, c);
    if (code != EXIT_OK)
        return code;
    if (c->help)
        return EXIT_OK;
    if ((code = cli_results_file(argc, argv, &c->rq.input)) != EXIT_OK)
        return code;
    if (c->output == NULL || c->output[0] == '\0')
        return cli_usage_error("no file to write: give -o OUT.h5");
    return cli_check_output(c->output, c->rq.input, c->force, commands[c->rq.analysis].name);
}

static int print_help(rollout_analysis analysis)
{
    fputs(commands[analysis].usage[0], stdout);
    cli_print_options(commands[analysis].options, stdout);
    fputs(commands[analysis].usage[1], stdout);
    return cli_finish_stdout(EXIT_OK);
}

/* The tokens of axis i (0 queries, 1 keys): (n) or (B, n), and the names
 * of the coordinates of the map appended to coordinates. */
static int add_tokens(const rollout_plan *plan, rollout_output *o, size_t i, char *coordinates,
                      size_t len, attn_error *err)
{
    const rollout_tokens *t = &plan->tokens[i];
    if (!t->present)
        return ATTN_OK;
    const size_t dims[2] = {plan->batch, plan->n};
    const char *const along[2] = {axes[0], axes[2 + i]};
    const size_t at = 2 - t->rank;                  /* (n): the last axis alone */
    size_t used = strlen(coordinates);
    snprintf(coordinates + used, len - used, "%s%s", used > 0 ? " " : "", t->name);
    return attn_results_add_labels(o->out, t->name, t->rank, dims + at, along + at,
                                   token_descriptions[i], &o->tokens[i], err);
}

/* The output's map: rollout (B, L, n, n) stored as float32, or flow
 * (B, n, n) as float64 (its exactness is its point). */
static int add_map(const rollout_cli *c, const rollout_plan *plan, rollout_output *o,
                   attn_error *err)
{
    const size_t dims[4] = {plan->batch, plan->layer_count, plan->n, plan->n};
    if (c->rq.analysis == ROLLOUT_ROLLOUT)
        return attn_results_add(o->out, "rollout", 4, dims, axes, ATTN_F64, ATTN_STORE_F32,
                                ROLLOUT_DESCRIPTION, &o->map, err);
    const size_t flat[3] = {dims[0], dims[2], dims[3]};
    const char *const along[3] = {axes[0], axes[2], axes[3]};
    return attn_results_add(o->out, "flow", 3, flat, along, ATTN_F64, ATTN_STORE_F64,
                            FLOW_DESCRIPTION, &o->map, err);
}

/* Every dataset and attribute of the output; layer_group written. */
static int describe_output(const rollout_cli *c, const rollout_plan *plan, rollout_output *o,
                           attn_error *err)
{
    const size_t layers = plan->layer_count;
    char coordinates[64] = "";                  /* flow has no layer axis */
    if (c->rq.analysis == ROLLOUT_ROLLOUT)
        strcpy(coordinates, "layer_group");
    int groups = -1;
    int status = add_map(c, plan, o, err);
    if (status == ATTN_OK)
        status = attn_results_add_labels(o->out, "layer_group", 1, &layers, &axes[1],
                                         LAYER_DESCRIPTION, &groups, err);
    /* in one write: HDF5 clears a conversion buffer of 1 MiB for each */
    const char **names = status == ATTN_OK ? attn_calloc(layers, sizeof *names) : NULL;
    if (status == ATTN_OK && names == NULL)
        status = attn_fail(err, ATTN_ENOMEM, "out of memory");
    for (size_t l = 0; names != NULL && l < layers; l++)
        names[l] = plan->layers[l].group;
    const size_t first = 0;
    if (status == ATTN_OK)
        status = attn_results_write_labels(o->out, groups, &first, &layers, names, err);
    free(names);
    for (size_t i = 0; i < 2 && status == ATTN_OK; i++)
        status = add_tokens(plan, o, i, coordinates, sizeof coordinates, err);
    if (status == ATTN_OK && coordinates[0] != '\0')
        status = attn_results_attribute(o->out, o->map, "coordinates", coordinates, err);
    if (status == ATTN_OK)
        status = attn_results_attribute(o->out, -1, "attnrun_version", ATTN_VERSION, err);
    if (status == ATTN_OK)
        status = attn_results_attribute(o->out, -1, "attnrun_analysis",
                                        commands[c->rq.analysis].name, err);
    if (status == ATTN_OK)
        status = attn_results_attribute_number(o->out, "residual", c->rq.residual, err);
    if (status == ATTN_OK)
        status = attn_results_attribute(o->out, -1, "source", c->rq.input, err);
    return status;
}

/* Writes the output into the transaction's temporary and renames it onto
 * OUT; on any failure the temporary is removed. */
static int write_rollout(attn_atomic *tx, const rollout_cli *c, const rollout_plan *plan,
                         attn_error *err)
{
    int status = attn_atomic_begin(tx, c->output, c->force, err);
    if (status != ATTN_OK)
        return status;
    rollout_output o = {.out = NULL, .map = -1, .tokens = {-1, -1}};
    status = attn_results_create(tx->temp_path, c->output, &o.out, err);
    if (status == ATTN_OK) {
        attn_error late;
        status = describe_output(c, plan, &o, err);
        if (status == ATTN_OK && c->rq.analysis == ROLLOUT_ROLLOUT)
            status = rollout_stream(&c->rq, plan, &o, err);
        if (status == ATTN_OK && c->rq.analysis == ROLLOUT_FLOW &&
            (status = flow_stream(&c->rq, plan, &o, err)) == ATTN_OK)
            status = attn_results_attribute_number(o.out, "certificate_gap", o.gap, err);
        int finished = attn_results_finish(o.out, status == ATTN_OK ? err : &late);
        if (status == ATTN_OK)
            status = finished;
    }
    /* what was read must still be what the file holds (one generation of
     * an index) before the rollout replaces anything */
    if (status == ATTN_OK && (status = attn_atomic_flush(tx, err)) == ATTN_OK &&
        (status = attn_results_file_check(c->rq.file, err)) == ATTN_OK)
        status = attn_atomic_publish(tx, NULL, err);
    if (status != ATTN_OK)
        attn_atomic_abort(tx);
    return status;
}

static void free_request(rollout_cli *c)
{
    cli_free_groups(c->rq.groups, c->rq.group_count);
    c->rq.groups = NULL;
}

int rollout_main(int argc, char **argv)
{
    rollout_cli c;
    memset(&c, 0, sizeof c);
    c.rq.analysis = strcmp(argv[0], "flow") == 0 ? ROLLOUT_FLOW : ROLLOUT_ROLLOUT;
    c.rq.residual = ROLLOUT_RESIDUAL;
    c.rq.memory = default_memory();
    cli_set_command("attnrun", c.rq.analysis == ROLLOUT_FLOW ? "attnrun flow --help"
                                                             : "attnrun rollout --help");
    int code = parse_arguments(argc, argv, &c);
    if (code != EXIT_OK || c.help) {
        free_request(&c);
        return code != EXIT_OK ? code : print_help(c.rq.analysis);
    }
    if (c.threads > 0)
        attn_set_threads(c.threads < attn_thread_limit() ? c.threads : attn_thread_limit());
    attn_atomic *tx = process_watch(c.rq.input, c.output, false);
    attn_error err = {0};
    rollout_plan plan;
    int status = attn_results_file_open(c.rq.input, &c.rq.file, &err);
    if (status == ATTN_OK)
        status = rollout_plan_layers(&c.rq, &plan, &err);
    const bool planned = status == ATTN_OK;
    if (planned)
        status = write_rollout(tx, &c, &plan, &err);
    process_run_ended();
    if (status != ATTN_OK)
        fprintf(stderr, "attnrun: %s%s\n", err.msg, cli_hint_of(&err));
    else if (plan.skipped > 0 && !c.rq.quiet)
        fprintf(stderr, "attnrun: warning: %s: %zu group%s holding neither weights nor mean "
                "left out of the %s (%s); --groups names the layers\n", c.rq.input,
                plan.skipped, plan.skipped == 1 ? "" : "s", commands[c.rq.analysis].name,
                plan.skipped_names);
    if (planned)
        rollout_plan_free(&plan);
    attn_results_file_close(c.rq.file);
    free_request(&c);
    return cli_exit_code(status);
}
