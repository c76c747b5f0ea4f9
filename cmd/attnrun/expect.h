/*
 * expect.h - `--expect OUTPUT=DATASET,...`: the run's outputs compared with
 * reference datasets of the input (expect.c), and when they differ, the
 * first item re-run under the conventions people confuse to name the one
 * that matches (diagnose.c).
 *
 *     attnrun_expect e = {0};
 *     expect_parse(&e, "weights=/reference/attn_weights");
 *     expect_check_shapes(&e, &opt, &report);        // before the run
 *     int code = expect_compare(&e, &opt, &report, quiet);   // after it
 *     if (code == EXIT_EXPECT) expect_diagnose(&e, &opt, &report);
 *
 * Shapes are attnrun's (attn_output_shape); `mean` also takes torch's
 * head-averaged weights (B, n, m), which is its shape.  Values are read a
 * block of rows at a time, so memory does not grow with B.  Under MPI
 * every rank calls each function; rank 0 alone reads and speaks, and the
 * exit status is every rank's.
 */
#ifndef ATTN_CMD_EXPECT_H
#define ATTN_CMD_EXPECT_H

#include "attn_results.h"
#include "attn_run.h"

#include <stdbool.h>

#define EXPECT_MAX 8

typedef struct expect_pair {
    attn_output which;            /* the output compared                  */
    char reference[512];          /* its reference: a dataset of the input */
} expect_pair;

typedef struct attnrun_expect {
    expect_pair pairs[EXPECT_MAX];
    size_t count;
    double tol;                   /* --expect-tol; 0: the default of the
                                     precision (expect_tolerance)       */
} attnrun_expect;

/* The largest difference of one output from its reference. */
typedef struct expect_diff {
    double abs, rel;              /* largest |a - b|, and that over the
                                     largest finite |b|                  */
    double largest;               /* largest finite |b|                    */
    double worst;                 /* largest |a - b| / max(1, |b|): the
                                     measure the tolerance bounds        */
    size_t at[4];                 /* the element of `worst`                */
    size_t rank;
    bool nan;                     /* a NaN or an infinity on one side only */
    bool float32;                 /* every reference value is a float's:
                                     it was computed in float32          */
    bool causal;                  /* the reference is 0 wherever the last
                                     index exceeds the one before (a
                                     causal map's keys after the query) */
} expect_diff;

/* Whether an output's name is plural ("weights differ", "output differs"). */
bool plural(const char *name);

/* A reference's name in the input's root group: without its leading '/'. */
const char *expect_in_root(const char *name);

/* Parses "OUTPUT=DATASET[,OUTPUT=DATASET...]" into e (appending); an exit code. */
int expect_parse(attnrun_expect *e, const char *list);

/* The tolerance of a comparison: --expect-tol, else 1e-5, or 1e-10 when
 * the run is float64 and the reference holds values no float holds. */
double expect_tolerance(const attnrun_expect *e, attn_precision run, const expect_diff *diff);

/* Before the run: each reference exists, holds floats and has the shape
 * of its output (report of a dry run).  EXIT_OK, or the exit code with
 * the error printed. */
int expect_check_shapes(const attnrun_expect *e, const attn_run_options *opt,
                        const attn_run_report *report);

/* After the run: each output against its reference, one line each (the
 * passing ones not with quiet).  EXIT_OK, EXIT_EXPECT when one differs
 * beyond the tolerance, or the exit code of a failure (printed); then
 * `failure` says how the first that differs does ("weights differ by
 * 0.985"), for the diagnosis. */
int expect_compare(const attnrun_expect *e, const attn_run_options *opt,
                   const attn_run_report *report, bool quiet, char failure[128]);

/*
 * The largest difference of output `name` of `got` from `reference` of
 * `ref`, over the shape of `name` (the reference's is that, or the same
 * with more items: a re-run of the first item is compared with it),
 * in *diff.  ATTN_OK or the failure, err filled.
 */
int expect_diff_of(attn_results *got, const char *name, attn_results *ref,
                   const char *reference, expect_diff *diff, attn_error *err);

/* When expect_compare found a difference: the first item re-run under
 * the conventions people confuse, one line naming what matches (or what
 * was tried).  Writes nothing the run wrote. */
void expect_diagnose(const attnrun_expect *e, const attn_run_options *opt,
                     const attn_run_report *report, const char *failure);

#endif
