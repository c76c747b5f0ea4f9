/*
 * main.c - attnrun's entry point: the standard descriptors made safe, then
 * the command the first word names -- a subcommand of the table below, or
 * else the run itself (cmd/attnrun/).
 */
#include "attnrun/attnrun.h"
#include "cli/exit.h"
#include "cli/options.h"
#include "cli/process.h"
#include "plot/plot.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* The subcommands: `attnrun NAME ...` runs main(argc - 1, argv + 1). */
static const struct subcommand {
    const char *name;
    int (*main)(int argc, char **argv);
} subcommands[] = {
    {"plot", plot_main},
};

#define SUBCOMMAND_COUNT (sizeof subcommands / sizeof subcommands[0])

/* Whether the first word, which names no subcommand, is one mistyped: a
 * bare word (no option, no "/" or "." of a file name) that names no file
 * and lies near a subcommand's name.  Then it says so (the run would only
 * report a missing input). */
static bool mistyped_subcommand(const char *word)
{
    const char *names[SUBCOMMAND_COUNT];
    struct stat st;
    if (word[0] == '\0' || word[0] == '-' || strpbrk(word, "/.") != NULL ||
        stat(word, &st) == 0 || errno != ENOENT)
        return false;
    for (size_t i = 0; i < SUBCOMMAND_COUNT; i++)
        names[i] = subcommands[i].name;
    const char *near = cli_nearest(word, names, SUBCOMMAND_COUNT);
    if (near == NULL)
        return false;
    fprintf(stderr, "attnrun: %s: no such file, nor a subcommand; did you mean attnrun %s?\n", word,
            near);
    return true;
}

int main(int argc, char **argv)
{
    process_open_standard_descriptors();
    for (size_t i = 0; argc > 1 && i < SUBCOMMAND_COUNT; i++)
        if (strcmp(argv[1], subcommands[i].name) == 0)
            return subcommands[i].main(argc - 1, argv + 1);
    if (argc > 1 && mistyped_subcommand(argv[1]))
        return EXIT_INPUT;
    return attnrun_main(argc, argv);
}
