/*
 * progress.c - the progress line on stderr (progress.h):
 *
 *     attnrun: 12 heads (12 K/V), d_k 64, layout xw, mask M (causal), saving weights,output
 *     attnrun: 37% (6144/16384 rows of item 1/1), 12 s left
 *     attnrun: 50% (128/128 rows of items 5-8/16), 1 min 05 s left
 *     attnrun: 100% (16384/16384 rows of item 1/1), 31 s elapsed
 *
 * The time left is the time the rows done so far took, scaled to the
 * rows still to do; it is measured from the first report on, so that
 * reading the weights does not count as the rows' time.
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

/* Where rows `done` stand in the batch: "6144/16384 rows of item 1/1",
 * or for a slice of several items "128/128 rows of items 5-8/16" (a step
 * computes the same rows of every item of its slice). */
static void format_position(char *buf, size_t len, const attn_run_report *plan, size_t done)
{
    const size_t n = plan->layout.dims.n, batch = plan->layout.dims.batch;
    size_t items = plan->slice_items < batch ? plan->slice_items : batch;
    if (n == 0 || items == 0 || done == 0) {
        snprintf(buf, len, "%zu rows", done);
        return;
    }
    const size_t first = (done - 1) / (items * n) * items;    /* items * n <= B n */
    const size_t count = batch - first < items ? batch - first : items;
    const size_t rows = (done - first * n) / count;
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
 * terminal at most PROGRESS_REFRESH a second, elsewhere each time another
 * PROGRESS_LINE_STEP percent is done. */
static bool due(progress_line *p, size_t percent, size_t done, size_t total, double now)
{
    if (p->reports == 1 || done == total)
        return true;
    if (p->terminal)
        return now - p->shown_at >= 1.0 / PROGRESS_REFRESH;
    return percent / PROGRESS_LINE_STEP > p->shown_step;
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
    if (!due(p, percent, done, total, now))
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
    format_position(position, sizeof position, p->plan, done);
    if (done == total) {
        format_duration(duration, sizeof duration, now - p->start);
        snprintf(line, sizeof line, "attnrun: %zu%% (%s), %s elapsed", percent, position, duration);
    } else {
        /* seconds per row since the first report; at the first, since the start */
        double rate = done > p->first_done ? (now - p->first_at) / (double)(done - p->first_done)
                    : done > 0 ? (now - p->start) / (double)done : 0;
        format_duration(duration, sizeof duration, rate * (double)(total - done));
        snprintf(line, sizeof line, "attnrun: %zu%% (%s), %s left", percent, position, duration);
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
    p->shown_step = percent / PROGRESS_LINE_STEP;
    p->width = width;
    if (p->terminal)
        process_progress_line_open();
    return true;
}
