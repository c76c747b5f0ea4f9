/*
 * process.c - what attnrun does about its own process (process.h): the
 * standard descriptors, every signal, a library that calls exit(), and
 * the address space OpenBLAS takes before main.
 */
#define _GNU_SOURCE
#include "cli/process.h"

#include "attn_common.h"
#include "attn_threads.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Appends text to buf (used: *len of size), for messages written where stdio cannot be used. */
static void append(char *buf, size_t size, size_t *len, const char *text)
{
    while (*text != '\0' && *len + 1 < size)
        buf[(*len)++] = *text++;
}

/* Appends the decimal digits of value to buf (used: *len of size). */
static void append_number(char *buf, size_t size, size_t *len, unsigned long long value)
{
    char digits[24];
    size_t count = 0;
    do {
        digits[count++] = (char)('0' + value % 10);
        value /= 10;
    } while (value > 0);
    while (count > 0 && *len + 1 < size)
        buf[(*len)++] = digits[--count];
}

/*
 * OpenBLAS's start-up, and whether the address space (ulimit -v) has room
 * for it.  OpenBLAS's constructor takes a work buffer of 128 MiB
 * (ATTN_BLAS_BUFFER_BYTES) for each of its threads, and when the mmap of
 * one fails it retries forever at 100% CPU (blas_memory_alloc's loop in
 * driver/others/memory.c): every command, --version included, would hang
 * before main.  How many, for each build (OpenBLAS 0.3, as openblas_get_parallel
 * tells the builds apart):
 *   - OpenMP (2, Debian's libopenblas0-openmp, which attnrun links): one
 *     buffer per thread of blas_thread_init, which counts
 *     atoi(OMP_NUM_THREADS) when positive, else every CPU; capped at the
 *     CPUs configured (sysconf), or at the places of OMP_PLACES when it
 *     lists any (which may be more: "{0}:4:0" is four).  OPENBLAS_NUM_THREADS and GOTO_NUM_THREADS are not read
 *     (memory.c's `#ifndef USE_OPENMP`), except in a build with USE_TLS=1,
 *     which reads them first: both are counted, the larger taken.
 *   - pthreads (1): OPENBLAS_NUM_THREADS, else GOTO_NUM_THREADS, else
 *     OMP_NUM_THREADS, else the CPUs it may run on; it starts one thread
 *     fewer, each taking its stack and a buffer.
 *   - sequential (0): at most the one buffer of its warm-up.
 * Measured here (Debian's 0.3.21, 2 CPUs): --version runs from about
 * 0.5 MiB above the address space at the preinit plus the buffers, and
 * hangs below.
 */

/* Room left above the estimate: the libraries' constructors, main's
 * start (about 0.5 MiB measured). */
#define START_SLACK_BYTES ((unsigned long long)32 << 20)

/* At most this many threads are believed (OpenBLAS caps its own count
 * lower still: MAX_CPU_NUMBER). */
#define START_MAX_THREADS 4096L

/* OpenBLAS's own answer, when it is the BLAS linked: 0 sequential,
 * 1 pthreads, 2 OpenMP.  It returns a constant, so it may be called
 * before OpenBLAS's constructor. */
extern int openblas_get_parallel(void) __attribute__((weak));

/* The value of an environment entry NAME=..., or NULL; for
 * before_libraries, which runs before getenv can be used. */
static const char *environment_value(char **envp, const char *name)
{
    size_t len = strlen(name);
    for (char **entry = envp; entry != NULL && *entry != NULL; entry++)
        if (strncmp(*entry, name, len) == 0 && (*entry)[len] == '=')
            return *entry + len + 1;
    return NULL;
}

/* A thread count as OpenBLAS reads it (atoi): 0 when the entry is
 * absent, not a number or not positive. */
static long environment_count(char **envp, const char *name)
{
    const char *text = environment_value(envp, name);
    if (text == NULL)
        return 0;
    long value = strtol(text, NULL, 10);
    return value <= 0 ? 0 : value > START_MAX_THREADS ? START_MAX_THREADS : value;
}

/*
 * At least as many places as OMP_PLACES lists, as libgomp counts them,
 * where they could be more than the CPUs: an explicit list gives one place
 * per item, or LEN for an item followed by :LEN[:STRIDE] (a stride of 0
 * repeats a place).  0 for an abstract name (threads, cores, ...: at most
 * one place per CPU), and when it is unset or empty.
 */
static long places_bound(const char *text)
{
    long count = 0;
    if (text == NULL)
        return 0;
    while (*text == ' ' || *text == '\t')
        text++;
    if ((*text >= 'a' && *text <= 'z') || (*text >= 'A' && *text <= 'Z'))
        return 0;
    int depth = 0;
    bool item = false;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p == '{') {
            depth++;
        } else if (*p == '}') {
            depth--;
        } else if (depth == 0 && *p == ':') {
            long len = strtol(p + 1, NULL, 10);   /* replaces the item's 1 */
            if (len > 1)
                count += len - 1;
            while (p[1] != '\0' && p[1] != ',')
                p++;
            continue;
        } else if (depth == 0 && *p == ',') {
            item = false;
            continue;
        }
        if (!item && *p != ' ' && *p != '\t') {
            item = true;
            count++;
        }
        if (count > START_MAX_THREADS)
            return START_MAX_THREADS;
    }
    return count;
}

/* The buffers OpenBLAS (build `parallel`) takes as it starts, and the
 * thread stacks it starts with them, under the environment envp. */
static void blas_start(int parallel, char **envp, unsigned long long *buffers,
                       unsigned long long *stacks)
{
    long omp = environment_count(envp, "OMP_NUM_THREADS");
    long own = environment_count(envp, "OPENBLAS_NUM_THREADS");
    if (own == 0)
        own = environment_count(envp, "GOTO_NUM_THREADS");
    *buffers = *stacks = 0;
    if (parallel == 2) {
        /* The larger of the two: libgomp counts no places for a list it
         * rejects, and OpenBLAS then the CPUs. */
        long cpus = sysconf(_SC_NPROCESSORS_CONF);
        long places = places_bound(environment_value(envp, "OMP_PLACES"));
        long cap = places > cpus ? places : cpus > 0 ? cpus : 1;
        long asked = omp > 0 ? omp : START_MAX_THREADS;
        if (own > asked)                /* a USE_TLS=1 build reads it first */
            asked = own;
        *buffers = (unsigned long long)(asked < cap ? asked : cap);
    } else if (parallel == 1) {
        cpu_set_t cpus;
        long cap = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
        long asked = own > 0 ? own : omp > 0 ? omp : START_MAX_THREADS;
        *buffers = (unsigned long long)(asked < cap ? asked : cap) - 1;
        struct rlimit stack;
        unsigned long long size = (unsigned long long)32 << 20;
        if (getrlimit(RLIMIT_STACK, &stack) == 0 && stack.rlim_cur != RLIM_INFINITY)
            size = (unsigned long long)stack.rlim_cur + ((unsigned long long)64 << 10);
        *stacks = *buffers * size;
    } else {
        *buffers = 1;
    }
}

/* Appends " NAME=1" for each variable whose 1 makes every build of
 * OpenBLAS start a single thread, given the environment envp. */
static void append_one_thread(char *buf, size_t size, size_t *len, int parallel, char **envp)
{
    bool own = environment_count(envp, "OPENBLAS_NUM_THREADS") > 1 ||
               (environment_count(envp, "OPENBLAS_NUM_THREADS") == 0 &&
                environment_count(envp, "GOTO_NUM_THREADS") > 1);
    if (parallel == 1 || own)
        append(buf, size, len, " OPENBLAS_NUM_THREADS=1");
    if (parallel == 2)
        append(buf, size, len, " OMP_NUM_THREADS=1");
}

/* The figure for ulimit -v (KiB) that leaves room for bytes: whole MiB. */
static unsigned long long limit_figure(unsigned long long bytes)
{
    return ((bytes + ((1ull << 20) - 1)) >> 20) << 10;
}

/*
 * Runs before any shared library initialises (the executable's preinit
 * array runs first: LD_DEBUG=libs shows it before OpenBLAS's init), and
 * ends attnrun with one line, exit 1, when OpenBLAS's start-up (above)
 * would not fit under ulimit -v.  The line names a setting under which it
 * does: OMP_NUM_THREADS=1 (with OPENBLAS_NUM_THREADS=1 where that one
 * counts) when one buffer fits, and the limit that fits.
 */
static void before_libraries(int argc, char **argv, char **envp)
{
    struct rlimit limit;
    char text[512] = "";
    (void)argc;
    (void)argv;
    if (openblas_get_parallel == NULL || getrlimit(RLIMIT_AS, &limit) != 0 ||
        limit.rlim_cur == RLIM_INFINITY)
        return;
    int parallel = openblas_get_parallel();
    unsigned long long buffers, stacks;
    blas_start(parallel, envp, &buffers, &stacks);
    if (buffers == 0)
        return;             /* a pthreads build on one thread starts none */
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)!read(fd, text, sizeof text - 1);
        close(fd);
    }
    unsigned long long used = strtoull(text, NULL, 10) * (unsigned long long)sysconf(_SC_PAGESIZE);
    unsigned long long need = used + buffers * ATTN_BLAS_BUFFER_BYTES + stacks + START_SLACK_BYTES;
    if (need <= limit.rlim_cur)
        return;
    /* The same with a single thread: one buffer (none started in a
     * pthreads build). */
    unsigned long long single = used + (parallel == 1 ? 0 : ATTN_BLAS_BUFFER_BYTES) +
                                START_SLACK_BYTES;
    bool fewer = single < need && parallel != 0;
    size_t len = 0;
    append(text, sizeof text, &len, "attnrun: out of memory: OpenBLAS takes 128 MiB of address "
           "space for ");
    if (buffers == 1) {
        append(text, sizeof text, &len, "its one thread");
    } else {
        append(text, sizeof text, &len, "each of its ");
        append_number(text, sizeof text, &len, buffers);
        append(text, sizeof text, &len, " threads");
    }
    append(text, sizeof text, &len, " as it starts, more than ulimit -v ");
    append_number(text, sizeof text, &len, (unsigned long long)limit.rlim_cur >> 10);
    append(text, sizeof text, &len, " leaves; ");
    if (fewer && single <= limit.rlim_cur) {
        append(text, sizeof text, &len, "set");
        append_one_thread(text, sizeof text, &len, parallel, envp);
        append(text, sizeof text, &len, ", or ");
    }
    append(text, sizeof text, &len, "raise the limit to ulimit -v ");
    append_number(text, sizeof text, &len, limit_figure(need));
    if (fewer && single > limit.rlim_cur) {
        append(text, sizeof text, &len, " (or to ");
        append_number(text, sizeof text, &len, limit_figure(single));
        append(text, sizeof text, &len, " with");
        append_one_thread(text, sizeof text, &len, parallel, envp);
        append(text, sizeof text, &len, ")");
    }
    append(text, sizeof text, &len, "\n");
    (void)!write(STDERR_FILENO, text, len);
    _exit(EXIT_RUNTIME);
}

__attribute__((section(".preinit_array"), used))
static void (*const run_before_libraries)(int, char **, char **) = before_libraries;

/* The transaction of the run: the signal handlers remove its temporary. */
static attn_atomic transaction;

/* What the handlers need to know, set by process_watch. */
static pid_t main_thread;                 /* where on_terminate does its work */
static char target_name[1024];            /* OUT, or IN for --in-place      */
static bool target_is_input;
static volatile sig_atomic_t progress_shown;   /* a "\r" progress line is open */
static volatile sig_atomic_t ending;      /* attn_run returned: main finishes */
static bool results_kept;                 /* a check after the run (--expect) */

/*
 * Every signal that would end the process (SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT, SIGUSR1, SIGALRM, SIGPROF, the real-time signals, ...) ends
 * the run at once: the temporary output is removed, one line says so,
 * and the exit status is 1.  The work is done on the main thread (a
 * signal taken by a compute thread is passed to it), so it cannot race
 * the commit: once the flushed output is being renamed into place
 * (transaction.committing) the run completes and the signal is ignored.
 * Only async-signal-safe calls here.
 */
static void on_terminate(int signo)
{
    char message[1400];
    size_t len = 0;
    if (gettid() != main_thread) {
        int saved = errno;
        tgkill(getpid(), main_thread, signo);
        errno = saved;
        return;
    }
    if (transaction.committing || ending)
        return;
    if (transaction.temp_path[0] != '\0')
        unlink(transaction.temp_path);
    const char *name = sigabbrev_np(signo);
    append(message, sizeof message, &len, progress_shown ? "\nattnrun: " : "attnrun: ");
    append(message, sizeof message, &len, target_name);
    append(message, sizeof message, &len, ": interrupted by SIG");
    if (name != NULL) {
        append(message, sizeof message, &len, name);
    } else {                                     /* a real-time signal */
        append(message, sizeof message, &len, "RTMIN+");
        append_number(message, sizeof message, &len, (unsigned long long)(signo - SIGRTMIN));
    }
    append(message, sizeof message, &len, results_kept      ? "; the results are kept\n"
                                          : target_is_input ? "; the input is unchanged\n"
                                                            : "; no output was written\n");
    (void)!write(STDERR_FILENO, message, len);
    _exit(EXIT_RUNTIME);
}

/* A library that ends the process with exit() (libgomp when it cannot
 * start a thread) leaves no temporary behind either. */
static void remove_temporary(void)
{
    if (!transaction.committing && transaction.temp_path[0] != '\0')
        unlink(transaction.temp_path);
}

/* The input's name, for on_fatal's message. */
static char input_name[1024];

/*
 * A fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS,
 * SIGTRAP).  HDF5 does not read
 * damaged or hostile files safely, and what attnrun checks first cannot
 * catch everything: when HDF5 was parsing the input, the input is
 * rejected (exit 3); otherwise it is attnrun's own failure (exit 1).
 * Either way the temporary output goes and one line says why.  Only
 * async-signal-safe calls here.
 */
static void on_fatal(int signo)
{
    char message[1400];
    size_t len = 0;
    const char *abbreviation = sigabbrev_np(signo);
    bool input = attn_parsing_file();
    if (transaction.temp_path[0] != '\0')
        unlink(transaction.temp_path);
    append(message, sizeof message, &len, "attnrun: ");
    if (input) {
        append(message, sizeof message, &len, input_name);
        append(message, sizeof message, &len, ": the HDF5 library crashed (SIG");
        append(message, sizeof message, &len, abbreviation != NULL ? abbreviation : "?");
        append(message, sizeof message, &len,
               ") reading this file; it is damaged or hostile; nothing was written\n");
    } else {
        append(message, sizeof message, &len, "internal error: SIG");
        append(message, sizeof message, &len, abbreviation != NULL ? abbreviation : "?");
        append(message, sizeof message, &len, "; nothing was written (please report it)\n");
    }
    (void)!write(STDERR_FILENO, message, len);
    _exit(input ? EXIT_INPUT : EXIT_RUNTIME);
}

/* Whether signal signo, left to its default, would end the process. */
static bool terminates(int signo)
{
    switch (signo) {
    case SIGKILL: case SIGSTOP:                        /* cannot be caught  */
    case SIGCHLD: case SIGCONT: case SIGURG: case SIGWINCH:   /* ignored    */
    case SIGTSTP: case SIGTTIN: case SIGTTOU:          /* stop, not end     */
        return false;
    default:
        return signo < 32 || (signo >= SIGRTMIN && signo <= SIGRTMAX);
    }
}

attn_atomic *process_watch(const char *input, const char *target, bool is_input)
{
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS, SIGTRAP};
    static char alternate[1 << 16];     /* room to report a stack overflow */
    stack_t stack = {.ss_sp = alternate, .ss_size = sizeof alternate};
    struct sigaction sa;
    snprintf(input_name, sizeof input_name, "%s", input);
    snprintf(target_name, sizeof target_name, "%s", target);
    target_is_input = is_input;
    main_thread = gettid();
    memset(&sa, 0, sizeof sa);
    sigfillset(&sa.sa_mask);            /* one handler at a time */
    sigaltstack(&stack, NULL);
    sa.sa_handler = on_fatal;
    sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        sigaction(fatal[i], &sa, NULL);
    sa.sa_handler = on_terminate;
    sa.sa_flags = SA_RESTART;
    for (int signo = 1; signo <= SIGRTMAX; signo++) {
        bool is_fatal = false;
        for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
            is_fatal = is_fatal || fatal[i] == signo;
        if (!is_fatal && terminates(signo) && signo != SIGPIPE && signo != SIGXFSZ)
            sigaction(signo, &sa, NULL);
    }
    /* A write to a closed pipe (progress) or past `ulimit -f` fails with
     * EPIPE or EFBIG and is reported, instead of killing the process with
     * its temporary left behind. */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
    atexit(remove_temporary);
    return &transaction;
}

void process_progress_line_open(void)
{
    progress_shown = 1;
}

bool process_progress_line_is_open(void)
{
    return progress_shown != 0;
}

void process_run_ended(void)
{
    ending = 1;
}

attn_atomic *process_check_started(const char *results)
{
    snprintf(target_name, sizeof target_name, "%s", results);
    results_kept = true;
    ending = 0;
    return &transaction;
}

/*
 * Makes sure descriptors 0, 1 and 2 are open before anything opens a file:
 * otherwise the output file could become descriptor 1 or 2 and messages
 * would be written into it.  A closed one is opened on /dev/null the
 * other way round (stdin for writing, stdout and stderr for reading), so
 * that using it fails visibly instead of writing anywhere.
 */
void process_open_standard_descriptors(void)
{
    for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
            continue;
        int opened = open("/dev/null", (fd == STDIN_FILENO ? O_WRONLY : O_RDONLY) | O_NOCTTY);
        if (opened != fd)
            _exit(EXIT_RUNTIME);        /* nothing is safe to open then */
    }
}


void process_silence(void)
{
    int null = open("/dev/null", O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (null < 0)
        _exit(EXIT_RUNTIME);
    if (dup2(null, STDOUT_FILENO) < 0 || dup2(null, STDERR_FILENO) < 0)
        _exit(EXIT_RUNTIME);
    close(null);
}
