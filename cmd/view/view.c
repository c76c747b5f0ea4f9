/*
 * view.c - the command line of `attnrun view` (view.h): options, messages,
 * exit codes, and the page written to a temporary file renamed into place
 * (attn_atomic.h), so that VIEW.html is whole or absent.
 */
#define _GNU_SOURCE
#include "view/view.h"

#include "attn_atomic.h"
#include "cli/process.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The help text, in parts (each within what C compilers must support). */
static const char *const view_usage[] = {
    "Usage: attnrun view RESULTS.h5 -o VIEW.html [OPTIONS]\n"
    "\n"
    "One self-contained HTML page showing the attention weights of RESULTS.h5:\n"
    "every layer and head of each item shown as thumbnails (the model view), one\n"
    "head's map with its tokens, zoom and pan (the head view), one query's weights\n"
    "in every head of a layer (the token view), the census of attnrun heads as a\n"
    "sortable table, and the rollout of --rollout.  It opens from disk in any\n"
    "browser with no network: nothing is fetched, and the page's own security\n"
    "policy forbids it.  Tokens and names are shown as text, never as markup.\n"
    "\n"
    "The layers are the groups holding weights (--save weights), as attnrun heads\n"
    "takes them: an --append results file's in the order appended.  Maps are\n"
    "embedded at full resolution while the page fits --max-size; beyond, as\n"
    "2^k x 2^k blocks (the max and the mean of each), the finest k that fits, and\n"
    "attnrun view says so.  It reads one map at a time.\n"
    "\n",
    /* ... the options (the table below), then: */
    "\n"
    "Examples:\n"
    "  attnrun view results.h5 -o view.html\n"
    "  attnrun view results.h5 --items 0-3 --groups /layer0,/layer5 -o view.html\n"
    "  attnrun rollout results.h5 -o rollout.h5\n"
    "  attnrun view results.h5 --rollout rollout.h5 --max-size 256M -o view.html\n"
    "\n"
    "docs/view.md describes the page, its keys and its automation interface.\n"
    "\n"
    "Exit status: 0 success, 1 runtime or I/O failure (or interrupted), 2 usage\n"
    "error (VIEW.html exists without --force, --items outside the file, a page\n"
    "that no level fits into --max-size), 3 input rejected (missing file or\n"
    "group, no weights, layers of different heads or items, a rollout file of\n"
    "other results).\n",
};

/* Largest item number --items takes. */
#define MAX_ITEM ((size_t)1 << 48)

typedef struct view_cli {
    view_request rq;
    cli_range *items;             /* (rq.item_ranges) owned              */
    const char *output;
    bool force, quiet, help;
} view_cli;

static int parse_groups(void *settings, const cli_option *option, const char *name,
                        const char *value)
{
    view_cli *c = settings;
    (void)option;
    return cli_parse_groups(name, value, true, &c->rq.groups, &c->rq.group_count);
}

static int parse_items(void *settings, const cli_option *option, const char *name,
                       const char *value)
{
    view_cli *c = settings;
    (void)option;
    int code = cli_parse_ranges(name, value, MAX_ITEM, "item numbers", &c->items,
                                &c->rq.item_ranges);
    c->rq.items = c->items;
    return code;
}

#define VIEW(field) offsetof(view_cli, field)

/* The options of attnrun view. */
static const cli_option options[] = {
    {"output", 'o', CLI_TEXT, VIEW(output), .value = "VIEW.html", .section = "Options",
     .help = "the page to write (atomically: all or nothing)"},
    {"groups", 0, CLI_CUSTOM, 0, .parse = parse_groups, .value = "LIST",
     .help = "the layers, in this order: group paths separated by\n"
             "commas (default: every group holding weights)"},
    {"items", 0, CLI_CUSTOM, 0, .parse = parse_items, .value = "LIST",
     .help = "the items shown, e.g. 0,3,5-7 (default: the first 16)"},
    {"max-size", 0, CLI_SIZE, VIEW(rq.max_size), .value = "SIZE",
     .expected = "a size such as 512K, 64M or 1G",
     .help = "the page's size at most, e.g. 16M or 1G (default\n"
             "64M); maps are pooled to fit"},
    {"rollout", 0, CLI_TEXT, VIEW(rq.rollout), .value = "FILE",
     .help = "also show the rollout of attnrun rollout's FILE"},
    {"force", 0, CLI_FLAG, VIEW(force),
     .help = "replace an existing VIEW.html (one attnrun wrote)"},
    {"quiet", 'q', CLI_FLAG, VIEW(quiet), .help = "no notes or warnings"},
    {"help", 'h', CLI_FLAG, VIEW(help), .help = "this help"},
    {NULL},
};

static int parse_arguments(int argc, char **argv, view_cli *c)
{
    int code = cli_parse(options, argc, argv, c);
    if (code != EXIT_OK || c->help)
        return code;
    if ((code = cli_results_file(argc, argv, &c->rq.input)) != EXIT_OK)
        return code;
    if (c->output == NULL)
        return cli_usage_error("no page to write: give -o VIEW.html");
    const char *dot = strrchr(c->output, '.');
    if (dot == NULL || (strcasecmp(dot, ".html") != 0 && strcasecmp(dot, ".htm") != 0))
        return cli_usage_error("-o '%s': the page's name must end in .html or .htm", c->output);
    if (c->rq.rollout != NULL && strcmp(c->rq.rollout, c->output) == 0)
        return cli_usage_error("-o '%s' is the --rollout file: name a new page", c->output);
    return cli_check_output(c->output, c->rq.input, c->force, CLI_OUTPUT_PAGE);
}

static int print_help(void)
{
    fputs(view_usage[0], stdout);
    cli_print_options(options, stdout);
    fputs(view_usage[1], stdout);
    return cli_finish_stdout(EXIT_OK);
}

/* The page, written into an open stream (a cli_writer), within the size
 * planned. */
static int write_page(void *ctx, FILE *out, attn_error *err)
{
    const view_plan *plan = ctx;
    int status = view_write_page(plan, out, err);
    const long written = ftell(out);
    if (status == ATTN_OK && (written < 0 || (size_t)written > plan->bytes))
        status = attn_fail(err, ATTN_EIO, "the page took %ld bytes, more than the %zu planned (a "
                           "fault of attnrun)", written, plan->bytes);
    return status;
}

/* One line, unless -q, of what the page holds when it is not everything
 * at full resolution. */
static void tell(const view_cli *c, const view_plan *plan)
{
    if (c->quiet)
        return;
    if (c->rq.items == NULL && plan->item_count < plan->batch)
        fprintf(stderr, "attnrun: view: items 0 to %zu of %zu shown; --items chooses others\n",
                plan->item_count - 1, plan->batch);
    if (plan->level > 0) {
        const size_t side = (size_t)1 << plan->level;
        fprintf(stderr, "attnrun: view: maps pooled to fit --max-size %zu bytes: each cell is "
                "the max and the mean of a block of %zu x %zu (level %u); a larger --max-size "
                "or fewer --items keep more\n", c->rq.max_size, side, side, plan->level);
    }
}

int view_main(int argc, char **argv)
{
    view_cli c;
    memset(&c, 0, sizeof c);
    c.rq.max_size = VIEW_MAX_SIZE;
    cli_set_command("attnrun", "attnrun view --help");
    int code = parse_arguments(argc, argv, &c);
    if (code != EXIT_OK || c.help) {
        cli_free_groups(c.rq.groups, c.rq.group_count);
        free(c.items);
        return code != EXIT_OK ? code : print_help();
    }
    attn_atomic *tx = process_watch(c.rq.input, c.output, false);
    attn_error err = {0};
    view_plan plan;
    int status = view_plan_make(&c.rq, &plan, &err);
    const bool planned = status == ATTN_OK;
    if (planned)
        status = cli_write_output(tx, c.output, c.force, write_page, &plan, plan.census.file,
                                  &err);
    process_run_ended();
    if (status != ATTN_OK)
        fprintf(stderr, "attnrun: %s%s\n", err.msg, cli_hint_of(&err));
    else
        tell(&c, &plan);
    if (planned)
        view_plan_free(&plan);
    cli_free_groups(c.rq.groups, c.rq.group_count);
    free(c.items);
    return cli_exit_code(status);
}
