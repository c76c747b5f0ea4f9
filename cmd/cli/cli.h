/*
 * cli.h - what attnrun's commands (a run, and `attnrun plot`) share on
 * their command lines: usage errors, the option loop, the exit code of a
 * library status, standard output closed cleanly.
 *
 *     cli_set_command("attnrun plot");
 *     int code = cli_parse_options(argc, argv, ":o:h", options, apply_option, &c);
 *     if (code != EXIT_OK) return code;            // the error is printed
 *     ...
 *     return cli_finish_stdout(cli_exit_code(status));
 */
#ifndef ATTN_CMD_CLI_H
#define ATTN_CMD_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

/* The command usage errors point at ("attnrun", "attnrun plot"). */
void cli_set_command(const char *command);

/* Prints "attnrun: <message> (see <command> --help)" on stderr; returns
 * EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One option: opt as getopt_long returns it, name as typed ("--heads",
 * "-H"), value (NULL for a flag).  Returns EXIT_OK or an exit code, its
 * error printed. */
typedef int (*cli_apply_fn)(void *context, int opt, const char *name, const char *value);

/* Runs getopt_long over argv (shortopts starting with ':'), handing each
 * option to apply; unknown options and missing values are usage errors.
 * Returns EXIT_OK with optind at the first operand, or the exit code. */
int cli_parse_options(int argc, char **argv, const char *shortopts,
                      const struct option *options, cli_apply_fn apply, void *context);

/* A strict whole number: digits only (no sign, no space), at most max.
 * *end (when not NULL) is where the digits stopped; with end NULL the
 * whole text must be the number.  Returns false otherwise. */
bool cli_parse_number(const char *text, size_t max, size_t *value, const char **end);

/* The exit code of a library status (README, Exit status). */
int cli_exit_code(int status);

/* Flushes and closes stdout; a write error there turns EXIT_OK into
 * EXIT_RUNTIME (printed).  Returns the exit code. */
int cli_finish_stdout(int code);

#endif
