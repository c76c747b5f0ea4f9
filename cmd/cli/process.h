/*
 * process.h - what attnrun does about its own process, apart from the
 * command line: descriptors 0-2 that may be closed, every signal that
 * would end it, libraries that call exit(), and OpenBLAS's start-up
 * buffers (checked before main, see process.c).  Only cmd/ uses it.
 *
 *     process_open_standard_descriptors();          // first thing in main
 *     attn_atomic *tx = process_watch("in.h5", "out.h5", false);
 *     ... attn_run with options.transaction = tx ...
 *     process_run_ended();
 */
#ifndef ATTN_CMD_PROCESS_H
#define ATTN_CMD_PROCESS_H

#include "attn_atomic.h"
#include "cli/exit.h"

#include <stdbool.h>

/* Opens each of descriptors 0, 1 and 2 that is closed on /dev/null, the
 * other way round (stdin for writing, stdout and stderr for reading), so
 * that no file opened later becomes one of them.  Ends the process
 * (EXIT_RUNTIME) when that is impossible. */
void process_open_standard_descriptors(void);

/* Sends standard output and error to /dev/null: a rank other than 0
 * of an MPI job says nothing (rank 0 speaks for the job). */
void process_silence(void);

/*
 * Installs the handlers: every signal that would end the process ends the
 * run at once on the main thread -- the transaction's temporary removed,
 * one line naming `target` (OUT, or IN when `is_input`), EXIT_RUNTIME --
 * unless the transaction is committing (the point of no return); the
 * fatal signals end it with EXIT_INPUT when HDF5 was reading `input`, else
 * EXIT_RUNTIME; SIGPIPE and SIGXFSZ are ignored; an exit() from a library
 * removes the temporary.  Returns the transaction the caller passes to
 * attn_run.
 */
attn_atomic *process_watch(const char *input, const char *target, bool is_input);

/* After process_run_ended, a check that runs more (--expect's re-runs,
 * into temporaries of their own): signals end it again, the check's
 * temporary removed, one line naming `results` and saying they are kept.
 * Returns the transaction to pass to those runs. */
attn_atomic *process_check_started(const char *results);

/* A "\r" progress line is on stderr: a handler's line starts a new one. */
void process_progress_line_open(void);
bool process_progress_line_is_open(void);

/* attn_run has returned: a signal from now on leaves main to finish. */
void process_run_ended(void);

#endif
