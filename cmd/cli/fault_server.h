/*
 * fault_server.h - the fault-injection build's allocation sweep, one
 * process start for all its runs (tests/lib/checks.sh, alloc_sweep).
 *
 * A sweep runs attnrun once per allocation, the Nth failing
 * (ATTN_FAIL_ALLOC=N): hundreds of runs of the same command line.  Most
 * of a run of the sanitized build is its start -- the exec, the loading
 * of its libraries, the sanitizer's set-up.  With ATTN_FAIL_SERVE set,
 * the process starts once and serves: it reads one N per line on
 * standard input and forks; the child returns from fault_serve() with
 * ATTN_FAIL_ALLOC=N, standard input and output on /dev/null and standard
 * error on the file ATTN_FAIL_STDERR names, and runs the command line as
 * any run would, exit and leak check included; the server waits and
 * writes the child's status as a shell gives it (the exit status, or 128
 * + the signal) on a line of standard output.  It ends, status 0, at the
 * end of its input.  The checks between runs stay with the caller.
 *
 * In every other build, and without ATTN_FAIL_SERVE, it returns at once.
 *
 *     int main(int argc, char **argv) { fault_serve(); ... }
 */
#ifndef ATTN_CMD_FAULT_SERVER_H
#define ATTN_CMD_FAULT_SERVER_H

/* Returns in the process that runs the command line (see above). */
void fault_serve(void);

#endif
