/* append.c - attnbench-append: what appending a layer to a results file
 * costs as the file grows (attnrun --append).
 *
 *     attnbench-append --attnrun build/attnrun --gen build/bench/attnbench-gen
 *     attnbench-append --layers 12 --runs 5 --workload gpt2
 *
 * For a workload of workloads.h (gpt2 unless --workload), it appends the
 * same layer (the workload's input and options) L times (--layers, 12) to
 * one fresh results file, as groups /layer01 ... /layerL, timing each
 * append as a whole process.  Before each append it times a plain `-o`
 * run of the same layer into a file of its own beside the results file
 * (kept to the end of the sequence), so that both see the disk in the
 * same state: in a virtual machine a run slows down as writes pile up,
 * whatever wrote them.  The sequence is repeated N times
 * (--runs, 5), each into a new directory.  It prints, per layer, the
 * median time of the append and of the plain run, the median of the
 * ratio of each append to the plain run before it, and the fastest of
 * the N runs of each; then the ratio of the last append to the first,
 * and the sizes of the index and of one part.  An append costs what the
 * new results cost, not what the file already holds, when its ratio to
 * the plain run stays flat from layer 1 to layer L.
 *
 * Progress goes to stderr, the report to stdout.  Exit status: 0 every run
 * worked, 1 otherwise, 2 usage error.
 */
#define _DEFAULT_SOURCE

#include <dirent.h>
#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/options.h"
#include "run.h"
#include "workloads.h"

#define PROG "attnbench-append"
#define MAX_LAYERS 64
#define MAX_RUNS 50
#define ARGV_MAX 24

struct options {
    const char *attnrun, *gen, *dir;
    const char *tiny;           /* a tiny layer's input (one head) */
    const struct bench_workload *w;
    int layers, runs;
    bool help;
};

/* Removes dir and the files in it and in its subdirectories (one level:
 * the parts directory); missing is fine. */
static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[PATH_MAX];
        struct stat st;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
            remove_tree(path);
        else
            unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

/* The argv of one attnrun run of the workload into out; with group, an
 * append of that group.  The strings live in `text`. */
static void attnrun_argv(const struct options *o, const char *input, const char *out_path,
                         const char *group, char *argv[ARGV_MAX], char text[2][32])
{
    int n = 0;
    argv[n++] = (char *)o->attnrun;
    argv[n++] = (char *)input;
    argv[n++] = "-o";
    argv[n++] = (char *)out_path;
    argv[n++] = "-q";
    push_workload(o->w, argv, &n, ARGV_MAX, 3, text);
    if (group != NULL) {
        argv[n++] = "--append";
        argv[n++] = "--group";
        argv[n++] = (char *)group;
    }
    argv[n] = NULL;
}

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static int parse_workload(void *settings, const cli_option *option, const char *name,
                          const char *value)
{
    struct options *o = settings;
    (void)option;
    if ((o->w = bench_find_workload(value)) == NULL)
        return cli_usage_error("%s '%s': expected a workload of bench/workloads.h", name, value);
    return EXIT_OK;
}

#define OPTION(field) offsetof(struct options, field)

static const cli_option options[] = {
    BENCH_OPTION_ATTNRUN(struct options),
    BENCH_OPTION_GEN(struct options),
    BENCH_OPTION_DIR(struct options),
    {"workload", 0, CLI_CUSTOM, 0, .parse = parse_workload, .value = "NAME",
     .help = "the layer appended (default gpt2)"},
    {"layers", 0, CLI_INT, OPTION(layers), .min = 1, .max = MAX_LAYERS, .value = "L",
     .expected = "a whole number from 1 to 64", .help = "layers appended (default 12)"},
    {"runs", 0, CLI_INT, OPTION(runs), .min = 1, .max = MAX_RUNS, .value = "N",
     .expected = "a whole number from 1 to 50", .help = "sequences of appends (default 5)"},
    {"tiny", 0, CLI_TEXT, OPTION(tiny), .value = "PATH",
     .help = "a one-head layer for the index's cost (default fixtures/toy.h5)"},
    {"help", 'h', CLI_FLAG, OPTION(help), .help = "this help"},
    {NULL},
};

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){BENCH_ATTNRUN, BENCH_GEN, BENCH_DIR,
                          "fixtures/toy.h5", bench_find_workload("gpt2"), 12, 5, false};
    cli_set_command(PROG, PROG " --help");
    int code = cli_parse(options, argc, argv, o);
    if (code != EXIT_OK)
        return code;
    if (o->help) {
        printf("usage: " PROG " [OPTIONS]\n\n"
               "Times appending L copies of a workload's layer (default gpt2, 12 layers)\n"
               "to one results file with attnrun --append, N times (default 5), then a\n"
               "tiny one-head layer (default fixtures/toy.h5) to indexes of 1 to 400 groups.\n\n");
        cli_print_options(options, stdout);
        exit(0);
    }
    if (optind < argc)
        return cli_usage_error("no operands expected, got '%s'", argv[optind]);
    return -1;
}

/* The paths of a run. */
struct paths {
    char input[PATH_MAX];       /* the workload's input                     */
    char seq[PATH_MAX];         /* the directory of one sequence of appends */
    char index[PATH_MAX];       /* the results file in it                   */
    char part[PATH_MAX];        /* its first part                           */
    char plain[PATH_MAX];       /* the tiny plain run's output              */
    char tiny[PATH_MAX];        /* the index of the index-cost figure       */
};

/* Per layer l and run r (MAX_LAYERS, MAX_RUNS): the times of the append and
 * of the plain run before it, and their ratio. */
struct layer_times {
    double append[MAX_LAYERS][MAX_RUNS], plain[MAX_LAYERS][MAX_RUNS];
    double ratio[MAX_LAYERS][MAX_RUNS];
    long long index_bytes, part_bytes;
};

/* o.runs sequences of o.layers appends, each after a plain run; 0 or -1. */
static int time_layers(const struct options *o, const struct paths *p, struct layer_times *t)
{
    char text[2][32], *args[ARGV_MAX];
    for (int r = 0; r < o->runs; r++) {
        remove_tree(p->seq);
        if (mkdir(p->seq, 0777) != 0) {
            fprintf(stderr, PROG ": cannot make %s: %s\n", p->seq, strerror(errno));
            return -1;
        }
        fprintf(stderr, PROG ": run %d of %d: -o / --append s:", r + 1, o->runs);
        for (int l = 0; l < o->layers; l++) {
            char group[32], plain[PATH_MAX];
            if (!make_path(plain, "%s/plain%02d.h5", p->seq, l + 1))
                return -1;
            attnrun_argv(o, p->input, plain, NULL, args, text);
            if ((t->plain[l][r] = run_timed(args)) < 0) {
                fprintf(stderr, "\n" PROG ": attnrun -o %s failed\n", plain);
                return -1;
            }
            snprintf(group, sizeof group, "/layer%02d", l + 1);
            attnrun_argv(o, p->input, p->index, group, args, text);
            if ((t->append[l][r] = run_timed(args)) < 0) {
                fprintf(stderr, "\n" PROG ": attnrun --append --group %s failed\n", group);
                return -1;
            }
            t->ratio[l][r] = t->append[l][r] / t->plain[l][r];
            fprintf(stderr, " %.3f/%.3f", t->plain[l][r], t->append[l][r]);
        }
        fprintf(stderr, " s\n");
        t->index_bytes = file_size(p->index);
        t->part_bytes = file_size(p->part);
    }
    remove_tree(p->seq);
    return 0;
}

static void print_layers(const struct options *o, struct layer_times *t)
{
    double first = 0, last = 0, best_first = 0, best_last = 0, ratio_first = 0, ratio_last = 0;
    printf("appending %d layers of %s (%ldx%ldx%ld/%ld) to one results file, median of %d\n",
           o->layers, o->w->name, o->w->batch, o->w->seq, o->w->d_model, o->w->heads, o->runs);
    printf("%-6s %9s %9s %10s %9s %9s %10s\n", "layer", "append s", "-o same s", "x -o",
           "best app", "best -o", "x layer 1");
    for (int l = 0; l < o->layers; l++) {
        double m = median(t->append[l], o->runs), p = median(t->plain[l], o->runs);
        double bm = t->append[l][0], bp = t->plain[l][0];     /* median() sorted them */
        if (l == 0) {
            first = m;
            best_first = bm;
        }
        last = m;
        best_last = bm;
        ratio_last = median(t->ratio[l], o->runs);
        if (l == 0)
            ratio_first = ratio_last;
        printf("%-6d %9.3f %9.3f %10.2f %9.3f %9.3f %10.2f\n", l + 1, m, p, ratio_last, bm, bp,
               bm / best_first);
    }
    printf("last / first append: %.2f (medians), %.2f (best); append / -o same: %.2f at layer 1,\n"
           "%.2f at layer %d\n", last / first, best_last / best_first, ratio_first, ratio_last,
           o->layers);
    printf("-o same: a plain run of the same layer just before each append, into a file of its\n"
           "own beside; x -o: the median of append / that run; best: the fastest of the %d runs\n",
           o->runs);
    printf("index after %d layers: %lld bytes; one part: %lld bytes\n", o->layers, t->index_bytes,
           t->part_bytes);
}

/*
 * The index's own cost, which grows with the groups it holds: a tiny layer
 * (--tiny, the toy fixture) appended to indexes of 1 to 400 groups, 10 * N
 * times each (replacing its group), beside as many plain runs of it.
 */
static int index_cost(const struct options *o, const struct paths *p)
{
    static const int sizes[] = {1, 12, 100, 400};
    char group[32];
    int built = 0;                   /* groups /g0, /g1, ... in the index */
    double append[10 * MAX_RUNS], plain[10 * MAX_RUNS];
    char *append_args[] = {(char *)o->attnrun, (char *)o->tiny, "-o", (char *)p->tiny, "-q",
                           "--heads", "1", "--append", "--force", "--group", group, NULL};
    char *plain_args[] = {(char *)o->attnrun, (char *)o->tiny, "-o", (char *)p->plain, "-q",
                          "--heads", "1", NULL};
    remove_tree(p->seq);
    if (mkdir(p->seq, 0777) != 0) {
        fprintf(stderr, PROG ": cannot make %s: %s\n", p->seq, strerror(errno));
        return -1;
    }
    printf("\nthe index's own cost: a tiny layer (%s) appended to an index of k groups,\n"
           "its own group replaced each time (--force); median of %d, beside a plain -o run\n",
           o->tiny, 10 * o->runs);
    printf("%-8s %10s %10s %10s %12s\n", "groups", "append ms", "-o ms", "extra ms", "index bytes");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        for (; built < sizes[s] - 1; built++) {      /* the probe's own group makes k */
            snprintf(group, sizeof group, "/g%d", built);
            if (run_timed(append_args) < 0) {
                fprintf(stderr, PROG ": attnrun --append of %s failed\n", o->tiny);
                return -1;
            }
        }
        snprintf(group, sizeof group, "/probe");
        for (int r = 0; r < 10 * o->runs; r++) {
            unlink(p->plain);
            plain[r] = run_timed(plain_args);
            append[r] = run_timed(append_args);
            if (plain[r] < 0 || append[r] < 0) {
                fprintf(stderr, PROG ": attnrun on %s failed\n", o->tiny);
                return -1;
            }
        }
        unlink(p->plain);
        double a = median(append, 10 * o->runs), b = median(plain, 10 * o->runs);
        printf("%-8d %10.1f %10.1f %10.1f %12lld\n", sizes[s], 1e3 * a, 1e3 * b, 1e3 * (a - b),
               file_size(p->tiny));
    }
    remove_tree(p->seq);
    return 0;
}

int main(int argc, char **argv)
{
    static struct layer_times times;
    static struct paths p;
    struct options o;
    int status = parse_options(argc, argv, &o);
    if (status >= 0)
        return status;
    if (!make_path(p.input, "%s/%s.h5", o.dir, bench_input_of(o.w)->name) ||
        !make_path(p.seq, "%s/append", o.dir) ||
        !make_path(p.index, "%s/append/results.h5", o.dir) ||
        !make_path(p.part, "%s/append/results.h5.parts/layer01.1.h5", o.dir) ||
        !make_path(p.plain, "%s/append/plain.h5", o.dir) ||
        !make_path(p.tiny, "%s/append/tiny.h5", o.dir))
        return cli_error(2, "path too long: %s", o.dir);
    mkdir(o.dir, 0777);
    if (access(p.input, F_OK) != 0) {
        char *gen_argv[] = {(char *)o.gen, (char *)bench_input_of(o.w)->name, p.input, NULL};
        fprintf(stderr, PROG ": generating %s\n", p.input);
        if (run_timed(gen_argv) < 0) {
            fprintf(stderr, PROG ": %s could not generate %s\n", o.gen, p.input);
            return 1;
        }
    }
    if (time_layers(&o, &p, &times) != 0)
        return 1;
    print_layers(&o, &times);
    fflush(stdout);
    return index_cost(&o, &p) != 0;
}
