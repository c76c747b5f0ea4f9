/*
 * progress.c - the progress line on stderr (progress.h):
 *
 *     attnrun: 12 heads (12 K/V), d_k 64, layout xw, mask M (causal), saving weights,output
 *     attnrun: 37% (10034/16384 rows of item 1/1), 12 s left
 *     attnrun: 50% (128/128 rows of items 5-8/16), 1 min 05 s left
 *     attnrun: 100% (16384/16384 rows of item 1/1), 31 s elapsed
 *
 * The share is of the work (attn_run_work: the visible (query, key)
 * pairs and the projected rows), the rows those whose work is done.  The
 * time left is the time the work done so far took, scaled to the work
 * still to do; it is measured from the first report on, so that reading
 * the weights does not count as the work's time, and once PROGRESS_SETTLED
 * percent is done it moves by at most PROGRESS_DRIFT times from one line
 * to the next.
 */
#include "attnrun/progress.h"
#include "cli/process.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void progress_start(progress_line *p, bool enabled, bool terminal,
                    const attn_run_options *options, const attn_run_report *plan)
{
    memset(p, 0, sizeof *p);
    p->enabled = enabled;
    p->terminal = terminal;
    p->options = options;
    p->plan = plan;
    p->start = seconds_now();
}

/* A duration in whole seconds, rounded: "42 s", "3 min 05 s", "2 h 07 min". */
static const char *format_duration(char *buf, size_t len, double seconds)
{
    double rounded = floor(seconds + 0.5);
    if (!(rounded < 1e9))                     /* far away, or not a number */
        rounded = 1e9;
    unsigned long s = (unsigned long)rounded;
    if (s < 60)
        snprintf(buf, len, "%lu s", s);
    else if (s < 3600)
        snprintf(buf, len, "%lu min %02lu s", s / 60, s % 60);
    else
        snprintf(buf, len, "%lu h %02lu min", s / 3600, s / 60 % 60);
    return buf;
}

/* Where work `done` stands in the batch, in the rows of each item of
 * its slice whose work is done: "10034/16384 rows of item 1/1", or for a
 * slice of several items "128/128 rows of items 5-8/16" (a step computes
 * the same rows of every item of its slice).  The rows are found walking
 * on from those of the last call, a row's work at a time. */
static void format_position(char *buf, size_t len, progress_line *p, size_t done)
{
    const attn_run_report *plan = p->plan;
    const size_t n = plan->layout.dims.n, batch = plan->layout.dims.batch;
    size_t items = plan->slice_items < batch ? plan->slice_items : batch;
    if (p->item_work == 0 && n > 0)
        p->item_work = attn_run_work(plan, 0, n);
    if (p->item_work == 0 || items == 0 || done == 0) {
        snprintf(buf, len, "0/%zu rows of item 1/%zu", n, batch);
        return;
    }
    const size_t first = (done - 1) / p->item_work / items * items;
    const size_t count = batch - first < items ? batch - first : items;
    const size_t within = (done - first * p->item_work) / count;
    if (first != p->at_first || within < p->at_work) {
        p->at_first = first;
        p->at_rows = 0;
        p->at_work = 0;
    }
    while (p->at_rows < n) {
        const size_t next = attn_run_work(plan, p->at_rows, 1);
        if (next > within - p->at_work)
            break;
        p->at_work += next;
        p->at_rows++;
    }
    const size_t rows = p->at_rows;
    if (count == 1)
        snprintf(buf, len, "%zu/%zu rows of item %zu/%zu", rows, n, first + 1, batch);
    else
        snprintf(buf, len, "%zu/%zu rows of items %zu-%zu/%zu", rows, n, first + 1,
                 first + count, batch);
}

/* What the run does, in one line (the text plan of a dry run says it at
 * length): "2 heads (1 K/V), d_k 64, layout linear, mask M inverted
 * (causal, window 256), saving weights,output". */
static void format_plan(char *buf, size_t len, const attn_run_options *opt,
                        const attn_run_report *plan)
{
    const attn_dims *d = &plan->layout.dims;
    const attn_variant *v = &plan->config.variant;
    const char *mask = opt->names[ATTN_IN_MASK];
    size_t used = (size_t)snprintf(buf, len, "%zu head%s (%zu K/V), d_k %zu", d->heads,
                                   d->heads == 1 ? "" : "s", attn_kv_heads(d), d->d_k);
    if (d->d_v != d->d_k && used < len)
        used += (size_t)snprintf(buf + used, len - used, ", d_v %zu", d->d_v);
    if (used < len)
        used += (size_t)snprintf(buf + used, len - used, ", layout %s, ",
                                 attn_weight_layout_name(plan->layout.linear ? ATTN_LAYOUT_LINEAR
                                                                             : ATTN_LAYOUT_XW));
    if (used < len && plan->inputs[ATTN_IN_MASK].present)
        used += (size_t)snprintf(buf + used, len - used, "mask %s%s", mask != NULL ? mask : "",
                                 opt->mask_invert ? " inverted" : "");
    else if (used < len)
        used += (size_t)snprintf(buf + used, len - used, "no mask");
    if (used < len && (v->causal || v->window != 0)) {
        char window[48] = "";
        if (v->window != 0)
            snprintf(window, sizeof window, "%swindow %zu", v->causal ? ", " : "", v->window);
        used += (size_t)snprintf(buf + used, len - used, " (%s%s)", v->causal ? "causal" : "",
                                 window);
    }
    if (used < len)
        used += (size_t)snprintf(buf + used, len - used, ", saving");
    for (int i = 0, shown = 0; i < ATTN_OUT_COUNT && used < len; i++)
        if ((plan->save >> i) & 1u)
            used += (size_t)snprintf(buf + used, len - used, "%c%s", shown++ ? ',' : ' ',
                                     attn_output_name((attn_output)i));
}

/* Whether this report is shown: the first and the last always; on a
 * terminal at most PROGRESS_REFRESH a second, elsewhere once both
 * PROGRESS_LINE_SECONDS and PROGRESS_LINE_STEP percent of the work have
 * passed since the last line. */
static bool due(const progress_line *p, size_t done, size_t total, double now)
{
    if (p->reports == 1 || done == total)
        return true;
    if (p->terminal)
        return now - p->shown_at >= 1.0 / PROGRESS_REFRESH;
    return now - p->shown_at >= PROGRESS_LINE_SECONDS &&
           100.0 * (double)(done - p->shown_done) >= PROGRESS_LINE_STEP * (double)total;
}

/* Seconds left, or -1 when not known: the time per unit of work since
 * the first report times the work left.  At the first report the time
 * since the start, once PROGRESS_SETTLED percent is done, else none
 * (reading the inputs and projecting them would make a first sliver of
 * work look hours long).  Once the last line was PROGRESS_SETTLED percent
 * on, kept between what it said less the time since, divided by
 * PROGRESS_DRIFT, and what it said times PROGRESS_DRIFT (and half a
 * second, so that it can rise from 0). */
static double time_left(const progress_line *p, size_t done, size_t total, double now)
{
    const bool settled = 100.0 * (double)done >= PROGRESS_SETTLED * (double)total;
    if (done <= p->first_done && !settled)
        return -1;
    double rate = done > p->first_done ? (now - p->first_at) / (double)(done - p->first_done)
                : (now - p->start) / (double)done;
    double left = rate * (double)(total - done);
    if (p->lines > 0 && p->shown_left >= 0 &&
        100.0 * (double)p->shown_done >= PROGRESS_SETTLED * (double)total) {
        double expected = p->shown_left - (now - p->shown_at);
        double low = (expected > 0 ? expected : 0) / PROGRESS_DRIFT;
        double high = p->shown_left * PROGRESS_DRIFT + 0.5;
        left = left < low ? low : left > high ? high : left;
    }
    return left;
}

bool progress_show(size_t done, size_t total, void *context)
{
    progress_line *p = context;
    if (!p->enabled || total == 0)
        return true;
    const double now = seconds_now();
    if (++p->reports == 1) {
        p->first_at = now;
        p->first_done = done;
    }
    size_t percent = (size_t)(100.0 * (double)done / (double)total);
    if (percent >= 100 && done < total)          /* 100 only at the end */
        percent = 99;
    if (!due(p, done, total, now))
        return true;
    char position[128], duration[32], line[256];
    if (p->reports == 1 && p->terminal) {     /* the plan first, a line of its own */
        char plan[1024];
        format_plan(plan, sizeof plan, p->options, p->plan);
        if (fprintf(stderr, "attnrun: %s\n", plan) < 0) {
            p->failure = errno;
            return false;
        }
    }
    format_position(position, sizeof position, p, done);
    double left = 0;
    if (done == total) {
        format_duration(duration, sizeof duration, now - p->start);
        snprintf(line, sizeof line, "attnrun: %zu%% (%s), %s elapsed", percent, position, duration);
    } else {
        left = time_left(p, done, total, now);
        if (left < 0)
            snprintf(line, sizeof line, "attnrun: %zu%% (%s)", percent, position);
        else
            snprintf(line, sizeof line, "attnrun: %zu%% (%s), %s left", percent, position,
                     format_duration(duration, sizeof duration, left));
    }
    const size_t width = strlen(line);
    int written = p->terminal
                  ? fprintf(stderr, "\r%s%*s", line, p->width > width ? (int)(p->width - width) : 0, "")
                  : fprintf(stderr, "%s\n", line);
    if (written < 0 || fflush(stderr) != 0) {
        p->failure = errno;
        return false;
    }
    p->shown_at = now;
    p->shown_done = done;
    p->shown_left = left;
    p->lines++;
    p->width = width;
    if (p->terminal)
        process_progress_line_open();
    return true;
}
