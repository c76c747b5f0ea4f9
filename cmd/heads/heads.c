/*
 * heads.c - the command line of `attnrun heads` (heads.h): options,
 * messages, exit codes, the census printed as CSV and, with -o, written
 * to a temporary file renamed into place (attn_atomic.h), so that
 * CENSUS.h5 is never partly written.
 */
#define _GNU_SOURCE
#include "heads/heads.h"
#include "cli/cli.h"

#include "attn_atomic.h"
#include "cli/process.h"

#include <getopt.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The help text, in parts (each within what C compilers must support). */
static const char *const heads_usage[] = {
    "Usage: attnrun heads RESULTS.h5 [--groups G1,G2,...] [-o CENSUS.h5] [OPTIONS]\n"
    "\n"
    "A census of every head of every layer in RESULTS.h5 over the whole batch:\n"
    "scores that tell previous-token, duplicate-token and induction heads apart\n"
    "(Olsson et al. 2022), printed as CSV on standard output, one line per layer\n"
    "and head:\n"
    "\n"
    "  layer,head,",
    /* ... the scores' names (the census table), then: */
    "\n"
    "\n"
    "A layer is a group holding the weights a run saved (--save weights): every\n"
    "group of an --append results file in the order appended, or of a plain\n"
    "results file by name, or those --groups names.  Each layer's weights are\n"
    "(B, H, n, m) or (H, n, m), read once, one block of one head's map at a\n"
    "time; every layer must have the same number of heads H.\n"
    "\n",
    /* ... the options (the table below), then: */
    "\n"
    "Scores (p: the weights of query q of a head over its m keys k; each score is\n"
    "a mean over the (item, query) rows p that are not all zero -- a query that\n"
    "sees no key is left out):\n",
    /* ... each score's definition (the census table), then: */
    "\n"
    "duplicate and induction need the tokens (query_token, key_token: a run with\n"
    "--tokens); without them their fields are empty.  A score that no row\n"
    "qualifies for is empty too (NaN in CENSUS.h5), one whose rows hold a NaN is\n"
    "nan.  Values are printed with 9 significant digits.\n"
    "\n"
    "CENSUS.h5 holds one (L, H) float64 dataset per score, named as the columns,\n"
    "along the axes layer and head (dimension scales), and layer_group, each\n"
    "layer's group path; duplicate and induction only when every layer has tokens.\n"
    "\n"
    "Examples:\n"
    "  attnrun l0.h5 -o results.h5 --append --group /layer0 --heads 12 --causal \\\n"
    "          --tokens tokens --save weights\n"
    "  attnrun heads results.h5\n"
    "  attnrun heads results.h5 --groups /layer3,/layer5 -o census.h5 >census.csv\n"
    "\n"
    "Exit status: 0 success, 1 runtime or I/O failure (or interrupted),\n"
    "2 usage error (CENSUS.h5 exists without --force), 3 input rejected\n"
    "(missing file or group, a layer without weights, layers with different\n"
    "numbers of heads).\n",
};

typedef struct heads_cli {
    const char *input;
    char **groups;                /* (group_count) owned                    */
    size_t group_count;
    const char *output;
    bool force, quiet, help;
} heads_cli;

/* --groups LIST: absolute group paths separated by commas, each once. */
static int parse_groups(void *settings, const cli_option *option, const char *name,
                        const char *value)
{
    heads_cli *c = settings;
    (void)option;
    return cli_parse_groups(name, value, true, &c->groups, &c->group_count);
}

#define HEADS(field) offsetof(heads_cli, field)

/* The options of attnrun heads. */
static const cli_option options[] = {
    {"groups", 0, CLI_CUSTOM, 0, .parse = parse_groups, .value = "LIST", .section = "Options",
     .help = "the layers, in this order: group paths separated by\n"
             "commas (default: every group holding weights)"},
    {"output", 'o', CLI_TEXT, HEADS(output), .value = "CENSUS.h5",
     .help = "also write the census as HDF5 (atomically: all or\nnothing)"},
    {"force", 0, CLI_FLAG, HEADS(force),
     .help = "replace an existing CENSUS.h5 (a file, never a directory)"},
    {"quiet", 'q', CLI_FLAG, HEADS(quiet),
     .help = "no warnings (as every attnrun command; the CSV is\nalways printed)"},
    {"help", 'h', CLI_FLAG, HEADS(help), .help = "this help"},
    {NULL},
};

static int parse_arguments(int argc, char **argv, heads_cli *c)
{
    int code = cli_parse(options, argc, argv, c);
    if (code != EXIT_OK || c->help)
        return code;
    if ((code = cli_results_file(argc, argv, &c->input)) != EXIT_OK)
        return code;
    if (c->output == NULL && c->force)
        return cli_usage_error("--force without -o: there is no CENSUS.h5 to replace");
    if (c->output == NULL)
        return EXIT_OK;
    if (c->output[0] == '\0')
        return cli_usage_error("-o '': expected the name of the census file to write");
    return cli_check_output(c->output, c->input, c->force, "heads");
}

/* text from `column` of the current line on, wrapped at `width` columns,
 * the lines after the first indented to `column`. */
static void print_wrapped(const char *text, int column, int width, FILE *out)
{
    for (int indent = 0; *text != '\0'; indent = column) {
        size_t room = (size_t)(width - column), len = strlen(text);
        if (len > room) {
            len = room;
            while (len > 0 && text[len] != ' ')
                len--;
            if (len == 0)
                len = strcspn(text, " ");
        }
        fprintf(out, "%*s%.*s\n", indent, "", (int)len, text);
        text += len;
        text += strspn(text, " ");
    }
}

static int print_help(void)
{
    fputs(heads_usage[0], stdout);
    for (int k = 0; k < ATTN_CENSUS_COUNT; k++)
        printf("%s%s", k > 0 ? "," : "", attn_census_name((attn_census_kind)k));
    fputs(heads_usage[1], stdout);
    cli_print_options(options, stdout);
    fputs(heads_usage[2], stdout);
    for (int k = 0; k < ATTN_CENSUS_COUNT; k++) {
        printf("  %-11s", attn_census_name((attn_census_kind)k));
        print_wrapped(attn_census_definition((attn_census_kind)k), 13, 79, stdout);
    }
    fputs(heads_usage[3], stdout);
    return cli_finish_stdout(EXIT_OK);
}

/* Writes the census into the transaction's temporary and flushes it;
 * on failure the temporary is removed.  Published by heads_main only
 * once every other output has succeeded. */
static int write_census(attn_atomic *tx, const heads_cli *c, const census_table *census,
                        attn_error *err)
{
    int status = attn_atomic_begin(tx, c->output, c->force, err);
    if (status != ATTN_OK)
        return status;
    status = heads_write_file(census, tx->temp_path, c->output, err);
    if (status == ATTN_OK)
        status = attn_atomic_flush(tx, err);
    if (status != ATTN_OK)
        attn_atomic_abort(tx);
    return status;
}

/* The CSV on standard output, flushed: a full or closed one fails. */
static int print_csv(const census_table *census, attn_error *err)
{
    errno = 0;
    heads_print_csv(census, stdout);
    if (fflush(stdout) != 0 || ferror(stdout))
        return attn_fail(err, ATTN_EIO, "cannot write to standard output: %s%s",
                         errno != 0 ? strerror(errno) : "a write failed",
                         " (the census file was not written)");
    return ATTN_OK;
}

static void free_cli(heads_cli *c)
{
    cli_free_groups(c->groups, c->group_count);
}

int heads_main(int argc, char **argv)
{
    heads_cli c;
    memset(&c, 0, sizeof c);
    cli_set_command("attnrun", "attnrun heads --help");
    int code = parse_arguments(argc, argv, &c);
    if (code != EXIT_OK || c.help) {
        free_cli(&c);
        return code != EXIT_OK ? code : print_help();
    }
    attn_atomic *tx = process_watch(c.input, c.output != NULL ? c.output : c.input,
                                    c.output == NULL);
    attn_error err = {0};
    census_table census;
    int status = census_find_layers(c.input, c.groups, c.group_count, &census, &err);
    const bool found = status == ATTN_OK;
    if (status == ATTN_OK)
        status = census_count(&census, &err);
    const bool writes = status == ATTN_OK && c.output != NULL;
    if (writes)
        status = write_census(tx, &c, &census, &err);
    if (status == ATTN_OK)
        status = attn_results_file_check(census.file, &err);
    /* all or nothing: the census file is renamed into place only once
     * the CSV is out whole */
    if (status == ATTN_OK)
        status = print_csv(&census, &err);
    if (writes)
        status = status == ATTN_OK ? attn_atomic_publish(tx, NULL, &err)
                                   : (attn_atomic_abort(tx), status);
    process_run_ended();
    if (found)
        census_free(&census);
    free_cli(&c);
    if (status != ATTN_OK)
        fprintf(stderr, "attnrun: %s%s\n", err.msg, cli_hint_of(&err));
    return cli_finish_stdout(cli_exit_code(status));
}
