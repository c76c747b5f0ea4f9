/* options.c - a command's options parsed and described by its table (options.h). */
#include "cli/options.h"

#include "attn_common.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Options of one table at most (long_options is built on the stack). */
#define MAX_OPTIONS 128

/* The column a usage line's help starts at. */
#define HELP_COLUMN 23

static const char *program = "attnrun";
static const char *help_command = "attnrun --help";

void cli_set_command(const char *name, const char *help)
{
    program = name;
    help_command = help;
}

int cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", program);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see %s)\n", help_command);
    return EXIT_USAGE;
}

int cli_error(int code, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", program);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
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

bool cli_parse_real(const char *text, double *value)
{
    char *end;
    if (text[0] == '\0' || strspn(text, "0123456789+-.eE") != strlen(text))
        return false;
    errno = 0;
    double v = strtod(text, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v))
        return false;
    *value = v;
    return true;
}

/* Whether typed (two letters or more) begins name, case ignored. */
static bool begins(const char *name, const char *typed)
{
    size_t len = strlen(typed);
    return len >= 2 && len < strlen(name) && strncasecmp(name, typed, len) == 0;
}

const char *cli_nearest(const char *typed, const char *const *names, size_t count)
{
    const size_t len = strlen(typed), limit = len / 3 > 1 ? len / 3 : 1;
    const char *nearest = NULL, *prefixed = NULL;
    size_t fewest = SIZE_MAX;
    if (len == 0)
        return NULL;
    for (size_t i = 0; i < count; i++) {
        if (names[i] == NULL || names[i][0] == '\0')
            continue;
        size_t edits = attn_edit_distance(typed, names[i]);
        if (edits < fewest) {
            fewest = edits;
            nearest = names[i];
        }
        if (prefixed == NULL && begins(names[i], typed))
            prefixed = names[i];
    }
    return fewest <= limit ? nearest : prefixed;
}

/* A whole number within [min, max] (max 0: the type's largest). */
static bool parse_count(const char *text, const cli_option *o, size_t type_max, size_t *value)
{
    const size_t max = o->max > 0 ? (size_t)o->max : type_max;
    size_t v;
    if (!cli_parse_number(text, max, &v, NULL) || v < (size_t)o->min)
        return false;
    *value = v;
    return true;
}

/* A byte count: digits with an optional K, M or G (powers of 1024), >= 1. */
static bool parse_size(const char *text, size_t *value)
{
    char digits[32];
    size_t len = strlen(text), shift = 0, v;
    if (len == 0 || len >= sizeof digits)
        return false;
    memcpy(digits, text, len + 1);
    const char *units = "KMG", *unit = strchr(units, digits[len - 1]);
    if (unit != NULL && *unit != '\0') {
        shift = 10 * (size_t)(unit - units + 1);
        digits[len - 1] = '\0';
    }
    if (!cli_parse_number(digits, SIZE_MAX >> shift, &v, NULL) || v < 1)
        return false;
    *value = v << shift;
    return true;
}

/* Sets the row's field from value; false when value is not what it takes. */
static bool set_field(const cli_option *o, const char *value, void *settings)
{
    char *field = (char *)settings + o->field;
    size_t count;
    double real;
    switch (o->kind) {
    case CLI_FLAG:
        *(bool *)(void *)field = true;
        return true;
    case CLI_TEXT:
        *(const char **)(void *)field = value;
        return true;
    case CLI_GROUP:
        *(const char **)(void *)field = value;
        return value[0] == '/';
    case CLI_COUNT:
        if (!parse_count(value, o, SIZE_MAX, &count))
            return false;
        *(size_t *)(void *)field = count;
        return true;
    case CLI_INT:
        if (!parse_count(value, o, INT_MAX, &count))
            return false;
        *(int *)(void *)field = (int)count;
        return true;
    case CLI_REAL:
    case CLI_REAL_FROM:
        if (!cli_parse_real(value, &real) || real < o->min || (o->kind == CLI_REAL && real == o->min))
            return false;
        *(double *)(void *)field = real;
        return true;
    case CLI_SIZE:
        return parse_size(value, (size_t *)(void *)field);
    case CLI_CHOICE:
        for (int v = o->first; v <= o->last; v++)
            if (strcmp(value, o->choice(v)) == 0) {
                *(int *)(void *)field = v;
                return true;
            }
        return false;
    case CLI_CUSTOM:
        break;
    }
    return false;
}

/* Whether the row's option takes a value. */
static bool takes_value(const cli_option *o)
{
    return o->kind != CLI_FLAG && !(o->kind == CLI_CUSTOM && o->flag);
}

/* "unknown option '--casual'; did you mean --causal?": the nearest
 * option of the table to the long option typed (its value cut off). */
static int unknown_option(const cli_option *options, const char *typed)
{
    const char *names[MAX_OPTIONS];
    char word[128];
    size_t count = 0;
    for (; options[count].name != NULL && count < MAX_OPTIONS; count++)
        names[count] = options[count].name;
    const char *dashes = strncmp(typed, "--", 2) == 0 ? typed + 2 : typed;
    snprintf(word, sizeof word, "%.*s", (int)strcspn(dashes, "="), dashes);
    const char *begun[4];
    size_t begins_count = 0, len = strlen(word);
    for (size_t i = 0; i < count; i++)     /* getopt_long takes a prefix of one */
        if (len > 0 && strncmp(names[i], word, len) == 0 && begins_count++ < 4)
            begun[begins_count - 1] = names[i];
    if (begins_count > 1) {
        char list[256] = "";
        const size_t shown = begins_count < 4 ? begins_count : 4;
        for (size_t i = 0; i < shown; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s--%s",
                     i == 0 ? "" : i + 1 == shown && begins_count <= 4 ? " or " : ", ", begun[i]);
        return cli_usage_error("option '%s' is ambiguous; did you mean %s%s?", typed, list,
                               begins_count > 4 ? ", ..." : "");
    }
    const char *near = cli_nearest(word, names, count);
    if (near != NULL)
        return cli_usage_error("unknown option '%s'; did you mean --%s?", typed, near);
    return cli_usage_error("unknown option '%s'", typed);
}

/* The choice of a CLI_CHOICE row nearest to a value it does not take. */
static const char *nearest_choice(const cli_option *o, const char *value)
{
    const char *names[64];
    size_t count = 0;
    for (int v = o->first; v <= o->last && count < sizeof names / sizeof names[0]; v++)
        names[count++] = o->choice(v);
    return cli_nearest(value, names, count);
}

int cli_parse(const cli_option *options, int argc, char **argv, void *settings)
{
    struct option long_options[MAX_OPTIONS + 1];
    char shortopts[2 * MAX_OPTIONS + 2] = ":";
    size_t count = 0, used = 1;
    for (; options[count].name != NULL && count < MAX_OPTIONS; count++) {
        const cli_option *o = &options[count];
        long_options[count] = (struct option){o->name, takes_value(o) ? required_argument
                                                                        : no_argument,
                                              NULL, 256 + (int)count};
        if (o->letter != 0) {
            shortopts[used++] = o->letter;
            if (takes_value(o))
                shortopts[used++] = ':';
        }
    }
    long_options[count] = (struct option){NULL, 0, NULL, 0};
    shortopts[used] = '\0';
    opterr = 0;
    for (;;) {
        int longindex = -1;
        int opt = getopt_long(argc, argv, shortopts, long_options, &longindex);
        if (opt == -1)
            return EXIT_OK;
        /* A short option by its letter; a long one as typed (getopt puts
         * its value, often a letter too, in optopt). */
        const char *typed = argv[optind - 1];
        const bool short_one = optopt != 0 && optopt < 256 && strncmp(typed, "--", 2) != 0;
        if (opt == '?') {
            if (short_one)
                return cli_usage_error("unknown option '-%c'", optopt);
            return unknown_option(options, typed);
        }
        if (opt == ':') {
            if (short_one)
                return cli_usage_error("-%c: missing its value", optopt);
            return cli_usage_error("%s: missing its value", typed);
        }
        size_t row = opt >= 256 ? (size_t)(opt - 256) : 0;
        while (opt < 256 && options[row].letter != opt)
            row++;
        const cli_option *o = &options[row];
        char name[64];
        if (opt >= 256)
            snprintf(name, sizeof name, "--%s", o->name);
        else
            snprintf(name, sizeof name, "-%c", opt);
        if (o->kind == CLI_CUSTOM) {
            int code = o->parse(settings, o, name, optarg);
            if (code != EXIT_OK)
                return code;
        } else if (!set_field(o, optarg, settings)) {
            const char *near = o->kind == CLI_CHOICE ? nearest_choice(o, optarg) : NULL;
            return cli_usage_error("%s '%s': expected %s%s%s%s", name, optarg, o->expected,
                                   near != NULL ? "; did you mean " : "", near != NULL ? near : "",
                                   near != NULL ? "?" : "");
        }
    }
}

void cli_print_options(const cli_option *options, FILE *out)
{
    for (const cli_option *o = options; o->name != NULL; o++) {
        char left[96];
        if (o->section != NULL)
            fprintf(out, "%s%s:\n", o == options ? "" : "\n", o->section);
        int len = snprintf(left, sizeof left, "  %c%c%s--%s%s%s", o->letter ? '-' : ' ',
                           o->letter ? o->letter : ' ', o->letter ? ", " : "  ", o->name,
                           o->value != NULL ? " " : "", o->value != NULL ? o->value : "");
        const char *help = o->help != NULL ? o->help : "";
        size_t line = strcspn(help, "\n");
        fprintf(out, "%s%*s%.*s\n", left, len < HELP_COLUMN - 1 ? HELP_COLUMN - len : 2, "",
                (int)line, help);
        for (help += line; *help == '\n'; help += line) {
            help++;
            line = strcspn(help, "\n");
            fprintf(out, "%*s%.*s\n", HELP_COLUMN, "", (int)line, help);
        }
    }
}
