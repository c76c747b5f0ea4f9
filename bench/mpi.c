/* mpi.c - attnbench-mpi: how attnrun-mpi scales with the ranks of an MPI
 * job on this machine.
 *
 *     attnbench-mpi --attnrun-mpi build/attnrun-mpi --gen build/bench/attnbench-gen
 *     attnbench-mpi --ranks 1,2,4 --runs 5 --workload gpt2,xl --attnrun build/attnrun
 *
 * For workloads of workloads.h (gpt2 and xl unless --workload) it times
 * `mpirun -n P attnrun-mpi IN -o OUT --threads 1 --save output` for each P
 * of --ranks (1,2,4), --runs times each (3), as whole jobs, after one
 * untimed job that brings the input into the page cache; with --attnrun
 * also the serial build on one thread, the cost of MPI itself.  It also
 * times the start-up alone -- `mpirun -n P attnrun-mpi --version`, MPI
 * started and ended with no work -- and prints per workload and P the
 * median time, the speed-up over P = 1 and the efficiency (speed-up / P),
 * both for the whole job and for the job less its start-up; then whether
 * gpt2 at P = 2 meets the target: at least 1.7 times as fast as P = 1 (a
 * whole job), xl at P = 2 at least 1.8 times, and every workload at P = 4
 * (more ranks than the 2 cores) no slower than at P = 2.  mpirun gets --oversubscribe (P may exceed the cores), as
 * root --allow-run-as-root, and --mpirun-args (default: OpenMPI's shared
 * memory transport, which one machine needs, without probing for network
 * fabrics).
 *
 * Progress goes to stderr, the report to stdout.  Exit status: 0 every run
 * worked, 1 otherwise, 2 usage error.
 */
#define _DEFAULT_SOURCE

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/options.h"
#include "run.h"
#include "workloads.h"

#define PROG "attnbench-mpi"
#define MAX_RANKS 8
#define MAX_RUNS 50
#define MAX_WORKLOADS 8
#define MAX_MPIRUN_ARGS 8
#define ARGV_MAX 48
#define TARGET_WORKLOAD "gpt2"
#define TARGET_RANKS 2
#define TARGET_SPEEDUP 1.7

/* A long job scales (xl: one item whose query rows the ranks share, at
 * least 1.8x at P=2), and more ranks than cores cost nothing (every
 * workload at P=4, oversubscribed, no slower than at P=2). */
#define LONG_WORKLOAD "xl"
#define LONG_SPEEDUP 1.8
#define CROWD_RANKS 4
#define CROWD_OF 2

struct options {
    const char *attnrun_mpi, *attnrun, *gen, *dir, *mpirun;
    const struct bench_workload *w[MAX_WORKLOADS];
    int workloads;
    char mpirun_text[256];           /* as given, for the report */
    char mpirun_words[256];          /* cut into mpirun_args */
    char *mpirun_args[MAX_MPIRUN_ARGS];
    int mpirun_arg_count;
    int ranks[MAX_RANKS], rank_count, runs;
    bool help;
};

/* One workload's medians: serial, then per P the job and its start-up. */
struct times {
    double serial, job[MAX_RANKS], start[MAX_RANKS];
};

/* "1,2,4" into o->ranks; false when malformed. */
static int parse_ranks(struct options *o, const char *text)
{
    char copy[128];
    snprintf(copy, sizeof copy, "%s", text);
    o->rank_count = 0;
    for (char *save = NULL, *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        size_t ranks;
        if (!cli_parse_number(p, 64, &ranks, NULL) || ranks < 1 || o->rank_count == MAX_RANKS)
            return 0;
        o->ranks[o->rank_count++] = (int)ranks;
    }
    return o->rank_count > 0;
}

/* "gpt2,xl" into o->w; false when a name is unknown. */
static int parse_workloads(struct options *o, const char *text)
{
    char copy[256];
    snprintf(copy, sizeof copy, "%s", text);
    o->workloads = 0;
    for (char *save = NULL, *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (o->workloads == MAX_WORKLOADS || (o->w[o->workloads] = bench_find_workload(p)) == NULL)
            return 0;
        o->workloads++;
    }
    return o->workloads > 0;
}

/* The words of text (spaces between) into o->mpirun_args. */
static int parse_mpirun_args(struct options *o, const char *text)
{
    snprintf(o->mpirun_text, sizeof o->mpirun_text, "%s", text);
    snprintf(o->mpirun_words, sizeof o->mpirun_words, "%s", text);
    o->mpirun_arg_count = 0;
    for (char *save = NULL, *p = strtok_r(o->mpirun_words, " ", &save); p;
         p = strtok_r(NULL, " ", &save)) {
        if (o->mpirun_arg_count == MAX_MPIRUN_ARGS)
            return 0;
        o->mpirun_args[o->mpirun_arg_count++] = p;
    }
    return 1;
}

/* --ranks, --workload, --mpirun-args: lists cut by the functions above. */
static int parse_list(void *settings, const cli_option *option, const char *name,
                      const char *value)
{
    struct options *o = settings;
    const bool good = option->first == 0   ? parse_ranks(o, value)
                    : option->first == 1 ? parse_workloads(o, value)
                                         : parse_mpirun_args(o, value);
    return good ? EXIT_OK : cli_usage_error("%s '%s': expected %s", name, value, option->expected);
}

#define OPTION(field) offsetof(struct options, field)

static const cli_option options[] = {
    {"attnrun-mpi", 0, CLI_TEXT, OPTION(attnrun_mpi), .value = "PATH",
     .help = "attnrun-mpi to time (default build/attnrun-mpi)"},
    {"attnrun", 0, CLI_TEXT, OPTION(attnrun), .value = "PATH",
     .help = "the serial attnrun beside it (default: none)"},
    BENCH_OPTION_GEN(struct options),
    BENCH_OPTION_DIR(struct options),
    {"mpirun", 0, CLI_TEXT, OPTION(mpirun), .value = "PATH", .help = "mpirun (default from PATH)"},
    {"mpirun-args", 0, CLI_CUSTOM, 0, .parse = parse_list, .first = 2, .value = "'ARGS'",
     .expected = "at most 8 words",
     .help = "words for mpirun (default --mca pml ob1 --mca btl self,vader)"},
    {"workload", 0, CLI_CUSTOM, 0, .parse = parse_list, .first = 1, .value = "NAME,...",
     .expected = "workloads of bench/workloads.h (at most 8)", .help = "workloads (default gpt2,xl)"},
    {"ranks", 0, CLI_CUSTOM, 0, .parse = parse_list, .first = 0, .value = "P,...",
     .expected = "counts from 1 to 64, comma separated", .help = "rank counts (default 1,2)"},
    {"runs", 0, CLI_INT, OPTION(runs), .min = 1, .max = MAX_RUNS, .value = "N",
     .expected = "a whole number from 1 to 50", .help = "jobs timed per point (default 3)"},
    {"help", 'h', CLI_FLAG, OPTION(help), .help = "this help"},
    {NULL},
};

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){
        .attnrun_mpi = "build/attnrun-mpi", .gen = BENCH_GEN,
        .dir = BENCH_DIR, .mpirun = "mpirun", .ranks = {1, 2, 4}, .rank_count = 3,
        .runs = 3,
    };
    parse_workloads(o, "gpt2,xl");
    parse_mpirun_args(o, "--mca pml ob1 --mca btl self,vader");
    cli_set_command(PROG, PROG " --help");
    int code = cli_parse(options, argc, argv, o);
    if (code != EXIT_OK)
        return code;
    if (o->help) {
        printf("usage: " PROG " [OPTIONS]\n\ntimes attnrun-mpi at several rank counts\n\n");
        cli_print_options(options, stdout);
        exit(0);
    }
    if (optind < argc)
        return cli_usage_error("no operands expected, got '%s'", argv[optind]);
    return 0;
}

/* The argv of one job: mpirun -n P attnrun-mpi (ranks > 0), or the serial
 * attnrun (ranks 0), on one thread per rank, of workload w (NULL: only
 * --version, the start-up); the strings live in text. */
static void job_argv(const struct options *o, const struct bench_workload *w, int ranks,
                     const char *input, const char *out, char *argv[ARGV_MAX], char text[3][32])
{
    int n = 0;
    if (ranks > 0) {
        snprintf(text[2], 32, "%d", ranks);
        argv[n++] = (char *)o->mpirun;
        if (geteuid() == 0)
            argv[n++] = "--allow-run-as-root";
        argv[n++] = "--oversubscribe";
        for (int i = 0; i < o->mpirun_arg_count; i++)
            argv[n++] = o->mpirun_args[i];
        argv[n++] = "-n";
        argv[n++] = text[2];
        argv[n++] = (char *)o->attnrun_mpi;
    } else {
        argv[n++] = (char *)o->attnrun;
    }
    if (w == NULL) {
        argv[n++] = "--version";
        argv[n] = NULL;
        return;
    }
    argv[n++] = (char *)input;
    argv[n++] = "-o";
    argv[n++] = (char *)out;
    argv[n++] = "--force";
    argv[n++] = "-q";
    argv[n++] = "--threads";
    argv[n++] = "1";
    push_workload(w, argv, &n, ARGV_MAX, 2, text);
    if (w->save == NULL) {
        argv[n++] = "--save";
        argv[n++] = "output";
    }
    argv[n] = NULL;
}

/* The median of o->runs timed jobs (after one untimed), or -1. */
static double time_jobs(const struct options *o, const struct bench_workload *w, int ranks,
                        const char *input, const char *out)
{
    char *argv[ARGV_MAX], text[3][32];
    double seconds[MAX_RUNS];
    job_argv(o, w, ranks, input, out, argv, text);
    if (ranks > 0)
        fprintf(stderr, PROG ": %s, P = %d:", w ? w->name : "start-up", ranks);
    else
        fprintf(stderr, PROG ": %s, serial attnrun:", w->name);
    for (int r = -1; r < o->runs; r++) {
        double s = run_timed(argv);
        if (s < 0) {
            fprintf(stderr, "\n" PROG ": the job failed:");
            for (int i = 0; argv[i]; i++)
                fprintf(stderr, " %s", argv[i]);
            fprintf(stderr, "\n");
            return -1;
        }
        if (r >= 0)
            seconds[r] = s;
        fprintf(stderr, " %.2f", s);
    }
    fprintf(stderr, "\n");
    unlink(out);
    return median(seconds, o->runs);
}

/* Times workload w (its input made when missing); 0 or -1. */
static int time_workload(const struct options *o, const struct bench_workload *w,
                         const double *start, struct times *t)
{
    char input[PATH_MAX], out[PATH_MAX];
    struct stat st;
    if (!make_path(input, "%s/%s.h5", o->dir, bench_input_of(w)->name) ||
        !make_path(out, "%s/mpi-out.h5", o->dir))
        return -1;
    if (stat(input, &st) != 0) {
        char *gen_argv[] = {(char *)o->gen, (char *)bench_input_of(w)->name, input, NULL};
        fprintf(stderr, PROG ": generating %s\n", input);
        if (run_timed(gen_argv) < 0) {
            fprintf(stderr, PROG ": %s could not generate %s\n", o->gen, input);
            return -1;
        }
    }
    t->serial = o->attnrun != NULL ? time_jobs(o, w, 0, input, out) : 0;
    if (t->serial < 0)
        return -1;
    for (int i = 0; i < o->rank_count; i++) {
        t->start[i] = start[i];
        if ((t->job[i] = time_jobs(o, w, o->ranks[i], input, out)) < 0)
            return -1;
    }
    return 0;
}

/* One workload's table; its speed-up at TARGET_RANKS (0: not measured). */
static double print_workload(const struct options *o, const struct bench_workload *w,
                             const struct times *t)
{
    double base = 0, base_work = 0, at_target = 0;
    for (int i = 0; i < o->rank_count; i++)
        if (o->ranks[i] == 1) {
            base = t->job[i];
            base_work = t->job[i] - t->start[i];
        }
    printf("\n%s: B=%ld n=%ld D=%ld H=%ld%s, --save %s\n", w->name, w->batch, w->seq, w->d_model,
           w->heads, w->causal ? " causal" : "", w->save ? w->save : "output");
    printf("  %-18s %9s %9s %10s   %14s %9s %10s\n", "job", "seconds", "speed-up", "efficiency",
           "less start-up", "speed-up", "efficiency");
    if (o->attnrun != NULL)
        printf("  %-18s %9.3f\n", "attnrun (serial)", t->serial);
    for (int i = 0; i < o->rank_count; i++) {
        char name[32];
        const double work = t->job[i] - t->start[i];
        snprintf(name, sizeof name, "mpirun -n %d", o->ranks[i]);
        if (base <= 0) {
            printf("  %-18s %9.3f %9s %10s   %14.3f\n", name, t->job[i], "-", "-", work);
            continue;
        }
        const double speedup = base / t->job[i], work_speedup = base_work / work;
        printf("  %-18s %9.3f %8.2fx %9.0f%%   %14.3f %8.2fx %9.0f%%\n", name, t->job[i], speedup,
               100 * speedup / o->ranks[i], work, work_speedup, 100 * work_speedup / o->ranks[i]);
        if (o->ranks[i] == TARGET_RANKS)
            at_target = speedup;
    }
    return at_target;
}

int main(int argc, char **argv)
{
    struct options o;
    int status = parse_options(argc, argv, &o);
    if (status != 0)
        return status;
    mkdir(o.dir, 0777);
    double start[MAX_RANKS];
    for (int i = 0; i < o.rank_count; i++)
        if ((start[i] = time_jobs(&o, NULL, o.ranks[i], NULL, "/dev/null")) < 0)
            return 1;
    struct times t[MAX_WORKLOADS];
    for (int k = 0; k < o.workloads; k++)
        if (time_workload(&o, o.w[k], start, &t[k]) < 0)
            return 1;

    printf("MPI scaling: one thread per rank (--threads 1), median of %d jobs, mpirun %s\n",
           o.runs, o.mpirun_text[0] ? o.mpirun_text : "(no extra arguments)");
    printf("start-up (mpirun -n P attnrun-mpi --version: MPI started and ended, no work):");
    for (int i = 0; i < o.rank_count; i++)
        printf("%s P=%d %.3f s", i ? "," : "", o.ranks[i], start[i]);
    printf("\n");
    double measured = -1;
    for (int k = 0; k < o.workloads; k++) {
        double at = print_workload(&o, o.w[k], &t[k]);
        if (strcmp(o.w[k]->name, TARGET_WORKLOAD) == 0)
            measured = at;
    }
    if (measured > 0)
        printf("\ntarget: %s, P=%d at least %.2fx as fast as P=1 (whole jobs): %.2fx  %s\n",
               TARGET_WORKLOAD, TARGET_RANKS, TARGET_SPEEDUP, measured,
               measured >= TARGET_SPEEDUP ? "PASS" : "MISS");
    else
        printf("\ntarget: %s at P=%d against P=1: not measured (--workload and --ranks need them)\n",
               TARGET_WORKLOAD, TARGET_RANKS);
    /* The targets judge whole jobs; beside each, the same ratio less the
     * start-up (mpirun starting and ending P processes), which attnrun
     * does not control. */
    for (int k = 0; k < o.workloads; k++) {
        double one = 0, two = 0, crowd = 0, one_w = 0, two_w = 0, crowd_w = 0;
        for (int i = 0; i < o.rank_count; i++) {
            const double work = t[k].job[i] - t[k].start[i];
            if (o.ranks[i] == 1)
                one = t[k].job[i], one_w = work;
            if (o.ranks[i] == CROWD_OF)
                two = t[k].job[i], two_w = work;
            if (o.ranks[i] == CROWD_RANKS)
                crowd = t[k].job[i], crowd_w = work;
        }
        if (strcmp(o.w[k]->name, LONG_WORKLOAD) == 0 && one > 0 && two > 0)
            printf("target: %s, P=2 at least %.2fx as fast as P=1: %.2fx (%.2fx less start-up)  %s\n",
                   LONG_WORKLOAD, LONG_SPEEDUP, one / two, one_w / two_w,
                   one / two >= LONG_SPEEDUP ? "PASS" : "MISS");
        if (two > 0 && crowd > 0)
            printf("target: %s, P=%d (oversubscribed) no slower than P=%d: %.2fx its time "
                   "(%.2fx less start-up)  %s\n", o.w[k]->name, CROWD_RANKS, CROWD_OF,
                   crowd / two, crowd_w / two_w, crowd <= two ? "PASS" : "MISS");
    }
    return 0;
}
