/*
 * flow.c - attention flow (rollout.h): item by item, every layer's head
 * mean read as rollout reads it (rollout_read_layer), made Â, held with
 * the others, and the maximum flow of every (position, input token) pair
 * through them (lib/math/flow.c) written at (item).  What it holds does
 * not grow with B: L (n, n) float64 layers, one (n, n) float64 flow and
 * float32 map, and the searches of attn_flow (rollout_plan.working_bytes).
 *
 * Legend: B items, L layers, n tokens.
 */
#include "rollout/rollout.h"

#include "attn_math.h"
#include "cli/process.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* Progress on stderr: nothing for a run shorter than FLOW_QUIET_SECONDS,
 * then a line at most every FLOW_LINE_SECONDS (rewritten on a terminal). */
#define FLOW_QUIET_SECONDS 2.0
#define FLOW_LINE_SECONDS 1.0

typedef struct flow_progress {
    bool enabled, terminal, shown;
    double start, shown_at;       /* seconds, CLOCK_MONOTONIC              */
    size_t item, items;           /* the item searched, of B               */
} flow_progress;

static double seconds_now(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* attn_flow's report of rows done: one line when it is time. */
static void show_progress(size_t done, size_t total, void *context)
{
    flow_progress *p = context;
    const double now = seconds_now();
    if (!p->enabled || now - p->start < FLOW_QUIET_SECONDS ||
        (p->shown && now - p->shown_at < FLOW_LINE_SECONDS))
        return;
    const double share = ((double)p->item + (double)done / (double)total) / (double)p->items;
    const double left = (now - p->start) * (1 - share) / share;
    fprintf(stderr, "%sattnrun: flow: %.0f%% (item %zu of %zu), about %.0f s left%s",
            p->terminal ? "\r" : "", 100 * share, p->item + 1, p->items, left,
            p->terminal ? " " : "\n");
    if (p->terminal)
        process_progress_line_open();
    p->shown = true;
    p->shown_at = now;
}

/* Fails unless every value of layer l's mean (n, n) of item b can be a
 * capacity: finite and not negative. */
static int check_capacities(const rollout_request *rq, const rollout_plan *plan, size_t l,
                            size_t b, const double *mean, attn_error *err)
{
    const size_t n = plan->n;
    for (size_t i = 0; i < n * n; i++)
        if (!(isfinite(mean[i]) && mean[i] >= 0))
            return attn_fail(err, ATTN_EINPUT, "%s: group %s: the mean of item %zu's %s is %g "
                             "at query %zu, key %zu; attention flow takes the weights as "
                             "capacities, which must be finite and not negative", rq->input,
                             plan->layers[l].group, b, plan->layers[l].map, mean[i], i / n,
                             i % n);
    return ATTN_OK;
}

/* The working set (rollout.h). */
typedef struct work {
    double *a_hat;                /* (L, n, n) each layer's Â              */
    double *flow;                 /* (n, n) the item's flows               */
    float *map;                   /* (n, n) one head's map as read         */
} work;

/* Item b: its layers read into w->a_hat, its flows written at (b). */
static int flow_item(const rollout_request *rq, const rollout_plan *plan,
                     rollout_output *output, size_t b, work *w, flow_progress *p,
                     attn_error *err)
{
    const size_t n = plan->n, L = plan->layer_count;
    int status = ATTN_OK;
    for (size_t l = 0; l < L && status == ATTN_OK; l++) {
        double *layer = w->a_hat + l * n * n;             /* (n, n) */
        status = rollout_read_layer(rq, plan, output, l, b, layer, w->map, err);
        if (status == ATTN_OK)
            status = check_capacities(rq, plan, l, b, layer, err);
        if (status == ATTN_OK)
            attn_rollout_layer(n, rq->residual, layer, layer);
    }
    attn_flow_report report;
    p->item = b;
    if (status == ATTN_OK &&
        attn_flow(n, L, w->a_hat, w->flow, &report, show_progress, p) != ATTN_OK)
        status = attn_fail(err, ATTN_ENOMEM, "out of memory: the flow of %zu tokens through "
                           "%zu layers", n, L);
    if (status != ATTN_OK)
        return status;
    if (report.gap > output->gap)
        output->gap = report.gap;
    const size_t first[3] = {b, 0, 0}, count[3] = {1, n, n};
    return attn_results_write(output->out, output->map, first, count, w->flow, err);
}

int flow_stream(const rollout_request *rq, const rollout_plan *plan, rollout_output *output,
                attn_error *err)
{
    const size_t n = plan->n, L = plan->layer_count;
    work w = {
        .a_hat = attn_malloc(L * n * n * sizeof(double)),
        .flow = attn_malloc(n * n * sizeof(double)),
        .map = attn_malloc(n * n * sizeof(float)),
    };
    flow_progress p = {.enabled = !rq->quiet, .terminal = isatty(STDERR_FILENO),
                       .start = seconds_now(), .items = plan->batch};
    int status = ATTN_OK;
    if (w.a_hat == NULL || w.flow == NULL || w.map == NULL)
        status = attn_fail(err, ATTN_ENOMEM, "out of memory: the flow of %zu tokens through "
                           "%zu layers holds them all", n, L);
    output->gap = 0;
    for (size_t b = 0; b < plan->batch && status == ATTN_OK; b++)
        status = flow_item(rq, plan, output, b, &w, &p, err);
    if (p.shown && p.terminal)
        fputc('\n', stderr);
    free(w.a_hat);
    free(w.flow);
    free(w.map);
    return status;
}
