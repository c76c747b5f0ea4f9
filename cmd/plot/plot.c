/*
 * plot.c - the command line of `attnrun plot` (plot.h): options, messages,
 * exit codes, and the picture written to a temporary file renamed into
 * place (attn_atomic.h), so that OUT is never partly written.
 */
#define _GNU_SOURCE
#include "plot/plot.h"
#include "cli/cli.h"

#include "attn_atomic.h"
#include "cli/process.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The help text, in parts (each within what C compilers must support). */
static const char *const plot_usage[] = {
    "Usage: attnrun plot RESULTS.h5 -o FILE.png|FILE.svg|FILE.pdf [OPTIONS]\n"
    "\n"
    "Draws the attention maps a run of attnrun saved in RESULTS.h5 as a grid of\n"
    "heat maps, one per head: queries top down, keys left to right, one block of\n"
    "equal pixels per value (no smoothing), a colour bar with its range, masked\n"
    "(-inf) and NaN values in colours of their own, and the tokens on the axes\n"
    "when the results hold them (query_token, key_token).  The format follows\n"
    "FILE's extension.\n"
    "\n",
    /* ... the options (the table below), then: */
    "\n"
    "Colours: viridis, from the bottom of the scale (dark violet) to its top\n"
    "(yellow).  Weights are scaled from 0 to the largest weight drawn, scores\n"
    "and entropy from their smallest to their largest finite value; the colour\n"
    "bar states the range.  -inf is light grey, +inf red, NaN magenta.  Maps\n"
    "longer than 512 along an axis are max-pooled to at most 512 cells (each\n"
    "cell the largest of its values; -inf only when all of them are); the picture\n"
    "states the factor.\n"
    "\n"
    "Examples:\n"
    "  attnrun in.h5 -o out.h5 --heads 12 --causal\n"
    "  attnrun plot out.h5 -o weights.png\n"
    "  attnrun plot out.h5 --what scores --heads 0-3 --item 2 -o scores.pdf\n"
    "  attnrun plot model.h5 --group /layer3/results --heads 5 -o layer3-head5.svg\n"
    "\n"
    "Exit status: 0 success, 1 runtime or I/O failure (or interrupted),\n"
    "2 usage error (FILE exists without --force, unknown extension), 3 input\n"
    "rejected (missing file, group or dataset, --item or --heads outside it).\n",
};

/* The --what table. */
static const plot_what_spec what_table[PLOT_WHAT_COUNT] = {
    [PLOT_WEIGHTS] = {"weights", 4, true, "(B, H, n, m) or (H, n, m)",
                      "weights", "queries", "keys", "query", "key"},
    [PLOT_SCORES] = {"scores", 4, false, "(B, H, n, m) or (H, n, m)",
                     "scores", "queries", "keys", "query", "key"},
    [PLOT_ENTROPY] = {"entropy", 3, false, "(B, H, n) or (H, n)",
                      "entropy (nats)", "heads", "queries", "head", "query"},
};

const plot_what_spec *plot_what_of(plot_what what)
{
    return &what_table[what];
}

/* Largest head number --heads takes (attnrun's own limit on heads, less one). */
#define MAX_HEAD ((size_t)(1u << 20) - 1)

typedef struct plot_cli {
    plot_request rq;
    plot_range *ranges;           /* (rq.head_ranges) owned          */
    const char *output;
    plot_format format;
    bool force, help;
} plot_cli;

/* --heads LIST: "3", "0,3,5-7": numbers and ranges first-last (first <=
 * last), separated by commas.  EXIT_OK, EXIT_USAGE (printed) or
 * EXIT_RUNTIME (out of memory, printed). */
static int parse_heads(const char *name, const char *text, plot_cli *c)
{
    size_t count = 1;
    for (const char *p = text; *p != '\0'; p++)
        count += *p == ',';
    free(c->ranges);
    c->ranges = attn_calloc(count, sizeof c->ranges[0]);    /* (count) */
    if (c->ranges == NULL) {
        fputs("attnrun: out of memory\n", stderr);
        return EXIT_RUNTIME;
    }
    const char *p = text;
    for (size_t i = 0; i < count; i++) {
        plot_range *r = &c->ranges[i];
        bool good = cli_parse_number(p, MAX_HEAD, &r->first, &p);
        r->last = r->first;
        if (good && *p == '-')
            good = cli_parse_number(p + 1, MAX_HEAD, &r->last, &p) && r->last >= r->first;
        if (!good || *p != (i + 1 < count ? ',' : '\0'))
            return cli_usage_error("%s '%s': expected head numbers and ranges such as 0,3,5-7",
                                    name, text);
        p++;
    }
    c->rq.heads = c->ranges;
    c->rq.head_ranges = count;
    return EXIT_OK;
}

static int parse_heads_option(void *settings, const cli_option *option, const char *name,
                              const char *value)
{
    (void)option;
    return parse_heads(name, value, settings);
}

static const char *what_name(int v)
{
    return what_table[v].name;
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
    {"what", 0, CLI_CHOICE, PLOT(rq.what), .choice = what_name, .first = PLOT_WEIGHTS,
     .last = PLOT_ENTROPY, .value = "W", .expected = "weights, scores or entropy",
     .help = "weights (default), scores, or entropy: the entropy\n"
             "dataset (saved by --save entropy) as one map of heads\n"
             "by queries"},
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
    if (optind == argc)
        return cli_usage_error("no results file given");
    if (argc - optind > 1)
        return cli_usage_error("one results file expected, got %d ('%s', '%s' ...)",
                                argc - optind, argv[optind], argv[optind + 1]);
    c->rq.input = argv[optind];
    if (c->output == NULL)
        return cli_usage_error("no picture to write: give -o FILE.png, FILE.svg or FILE.pdf");
    if (!plot_format_of(c->output, &c->format))
        return cli_usage_error("-o '%s': the name must end in .png, .svg or .pdf", c->output);
    if (attn_same_file(c->output, c->rq.input))
        return cli_usage_error("-o '%s' names the results file itself", c->output);
    struct stat st;
    if (lstat(c->output, &st) == 0) {
        if (!c->force)
            return cli_usage_error("%s: output exists; use --force to replace it", c->output);
        if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
            return cli_usage_error("%s: output exists and is not a regular file", c->output);
    }
    return EXIT_OK;
}

static int print_help(void)
{
    fputs(plot_usage[0], stdout);
    cli_print_options(options, stdout);
    fputs(plot_usage[1], stdout);
    return cli_finish_stdout(EXIT_OK);
}

/* Draws into the transaction's temporary and renames it onto the output. */
static int write_picture(attn_atomic *tx, const plot_cli *c, const plot_data *data,
                         attn_error *err)
{
    int status = attn_atomic_begin(tx, c->output, c->force, err);
    if (status != ATTN_OK)
        return status;
    FILE *file = fopen(tx->temp_path, "wb");
    if (file == NULL) {
        status = attn_fail(err, ATTN_EIO, "%s: cannot write %s: %s", c->output, tx->temp_path,
                           strerror(errno));
    } else {
        status = plot_draw(data, c->format, file, err);
        if (fclose(file) != 0 && status == ATTN_OK)
            status = attn_fail(err, ATTN_EIO, "%s: cannot write the picture: %s", c->output,
                               strerror(errno));
        else if (status != ATTN_OK && strncmp(err->msg, c->output, strlen(c->output)) != 0) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            attn_fail(err, status, "%s: %s", c->output, msg);
        }
    }
    if (status == ATTN_OK)
        status = attn_atomic_commit(tx, NULL, err);
    else
        attn_atomic_abort(tx);
    return status;
}

int plot_main(int argc, char **argv)
{
    plot_cli c;
    memset(&c, 0, sizeof c);
    c.rq.group = "/";
    c.rq.what = PLOT_WEIGHTS;
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
    if (status == ATTN_OK)
        status = write_picture(tx, &c, &data, &err);
    process_run_ended();
    plot_data_free(&data);
    free(c.ranges);
    if (status != ATTN_OK)
        fprintf(stderr, "attnrun: %s%s\n", err.msg, cli_hint_of(&err));
    return cli_exit_code(status);
}
