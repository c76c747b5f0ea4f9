/*
 * progress.c - the work of a run as its progress counts it
 * (attn_run_work, attn_run.h), and the reports of it to
 * attn_run_options.progress: after each step is written (pipeline.c), and
 * from inside a step's attention, where the tasks count the pairs they
 * saw (attn_progress, attn_math.h) and the calling thread hands them
 * here between its tasks.
 *
 * Legend: see run_state.h.
 */
#include "run/run_state.h"

#include "attn_ranks.h"

#include <stdint.h>
#include <time.h>

/* Seconds between two reports from inside a step, at least. */
#define RUN_PROGRESS_EVERY 0.1

static size_t add_saturated(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

static size_t mul_saturated(size_t a, size_t b)
{
    size_t product;
    return attn_size_mul(&product, a, b) ? product : SIZE_MAX;
}

size_t attn_run_work(const attn_run_report *report, size_t row0, size_t rows)
{
    const double pairs = attn_visible_pairs(&report->config, row0, rows);
    size_t work = pairs < (double)SIZE_MAX ? (size_t)pairs : SIZE_MAX;
    work = add_saturated(work, mul_saturated(2, rows));
    if (row0 == 0 && rows > 0)
        work = add_saturated(work, report->layout.dims.m);
    return work;
}

size_t run_progress_work(const run_state *st, size_t count, size_t row, size_t rows)
{
    return mul_saturated(count, attn_run_work(st->report, row, rows));
}

size_t run_progress_through(const run_state *st, size_t first, size_t count, size_t end)
{
    return add_saturated(mul_saturated(first, st->progress.item),
                         run_progress_work(st, count, 0, end));
}

int run_progress_report(run_state *st, size_t done, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    run_progress *p = &st->progress;
    if (!p->failed && opt->progress != NULL && done > p->shown) {
        p->shown = done;
        p->failed = !opt->progress(done, p->total, opt->progress_context);
    }
    if (!p->failed)
        return ATTN_OK;
    return attn_fail(err, ATTN_EIO, "%s: stopped: progress could not be reported",
                     opt->in_place ? opt->input : opt->output);
}

/* From inside a step (attn_progress.report, on the calling thread): the
 * work before the step and the pairs its finished tasks saw, summed over
 * heads and items, per head -- short of the step's whole work, which is
 * reported once it is written. */
static void report_inside(uint64_t pairs, void *context)
{
    run_state *st = context;
    run_progress *p = &st->progress;
    const uint64_t own = pairs / st->report->layout.dims.heads;
    const size_t inside = own < (uint64_t)p->step ? (size_t)own : p->step - 1;
    (void)run_progress_report(st, add_saturated(p->base, inside), &(attn_error){0});
}

void run_progress_start(run_state *st)
{
    run_progress *p = &st->progress;
    const attn_dims *d = &st->report->layout.dims;
    *p = (run_progress){.item = attn_run_work(st->report, 0, d->n)};
    p->total = mul_saturated(d->batch, p->item);
    /* With a shared file rank 0 reports every rank's work, known at each
     * step's agreement only (pipeline.c). */
    if (st->opt->progress == NULL || attn_ranks_shared_file())
        return;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    p->hook = (attn_progress){
        .report = report_inside, .context = st, .every = RUN_PROGRESS_EVERY,
        .last = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec,
    };
    st->cfg.progress = &p->hook;
}

void run_progress_step(run_state *st, size_t first, size_t count, size_t row, size_t rows)
{
    run_progress *p = &st->progress;
    if (st->cfg.progress == NULL)
        return;
    p->base = run_progress_through(st, first, count, row);
    p->step = run_progress_work(st, count, row, rows);
    p->hook.pairs = 0;
}
