/*
 * attnrun.h - the run command: `attnrun [OPTIONS] IN.h5 (-o OUT.h5 |
 * --in-place)`, the program's own command (cmd/main.c hands it every
 * command line that names no subcommand), in five parts:
 *
 *     attnrun.c    the command line checked, the run, its messages
 *     options.c    the option table: parsing and the usage text
 *     progress.c   the progress line while it runs
 *     warnings.c   the warnings of likely mistakes, worded
 *     expect.c, diagnose.c   --expect: outputs against references, and the
 *                  convention that explains a difference
 *     plan_text.c, plan_json.c   the plan of a dry run, as text or JSON
 */
#ifndef ATTN_CMD_ATTNRUN_H
#define ATTN_CMD_ATTNRUN_H

#include "attn_run.h"
#include "attnrun/expect.h"

#include <stdbool.h>
#include <stdio.h>

/* What the command line asks for. */
typedef struct attnrun_cli {
    attn_run_options run;
    bool progress, quiet, help, version;
    bool json;                          /* --json: the dry run's plan as JSON */
    attnrun_expect expect;              /* --expect, --expect-tol             */
} attnrun_cli;

/* Runs attention as the command line asks (argv[0] is the program);
 * under MPI every rank calls it.  Returns the exit status. */
int attnrun_main(int argc, char **argv);

/* Parses the options of argv into c by the option table (options.c):
 * EXIT_OK with optind at the first operand, or the exit code (printed). */
int attnrun_parse_options(int argc, char **argv, attnrun_cli *c);

/* `attnrun --help`. */
void attnrun_print_usage(FILE *out);

/* The warnings of a run (attn_warning), worded by attnrun_warn, the
 * callback of attn_run_options.warn (warnings.c): at most one line of
 * each kind. */
typedef struct attnrun_warnings {
    char lines[ATTN_WARN_COUNT][1024];
    size_t count;
} attnrun_warnings;

void attnrun_warn(const attn_warning *warning, void *context);

/* Each line as `attnrun: warning: LINE`; 0, or -1 when out failed. */
int attnrun_print_warnings(FILE *out, const attnrun_warnings *warnings);

/* The plan of a dry run as text (plan_text.c). */
void plan_text_print(FILE *out, const attn_run_options *opt, const attn_run_report *rep);

#endif
