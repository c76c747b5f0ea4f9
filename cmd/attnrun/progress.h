/*
 * progress.h - the progress attnrun reports on stderr while it runs: the
 * share of the work done (attn_run_work), where in the batch, and the
 * time left.
 *
 *     progress_line p;
 *     progress_start(&p, true, isatty(STDERR_FILENO), &opt, &report);
 *     opt.progress = progress_show;
 *     opt.progress_context = &p;
 *     attn_run(&opt, &report, &err);
 *
 * On a terminal a line naming the plan comes first (heads, d_k, the
 * weights' layout, the masks, the outputs), then one line is rewritten
 * (\r) at most PROGRESS_REFRESH times a second; elsewhere (a file, a
 * pipe) whole lines are written, one for the first report, one each time
 * both PROGRESS_LINE_SECONDS and another PROGRESS_LINE_STEP percent of
 * the work have passed, and one at the end.  Only cmd/ uses it.
 */
#ifndef ATTN_CMD_PROGRESS_H
#define ATTN_CMD_PROGRESS_H

#include "attn_run.h"

#include <stdbool.h>
#include <stddef.h>

#define PROGRESS_REFRESH 4       /* terminal updates a second, at most     */
#define PROGRESS_LINE_STEP 1     /* percent of the work between two lines
                                    elsewhere, at least ...             */
#define PROGRESS_LINE_SECONDS 1.0 /* ... and seconds                       */
#define PROGRESS_SETTLED 5       /* percent done before the time left is
                                    kept from jumping ...               */
#define PROGRESS_DRIFT 1.5       /* ... by more than this factor a line    */

typedef struct progress_line {
    bool enabled;
    bool terminal;               /* rewrite one line, else whole lines     */
    const attn_run_options *options; /* the run's options               */
    const attn_run_report *plan; /* the run's report: its plan is filled
                                    before the first report             */
    double start;                /* seconds (CLOCK_MONOTONIC) at the start */
    double first_at;             /* ... at the first report                */
    size_t first_done;           /* work done at the first report          */
    size_t reports;              /* calls so far                           */
    size_t lines;                /* reports shown so far                   */
    double shown_at;             /* seconds of the last line shown         */
    size_t shown_done;           /* its work done                          */
    double shown_left;           /* its seconds left                       */
    size_t width;                /* characters of the terminal line shown  */
    size_t item_work;            /* attn_run_work of one item; 0 = not yet */
    size_t at_first, at_rows, at_work; /* the last position: the slice's
                                    first item, the rows of each of its
                                    items and their work                */
    int failure;                 /* errno of a failed write, or 0          */
} progress_line;

/* Starts the clock; `enabled` false makes progress_show do nothing. */
void progress_start(progress_line *p, bool enabled, bool terminal,
                    const attn_run_options *options, const attn_run_report *plan);

/* The callback of attn_run_options.progress: done and total are work
 * (attn_run_work; B times one item's in all).  Returns false when stderr
 * cannot be written (the errno in p->failure), which stops the run. */
bool progress_show(size_t done, size_t total, void *context);

#endif
