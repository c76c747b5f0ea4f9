/* run.h - what the small benchmark programs (append.c, mpi.c) share:
 * the clock and the median of clock.h, timing one child process, paths,
 * and the attnrun options of a workload of workloads.h.  Each program
 * includes it once. */
#ifndef BENCH_RUN_H
#define BENCH_RUN_H

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "workloads.h"

/* Runs argv (argv[0] a path, or a name looked up in PATH) with stdout on
 * /dev/null (stderr kept when it fails: the caller says which run);
 * returns its wall time, or -1 when it did not exit 0. */
static double run_timed(char *const argv[])
{
    fflush(NULL);
    double start = now_s();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (freopen("/dev/null", "w", stdout) == NULL)
            _exit(127);
        execvp(argv[0], argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    double seconds = now_s() - start;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? seconds : -1;
}

/* Formats a path into out (PATH_MAX); false when it does not fit. */
__attribute__((format(printf, 2, 3)))
static int make_path(char out[PATH_MAX], const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    int len = vsnprintf(out, PATH_MAX, format, ap);
    va_end(ap);
    return len > 0 && len < PATH_MAX;
}

/* Appends to argv (at *n, leaving room for `spare` more and the NULL of
 * an array of `max`) the options of workload w: --heads, --causal,
 * --save, --kv-heads and its own; the numbers live in text. */
static void push_workload(const struct bench_workload *w, char *argv[], int *n, int max,
                          int spare, char text[2][32])
{
    snprintf(text[0], 32, "%ld", w->heads);
    argv[(*n)++] = "--heads";
    argv[(*n)++] = text[0];
    if (w->causal)
        argv[(*n)++] = "--causal";
    if (w->save) {
        argv[(*n)++] = "--save";
        argv[(*n)++] = (char *)w->save;
    }
    if (bench_kv_heads_arg(w)) {
        snprintf(text[1], 32, "%ld", bench_kv_heads_arg(w));
        argv[(*n)++] = "--kv-heads";
        argv[(*n)++] = text[1];
    }
    for (int i = 0; i < BENCH_MAX_ARGS && w->args[i] && *n < max - spare - 1; i++)
        argv[(*n)++] = (char *)w->args[i];
    argv[*n] = NULL;
}

#endif
