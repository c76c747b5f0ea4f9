/*
 * cli.h - what attnrun's commands (a run, and its subcommands) share at
 * the end of their command lines: the exit code of a library status, the
 * setting a library hint stands for, the file a reader of results writes
 * checked, and standard output closed cleanly.
 * Their options are tables (options.h).
 *
 *     int status = attn_run(&opt, &report, &err);
 *     if (status != ATTN_OK)
 *         fprintf(stderr, "attnrun: %s%s\n", err.msg, cli_hint_of(&err));
 *     return cli_finish_stdout(cli_exit_code(status));
 */
#ifndef ATTN_CMD_CLI_H
#define ATTN_CMD_CLI_H

#include "attn_atomic.h"
#include "attn_common.h"
#include "attn_results.h"
#include "cli/exit.h"
#include "cli/options.h"

/* The exit code of a library status (docs/safety.md, "Exit status"). */
int cli_exit_code(int status);

/* What a library hint (the setting that would resolve a failure) is on
 * the command line, appended to its message: "; use --force to replace
 * it", " (--heads)", ...; "" for none.  Hints that take a value (a
 * dataset, a group: err->hint_arg) come as their printf format: print
 * those with cli_hint_of. */
const char *cli_hint(attn_hint hint);

/* cli_hint of err->hint with its value filled in: "; pass --x
 * hidden_states", "; use --layout linear".  The text lives until the
 * next call. */
const char *cli_hint_of(const attn_error *err);

/*
 * The groups of the results file `path` holding results when `group` is
 * not one of them (attn_results_groups), for a reader's message: their
 * count, *index whether the file is an --append index, and names the
 * first few ("/layer0, /layer1, /layer2, ...").  0 when there are none,
 * the file cannot be listed, or `group` holds results.
 */
size_t cli_other_groups(const char *path, const char *group, bool *index, char *names,
                        size_t len);

/* The one results file a reader of results takes, the word left after its
 * options (argv[optind], cli_parse): EXIT_OK with *input set, or
 * EXIT_USAGE (printed) for none or more than one. */
int cli_results_file(int argc, char **argv, const char **input);

/* What a reader writes (cli_check_output's kind): a picture of attnrun
 * plot, else the attnrun_analysis of its HDF5 file ("rollout", "heads"). */
#define CLI_OUTPUT_PICTURE "picture"

/* ... and the page of attnrun view, which names its maker in its head. */
#define CLI_OUTPUT_PAGE "view"
#define CLI_PAGE_MARK "<meta name=\"generator\" content=\"attnrun view\">"

/*
 * The file a reader of results writes (attnrun plot, rollout, heads),
 * checked before any work: not the results file itself, and when it
 * exists, replaced only with `force`, only when a regular file or a
 * symbolic link, and only when it is what attnrun writes as this output
 * (`kind`): a picture, or an HDF5 file of that attnrun_analysis -- never
 * a results file, its index or one of its parts.  Nor may it name a part
 * of the index read or a file in its parts directory, even a new one.
 * EXIT_OK, or EXIT_USAGE (printed).
 */
int cli_check_output(const char *output, const char *input, bool force, const char *kind);

/* --groups LIST: absolute group paths separated by commas ("/layer0,/layer1"),
 * into *groups (count), which it replaces (cli_free_groups); `unique`: each
 * once.  EXIT_OK, EXIT_USAGE (printed) or EXIT_RUNTIME (out of memory,
 * printed). */
int cli_parse_groups(const char *name, const char *text, bool unique, char ***groups,
                     size_t *count);
void cli_free_groups(char **groups, size_t count);

/* Indices first..last, both included: an element of a list such as
 * --heads 0,3,5-7. */
typedef struct cli_range {
    size_t first, last;
} cli_range;

/* A list of numbers and ranges first-last (first <= last, each at most
 * max), separated by commas ("0,3,5-7"), into *ranges (count), which it
 * replaces (free).  `what` names the numbers in the usage error ("head
 * numbers").  EXIT_OK, EXIT_USAGE or EXIT_RUNTIME (printed). */
int cli_parse_ranges(const char *name, const char *text, size_t max, const char *what,
                     cli_range **ranges, size_t *count);

/* What writes a reader's output into an open stream (ctx its own). */
typedef int (*cli_writer)(void *ctx, FILE *out, attn_error *err);

/*
 * A reader's output written all or nothing: the transaction's temporary
 * (attn_atomic_begin on `output`, replaced only with `force`) opened and
 * written by `write`, closed and flushed; then, when `read` is not NULL,
 * the results file read must still be what it was (an --append index may
 * have moved on: attn_results_file_check); then renamed onto `output`.
 * Any failure removes the temporary; a message that does not name the
 * output gets it in front.  Returns the status.
 */
int cli_write_output(attn_atomic *tx, const char *output, bool force, cli_writer write,
                     void *ctx, attn_results_file *read, attn_error *err);

/* Flushes and closes stdout; a write error there turns EXIT_OK into
 * EXIT_RUNTIME (printed).  Returns the exit code. */
int cli_finish_stdout(int code);

#endif
