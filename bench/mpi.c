/* mpi.c - attnbench-mpi: how attnrun-mpi scales with the ranks of an MPI
 * job on this machine.
 *
 *     attnbench-mpi --attnrun-mpi build/attnrun-mpi --gen build/bench/attnbench-gen
 *     attnbench-mpi --ranks 1,2,4 --runs 5 --workload gpt2 --attnrun build/attnrun
 *
 * For a workload of workloads.h (gpt2 unless --workload) it times
 * `mpirun -n P attnrun-mpi IN -o OUT --threads 1 --save output` for each P
 * of --ranks (1,2), --runs times each (3), as whole jobs, after one
 * untimed job that brings the input into the page cache; with --attnrun
 * also the serial build on one thread, the cost of MPI itself.  It prints
 * per P the median time, the speed-up over P = 1 and the efficiency
 * (speed-up / P), and whether P = 2 meets the target: at least 1.7 times
 * as fast as P = 1.  mpirun gets --oversubscribe (P may exceed the cores)
 * and, as root, --allow-run-as-root.
 *
 * Progress goes to stderr, the report to stdout.  Exit status: 0 every run
 * worked, 1 otherwise, 2 usage error.
 */
#define _DEFAULT_SOURCE

#include <string.h>
#include <sys/stat.h>

#include "run.h"
#include "workloads.h"

#define PROG "attnbench-mpi"
#define MAX_RANKS 8
#define MAX_RUNS 50
#define ARGV_MAX 32
#define TARGET_RANKS 2
#define TARGET_SPEEDUP 1.7

struct options {
    const char *attnrun_mpi, *attnrun, *gen, *dir, *mpirun;
    const struct bench_workload *w;
    int ranks[MAX_RANKS], rank_count, runs;
};

static int usage(const char *why, const char *arg)
{
    fprintf(stderr, PROG ": %s%s%s\n"
            "usage: " PROG " [--attnrun-mpi PATH] [--attnrun PATH] [--gen PATH] [--dir DIR]\n"
            "       [--mpirun PATH] [--workload NAME] [--ranks P,P,...] [--runs N]\n",
            why, arg ? ": " : "", arg ? arg : "");
    return 2;
}

/* A whole number in [1, max], or -1. */
static int parse_count(const char *text, int max)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    return errno || end == text || *end || v < 1 || v > max ? -1 : (int)v;
}

/* "1,2,4" into o->ranks; false when malformed. */
static int parse_ranks(struct options *o, const char *text)
{
    char copy[128];
    snprintf(copy, sizeof copy, "%s", text);
    o->rank_count = 0;
    for (char *save = NULL, *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        int p_value = parse_count(p, 64);
        if (p_value < 0 || o->rank_count == MAX_RANKS)
            return 0;
        o->ranks[o->rank_count++] = p_value;
    }
    return o->rank_count > 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){"build/attnrun-mpi", NULL, "build/bench/attnbench-gen",
                          "build/bench/work", "mpirun", bench_find_workload("gpt2"),
                          {1, 2}, 2, 3};
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(opt, "--help") == 0) {
            usage("times attnrun-mpi at several rank counts", NULL);
            exit(0);
        }
        if (value == NULL)
            return usage("missing value", opt);
        i++;
        if (strcmp(opt, "--attnrun-mpi") == 0)
            o->attnrun_mpi = value;
        else if (strcmp(opt, "--attnrun") == 0)
            o->attnrun = value;
        else if (strcmp(opt, "--gen") == 0)
            o->gen = value;
        else if (strcmp(opt, "--dir") == 0)
            o->dir = value;
        else if (strcmp(opt, "--mpirun") == 0)
            o->mpirun = value;
        else if (strcmp(opt, "--workload") == 0) {
            if ((o->w = bench_find_workload(value)) == NULL)
                return usage("unknown workload", value);
        } else if (strcmp(opt, "--ranks") == 0) {
            if (!parse_ranks(o, value))
                return usage("--ranks takes counts from 1 to 64, comma separated", value);
        } else if (strcmp(opt, "--runs") == 0) {
            if ((o->runs = parse_count(value, MAX_RUNS)) < 0)
                return usage("--runs takes 1 to 50", value);
        } else {
            return usage("unknown option", opt);
        }
    }
    return 0;
}

/* The argv of one job: mpirun -n P attnrun-mpi (ranks > 0), or the serial
 * attnrun (ranks 0), on one thread per rank; the strings live in text. */
static void job_argv(const struct options *o, int ranks, const char *input, const char *out,
                     char *argv[ARGV_MAX], char text[3][32])
{
    int n = 0;
    if (ranks > 0) {
        snprintf(text[2], 32, "%d", ranks);
        argv[n++] = (char *)o->mpirun;
        if (geteuid() == 0)
            argv[n++] = "--allow-run-as-root";
        argv[n++] = "--oversubscribe";
        argv[n++] = "-n";
        argv[n++] = text[2];
        argv[n++] = (char *)o->attnrun_mpi;
    } else {
        argv[n++] = (char *)o->attnrun;
    }
    argv[n++] = (char *)input;
    argv[n++] = "-o";
    argv[n++] = (char *)out;
    argv[n++] = "--force";
    argv[n++] = "-q";
    argv[n++] = "--threads";
    argv[n++] = "1";
    push_workload(o->w, argv, &n, ARGV_MAX, 2, text);
    if (o->w->save == NULL) {
        argv[n++] = "--save";
        argv[n++] = "output";
    }
    argv[n] = NULL;
}

/* The median of o->runs timed jobs (after one untimed), or -1. */
static double time_jobs(const struct options *o, int ranks, const char *input, const char *out)
{
    char *argv[ARGV_MAX], text[3][32];
    double seconds[MAX_RUNS];
    job_argv(o, ranks, input, out, argv, text);
    if (ranks > 0)
        fprintf(stderr, PROG ": P = %d:", ranks);
    else
        fprintf(stderr, PROG ": serial attnrun:");
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

int main(int argc, char **argv)
{
    struct options o;
    int status = parse_options(argc, argv, &o);
    if (status != 0)
        return status;
    char input[PATH_MAX], out[PATH_MAX];
    struct stat st;
    if (!make_path(input, "%s/%s.h5", o.dir, bench_input_of(o.w)->name) ||
        !make_path(out, "%s/mpi-out.h5", o.dir))
        return usage("path too long", o.dir);
    mkdir(o.dir, 0777);
    if (stat(input, &st) != 0) {
        char *gen_argv[] = {(char *)o.gen, (char *)bench_input_of(o.w)->name, input, NULL};
        fprintf(stderr, PROG ": generating %s\n", input);
        if (run_timed(gen_argv) < 0) {
            fprintf(stderr, PROG ": %s could not generate %s\n", o.gen, input);
            return 1;
        }
    }
    double serial = o.attnrun != NULL ? time_jobs(&o, 0, input, out) : 0;
    double times[MAX_RANKS], base = 0;
    for (int i = 0; i < o.rank_count; i++) {
        if ((times[i] = time_jobs(&o, o.ranks[i], input, out)) < 0)
            return 1;
        if (o.ranks[i] == 1)
            base = times[i];
    }
    if (serial < 0)
        return 1;

    const struct bench_workload *w = o.w;
    printf("MPI scaling of %s: B=%ld n=%ld D=%ld H=%ld%s, --save %s, one thread per rank, "
           "median of %d jobs\n", w->name, w->batch, w->seq, w->d_model, w->heads,
           w->causal ? " causal" : "", w->save ? w->save : "output", o.runs);
    printf("  %-22s %10s %10s %11s\n", "job", "seconds", "speed-up", "efficiency");
    if (o.attnrun != NULL)
        printf("  %-22s %10.3f %10s %11s\n", "attnrun (serial)", serial, "", "");
    double measured = 0;
    for (int i = 0; i < o.rank_count; i++) {
        char name[32];
        snprintf(name, sizeof name, "mpirun -n %d", o.ranks[i]);
        if (base > 0) {
            double speedup = base / times[i];
            printf("  %-22s %10.3f %9.2fx %10.0f%%\n", name, times[i], speedup,
                   100 * speedup / o.ranks[i]);
            if (o.ranks[i] == TARGET_RANKS)
                measured = speedup;
        } else {
            printf("  %-22s %10.3f %10s %11s\n", name, times[i], "-", "-");
        }
    }
    if (base > 0 && measured > 0)
        printf("target: P=%d at least %.2fx as fast as P=1: %.2fx  %s\n", TARGET_RANKS,
               TARGET_SPEEDUP, measured, measured >= TARGET_SPEEDUP ? "PASS" : "MISS");
    else
        printf("target: P=%d against P=1: not measured (--ranks needs both)\n", TARGET_RANKS);
    return 0;
}
