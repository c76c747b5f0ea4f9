/*
 * cli.h - what attnrun's commands (a run, and `attnrun plot`) share at the
 * end of their command lines: the exit code of a library status, the
 * setting a library hint stands for, and standard output closed cleanly.
 * Their options are tables (options.h).
 *
 *     int status = attn_run(&opt, &report, &err);
 *     if (status != ATTN_OK)
 *         fprintf(stderr, "attnrun: %s%s\n", err.msg, cli_hint(err.hint));
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
 * it", " (--heads)", ...; "" for none. */
const char *cli_hint(attn_hint hint);

/* Flushes and closes stdout; a write error there turns EXIT_OK into
 * EXIT_RUNTIME (printed).  Returns the exit code. */
int cli_finish_stdout(int code);

#endif
