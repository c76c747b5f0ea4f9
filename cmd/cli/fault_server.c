/* fault_server.c - one start for a whole allocation sweep (fault_server.h). */
#include "cli/fault_server.h"

#ifdef ATTN_FAULT_INJECTION

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* One line of standard input, unbuffered (a child must inherit no
 * buffered input): its bytes without the newline in line[0 .. size).
 * False at the end of the input, or for a line that does not fit. */
static bool read_line(char *line, size_t size)
{
    size_t used = 0;
    for (;;) {
        char c;
        ssize_t got = read(STDIN_FILENO, &c, 1);
        if (got <= 0 || used + 1 >= size)
            return false;
        if (c == '\n')
            break;
        line[used++] = c;
    }
    line[used] = '\0';
    return true;
}

/* The child's descriptors 0-2: /dev/null, /dev/null, `stderr_path`. */
static void child_descriptors(const char *stderr_path)
{
    int null = open("/dev/null", O_RDWR);
    int err = open(stderr_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (null < 0 || err < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0 ||
        dup2(err, STDERR_FILENO) < 0)
        _exit(125);
    close(null);
    close(err);
}

/* The status of a child as a shell reports it. */
static int shell_status(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 255;
}

void fault_serve(void)
{
    const char *stderr_path = getenv("ATTN_FAIL_STDERR");
    if (getenv("ATTN_FAIL_SERVE") == NULL || stderr_path == NULL)
        return;
    char line[32];
    while (read_line(line, sizeof line)) {
        if (line[0] == '\0' || line[strspn(line, "0123456789")] != '\0')
            _exit(2);             /* not a count: the caller is confused */
        pid_t pid = fork();
        if (pid == 0) {
            /* the environment of a run started with N, nothing more */
            child_descriptors(stderr_path);
            if (setenv("ATTN_FAIL_ALLOC", line, 1) != 0 || unsetenv("ATTN_FAIL_SERVE") != 0 ||
                unsetenv("ATTN_FAIL_STDERR") != 0)
                _exit(125);
            return;               /* the run, as if started with N */
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid)
            _exit(3);
        char said[16];
        int len = snprintf(said, sizeof said, "%d\n", shell_status(status));
        if (write(STDOUT_FILENO, said, (size_t)len) != len)
            _exit(3);
    }
    _exit(0);
}

#else

void fault_serve(void)
{
}

#endif
