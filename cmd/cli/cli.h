/*
 * cli.h - what attnrun's commands (a run, and `attnrun plot`) share at the
 * end of their command lines: the exit code of a library status, the
 * setting a library hint stands for, and standard output closed cleanly.
 * Their options are tables (options.h).
 *
 *     int status = attn_run(&opt, &report, &err);
 *     if (status != ATTN_OK)
 *         fprintf(stderr, "attnrun: %s%s\n", err.msg, cli_hint_of(&err));
 *     return cli_finish_stdout(cli_exit_code(status));
 */
#ifndef ATTN_CMD_CLI_H
#define ATTN_CMD_CLI_H

#include "attn_common.h"
#include "cli/exit.h"
#include "cli/options.h"

/* The exit code of a library status (README, Exit status). */
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

/* Flushes and closes stdout; a write error there turns EXIT_OK into
 * EXIT_RUNTIME (printed).  Returns the exit code. */
int cli_finish_stdout(int code);

#endif
