/* cli.c - the command-line pieces every attnrun command shares (cli.h). */
#include "cli/cli.h"

#include "attn_common.h"
#include "cli/process.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *help_command = "attnrun";

void cli_set_command(const char *command)
{
    help_command = command;
}

int cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("attnrun: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see %s --help)\n", help_command);
    return EXIT_USAGE;
}

int cli_parse_options(int argc, char **argv, const char *shortopts,
                      const struct option *options, cli_apply_fn apply, void *context)
{
    opterr = 0;
    for (;;) {
        int longindex = -1;
        int opt = getopt_long(argc, argv, shortopts, options, &longindex);
        if (opt == -1)
            return EXIT_OK;
        /* A short option by its letter; a long one as typed (getopt puts
         * its value, often a letter too, in optopt). */
        const char *typed = argv[optind - 1];
        const bool short_one = optopt != 0 && optopt < 256 && strncmp(typed, "--", 2) != 0;
        if (opt == '?') {
            if (short_one)
                return cli_usage_error("unknown option '-%c'", optopt);
            return cli_usage_error("unknown option '%s'", typed);
        }
        if (opt == ':') {
            if (short_one)
                return cli_usage_error("-%c: missing its value", optopt);
            return cli_usage_error("%s: missing its value", typed);
        }
        char name[64];
        if (longindex >= 0)
            snprintf(name, sizeof name, "--%s", options[longindex].name);
        else
            snprintf(name, sizeof name, "-%c", opt);
        int code = apply(context, opt, name, optarg);
        if (code != EXIT_OK)
            return code;
    }
}

bool cli_parse_number(const char *text, size_t max, size_t *value, const char **end)
{
    size_t v = 0;
    const char *p = text;
    if (*p < '0' || *p > '9')
        return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        size_t digit = (size_t)(*p - '0');
        if (v > (max - digit) / 10)
            return false;
        v = v * 10 + digit;
    }
    if (end != NULL)
        *end = p;
    else if (*p != '\0')
        return false;
    *value = v;
    return true;
}

int cli_exit_code(int status)
{
    switch (status) {
    case ATTN_OK:     return EXIT_OK;
    case ATTN_EUSAGE: return EXIT_USAGE;
    case ATTN_EINPUT: return EXIT_INPUT;
    default:          return EXIT_RUNTIME;
    }
}

int cli_finish_stdout(int code)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout) || fclose(stdout) != 0) {
        if (code == EXIT_OK) {
            fprintf(stderr, "attnrun: cannot write to standard output: %s\n",
                    errno != 0 ? strerror(errno) : "a write failed");
            return EXIT_RUNTIME;
        }
    }
    return code;
}
