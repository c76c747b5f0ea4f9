/*
 * main.c - attnrun's entry point: the standard descriptors made safe, then
 * the command the first word names -- a subcommand of the table below, or
 * else the run itself (cmd/attnrun/).
 */
#include "attnrun/attnrun.h"
#include "cli/exit.h"
#include "cli/fault_server.h"
#include "cli/options.h"
#include "cli/process.h"
#include "heads/heads.h"
#include "plot/plot.h"
#include "rollout/rollout.h"
#include "view/view.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Threads that wait sleep.  libgomp reads OMP_WAIT_POLICY once, in its
 * constructor; by default its idle threads spin at every barrier and
 * while thread 0 does the I/O, burning CPU that another run on a shared
 * machine could use.  A function of the executable's .preinit_array runs
 * before any shared library's constructor, so it can set the policy
 * first: passive, whatever the environment says.  The environment cannot
 * grow there (a setenv is undone when libc starts; the array is the
 * kernel's), so:
 *   - an OMP_WAIT_POLICY entry is replaced in place (and a GOMP_SPINCOUNT,
 *     which libgomp would put first, becomes 0);
 *   - else the entry "_" (the shell's last command: read by no library's
 *     constructor) lends its slot until main gives it back;
 *   - else the program executes itself again with the entry added, which
 *     costs the exec and the loading of its libraries (about 9 ms here);
 *     where even that fails, the run goes on as before.
 * bench/README.md ("Waiting") measures it.
 */
static char passive_wait[] = "OMP_WAIT_POLICY=passive";
static char **lent_slot;        /* the slot of "_", lent until main */
static char *lent_entry;        /* what it held                      */

static char no_spin[] = "GOMP_SPINCOUNT=0";

static void wait_passively(int argc, char **argv, char **envp)
{
    char **underscore = NULL;
    bool set = false;
    size_t count = 0;
    (void)argc;
    if (envp == NULL)
        return;
    for (; envp[count] != NULL; count++) {
        if (strncmp(envp[count], "OMP_WAIT_POLICY=", 16) == 0) {
            envp[count] = passive_wait;
            set = true;
        } else if (strncmp(envp[count], "GOMP_SPINCOUNT=", 15) == 0) {
            envp[count] = no_spin;       /* libgomp would let it win */
        } else if (strncmp(envp[count], "_=", 2) == 0) {
            underscore = &envp[count];
        }
    }
    if (set)
        return;
    if (underscore != NULL) {
        lent_slot = underscore;
        lent_entry = *underscore;
        *underscore = passive_wait;
        return;
    }
    if (count > 1u << 16)
        return;
    char *with[count + 2];
    memcpy(with, envp, count * sizeof *with);
    with[count] = passive_wait;
    with[count + 1] = NULL;
    /* the path it was started by (cwd is still the same), else /proc's */
    const char *self = (const char *)getauxval(AT_EXECFN);
    execve(self != NULL ? self : "/proc/self/exe", argv, with);
}

__attribute__((section(".preinit_array"), used))
static void (*const run_before_libraries)(int, char **, char **) = wait_passively;

/* The subcommands: `attnrun NAME ...` runs main(argc - 1, argv + 1). */
static const struct subcommand {
    const char *name;
    int (*main)(int argc, char **argv);
} subcommands[] = {
    {"plot", plot_main},
    {"heads", heads_main},
    {"rollout", rollout_main},
    {"flow", rollout_main},
    {"view", view_main},
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
    if (lent_slot != NULL)
        *lent_slot = lent_entry;       /* libgomp has read the policy */
    fault_serve();                     /* the fault build's sweeps only */
    process_open_standard_descriptors();
    for (size_t i = 0; argc > 1 && i < SUBCOMMAND_COUNT; i++)
        if (strcmp(argv[1], subcommands[i].name) == 0)
            return subcommands[i].main(argc - 1, argv + 1);
    if (argc > 1 && mistyped_subcommand(argv[1]))
        return EXIT_INPUT;
    return attnrun_main(argc, argv);
}
