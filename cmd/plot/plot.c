/*
 * plot.c - the command line of `attnrun plot` (plot.h): options, messages,
 * exit codes, and the picture written to a temporary file renamed into
 * place (attn_atomic.h), so that OUT is never partly written.
 */
#define _GNU_SOURCE
#include "plot/plot.h"
#include "cli/cli.h"

#include "attn_atomic.h"
#include "attn_math.h"
#include "cli/process.h"

#include <assert.h>
#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The help text, in parts (each within what C compilers must support). */
static const char *const plot_usage[] = {
    "Usage: attnrun plot RESULTS.h5 -o FILE.png|FILE.svg|FILE.pdf [OPTIONS]\n"
    "\n"
    "Draws the attention maps a run of attnrun saved in RESULTS.h5 as a grid of\n"
    "heat maps, one per head: queries top down, keys left to right, one block of\n"
    "equal pixels per value (no smoothing), a colour bar with its range, masked\n"
    "(-inf) and NaN values in colours of their own, and the tokens on the axes\n"
    "when the results hold them (query_token, key_token).  A file of attnrun\n"
    "rollout is drawn one panel per layer, one of attnrun flow as one map per\n"
    "item; a census of attnrun heads as one grid\n"
    "of layers by heads per score, each with a colour bar of its own.  The\n"
    "format follows FILE's extension.\n"
    "\n",
    /* ... the options (the table below), then: */
    "\n"
    "Colours: viridis, from the bottom of the scale (dark violet) to its top\n"
    "(yellow).  Weights, norms, mean, value_norm, rollout and flow are scaled\n"
    "from 0 to the largest value drawn; scores, entropy and distance from\n"
    "their smallest to their largest finite value; a census's entropy and\n"
    "distance from 0, its other scores from 0 to 1.  --color sqrt places a value at the\n"
    "square root of its linear position; --color log spans the decades from\n"
    "the largest value down to the smallest positive one, at most 6 of them\n"
    "(smaller values and 0 take the bottom colour), and is refused for maps\n"
    "with negative values.  The colour bar states the range and the scale.\n"
    "-inf is light grey, +inf red, NaN magenta.  Maps longer than 512 along an\n"
    "axis are max-pooled to at most 512 cells (each cell the largest of its\n"
    "values; -inf only when all of them are); the picture states the factor.\n"
    "\n"
    "Examples:\n"
    "  attnrun in.h5 -o out.h5 --heads 12 --causal\n"
    "  attnrun plot out.h5 -o weights.png\n"
    "  attnrun plot out.h5 --what scores --heads 0-3 --item 2 -o scores.pdf\n"
    "  attnrun plot model.h5 --group /layer3/results --heads 5 -o layer3-head5.svg\n"
    "  attnrun plot out.h5 --queries 0-63 --keys 0-63 --color sqrt -o zoom.png\n"
    "  attnrun plot census.h5 -o census.png\n"
    "\n"
    "Exit status: 0 success, 1 runtime or I/O failure (or interrupted),\n"
    "2 usage error (FILE exists without --force, unknown extension, an option\n"
    "that does not apply to what the file holds, --color log on negative\n"
    "values), 3 input rejected (missing file, group or dataset, --item,\n"
    "--heads, --queries or --keys outside it).\n",
};

/* The axes a panel's rows and columns can be. */
static const plot_axis_spec axis_table[PLOT_AXIS_COUNT] = {
    [PLOT_QUERY] = {"query", "queries", "query_token", "--queries"},
    [PLOT_KEY] = {"key", "keys", "key_token", "--keys"},
    [PLOT_HEAD] = {"head", "heads", NULL, NULL},
    [PLOT_LAYER] = {"layer", "layers", "layer_group", NULL},
};

/* The layouts of panels: how a dataset's axes make them. */
static const plot_panels_spec panels_table[PLOT_PANELS_COUNT] = {
    [PLOT_PER_HEAD] = {true, PLOT_LEAD_PANEL, PLOT_HEAD, PLOT_QUERY, PLOT_KEY,
                       "(B, H, n, m) or (H, n, m)", "its panels are heads"},
    [PLOT_PER_LAYER] = {true, PLOT_LEAD_PANEL, PLOT_LAYER, PLOT_QUERY, PLOT_KEY,
                        "(B, L, n, n) or (L, n, n)",
                        "its panels are layers, every one drawn (--queries and --keys zoom them)"},
    [PLOT_ONE_MAP] = {true, PLOT_LEAD_NONE, PLOT_HEAD, PLOT_QUERY, PLOT_KEY,
                      "(B, n, m) or (n, m)",
                      "it is one map, the mean over the heads (--queries and --keys zoom it)"},
    [PLOT_HEADS_BY_QUERIES] = {true, PLOT_LEAD_ROW, PLOT_HEAD, PLOT_HEAD, PLOT_QUERY,
                               "(B, H, n) or (H, n)",
                               "its map is heads by queries (--heads and --queries choose them)"},
    [PLOT_HEADS_BY_KEYS] = {true, PLOT_LEAD_ROW, PLOT_HEAD, PLOT_HEAD, PLOT_KEY,
                            "(B, H, m) or (H, m)",
                            "its map is heads by keys (--heads and --keys choose them)"},
    [PLOT_GRID] = {false, PLOT_LEAD_NONE, PLOT_HEAD, PLOT_LAYER, PLOT_HEAD, "(L, H)",
                   "it draws every layer and head of its grids (--what picks one grid)"},
};

/* The maps of a results file (attnrun --save) and of a rollout file. */
static const plot_what_spec map_table[PLOT_WHAT_COUNT] = {
    [PLOT_WEIGHTS] = {"weights", PLOT_PER_HEAD, CLI_FROM_ZERO, "weights", "weights",
                      "attnrun saves it by default or with --save weights"},
    [PLOT_SCORES] = {"scores", PLOT_PER_HEAD, CLI_FROM_MIN, "scores", "scores",
                     "attnrun saves it by default or with --save scores"},
    [PLOT_NORMS] = {"norms", PLOT_PER_HEAD, CLI_FROM_ZERO, "norms \xE2\x80\x96\xCE\xB1 f(x)\xE2\x80\x96",
                    "norms \xE2\x80\x96\xCE\xB1 f(x)\xE2\x80\x96",
                    "run attnrun with --save norms to have one"},
    [PLOT_MEAN] = {"mean", PLOT_ONE_MAP, CLI_FROM_ZERO, "mean weights", "mean weights",
                   "run attnrun with --save mean to have one"},
    [PLOT_ENTROPY] = {"entropy", PLOT_HEADS_BY_QUERIES, CLI_FROM_MIN, "entropy (nats)",
                      "entropy (nats)", "run attnrun with --save entropy to have one"},
    [PLOT_DISTANCE] = {"distance", PLOT_HEADS_BY_QUERIES, CLI_FROM_MIN,
                       "mean distance attended (positions)", "distance",
                       "run attnrun with --save distance to have one"},
    [PLOT_VALUE_NORM] = {"value_norm", PLOT_HEADS_BY_KEYS, CLI_FROM_ZERO,
                         "value norms \xE2\x80\x96" "f(x)\xE2\x80\x96", "value norm",
                         "run attnrun with --save value_norm to have one"},
    [PLOT_ROLLOUT] = {"rollout", PLOT_PER_LAYER, CLI_FROM_ZERO, "rollout", "rollout",
                      "attnrun rollout writes it"},
    [PLOT_FLOW] = {"flow", PLOT_ONE_MAP, CLI_FROM_ZERO, "attention flow", "attention flow",
                   "attnrun flow writes it"},
};

/* The grids of a census of attnrun heads, each (L, H): the census's
 * scores (attn_math.h's table names them), how each is drawn. */
static const struct grid_row {
    attn_census_kind kind;
    cli_from from;
    const char *title;
} grid_rows[] = {
    {ATTN_CENSUS_ENTROPY, CLI_FROM_ZERO, "entropy (nats)"},
    {ATTN_CENSUS_DISTANCE, CLI_FROM_ZERO, "distance (positions)"},
    {ATTN_CENSUS_FIRST, CLI_FROM_UNIT, "first: weight on key 0"},
    {ATTN_CENSUS_PREVIOUS, CLI_FROM_UNIT, "previous: weight on key q\xE2\x88\x92" "1"},
    {ATTN_CENSUS_SELF, CLI_FROM_UNIT, "self: weight on key q"},
    {ATTN_CENSUS_DUPLICATE, CLI_FROM_UNIT, "duplicate: weight on copies"},
    {ATTN_CENSUS_INDUCTION, CLI_FROM_UNIT, "induction: weight after copies"},
};
static_assert(sizeof grid_rows / sizeof grid_rows[0] == ATTN_CENSUS_COUNT,
              "a row for every score of the census");

/* --what's word of each score: the two a map shares, then the rest */
static const plot_what grid_what[ATTN_CENSUS_COUNT] = {
    [ATTN_CENSUS_ENTROPY] = PLOT_ENTROPY, [ATTN_CENSUS_DISTANCE] = PLOT_DISTANCE,
    [ATTN_CENSUS_FIRST] = PLOT_FIRST, [ATTN_CENSUS_PREVIOUS] = PLOT_PREVIOUS,
    [ATTN_CENSUS_SELF] = PLOT_SELF, [ATTN_CENSUS_DUPLICATE] = PLOT_DUPLICATE,
    [ATTN_CENSUS_INDUCTION] = PLOT_INDUCTION,
};

/* The grids as --what rows, made once from the two tables above. */
static const plot_what_spec *grid_table(void)
{
    static plot_what_spec table[PLOT_WHAT_COUNT];
    static bool made;
    for (size_t i = 0; !made && i < ATTN_CENSUS_COUNT; i++) {
        const struct grid_row *g = &grid_rows[i];
        table[grid_what[g->kind]] = (plot_what_spec){
            attn_census_name(g->kind), PLOT_GRID, g->from, g->title, NULL,
            attn_census_needs_tokens(g->kind) ? "attnrun heads writes it when the results hold tokens"
                                              : "attnrun heads writes it"};
    }
    made = true;
    return table;
}

const plot_axis_spec *plot_axis_of(plot_axis axis)
{
    return &axis_table[axis];
}

const plot_panels_spec *plot_panels_of(plot_panels panels)
{
    return &panels_table[panels];
}

size_t plot_panels_rank(const plot_panels_spec *spec)
{
    /* [batch] [lead] [rows] cols: rows are the lead's indices with PLOT_LEAD_ROW */
    return (size_t)spec->batch + (spec->lead != PLOT_LEAD_NONE) + (spec->lead != PLOT_LEAD_ROW) + 1;
}

const plot_what_spec *plot_map_of(plot_what what)
{
    return map_table[what].name != NULL ? &map_table[what] : NULL;
}

const plot_what_spec *plot_grid_of(plot_what what)
{
    return grid_table()[what].name != NULL ? &grid_table()[what] : NULL;
}

/* Largest head number --heads takes (attnrun's own limit on heads, less one). */
#define MAX_HEAD ((size_t)(1u << 20) - 1)

/* Largest index --queries and --keys take. */
#define MAX_INDEX ((size_t)1 << 48)

typedef struct plot_cli {
    plot_request rq;
    plot_range *ranges;           /* (rq.head_ranges) owned          */
    plot_range zoom[2];           /* --queries, --keys               */
    const char *output;
    plot_format format;
    bool force, help;
} plot_cli;

/* --heads LIST: "3", "0,3,5-7". */
static int parse_heads(const char *name, const char *text, plot_cli *c)
{
    int code = cli_parse_ranges(name, text, MAX_HEAD, "head numbers", &c->ranges,
                                &c->rq.head_ranges);
    c->rq.heads = c->ranges;
    return code;
}

static int parse_heads_option(void *settings, const cli_option *option, const char *name,
                              const char *value)
{
    (void)option;
    return parse_heads(name, value, settings);
}

/* --queries A-B, --keys A-B (the row's .first: 0 queries, 1 keys): the
 * indices A to B, both included, A <= B; "A" alone is A-A. */
static int parse_zoom_option(void *settings, const cli_option *option, const char *name,
                             const char *value)
{
    plot_cli *c = settings;
    plot_range *r = &c->zoom[option->first];
    const char *p = value;
    bool good = cli_parse_number(p, MAX_INDEX, &r->first, &p);
    r->last = r->first;
    if (good && *p == '-')
        good = cli_parse_number(p + 1, MAX_INDEX, &r->last, &p) && r->last >= r->first;
    if (!good || *p != '\0')
        return cli_usage_error("%s '%s': expected a range of indices FIRST-LAST such as 0-63 "
                               "(FIRST <= LAST, both drawn)", name, value);
    if (option->first == 0)
        c->rq.queries = r;
    else
        c->rq.keys = r;
    return EXIT_OK;
}

/* --what's words: a map's, else a census grid's. */
static const char *what_name(int v)
{
    return map_table[v].name != NULL ? map_table[v].name : grid_table()[v].name;
}

#define PLOT(field) offsetof(plot_cli, field)

/* The options of attnrun plot. */
static const cli_option options[] = {
    {"output", 'o', CLI_TEXT, PLOT(output), .value = "FILE", .section = "Options",
     .help = "the picture to write (atomically: all or nothing)"},
    {"group", 0, CLI_GROUP, PLOT(rq.group), .value = "PATH",
     .expected = "an absolute group path such as /layer3",
     .help = "the group holding the results (default /)"},
    {"item", 0, CLI_COUNT, PLOT(rq.item), .value = "B", .expected = "a whole number from 0",
     .help = "the batch item to draw (default 0)"},
    {"heads", 0, CLI_CUSTOM, 0, .parse = parse_heads_option, .value = "LIST",
     .help = "heads to draw, e.g. 0,3,5-7 (default: all)"},
    {"queries", 0, CLI_CUSTOM, 0, .parse = parse_zoom_option, .first = 0, .value = "A-B",
     .help = "draw queries A to B only (both included), labelled\n"
             "with their own indices or tokens; unpooled when\n"
             "they are at most 512"},
    {"keys", 0, CLI_CUSTOM, 0, .parse = parse_zoom_option, .first = 1, .value = "A-B",
     .help = "draw keys A to B only, the same way"},
    {"what", 0, CLI_CHOICE, PLOT(rq.what), .choice = what_name, .first = PLOT_WEIGHTS,
     .last = PLOT_WHAT_COUNT - 1, .value = "W",
     .expected = "weights, scores, norms, mean, entropy, distance, value_norm, rollout, flow, "
                 "first, previous, self, duplicate or induction",
     .help = "the dataset to draw: weights (the default), scores,\n"
             "norms, mean (one map), rollout (a panel per layer;\n"
             "the default for a rollout file), flow (one map; the\n"
             "default for a flow file), or entropy,\n"
             "distance (a map of heads by queries), value_norm\n"
             "(heads by keys); in a census of attnrun heads one\n"
             "grid of entropy, distance, first, previous, self,\n"
             "duplicate, induction (default: every grid)"},
    {"color", 0, CLI_CHOICE, PLOT(rq.scale), .choice = cli_scale_name, .first = CLI_LINEAR,
     .last = CLI_LOG, .value = "S", .expected = "linear, sqrt or log",
     .help = "the colour scale: linear (default), sqrt or log"},
    {"force", 0, CLI_FLAG, PLOT(force),
     .help = "replace an existing FILE (a file, never a directory)"},
    {"help", 'h', CLI_FLAG, PLOT(help), .help = "this help"},
    {NULL},
};

static int parse_arguments(int argc, char **argv, plot_cli *c)
{
    int code = cli_parse(options, argc, argv, c);
    if (code != EXIT_OK)
        return code;
    if (c->help)
        return EXIT_OK;
    if ((code = cli_results_file(argc, argv, &c->rq.input)) != EXIT_OK)
        return code;
    if (c->output == NULL)
        return cli_usage_error("no picture to write: give -o FILE.png, FILE.svg or FILE.pdf");
    if (!plot_format_of(c->output, &c->format))
        return cli_usage_error("-o '%s': the name must end in .png, .svg or .pdf", c->output);
    return cli_check_output(c->output, c->rq.input, c->force, CLI_OUTPUT_PICTURE);
}

static int print_help(void)
{
    fputs(plot_usage[0], stdout);
    cli_print_options(options, stdout);
    fputs(plot_usage[1], stdout);
    return cli_finish_stdout(EXIT_OK);
}

/* The picture, drawn into an open stream (a cli_writer). */
typedef struct picture {
    const plot_data *data;
    plot_format format;
} picture;

static int draw_picture(void *ctx, FILE *out, attn_error *err)
{
    const picture *p = ctx;
    return plot_draw(p->data, p->format, out, err);
}

int plot_main(int argc, char **argv)
{
    plot_cli c;
    memset(&c, 0, sizeof c);
    c.rq.group = "/";
    c.rq.what = PLOT_WHAT_DEFAULT;
    c.rq.scale = CLI_LINEAR;
    cli_set_command("attnrun", "attnrun plot --help");
    int code = parse_arguments(argc, argv, &c);
    if (code != EXIT_OK || c.help) {
        free(c.ranges);
        return code != EXIT_OK ? code : print_help();
    }
    attn_atomic *tx = process_watch(c.rq.input, c.output, false);
    attn_error err = {0};
    plot_data data;
    int status = plot_read(&c.rq, &data, &err);
    picture pic = {&data, c.format};
    if (status == ATTN_OK)
        status = cli_write_output(tx, c.output, c.force, draw_picture, &pic, NULL, &err);
    process_run_ended();
    plot_data_free(&data);
    free(c.ranges);
    if (status != ATTN_OK)
        fprintf(stderr, "attnrun: %s%s\n", err.msg, cli_hint_of(&err));
    return cli_exit_code(status);
}
