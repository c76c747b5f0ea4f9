/*
 * options.h - a command's options as one table: each row names an option
 * (long and short), the kind of its value, the field of the command's
 * settings it sets, its bounds and its help.  The table alone drives
 * getopt_long, the parsing of every value, its usage error and the usage
 * text, for attnrun, attnrun plot and the benchmark's programs.
 *
 *     typedef struct settings { size_t heads; bool causal; } settings;
 *     static const cli_option options[] = {
 *         {"heads", 'H', CLI_COUNT, offsetof(settings, heads), .min = 1, .max = 1 << 20,
 *          .value = "N", .help = "number of heads",
 *          .expected = "a whole number from 1 to 1048576", .section = "Attention"},
 *         {"causal", 'c', CLI_FLAG, offsetof(settings, causal), .help = "causal mask"},
 *         {NULL},
 *     };
 *     cli_set_command("attnrun", "attnrun --help");
 *     int code = cli_parse(options, argc, argv, &s);   // EXIT_OK: optind at IN
 *     cli_print_options(options, stdout);              // the usage's option lines
 *
 * Self-contained (libc only), so that the benchmark programs build it
 * without libattn.
 */
#ifndef ATTN_CMD_OPTIONS_H
#define ATTN_CMD_OPTIONS_H

#include "cli/exit.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* What an option's value is, and the field it sets. */
typedef enum cli_kind {
    CLI_FLAG,         /* no value: sets a bool to true                     */
    CLI_TEXT,         /* any text, kept as it is: a const char *           */
    CLI_GROUP,        /* an absolute HDF5 group path ("/..."): const char * */
    CLI_COUNT,        /* a whole number in [min, max]: a size_t            */
    CLI_INT,          /* a whole number in [min, max]: an int              */
    CLI_REAL,         /* a finite decimal number > min: a double           */
    CLI_REAL_FROM,    /* a finite decimal number >= min: a double          */
    CLI_SIZE,         /* a byte count with K, M or G (1024s), >= 1: a size_t */
    CLI_CHOICE,       /* one of the names of .choice: its value, an int-sized
                         enum                                              */
    CLI_CUSTOM        /* .parse does it                                     */
} cli_kind;

typedef struct cli_option cli_option;

struct cli_option {
    const char *name;             /* the long option, without "--"; NULL
                                     ends the table                        */
    char letter;                  /* the short option, or 0                */
    cli_kind kind;
    size_t field;                 /* offsetof(settings, its field)         */
    double min, max;              /* bounds of CLI_COUNT, CLI_INT, CLI_REAL */
    const char *value;            /* the value's name in the usage ("N")   */
    const char *help;             /* its help; '\n' between lines          */
    const char *expected;         /* a bad value is told "expected ...": the
                                     rest of that sentence               */
    const char *(*choice)(int value);   /* CLI_CHOICE: the name of a value  */
    int first, last;              /* CLI_CHOICE: the values named, first to
                                     last; CLI_CUSTOM: free for .parse     */
    /* CLI_CUSTOM: parses value (NULL for an option without one) into
     * settings; `name` is how it was typed.  Returns an exit code, its
     * error printed (cli_usage_error). */
    int (*parse)(void *settings, const cli_option *option, const char *name, const char *value);
    bool flag;                    /* CLI_CUSTOM: takes no value            */
    const char *section;          /* starts a section of the usage text:
                                     its title                            */
};

/* The program messages start with ("attnrun", "attnbench") and the
 * command a usage error points at ("attnrun plot --help"). */
void cli_set_command(const char *program, const char *help);

/* Prints "<program>: <message> (see <help>)" on stderr; returns EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "<program>: <message>" on stderr; returns code. */
int cli_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Parses argv's options into settings by the table: unknown options and
 * missing values are usage errors, and so is a value outside its row's
 * bounds ("--heads '0': expected a whole number from 1 to 1048576").
 * Returns EXIT_OK with optind at the first operand, or the exit code (the
 * error printed).
 */
int cli_parse(const cli_option *options, int argc, char **argv, void *settings);

/* The option lines of a usage text, by section, as the table orders them. */
void cli_print_options(const cli_option *options, FILE *out);

/* A strict whole number: digits only (no sign, no space), at most max.
 * *end (when not NULL) is where the digits stopped; with end NULL the
 * whole text must be the number.  Returns false otherwise. */
bool cli_parse_number(const char *text, size_t max, size_t *value, const char **end);

/*
 * The name of names[0 .. count-1] nearest to `typed`, for a "did you
 * mean" after an unknown name: the one fewest edits away (a letter typed
 * wrong, left out or added, or two letters swapped; case ignored), if that
 * is within a third of typed's length (at least one edit), else the first
 * that typed (two letters or more) begins.  Ties: the first in names.
 * NULL when no name is near (or typed is empty).  Every choice list of
 * every command asks this one function.
 */
const char *cli_nearest(const char *typed, const char *const *names, size_t count);


/* Strict decimal parsing: digits, sign, point and exponent only (no
 * spaces, hex, inf or nan), all of text used, finite. */
bool cli_parse_real(const char *text, double *value);

#endif
