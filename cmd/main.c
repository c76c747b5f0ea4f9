/*
 * main.c - attnrun's entry point: the standard descriptors made safe, then
 * the command the first word names -- a subcommand of the table below, or
 * else the run itself (cmd/attnrun/).
 */
#include "attnrun/attnrun.h"
#include "cli/process.h"
#include "plot/plot.h"

#include <string.h>

/* The subcommands: `attnrun NAME ...` runs main(argc - 1, argv + 1). */
static const struct subcommand {
    const char *name;
    int (*main)(int argc, char **argv);
} subcommands[] = {
    {"plot", plot_main},
};

int main(int argc, char **argv)
{
    process_open_standard_descriptors();
    for (size_t i = 0; argc > 1 && i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (strcmp(argv[1], subcommands[i].name) == 0)
            return subcommands[i].main(argc - 1, argv + 1);
    return attnrun_main(argc, argv);
}
