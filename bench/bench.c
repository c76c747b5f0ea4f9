/* bench.c - attnbench: times attnrun on the benchmark workloads, against
 * this machine's limits and against a numpy peer.
 *
 *     attnbench --attnrun build/attnrun --gen build/bench/attnbench-gen
 *     attnbench --attnrun build/attnrun --only gpt2,many --runs 3 --no-numpy
 *
 * It measures OpenBLAS sgemm on a 2048^3 product once, then for every
 * selected workload (workloads.h)
 *   1. generates the input with attnbench-gen, unless the file is there;
 *   2. reads the FLOPs and the output bytes from `attnrun --dry-run`, so
 *      the arithmetic has one source of truth;
 *   3. runs attnrun, then bench/ref_numpy.py, each 1 warm-up + N timed runs
 *      as whole processes, keeping the median time and the peak RSS, and
 *      the size of attnrun's last output file (the bytes on disk); the
 *      numpy warm-up also checks that attnrun's output equals numpy's;
 *   4. sweeps attnrun's threads, T = 1, 2, 4, ... and the core count, N
 *      timed runs each, taken in turns across the Ts (--no-sweep: not);
 *   5. measures the roofline's write rate: one plain contiguous HDF5 dataset
 *      of the bytes attnrun wrote, fsync included, in the directory the runs
 *      write to;
 * and prints the machine, then five tables: the workloads with their bytes
 * and write rates, attnrun against the roofline, the thread sweep, attnrun
 * against numpy, and every target of workloads.h with PASS or MISS (ratios
 * of times, bytes and RSS measured in this run).
 * Rows may share an input file (workloads.h: input); the numpy peer is
 * skipped for workloads with attnrun-only options (--kv-heads, args).
 * Progress and the programs' messages go to stderr, the report to stdout.
 *
 * Legend: B batch, n sequence length (queries = keys), D d_model, H heads,
 * T attnrun's --threads.
 * Exit status: 0 every run worked and every check agreed, 1 otherwise,
 * 2 usage error.
 */
#define _DEFAULT_SOURCE   /* wait4() and ru_maxrss, hidden by _POSIX_C_SOURCE alone */

#include <assert.h>
#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>
#include <hdf5.h>

#include "cli/options.h"
#include "clock.h"
#include "workloads.h"

#define PROG "attnbench"

#define MAX_RUNS 100
#define SGEMM_N 2048
#define SGEMM_REPEATS 3
#define WRITE_REPEATS 3
#define WRITE_BLOCK_VALUES ((hsize_t)16 << 20)   /* 64 MiB of float32 per H5Dwrite */
#define CHILD_OUT_SIZE 8192
#define NOTE_SIZE 160
#define MIB (1024.0 * 1024)          /* sizes in binary units, as attnrun says them */
#define GIB (1024.0 * 1024 * 1024)
#define ARGV_MAX 24
#define SWEEP_MAX 16   /* thread counts in the sweep: 1, 2, 4, ... 2^14, cores */
#define BENCH_MAX_TOGETHER 8   /* copies of a run at once, at most */

/* ref_numpy.py's "numpy or h5py is not installed", and the shell's
 * "cannot execute": both mean the peer is unavailable, not that it failed. */
#define EXIT_PEER_UNAVAILABLE 3
#define EXIT_EXEC_FAILED 127

struct options {
    const char *attnrun;   /* attnrun binary */
    const char *gen;       /* attnbench-gen binary */
    const char *python;    /* interpreter for the peer */
    const char *ref;       /* bench/ref_numpy.py */
    const char *dir;       /* inputs and outputs live here */
    int runs;              /* timed runs after the warm-up */
    bool numpy;            /* run the numpy peer */
    bool sweep;            /* run the thread sweep */
    bool no_numpy, no_sweep, help;   /* as the command line says */
    int sweep_threads[SWEEP_MAX];   /* its Ts, rising; the last is the core count */
    int n_sweep;
    int selected[BENCH_N_WORKLOADS];
    int name_width;        /* the workload column: 9, or wider for long names */
};

enum series_state { SERIES_NOT_RUN, SERIES_OK, SERIES_FAILED, SERIES_SKIPPED };

/* The timed runs of one program on one workload. */
struct series {
    enum series_state state;
    double median_s;
    double cpu_s;            /* median CPU seconds (user + sys) of the timed runs */
    long peak_rss_kib;       /* largest ru_maxrss of the timed runs */
    char note[NOTE_SIZE];    /* why it failed or was skipped */
};

/* Everything measured for one workload: one row of each table. */
struct row {
    const struct bench_workload *w;
    char input[PATH_MAX], attn_out[PATH_MAX], numpy_out[PATH_MAX];
    int prepared;            /* the input exists and the dry run parsed */
    char prep_note[NOTE_SIZE];
    double flops;            /* from attnrun --dry-run */
    double bytes;            /* output bytes, as attnrun --dry-run counts them */
    double disk_bytes;       /* size of attnrun's output file, or 0 before a run */
    double write_s;          /* best time to write disk_bytes as one dataset + fsync */
    double compute_s;        /* FLOPs / sgemm rate */
    double roof_s;           /* max(compute_s, write_s), or 0 when unknown */
    struct series attn, numpy;
    struct series sweep[SWEEP_MAX];   /* attnrun at options.sweep_threads[i] */
    struct series in_a_row, at_once;  /* w->together copies: one after the
                                         other, and all started at once */
    char check[32];          /* "ok 1.8e-07", "FAIL 3.1e-02" or "-" */
    char check_line[NOTE_SIZE];  /* ref_numpy.py's whole "check: ..." line */
    int check_failed;
};

/* A finished child process. */
struct child {
    int status;                  /* as wait4() reports it */
    double seconds;              /* fork to reaped, wall clock */
    double cpu_s;                /* its user + system CPU seconds */
    long maxrss_kib;             /* its peak resident set */
    char out[CHILD_OUT_SIZE];    /* its stdout and stderr, truncated, NUL-terminated */
};

/* An argv under construction; the strings must outlive it. */
struct argv_list {
    const char *v[ARGV_MAX];
    size_t n;
    char heads[24];              /* the --heads value's text */
    char kv_heads[24];           /* the --kv-heads value's text */
    char threads[24];            /* the --threads value's text */
};

/* ---- small utilities ---------------------------------------------------- */

/* A progress message on stderr, where the programs' own messages also go. */
__attribute__((format(printf, 1, 2)))
static void progress(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    fprintf(stderr, PROG ": ");
    vfprintf(stderr, format, ap);
    va_end(ap);
    fflush(stderr);
}

/* The first line of text, shortened to fit a note. */
static void first_line(const char *text, char *note, size_t size)
{
    size_t len = strcspn(text, "\n");
    snprintf(note, size, "%.*s", (int)len, text);
}

static int join_path(char *out, const char *dir, const char *name, const char *suffix)
{
    int len = snprintf(out, PATH_MAX, "%s/%s%s", dir, name, suffix);
    if (len < 0 || len >= PATH_MAX) {
        fprintf(stderr, PROG ": %s/%s%s: path too long\n", dir, name, suffix);
        return -1;
    }
    return 0;
}

/* mkdir -p. Returns 0 or -1 (reported). */
static int make_dirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        fprintf(stderr, PROG ": %s: path too long\n", path);
        return -1;
    }
    for (char *p = buf + 1; ; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, PROG ": %s: cannot create the directory: %s\n", buf, strerror(errno));
            return -1;
        }
        *p = saved;
        if (saved == '\0')
            break;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, PROG ": %s: not a directory\n", path);
        return -1;
    }
    return 0;
}

static void remove_if_present(const char *path)
{
    if (unlink(path) != 0 && errno != ENOENT)
        fprintf(stderr, PROG ": %s: cannot remove: %s\n", path, strerror(errno));
}

/* ---- child processes ---------------------------------------------------- */

static void argv_push(struct argv_list *a, const char *arg)
{
    assert(a->n + 1 < ARGV_MAX);
    a->v[a->n++] = arg;
    a->v[a->n] = NULL;
}

/* The options attnrun and ref_numpy.py both take for workload w. */
static void argv_push_workload(struct argv_list *a, const struct bench_workload *w)
{
    snprintf(a->heads, sizeof a->heads, "%ld", w->heads);
    argv_push(a, "--heads");
    argv_push(a, a->heads);
    if (w->causal)
        argv_push(a, "--causal");
    if (w->save) {
        argv_push(a, "--save");
        argv_push(a, w->save);
    }
}

/* Those, then the options only attnrun takes: --kv-heads and the row's args. */
static void argv_push_attnrun_workload(struct argv_list *a, const struct bench_workload *w)
{
    argv_push_workload(a, w);
    if (bench_kv_heads_arg(w)) {
        snprintf(a->kv_heads, sizeof a->kv_heads, "%ld", bench_kv_heads_arg(w));
        argv_push(a, "--kv-heads");
        argv_push(a, a->kv_heads);
    }
    for (int i = 0; i < BENCH_MAX_ARGS && w->args[i]; i++)
        argv_push(a, w->args[i]);
}

/* The attnrun-only options of w as text ("--kv-heads 8 --rope 10000"), or "". */
static void attnrun_only_text(const struct bench_workload *w, char *out, size_t size)
{
    size_t len = 0;
    out[0] = '\0';
    if (bench_kv_heads_arg(w))
        len += (size_t)snprintf(out, size, "--kv-heads %ld", bench_kv_heads_arg(w));
    for (int i = 0; i < BENCH_MAX_ARGS && w->args[i] && len < size; i++)
        len += (size_t)snprintf(out + len, size - len, "%s%s", len ? " " : "", w->args[i]);
}

/* Child side of run_child: stdout and stderr into the pipe, then exec.
 * Only async-signal-safe calls: the parent may hold OpenBLAS's threads. */
static void exec_child(const char *const argv[], int pipe_write)
{
    static const char prefix[] = PROG ": cannot execute ";
    if (dup2(pipe_write, STDOUT_FILENO) >= 0 && dup2(pipe_write, STDERR_FILENO) >= 0) {
        close(pipe_write);
        execvp(argv[0], (char *const *)argv);
    }
    ssize_t ignored = write(STDERR_FILENO, prefix, sizeof prefix - 1);
    ignored = write(STDERR_FILENO, argv[0], strlen(argv[0]));
    ignored = write(STDERR_FILENO, "\n", 1);
    (void)ignored;
    _exit(EXIT_EXEC_FAILED);
}

/* Reads fd to its end into out (truncated, NUL-terminated): the child must
 * never block on a full pipe, whatever it prints. */
static void drain(int fd, char *out, size_t size)
{
    size_t len = 0;
    char discard[4096];
    for (;;) {
        char *dst = len + 1 < size ? out + len : discard;
        size_t room = len + 1 < size ? size - 1 - len : sizeof discard;
        ssize_t got = read(fd, dst, room);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        if (dst != discard)
            len += (size_t)got;
    }
    out[len] = '\0';
}

/* Runs argv (argv[0] searched in PATH when it has no '/') to completion,
 * timing the whole process. Returns 0 with c filled, or -1 (reported) when
 * no child could be started. */
static int run_child(const char *const argv[], struct child *c)
{
    int fds[2];
    if (pipe(fds) != 0) {
        fprintf(stderr, PROG ": cannot make a pipe: %s\n", strerror(errno));
        return -1;
    }
    fflush(NULL);
    double start = now_s();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, PROG ": cannot fork: %s\n", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        exec_child(argv, fds[1]);
    }
    close(fds[1]);
    drain(fds[0], c->out, sizeof c->out);
    close(fds[0]);
    struct rusage usage;
    while (wait4(pid, &c->status, 0, &usage) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, PROG ": wait4: %s\n", strerror(errno));
            return -1;
        }
    }
    c->seconds = now_s() - start;
    c->cpu_s = (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec / 1e6 +
               (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec / 1e6;
    c->maxrss_kib = usage.ru_maxrss;   /* Linux reports KiB */
    return 0;
}

static int child_exit_code(const struct child *c)
{
    return WIFEXITED(c->status) ? WEXITSTATUS(c->status) : -1;
}

/* "failed (exit N)" or "killed by signal N". */
static void describe_status(const struct child *c, char *note, size_t size)
{
    if (WIFEXITED(c->status))
        snprintf(note, size, "failed (exit %d)", WEXITSTATUS(c->status));
    else if (WIFSIGNALED(c->status))
        snprintf(note, size, "killed by signal %d (%s)", WTERMSIG(c->status),
                 strsignal(WTERMSIG(c->status)));
    else
        snprintf(note, size, "failed (wait status %d)", c->status);
}

/* Removes out_path (each run must create its output afresh), runs argv.
 * Returns 1 when it exited 0, else 0. */
static int run_once(const char *const argv[], const char *out_path, struct child *c)
{
    remove_if_present(out_path);
    if (run_child(argv, c) != 0) {
        c->status = EXIT_EXEC_FAILED << 8;   /* reads as "failed (exit 127)" */
        c->out[0] = '\0';
        return 0;
    }
    return child_exit_code(c) == 0;
}

/* Ends the progress line with why c failed, then shows what it printed. */
static void report_failure(const struct child *c, char *note, size_t size)
{
    describe_status(c, note, size);
    fprintf(stderr, " %s\n%s", note, c->out);
}

/* `runs` timed runs of argv; fills s with the median time and the peak RSS,
 * or with the first failure. */
static void time_runs(const char *const argv[], const char *out_path, int runs, struct series *s)
{
    static struct child c;    /* 8 KiB of output: off the stack */
    double seconds[MAX_RUNS], cpu[MAX_RUNS];
    s->peak_rss_kib = 0;
    fprintf(stderr, ", runs");
    for (int i = 0; i < runs; i++) {
        if (!run_once(argv, out_path, &c)) {
            report_failure(&c, s->note, sizeof s->note);
            s->state = SERIES_FAILED;
            return;
        }
        seconds[i] = c.seconds;
        cpu[i] = c.cpu_s;
        if (c.maxrss_kib > s->peak_rss_kib)
            s->peak_rss_kib = c.maxrss_kib;
        fprintf(stderr, " %.3f", c.seconds);
        fflush(stderr);
    }
    fprintf(stderr, " s\n");
    s->median_s = median(seconds, (size_t)runs);
    s->cpu_s = median(cpu, (size_t)runs);
    s->state = SERIES_OK;
}

/* ---- preparing a workload ----------------------------------------------- */

/* Generates the input unless it exists. Returns 0, or -1 with r->prep_note. */
static int ensure_input(const struct options *o, struct row *r)
{
    static struct child c;
    if (access(r->input, F_OK) == 0)
        return 0;
    const char *owner = bench_input_of(r->w)->name;   /* the file's own workload */
    progress("%s: generating %s", r->w->name, r->input);
    const char *argv[] = {o->gen, owner, r->input, NULL};
    if (run_once(argv, r->input, &c)) {
        fprintf(stderr, "\n");
        return 0;
    }
    char why[64];
    report_failure(&c, why, sizeof why);
    snprintf(r->prep_note, sizeof r->prep_note, "input generator %s", why);
    return -1;
}

/* Reads "FLOPs  3.08281e+08 (...)" and "  total ... 458752 bytes (...)" from
 * attnrun's dry run. Returns 0, or -1 when a line is missing. */
static int parse_dry_run(const char *text, double *flops, double *bytes)
{
    int found = 0;
    const char *line = text;
    while (*line) {
        if (sscanf(line, "FLOPs %lf", flops) == 1)
            found |= 1;
        else if (sscanf(line, " total %lf bytes", bytes) == 1)
            found |= 2;
        const char *eol = strchr(line, '\n');
        if (!eol)
            break;
        line = eol + 1;
    }
    return found == 3 ? 0 : -1;
}

/* FLOPs and output bytes from `attnrun IN <workload options> --dry-run`. */
static int dry_run(const struct options *o, struct row *r)
{
    static struct child c;
    struct argv_list a = {.n = 0};
    argv_push(&a, o->attnrun);
    argv_push(&a, r->input);
    argv_push_attnrun_workload(&a, r->w);
    argv_push(&a, "--dry-run");
    if (run_child(a.v, &c) != 0 || child_exit_code(&c) != 0) {
        char status[48], said[NOTE_SIZE / 2];   /* fits the note with the rest */
        fputs(c.out, stderr);
        describe_status(&c, status, sizeof status);
        first_line(c.out, said, sizeof said);
        snprintf(r->prep_note, sizeof r->prep_note, "attnrun --dry-run %s: %s", status, said);
        return -1;
    }
    if (parse_dry_run(c.out, &r->flops, &r->bytes) != 0) {
        snprintf(r->prep_note, sizeof r->prep_note,
                 "attnrun --dry-run printed no FLOPs or total bytes line");
        return -1;
    }
    return 0;
}

static int prepare_row(const struct options *o, struct row *r)
{
    if (join_path(r->input, o->dir, bench_input_of(r->w)->name, ".h5") != 0
        || join_path(r->attn_out, o->dir, r->w->name, ".attnrun.out.h5") != 0
        || join_path(r->numpy_out, o->dir, r->w->name, ".numpy.out.h5") != 0) {
        snprintf(r->prep_note, sizeof r->prep_note, "path too long");
        return -1;
    }
    if (ensure_input(o, r) != 0 || dry_run(o, r) != 0)
        return -1;
    r->prepared = 1;
    return 0;
}

/* ---- machine limits ----------------------------------------------------- */

/* OpenBLAS sgemm rate on a 2048^3 row-major product, GFLOP/s, with its
 * default threads: one warm-up (thread start, page faults), best of 3. */
static double measure_sgemm_gflops(void)
{
    const size_t n = SGEMM_N;
    float *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b);
    float *c = malloc(n * n * sizeof *c);
    double best = 0;
    if (!a || !b || !c) {
        fprintf(stderr, PROG ": out of memory for the sgemm probe\n");
        goto out;
    }
    for (size_t i = 0; i < n * n; i++) {
        a[i] = (float)(i % 97) * 0.01f - 0.5f;
        b[i] = (float)(i % 89) * 0.01f - 0.4f;
    }
    for (int i = 0; i <= SGEMM_REPEATS; i++) {
        double start = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f,
                    a, (int)n, b, (int)n, 0.0f, c, (int)n);
        double rate = 2.0 * (double)n * (double)n * (double)n / (now_s() - start) / 1e9;
        if (i > 0 && rate > best)
            best = rate;
    }
out:
    free(a);
    free(b);
    free(c);
    return best;
}

/* HDF5's innermost error description, for one-line messages. */
static herr_t keep_innermost(unsigned n, const H5E_error2_t *entry, void *data)
{
    if (n == 0 && entry->desc)
        snprintf(data, 256, "%s", entry->desc);
    return 0;
}

static int h5_fail(const char *path, const char *what)
{
    char reason[256] = "HDF5 error";
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_innermost, reason);
    fprintf(stderr, PROG ": %s: %s: %s\n", path, what, reason);
    return -1;
}

/* Writes values float32 from block (block_values long, reused) as dataset
 * "data" of the open file. Returns 0 or -1 (reported). */
static int write_probe_dataset(hid_t file, const char *path, hsize_t values,
                               const float *block, hsize_t block_values)
{
    int status = -1;
    hid_t space = H5Screate_simple(1, &values, NULL), dset = H5I_INVALID_HID;
    if (space < 0
        || (dset = H5Dcreate2(file, "data", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                              H5P_DEFAULT)) < 0) {
        h5_fail(path, "cannot create the probe dataset");
        goto out;
    }
    for (hsize_t start = 0; start < values; start += block_values) {
        hsize_t count = values - start < block_values ? values - start : block_values;
        hid_t mem = H5Screate_simple(1, &count, NULL);
        herr_t written = mem < 0 ? -1
            : H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, NULL, &count, NULL) < 0 ? -1
            : H5Dwrite(dset, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, block);
        if (mem >= 0)
            H5Sclose(mem);
        if (written < 0) {
            h5_fail(path, "cannot write the probe dataset");
            goto out;
        }
    }
    status = 0;
out:
    if (dset >= 0 && H5Dclose(dset) < 0 && status == 0)
        status = h5_fail(path, "cannot close the probe dataset");
    if (space >= 0)
        H5Sclose(space);
    return status;
}

/* One timed probe: create, write, close, then open + fsync, as attnrun's
 * output pays for reaching the disk. Returns seconds, or -1 (reported). */
static double write_probe_once(const char *path, hsize_t values, const float *block,
                               hsize_t block_values)
{
    remove_if_present(path);
    double start = now_s();
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0)
        return h5_fail(path, "cannot create the probe file");
    int status = write_probe_dataset(file, path, values, block, block_values);
    if (H5Fclose(file) < 0 && status == 0)
        status = h5_fail(path, "cannot close the probe file");
    int fd = status == 0 ? open(path, O_RDONLY) : -1;
    if (status == 0 && (fd < 0 || fsync(fd) != 0)) {
        fprintf(stderr, PROG ": %s: cannot fsync: %s\n", path, strerror(errno));
        status = -1;
    }
    if (fd >= 0)
        close(fd);
    double seconds = now_s() - start;
    remove_if_present(path);
    return status == 0 ? seconds : -1;
}

/* Best time of WRITE_REPEATS probes writing `bytes` into dir, or -1. */
static double measure_write_seconds(const char *dir, double bytes)
{
    char path[PATH_MAX];
    if (join_path(path, dir, "write-probe", ".h5") != 0)
        return -1;
    hsize_t values = (hsize_t)(bytes / sizeof(float));
    hsize_t block_values = values < WRITE_BLOCK_VALUES ? values : WRITE_BLOCK_VALUES;
    if (values == 0)
        return -1;
    float *block = malloc((size_t)block_values * sizeof *block);
    if (!block) {
        fprintf(stderr, PROG ": out of memory for the write probe\n");
        return -1;
    }
    /* Varied, finite values: nothing a file system could compress or skip. */
    for (hsize_t i = 0; i < block_values; i++)
        block[i] = (float)(i % 1000) * 0.001f + 0.5f;
    double best = -1;
    for (int i = 0; i < WRITE_REPEATS; i++) {
        double seconds = write_probe_once(path, values, block, block_values);
        if (seconds < 0) {
            best = -1;
            break;
        }
        if (best < 0 || seconds < best)
            best = seconds;
    }
    free(block);
    return best;
}

static double physical_ram_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 0;
}

/* ---- the two peers ------------------------------------------------------ */

/* attnrun IN -o OUT -q <workload options> [--threads T]; T 0: its default,
 * every core.  OUT: out, or NULL for the row's own. */
static void attnrun_argv(const struct options *o, const struct row *r, int threads,
                         const char *out, struct argv_list *a)
{
    argv_push(a, o->attnrun);
    argv_push(a, r->input);
    argv_push(a, "-o");
    argv_push(a, out != NULL ? out : r->attn_out);
    argv_push(a, "-q");
    argv_push_attnrun_workload(a, r->w);
    if (threads > 0) {
        snprintf(a->threads, sizeof a->threads, "%d", threads);
        argv_push(a, "--threads");
        argv_push(a, a->threads);
    }
}

/* The timed runs on every core; the last run's output stays for the numpy
 * check and for its size on disk. */
static void bench_attnrun(const struct options *o, struct row *r)
{
    static struct child c;
    struct argv_list a = {.n = 0};
    attnrun_argv(o, r, 0, NULL, &a);

    progress("%s: %s warm-up", r->w->name, "attnrun");
    if (!run_once(a.v, r->attn_out, &c)) {
        report_failure(&c, r->attn.note, sizeof r->attn.note);
        r->attn.state = SERIES_FAILED;
        return;
    }
    fprintf(stderr, " %.3f s", c.seconds);
    time_runs(a.v, r->attn_out, o->runs, &r->attn);
    if (r->attn.state != SERIES_OK)
        return;
    struct stat st;
    if (stat(r->attn_out, &st) != 0) {
        snprintf(r->attn.note, sizeof r->attn.note, "no output file after the run: %s",
                 strerror(errno));
        progress("%s: %s\n", r->w->name, r->attn.note);
        r->attn.state = SERIES_FAILED;
        return;
    }
    r->disk_bytes = (double)st.st_size;
}

/* One timed run of sweep point k, into its series; a point that failed once
 * runs no more. */
static void sweep_run(const struct options *o, struct row *r, int k, double *seconds,
                      double *cpu)
{
    static struct child c;
    struct series *s = &r->sweep[k];
    struct argv_list a = {.n = 0};
    attnrun_argv(o, r, o->sweep_threads[k], NULL, &a);
    fprintf(stderr, " T=%d", o->sweep_threads[k]);
    if (!run_once(a.v, r->attn_out, &c)) {
        report_failure(&c, s->note, sizeof s->note);
        s->state = SERIES_FAILED;
        progress("%s: thread sweep goes on:", r->w->name);   /* for the other Ts */
        return;
    }
    *seconds = c.seconds;
    *cpu = c.cpu_s;
    if (c.maxrss_kib > s->peak_rss_kib)
        s->peak_rss_kib = c.maxrss_kib;
    fprintf(stderr, " %.3f", c.seconds);
}

/* attnrun at each T of the sweep, o->runs times. Run i takes every T in
 * turn, so that a drift of the shared machine falls on all Ts alike; the
 * row's warm-up has just run, so none is needed. */
static void bench_sweep(const struct options *o, struct row *r)
{
    static double seconds[SWEEP_MAX][MAX_RUNS], cpu[SWEEP_MAX][MAX_RUNS];
    for (int k = 0; k < o->n_sweep; k++)
        r->sweep[k] = (struct series){.state = SERIES_OK};
    for (int i = 0; i < o->runs; i++) {
        progress("%s: thread sweep, run %d:", r->w->name, i + 1);
        for (int k = 0; k < o->n_sweep; k++)
            if (r->sweep[k].state == SERIES_OK)
                sweep_run(o, r, k, &seconds[k][i], &cpu[k][i]);
        fprintf(stderr, " s\n");
    }
    for (int k = 0; k < o->n_sweep; k++)
        if (r->sweep[k].state == SERIES_OK) {
            r->sweep[k].median_s = median(seconds[k], (size_t)o->runs);
            r->sweep[k].cpu_s = median(cpu[k], (size_t)o->runs);
        }
}

/* ---- copies at once ------------------------------------------------------ */

/* Starts argv with its output to /dev/null; the pid, or -1. */
static pid_t spawn_quiet(const char *const argv[])
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
        }
        execvp(argv[0], (char *const *)argv);
        _exit(EXIT_EXEC_FAILED);
    }
    return pid;
}

/* Runs the copies' argvs all at once (at_once) or one after the other;
 * the wall time from the first start to the last end, or -1 when one
 * failed. */
static double run_copies(struct argv_list copies[], int count, bool at_once)
{
    pid_t pids[BENCH_MAX_TOGETHER];
    int failed = 0;
    double start = now_s();
    for (int i = 0; i < count; i++) {
        pids[i] = spawn_quiet(copies[i].v);
        failed |= pids[i] < 0;
        if (!at_once && pids[i] > 0) {
            int status;
            while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR)
                ;
            failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
            pids[i] = -1;
        }
    }
    for (int i = 0; i < count; i++) {
        int status;
        if (pids[i] <= 0)
            continue;
        while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR)
            ;
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    return failed ? -1 : now_s() - start;
}

/* w->together copies of the row's run, each to its own output: o->runs
 * times in a row and at once, alternating, so that the machine's drift
 * falls on both alike. */
static void bench_together(const struct options *o, struct row *r)
{
    static char outs[BENCH_MAX_TOGETHER][PATH_MAX];
    struct argv_list copies[BENCH_MAX_TOGETHER];
    double row_s[MAX_RUNS], once_s[MAX_RUNS];
    const int count = r->w->together;
    for (int i = 0; i < count; i++) {
        copies[i] = (struct argv_list){.n = 0};
        snprintf(outs[i], sizeof outs[i], "%s.copy%d", r->attn_out, i);
        attnrun_argv(o, r, 0, outs[i], &copies[i]);
    }
    progress("%s: %d copies in a row, then at once:", r->w->name, count);
    for (int run = 0; run < o->runs; run++) {
        for (int i = 0; i < count; i++)
            remove_if_present(outs[i]);
        row_s[run] = run_copies(copies, count, false);
        for (int i = 0; i < count; i++)
            remove_if_present(outs[i]);
        once_s[run] = run_copies(copies, count, true);
        fprintf(stderr, " %.3f/%.3f", row_s[run], once_s[run]);
        if (row_s[run] < 0 || once_s[run] < 0) {
            snprintf(r->at_once.note, sizeof r->at_once.note, "a copy failed");
            r->at_once.state = r->in_a_row.state = SERIES_FAILED;
            fprintf(stderr, " failed\n");
            return;
        }
    }
    fprintf(stderr, " s\n");
    for (int i = 0; i < count; i++)
        remove_if_present(outs[i]);
    r->in_a_row = (struct series){.state = SERIES_OK, .median_s = median(row_s, (size_t)o->runs)};
    r->at_once = (struct series){.state = SERIES_OK, .median_s = median(once_s, (size_t)o->runs)};
}

/* Bytes numpy needs for workload w: scores and weights with the softmax's
 * temporaries, about three (B, H, n, m) float32 arrays (ref_numpy.py). */
static double numpy_estimate_bytes(const struct bench_workload *w)
{
    return 3.0 * (double)w->batch * (double)w->heads * (double)w->seq * (double)w->seq * 4.0;
}

/* python3 ref_numpy.py IN OUT <workload options> */
static void numpy_argv(const struct options *o, const struct row *r, struct argv_list *a)
{
    argv_push(a, o->python);
    argv_push(a, o->ref);
    argv_push(a, r->input);
    argv_push(a, r->numpy_out);
    argv_push_workload(a, r->w);
}

/* The numpy warm-up's argv, with --check ATTN.h5 when attnrun's output is
 * there and holds the output dataset that the check compares. Returns
 * whether it checks. */
static int numpy_warmup_argv(const struct options *o, struct row *r, struct argv_list *warm)
{
    numpy_argv(o, r, warm);
    if (r->attn.state != SERIES_OK)
        return 0;
    if (!bench_saves(r->w, "output")) {
        snprintf(r->check, sizeof r->check, "- (no output)");
        return 0;
    }
    argv_push(warm, "--check");
    argv_push(warm, r->attn_out);
    return 1;
}

/* Reads ref_numpy.py's "check: relative diff 1.81e-07 (...): ok" line into
 * r->check. Returns 1 when the line was there. */
static int read_check_line(const char *out, struct row *r)
{
    const char *line = strstr(out, "check: ");
    double relative;
    if (!line)
        return 0;
    const char *eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    snprintf(r->check_line, sizeof r->check_line, "%.*s", (int)len, line);
    int ok = len >= 4 && strncmp(line + len - 4, ": ok", 4) == 0;
    if (sscanf(line, "check: relative diff %lf", &relative) == 1)
        snprintf(r->check, sizeof r->check, "%s %.1e", ok ? "ok" : "FAIL", relative);
    else
        snprintf(r->check, sizeof r->check, "%s", ok ? "ok" : "FAIL");
    r->check_failed = !ok;
    return 1;
}

/* The numpy peer: its warm-up also checks attnrun's output when there is one.
 * Clears *available when the peer cannot run here at all. */
static void bench_numpy(const struct options *o, struct row *r, int *available,
                        char *unavailable_note)
{
    static struct child c;
    double need = numpy_estimate_bytes(r->w), ram = physical_ram_bytes();
    r->numpy.state = SERIES_SKIPPED;
    if (!*available)
        return;
    char only[NOTE_SIZE / 2];
    attnrun_only_text(r->w, only, sizeof only);
    if (only[0]) {
        snprintf(r->numpy.note, sizeof r->numpy.note, "skipped: %s has no %s", o->ref, only);
        progress("%s: numpy %s\n", r->w->name, r->numpy.note);
        return;
    }
    if (ram > 0 && need > ram / 2) {
        snprintf(r->numpy.note, sizeof r->numpy.note,
                 "skipped: needs ~%.1f GiB (3 x B*H*n*m float32), over half of the %.1f GiB RAM",
                 need / GIB, ram / GIB);
        progress("%s: numpy %s\n", r->w->name, r->numpy.note);
        return;
    }
    struct argv_list a = {.n = 0}, warm = {.n = 0};
    numpy_argv(o, r, &a);
    int check = numpy_warmup_argv(o, r, &warm);

    progress("%s: %s warm-up", r->w->name, check ? "numpy (with --check)" : "numpy");
    int worked = run_once(warm.v, r->numpy_out, &c);
    int checked = read_check_line(c.out, r);
    int code = child_exit_code(&c);
    if (code == EXIT_PEER_UNAVAILABLE || code == EXIT_EXEC_FAILED) {
        *available = 0;
        first_line(c.out, unavailable_note, NOTE_SIZE);
        fprintf(stderr, " unavailable\n%s", c.out);
        snprintf(r->numpy.note, sizeof r->numpy.note, "numpy peer unavailable");
        return;
    }
    /* A failed check exits 1 after a complete run: time it all the same. */
    if (!worked && !(checked && r->check_failed && code == 1)) {
        report_failure(&c, r->numpy.note, sizeof r->numpy.note);
        r->numpy.state = SERIES_FAILED;
        return;
    }
    fprintf(stderr, " %.3f s", c.seconds);
    time_runs(a.v, r->numpy_out, o->runs, &r->numpy);
    if (checked)
        progress("%s: %s\n", r->w->name, r->check_line);
}

/* ---- one workload ------------------------------------------------------ */

/* roof s from the two limits; 0 (unknown) when either could not be measured. */
static void set_roofline(struct row *r, double sgemm_gflops)
{
    r->compute_s = sgemm_gflops > 0 ? r->flops / (sgemm_gflops * 1e9) : 0;
    int known = sgemm_gflops > 0 && r->write_s > 0;
    r->roof_s = !known ? 0 : r->compute_s > r->write_s ? r->compute_s : r->write_s;
}

/* Every measurement of row r: attnrun, numpy, the sweep, then the write probe
 * at the bytes attnrun wrote. Returns 1 when anything failed, else 0. */
static int bench_row(const struct options *o, struct row *r, double sgemm_gflops,
                     int *numpy_available, char *unavailable_note)
{
    bench_attnrun(o, r);
    if (r->w->peerless) {
        r->numpy.state = SERIES_SKIPPED;
        snprintf(r->numpy.note, sizeof r->numpy.note, "skipped: the row measures attnrun alone");
    } else {
        bench_numpy(o, r, numpy_available, unavailable_note);
    }
    if (o->sweep && !r->w->peerless && r->attn.state == SERIES_OK)
        bench_sweep(o, r);
    if (r->w->together > 0 && r->attn.state == SERIES_OK)
        bench_together(o, r);
    remove_if_present(r->attn_out);   /* outputs are large; inputs are kept */
    remove_if_present(r->numpy_out);
    int failed = r->attn.state == SERIES_FAILED || r->numpy.state == SERIES_FAILED
                 || r->check_failed;
    for (int k = 0; k < o->n_sweep; k++)
        failed |= r->sweep[k].state == SERIES_FAILED;
    failed |= r->at_once.state == SERIES_FAILED;
    if (r->disk_bytes > 0) {
        progress("%s: measuring the HDF5 write rate at %.1f MiB\n", r->w->name,
                 r->disk_bytes / MIB);
        r->write_s = measure_write_seconds(o->dir, r->disk_bytes);
        failed |= r->write_s < 0;
    }
    set_roofline(r, sgemm_gflops);
    return failed;
}

/* ---- the report --------------------------------------------------------- */

static void shape_text(const struct bench_workload *w, char *out, size_t size)
{
    snprintf(out, size, "%ldx%ldx%ld/%ld", w->batch, w->seq, w->d_model, w->heads);
}

/* After a workloads row: what sets w apart from plain multi-head attention on
 * its own input (nothing for the original workloads). */
static void print_variant(const struct bench_workload *w)
{
    char only[NOTE_SIZE];
    attnrun_only_text(w, only, sizeof only);
    if (only[0])
        printf("  %s", only);
    if (w->repeat_kv)
        printf("  W_K, W_V: %ld K/V heads repeated to %ld", bench_kv_heads(w), w->heads);
    if (w->seed)
        printf(" (%s's values)", w->seed);
    if (w->input)
        printf(" (%s's input)", w->input);
}

/* The run's settings and the compute limit, printed before the runs start. */
static void print_machine(const struct options *o, double sgemm_gflops)
{
    printf("attnbench: %s, whole process, median of %d run%s after 1 warm-up\n\n", o->attnrun,
           o->runs, o->runs == 1 ? "" : "s");
    printf("machine limits, measured now\n");
    printf("  cores               %ld online, %.1f GiB RAM\n", sysconf(_SC_NPROCESSORS_ONLN),
           physical_ram_bytes() / GIB);
    printf("  OpenBLAS sgemm      %.1f GFLOP/s (2048^3 row-major, %d threads, best of %d)\n",
           sgemm_gflops, openblas_get_num_threads(), SGEMM_REPEATS);
    printf("  HDF5 write + fsync  one contiguous float32 dataset of as many bytes as each\n"
           "                      workload's attnrun wrote, new file in %s, best of %d:\n"
           "                      write MiB/s under workloads\n", o->dir, WRITE_REPEATS);
}

/* "causal, biases", "full", ... */
static void attention_text(const struct bench_workload *w, char *out, size_t size)
{
    snprintf(out, size, "%s%s", w->causal ? "causal" : "full", w->biases ? ", biases" : "");
}

/* Every workload: its shape, its work, its dense and on-disk bytes, and the
 * write rate of the probe at the bytes on disk. */
static void print_workloads(const struct options *o, const struct row rows[])
{
    printf("\nworkloads\n");
    printf("%-*s %-19s %-14s %-14s %7s %9s %9s %10s\n", o->name_width, "workload",
           "shape B x n x D / H", "attention", "saves", "GFLOP", "output MiB", "disk MiB",
           "write MiB/s");
    for (size_t i = 0; i < BENCH_N_WORKLOADS; i++) {
        const struct row *r = &rows[i];
        char shape[48], attention[32];
        if (!o->selected[i])
            continue;
        shape_text(r->w, shape, sizeof shape);
        attention_text(r->w, attention, sizeof attention);
        printf("%-*s %-19s", o->name_width, r->w->name, shape);
        if (!r->prepared) {
            printf(" %s\n", r->prep_note);
            continue;
        }
        char disk[16] = "-", rate[16] = "-";   /* known once attnrun has run */
        if (r->disk_bytes > 0)
            snprintf(disk, sizeof disk, "%.1f", r->disk_bytes / MIB);
        if (r->write_s > 0)
            snprintf(rate, sizeof rate, "%.0f", r->disk_bytes / r->write_s / MIB);
        else if (r->write_s < 0)
            snprintf(rate, sizeof rate, "failed");
        printf(" %-14s %-14s %7.1f %9.1f %9s %10s", attention, r->w->save ? r->w->save : "all",
               r->flops / 1e9, r->bytes / MIB, disk, rate);
        print_variant(r->w);
        printf("\n");
    }
    printf("output MiB: the dry run's total, the bytes it counts for the saved datasets\n"
           "(before any compression); disk MiB: the size of attnrun's output file after its\n"
           "last timed run; write MiB/s: the probe writing as many bytes.\n");
}

static int meets(double value, int at_most, double bound)
{
    return at_most ? value <= bound : value >= bound;
}

static void print_roofline_table(const struct options *o, const struct row rows[])
{
    printf("\nattnrun against the roofline\n");
    printf("%-*s %-14s %7s %6s %8s %8s %6s %8s %7s  %-5s %7s  %s\n", o->name_width, "workload",
           "shape", "time s", "CPU s", "GFLOP/s", "disk MiB", "GiB/s", "RSS MiB", "roof s",
           "bound", "x roof", "target");
    for (size_t i = 0; i < BENCH_N_WORKLOADS; i++) {
        const struct row *r = &rows[i];
        char shape[48];
        if (!o->selected[i])
            continue;
        shape_text(r->w, shape, sizeof shape);
        printf("%-*s %-14s", o->name_width, r->w->name, shape);
        if (!r->prepared || r->attn.state != SERIES_OK) {
            printf("  %s\n", !r->prepared ? r->prep_note : r->attn.note);
            continue;
        }
        double t = r->attn.median_s;
        printf(" %7.3f %6.3f %8.1f %8.1f %6.2f %8.1f", t, r->attn.cpu_s, r->flops / t / 1e9,
               r->disk_bytes / MIB,
               r->disk_bytes / t / GIB, (double)r->attn.peak_rss_kib / 1024);
        if (r->roof_s <= 0) {
            printf(" %7s\n", "n/a");
            continue;
        }
        printf(" %7.3f  %-5s %7.2f", r->roof_s, r->compute_s >= r->write_s ? "sgemm" : "write",
               t / r->roof_s);
        if (r->w->roof_target > 0)
            printf("  <= %.2f %s", r->w->roof_target,
                   meets(t / r->roof_s, 1, r->w->roof_target) ? "PASS" : "MISS");
        printf("\n");
    }
    printf("time s: median wall time of the whole attnrun process (start, read, compute, write,\n"
           "        fsync); CPU s: its median user + system CPU seconds (every thread's);\n"
           "        GFLOP/s: the dry run's FLOPs over time s; disk MiB: the size of\n"
           "        attnrun's output file; GiB/s: disk MiB over time s.\n"
           "roof s: max(FLOPs / sgemm rate, disk bytes / write rate), the larger of the two\n"
           "        limits (bound). The bytes are those on disk, not the dense outputs': tiles\n"
           "        and compression legitimately write fewer. x roof: time s / roof s.\n");
    for (size_t i = 0; i < BENCH_N_WORKLOADS; i++)
        if (o->selected[i] && rows[i].w->note)
            printf("%s: %s\n", rows[i].w->name, rows[i].w->note);
}

/* One row of the sweep: the median at each T, with its speed-up over T=1,
 * then a line for each T that failed. */
static void print_sweep_row(const struct options *o, const struct row *r)
{
    const struct series *one = &r->sweep[0];
    printf("%-*s", o->name_width, r->w->name);
    for (int k = 0; k < o->n_sweep; k++) {
        const struct series *s = &r->sweep[k];
        char speedup[16] = "";
        if (k > 0 && one->state == SERIES_OK && s->state == SERIES_OK)
            snprintf(speedup, sizeof speedup, "%.2fx", one->median_s / s->median_s);
        if (s->state == SERIES_OK)
            printf("  %7.3f s %6s", s->median_s, speedup);
        else
            printf("  %16s", "failed");
    }
    printf("\n");
    for (int k = 0; k < o->n_sweep; k++)
        if (r->sweep[k].state == SERIES_FAILED)
            printf("%*s  T=%d: %s\n", o->name_width, "", o->sweep_threads[k], r->sweep[k].note);
}

static void print_sweep_table(const struct options *o, const struct row rows[])
{
    printf("\nthread sweep: attnrun --threads T, median of %d run%s at each T\n", o->runs,
           o->runs == 1 ? "" : "s");
    if (!o->sweep) {
        printf("  skipped (--no-sweep)\n");
        return;
    }
    printf("%-*s", o->name_width, "workload");
    for (int k = 0; k < o->n_sweep; k++) {
        char head[24];
        snprintf(head, sizeof head, "T=%d s", o->sweep_threads[k]);
        printf("  %9s %6s", head, k > 0 ? "x T=1" : "");
    }
    printf("\n");
    for (size_t i = 0; i < BENCH_N_WORKLOADS; i++) {
        const struct row *r = &rows[i];
        if (!o->selected[i])
            continue;
        if (!r->prepared || r->attn.state != SERIES_OK)
            printf("%-*s  %s\n", o->name_width, r->w->name,
                   !r->prepared ? r->prep_note : "attnrun failed: not swept");
        else if (r->w->peerless)
            printf("%-*s  not swept: the row measures something else\n", o->name_width,
                   r->w->name);
        else
            print_sweep_row(o, r);
    }
    printf("T=N s: the median time of attnrun --threads N; x T=1: the speed-up, time at T=1\n"
           "over time at T=N. Run i of the sweep takes every T in turn, so that the shared\n"
           "machine's drift falls on all of them alike; other processes' load still takes\n"
           "cores from the larger Ts first, so the speed-ups need an otherwise idle machine.\n");
}

static void print_numpy_table(const struct options *o, const struct row rows[],
                              const char *unavailable_note)
{
    printf("\nattnrun against numpy (%s: float32, same datasets, fsync'ed)\n", o->ref);
    if (!o->numpy) {
        printf("  skipped (--no-numpy)\n");
        return;
    }
    if (unavailable_note[0])
        printf("  numpy peer unavailable: %s\n", unavailable_note);
    printf("%-*s %9s %8s %8s %8s %14s  %s\n", o->name_width, "workload", "attnrun s", "RSS MiB",
           "numpy s", "RSS MiB", "numpy/attnrun", "check");
    for (size_t i = 0; i < BENCH_N_WORKLOADS; i++) {
        const struct row *r = &rows[i];
        if (!o->selected[i] || !r->prepared)
            continue;
        printf("%-*s", o->name_width, r->w->name);
        if (r->attn.state == SERIES_OK)
            printf(" %9.3f %8.1f", r->attn.median_s, (double)r->attn.peak_rss_kib / 1024);
        else
            printf(" %18s", "attnrun failed");
        if (r->numpy.state != SERIES_OK) {
            printf("  %s\n", r->numpy.note);
            continue;
        }
        printf(" %8.3f %8.1f", r->numpy.median_s, (double)r->numpy.peak_rss_kib / 1024);
        if (r->attn.state == SERIES_OK)
            printf(" %14.2f", r->numpy.median_s / r->attn.median_s);
        else
            printf(" %14s", "-");
        printf("  %s\n", r->check[0] ? r->check : "-");
    }
    printf("check: numpy's output against attnrun's, max |diff| / max |output|, ok <= 1e-4;\n"
           "       - (no output): the row saves no output dataset to compare.\n");
}

/* A target's measured side, as its kind's measure function finds it. */
struct measure {
    char name[40];            /* what is measured: "llama / llama-plain", "x roof" */
    char reference[16];       /* the time it is compared with, or "-" */
    double value;
    char why[NOTE_SIZE];      /* why there is no value; empty when there is one */
};

/* The row measured, and the run it may be compared within. */
struct subject {
    const struct options *o;
    const struct row *rows;   /* every workload's, indexed as bench_workloads */
    const struct row *r;      /* its attnrun series ran */
};

/* One kind of target of workloads.h: its bound (0 when the row sets none)
 * and which way it points, and how this run measured it. */
struct target_kind {
    double (*bound)(const struct bench_workload *w, int *at_most);
    void (*measure)(const struct subject *s, struct measure *m);
    int digits[2];            /* decimals of the value and of the bound */
};

static double baseline_bound(const struct bench_workload *w, int *at_most)
{
    *at_most = w->ratio != BENCH_RATIO_AT_LEAST;
    return w->baseline ? w->target : 0;
}

/* This time over the baseline's (an overhead), or the inverse (a speed-up). */
static void baseline_measure(const struct subject *s, struct measure *m)
{
    const struct bench_workload *w = s->r->w, *bw = bench_find_workload(w->baseline);
    int at_most;
    baseline_bound(w, &at_most);
    snprintf(m->name, sizeof m->name, "%s / %s", at_most ? w->name : w->baseline,
             at_most ? w->baseline : w->name);
    const struct row *b = bw ? &s->rows[bw - bench_workloads] : NULL;
    if (!b || !s->o->selected[bw - bench_workloads]) {
        snprintf(m->why, sizeof m->why, "needs %s in the run (--only)", w->baseline);
        return;
    }
    if (b->attn.state != SERIES_OK) {
        snprintf(m->why, sizeof m->why, "%s did not run", w->baseline);
        return;
    }
    double t = s->r->attn.median_s, base = b->attn.median_s;
    m->value = at_most ? t / base : base / t;
    snprintf(m->reference, sizeof m->reference, "%.3f", base);
}

static double rss_bound(const struct bench_workload *w, int *at_most)
{
    *at_most = 1;
    return w->max_rss_mib;
}

static void rss_measure(const struct subject *s, struct measure *m)
{
    snprintf(m->name, sizeof m->name, "peak RSS MiB");
    m->value = (double)s->r->attn.peak_rss_kib / 1024;
}

static double roof_bound(const struct bench_workload *w, int *at_most)
{
    *at_most = 1;
    return w->roof_target;
}

static void roof_measure(const struct subject *s, struct measure *m)
{
    snprintf(m->name, sizeof m->name, "x roof");
    if (s->r->roof_s <= 0) {
        snprintf(m->why, sizeof m->why, "no roofline (a probe failed)");
        return;
    }
    m->value = s->r->attn.median_s / s->r->roof_s;
    snprintf(m->reference, sizeof m->reference, "%.3f", s->r->roof_s);
}

static double sweep_bound(const struct bench_workload *w, int *at_most)
{
    *at_most = 0;
    return w->sweep_target;
}

/* The thread sweep's series at one thread and at every core, or false
 * with m->why saying why there are none (`what`: the measure's wording of
 * "nothing to sweep"). */
static bool sweep_ends(const struct subject *s, struct measure *m, const char *what,
                       const struct series **one, const struct series **all)
{
    const struct options *o = s->o;
    *one = &s->r->sweep[0];
    *all = &s->r->sweep[o->n_sweep - 1];
    if (!o->sweep)
        snprintf(m->why, sizeof m->why, "needs the thread sweep (--no-sweep given)");
    else if (o->n_sweep < 2)
        snprintf(m->why, sizeof m->why, "one core: %s", what);
    else if ((*one)->state != SERIES_OK || (*all)->state != SERIES_OK)
        snprintf(m->why, sizeof m->why, "the thread sweep failed");
    else
        return true;
    return false;
}

/* The speed-up from one thread to every core. */
static void sweep_measure(const struct subject *s, struct measure *m)
{
    const struct series *one, *all;
    snprintf(m->name, sizeof m->name, "T=1 / T=%d", s->o->sweep_threads[s->o->n_sweep - 1]);
    if (!sweep_ends(s, m, "nothing to sweep", &one, &all))
        return;
    m->value = one->median_s / all->median_s;
    snprintf(m->reference, sizeof m->reference, "%.3f", one->median_s);
}

static double bytes_bound(const struct bench_workload *w, int *at_most)
{
    *at_most = 1;
    return w->bytes_target;
}

/* The output file's size over the dense float32 maps it holds. */
static void bytes_measure(const struct subject *s, struct measure *m)
{
    double dense = bench_dense_map_bytes(s->r->w);
    snprintf(m->name, sizeof m->name, "disk bytes / dense");
    if (dense <= 0) {
        snprintf(m->why, sizeof m->why, "the row saves no scores or weights");
        return;
    }
    m->value = s->r->disk_bytes / dense;
}

static double cpu_bound(const struct bench_workload *w, int *at_most)
{
    *at_most = 1;
    return w->cpu_target;
}

/* CPU seconds on every core over CPU seconds on one thread: what the
 * threads cost beyond the work (waiting, spinning, serial parts twice). */
static void cpu_measure(const struct subject *s, struct measure *m)
{
    const struct series *one, *all;
    snprintf(m->name, sizeof m->name, "CPU s T=%d / T=1", s->o->sweep_threads[s->o->n_sweep - 1]);
    if (!sweep_ends(s, m, "nothing to compare", &one, &all))
        return;
    if (one->cpu_s <= 0) {
        snprintf(m->why, sizeof m->why, "the thread sweep failed");
        return;
    }
    m->value = all->cpu_s / one->cpu_s;
    snprintf(m->reference, sizeof m->reference, "%.3f", one->cpu_s);
}

static double together_bound(const struct bench_workload *w, int *at_most)
{
    *at_most = 1;
    return w->together > 0 ? w->together_target : 0;
}

/* The copies at once over the copies in a row. */
static void together_measure(const struct subject *s, struct measure *m)
{
    const struct row *r = s->r;
    snprintf(m->name, sizeof m->name, "%d at once / in a row", r->w->together);
    if (r->at_once.state != SERIES_OK || r->in_a_row.state != SERIES_OK) {
        snprintf(m->why, sizeof m->why, "%s", r->at_once.note[0] ? r->at_once.note : "not run");
        return;
    }
    m->value = r->at_once.median_s / r->in_a_row.median_s;
    snprintf(m->reference, sizeof m->reference, "%.3f", r->in_a_row.median_s);
}

static const struct target_kind target_kinds[] = {
    {cpu_bound, cpu_measure, {2, 2}},
    {together_bound, together_measure, {2, 2}},
    {baseline_bound, baseline_measure, {2, 2}},
    {roof_bound, roof_measure, {2, 2}},
    {sweep_bound, sweep_measure, {2, 2}},
    {bytes_bound, bytes_measure, {3, 2}},
    {rss_bound, rss_measure, {1, 0}},
};

#define N_TARGET_KINDS (sizeof target_kinds / sizeof target_kinds[0])

static int has_targets(const struct bench_workload *w)
{
    int at_most;
    for (size_t k = 0; k < N_TARGET_KINDS; k++)
        if (target_kinds[k].bound(w, &at_most) > 0)
            return 1;
    return 0;
}

/* One target line: the measure, its value, the bound and PASS or MISS. */
static void print_target(const struct options *o, const struct row *r, const struct measure *m,
                         int at_most, double bound, const int digits[2])
{
    char text[24];
    snprintf(text, sizeof text, "%s %.*f", at_most ? "<=" : ">=", digits[1], bound);
    printf("%-*s %9.3f %8.1f %10s  %-21s %8.*f  %-9s %s\n", o->name_width, r->w->name,
           r->attn.median_s, (double)r->attn.peak_rss_kib / 1024, m->reference, m->name,
           digits[0], m->value, text, meets(m->value, at_most, bound) ? "PASS" : "MISS");
}

/* Every target of row r, one line each. */
static void print_row_targets(const struct options *o, const struct row rows[],
                              const struct row *r)
{
    const struct subject s = {o, rows, r};
    for (size_t k = 0; k < N_TARGET_KINDS; k++) {
        int at_most;
        double bound = target_kinds[k].bound(r->w, &at_most);
        if (bound <= 0)
            continue;
        struct measure m = {.reference = "-"};
        target_kinds[k].measure(&s, &m);
        if (m.why[0])
            printf("%-*s  %s: %s\n", o->name_width, r->w->name, m.name, m.why);
        else
            print_target(o, r, &m, at_most, bound, target_kinds[k].digits);
    }
}

/* The rows with targets: ratios of times, bytes and RSS of this run. */
static void print_targets_table(const struct options *o, const struct row rows[])
{
    int any = 0;
    for (size_t i = 0; i < BENCH_N_WORKLOADS; i++)
        any |= o->selected[i] && has_targets(rows[i].w);
    if (!any)
        return;
    printf("\nattnrun against its targets (bench/workloads.h)\n");
    printf("%-*s %9s %8s %10s  %-21s %8s  %-9s %s\n", o->name_width, "workload", "attnrun s",
           "RSS MiB", "baseline s", "measure", "value", "target", "result");
    for (size_t i = 0; i < BENCH_N_WORKLOADS; i++) {
        const struct row *r = &rows[i];
        if (!o->selected[i] || !has_targets(r->w))
            continue;
        if (!r->prepared || r->attn.state != SERIES_OK)
            printf("%-*s  %s\n", o->name_width, r->w->name,
                   !r->prepared ? r->prep_note : r->attn.note);
        else
            print_row_targets(o, rows, r);
    }
    printf("baseline s: the time the measure compares with, from this run: the baseline\n"
           "workload's attnrun s, roof s, the sweep's T=1 s (CPU s for the CPU measure), or\n"
           "the copies in a row. measure: a ratio of two times, the file's bytes on disk over\n"
           "the dense float32 maps it saves, or the peak RSS (under --memory: the cap, the\n"
           "parameters and %d MiB for the program, its libraries and HDF5's caches). N at once\n"
           "/ in a row: the wall time of N copies started together over that of the same N\n"
           "one after the other (median of the runs, alternating).\n", BENCH_RSS_ALLOWANCE_MIB);
    printf("MISS is reported, not an error: the exit status does not change (the figures\n"
           "move 10-20 %% between runs).\n");
}

static void print_footnote(void)
{
    printf("\nEvery timed output reaches the disk: attnrun fsyncs its file before renaming it,\n"
           "ref_numpy.py fsyncs after closing, and the write probe fsyncs after H5Fclose, so\n"
           "the times and the write rate all include the flush. The roofline's write side is\n"
           "the bytes attnrun put on disk (its file's size) at the probe's rate for as many.\n");
}

/* ---- command line ------------------------------------------------------- */

/* Marks the workloads named in list (--only). */
static int parse_only(void *settings, const cli_option *option, const char *name,
                      const char *value)
{
    struct options *o = settings;
    char buf[256];
    (void)option;
    int any = snprintf(buf, sizeof buf, "%s", value) < (int)sizeof buf ? 0 : -1;
    memset(o->selected, 0, sizeof o->selected);
    for (char *save = NULL, *word = any < 0 ? NULL : strtok_r(buf, ",", &save); word;
         word = strtok_r(NULL, ",", &save)) {
        const struct bench_workload *w = bench_find_workload(word);
        if (!w) {
            any = -1;
            break;
        }
        o->selected[w - bench_workloads] = 1;
        any = 1;
    }
    if (any <= 0)
        return cli_usage_error("%s '%s': expected a comma list of workloads", name, value);
    return EXIT_OK;
}

#define OPTION(field) offsetof(struct options, field)

static const cli_option options[] = {
    BENCH_OPTION_ATTNRUN(struct options),
    BENCH_OPTION_GEN(struct options),
    {"only", 0, CLI_CUSTOM, 0, .parse = parse_only, .value = "LIST",
     .help = "comma list of workloads (default all, below)"},
    {"dir", 0, CLI_TEXT, OPTION(dir), .value = "DIR",
     .help = "inputs and outputs (default " BENCH_DIR "; inputs are\n"
             "generated there when missing)"},
    {"runs", 0, CLI_INT, OPTION(runs), .min = 1, .max = MAX_RUNS, .value = "N",
     .expected = "a whole number from 1 to 100", .help = "timed runs after the warm-up (default 5)"},
    {"no-numpy", 0, CLI_FLAG, OPTION(no_numpy), .help = "skip the numpy peer"},
    {"no-sweep", 0, CLI_FLAG, OPTION(no_sweep),
     .help = "skip the thread sweep (attnrun --threads 1, 2, 4, ... cores)"},
    {"python", 0, CLI_TEXT, OPTION(python), .value = "PATH",
     .help = "interpreter for the peer (default /usr/bin/python3)"},
    {"ref", 0, CLI_TEXT, OPTION(ref), .value = "PATH",
     .help = "the peer script (default bench/ref_numpy.py)"},
    {"help", 'h', CLI_FLAG, OPTION(help), .help = "this help"},
    {NULL},
};

static void print_help(void)
{
    printf("usage: " PROG " [OPTIONS]\n"
           "\nTimes attnrun on the benchmark workloads against this machine's limits\n"
           "(sgemm rate, HDF5 write rate) and against bench/ref_numpy.py.\n\n");
    cli_print_options(options, stdout);
    printf("\nworkloads:");
    for (size_t i = 0; i < BENCH_N_WORKLOADS; i++)
        printf(" %s", bench_workloads[i].name);
    printf("\n");
}

/* The sweep's Ts: the powers of two below the online cores, then the cores. */
static void plan_sweep(struct options *o)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1)
        cores = 1;
    o->n_sweep = 0;
    for (long t = 1; t < cores && o->n_sweep < SWEEP_MAX - 1; t *= 2)
        o->sweep_threads[o->n_sweep++] = (int)t;
    o->sweep_threads[o->n_sweep++] = (int)cores;
}

/* Returns -1 to go on, else the exit status (help or usage error). */
static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){BENCH_ATTNRUN, BENCH_GEN, "/usr/bin/python3", "bench/ref_numpy.py",
                          BENCH_DIR, .runs = 5, .name_width = 9};
    for (size_t i = 0; i < BENCH_N_WORKLOADS; i++)
        o->selected[i] = 1;
    cli_set_command(PROG, PROG " --help");
    int code = cli_parse(options, argc, argv, o);
    if (code != EXIT_OK)
        return code;
    if (o->help) {
        print_help();
        return 0;
    }
    if (optind < argc)
        return cli_usage_error("no operands expected, got '%s'", argv[optind]);
    o->numpy = !o->no_numpy;
    o->sweep = !o->no_sweep;
    for (size_t i = 0; i < BENCH_N_WORKLOADS; i++)   /* "workload" and a space, or more */
        if (o->selected[i] && (int)strlen(bench_workloads[i].name) + 1 > o->name_width)
            o->name_width = (int)strlen(bench_workloads[i].name) + 1;
    plan_sweep(o);
    return -1;
}

int main(int argc, char **argv)
{
    static struct row rows[BENCH_N_WORKLOADS];
    struct options o;
    int status = parse_options(argc, argv, &o);
    if (status >= 0)
        return status;
    if (access(o.attnrun, X_OK) != 0)
        return cli_error(2, "cannot execute attnrun (build it, or give --attnrun): %s", o.attnrun);
    if (make_dirs(o.dir) != 0)
        return 1;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);   /* one-line errors from h5_fail */

    int failed = 0;
    for (size_t i = 0; i < BENCH_N_WORKLOADS; i++) {
        rows[i].w = &bench_workloads[i];
        if (o.selected[i] && prepare_row(&o, &rows[i]) != 0)
            failed = 1;
    }

    progress("measuring the sgemm rate\n");
    double sgemm_gflops = measure_sgemm_gflops();
    print_machine(&o, sgemm_gflops);
    fflush(stdout);   /* the machine before the progress of the runs, even into a pipe */

    int numpy_available = o.numpy;
    char unavailable_note[NOTE_SIZE] = "";
    for (size_t i = 0; i < BENCH_N_WORKLOADS; i++)
        if (rows[i].prepared)
            failed |= bench_row(&o, &rows[i], sgemm_gflops, &numpy_available, unavailable_note);

    print_workloads(&o, rows);
    print_roofline_table(&o, rows);
    print_sweep_table(&o, rows);
    print_numpy_table(&o, rows, unavailable_note);
    print_targets_table(&o, rows);
    print_footnote();
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, PROG ": cannot write the report: %s\n", strerror(errno));
        return 1;
    }
    return failed;
}
