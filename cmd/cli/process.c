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

/* The first number of an environment entry NAME=..., or 0; for
 * before_libraries, which runs before getenv can be used. */
static unsigned long environment_number(char **envp, const char *name)
{
    size_t len = strlen(name);
    for (char **entry = envp; entry != NULL && *entry != NULL; entry++)
        if (strncmp(*entry, name, len) == 0 && (*entry)[len] == '=')
            return strtoul(*entry + len + 1, NULL, 10);
    return 0;
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
 * Runs before any shared library initialises (the executable's preinit
 * array), because OpenBLAS's initialiser takes a work buffer of 128 MiB
 * (ATTN_BLAS_BUFFER_BYTES) for each thread it may run -- as many as
 * OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS or OMP_NUM_THREADS says, else one
 * per CPU -- and retries forever when the address space (ulimit -v) has
 * no room for one.  When they cannot fit, attnrun ends here with its one
 * line instead of hanging.
 */
static void before_libraries(int argc, char **argv, char **envp)
{
    static const char *const variables[] = {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
                                            "OMP_NUM_THREADS"};
    struct rlimit limit;
    char text[512] = "";
    cpu_set_t cpus;
    (void)argc;
    (void)argv;
    if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
        return;
    unsigned long long buffers = sched_getaffinity(0, sizeof cpus, &cpus) == 0
                                 ? (unsigned long long)CPU_COUNT(&cpus) : 1;
    for (size_t i = 0; i < sizeof variables / sizeof variables[0]; i++) {
        unsigned long asked = environment_number(envp, variables[i]);
        if (asked > 0) {
            buffers = asked < buffers ? asked : buffers;
            break;
        }
    }
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)!read(fd, text, sizeof text - 1);
        close(fd);
    }
    unsigned long long used = strtoull(text, NULL, 10) * (unsigned long long)sysconf(_SC_PAGESIZE);
    unsigned long long need = used + buffers * ATTN_BLAS_BUFFER_BYTES + ((unsigned long long)32 << 20);
    if (need <= limit.rlim_cur)
        return;
    size_t len = 0;
    append(text, sizeof text, &len, "attnrun: out of memory: OpenBLAS takes 128 MiB for each of "
           "its ");
    append_number(text, sizeof text, &len, buffers);
    append(text, sizeof text, &len, " threads and the address-space limit (ulimit -v) of ");
    append_number(text, sizeof text, &len, (unsigned long long)limit.rlim_cur >> 20);
    append(text, sizeof text, &len, " MiB has no room for them; raise it");
    append(text, sizeof text, &len, buffers > 1 ? " (or set OPENBLAS_NUM_THREADS=1)\n" : "\n");
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
    append(message, sizeof message, &len, target_is_input ? "; the input is unchanged\n"
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
