/*
 * stream.c - the rollout itself (rollout.h): item by item, each layer's
 * head maps read one (n, n) map at a time and summed into the layer's
 * mean, made Â, multiplied onto the rollout so far (lib/math/rollout.c)
 * and written at (item, layer).  What it holds does not grow with B or L:
 * three (n, n) float64 matrices and one (n, n) float32 map
 * (rollout_plan.working_bytes); a layer's group is open only while it is
 * read, from the file opened once (rq->file: one generation of an index).
 *
 * Legend: B items, L layers, H heads of a layer, n tokens.
 */
#include "rollout/rollout.h"

#include "attn_math.h"

#include <stdlib.h>
#include <string.h>

/* The working set. */
typedef struct work {
    double *a_hat;                /* (n, n) the layer's head mean, then Â */
    double *prev;                 /* (n, n) R_{l-1}, the rollout so far    */
    double *next;                 /* (n, n) R_l                            */
    float *map;                   /* (n, n) one head's map as read         */
} work;

static int work_alloc(size_t n, work *w, attn_error *err)
{
    size_t count, bytes;
    memset(w, 0, sizeof *w);
    if (!attn_size_mul(&count, n, n) || !attn_size_mul(&bytes, count, sizeof(double)) ||
        (w->a_hat = attn_malloc(bytes)) == NULL || (w->prev = attn_malloc(bytes)) == NULL ||
        (w->next = attn_malloc(bytes)) == NULL ||
        (w->map = attn_malloc(count * sizeof(float))) == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory: rolling out %zu tokens holds three "
                         "(n, n) float64 matrices and one (n, n) float32 map", n);
    return ATTN_OK;
}

static void work_free(work *w)
{
    free(w->a_hat);
    free(w->prev);
    free(w->next);
    free(w->map);
}

/* Reads head h (ignored for a mean) of item b of the layer's map into
 * map (n, n). */
static int read_map(attn_results *r, const rollout_layer *layer, size_t n, size_t b, size_t h,
                    float *map, attn_error *err)
{
    size_t first[4], count[4], a = 0;
    if (layer->batched) {
        first[a] = b;
        count[a++] = 1;
    }
    if (layer->headed) {
        first[a] = h;
        count[a++] = 1;
    }
    first[a] = 0;
    count[a++] = n;
    first[a] = 0;
    count[a++] = n;
    return attn_results_read(r, layer->map, first, count, map, err);
}

/* Writes item b's tokens of each axis that layer l carries for the
 * output: (B, n) ones every item, (n) ones with item 0. */
static int write_tokens(const rollout_plan *plan, const rollout_output *output,
                        attn_results *r, size_t l, size_t b, attn_error *err)
{
    int status = ATTN_OK;
    for (size_t i = 0; i < 2 && status == ATTN_OK; i++) {
        const rollout_tokens *t = &plan->tokens[i];
        char **labels = NULL;                            /* (n) */
        if (!t->present || t->layer != l || (t->rank == 1 && b > 0))
            continue;
        const size_t first[2] = {b, 0}, count[2] = {1, plan->n};
        status = attn_results_labels(r, t->name, b, plan->n, &labels, err);
        if (status == ATTN_OK && labels == NULL)
            status = attn_fail(err, ATTN_EINPUT, "%s: %s vanished while it was read",
                               attn_results_path(r), t->name);
        if (status == ATTN_OK)
            status = attn_results_write_labels(output->out, output->tokens[i],
                                               t->rank == 2 ? first : first + 1,
                                               t->rank == 2 ? count : count + 1,
                                               (const char *const *)labels, err);
        attn_labels_free(labels, plan->n);
    }
    return status;
}

int rollout_read_layer(const rollout_request *rq, const rollout_plan *plan,
                       const rollout_output *output, size_t l, size_t b, double *mean,
                       float *map, attn_error *err)
{
    const rollout_layer *layer = &plan->layers[l];
    const size_t n = plan->n;
    attn_results *r = NULL;
    int status = rollout_open_group(rq, layer->group, &r, err);
    if (status == ATTN_OK)
        status = write_tokens(plan, output, r, l, b, err);
    memset(mean, 0, n * n * sizeof *mean);
    for (size_t h = 0; h < layer->heads && status == ATTN_OK; h++) {
        status = read_map(r, layer, n, b, h, map, err);
        if (status == ATTN_OK)
            attn_rollout_accumulate(n * n, 1.0 / (double)layer->heads, map, mean);
    }
    attn_results_close(r);
    return status;
}

/* Item b through every layer, each rollout R_l written at (b, l). */
static int roll_item(const rollout_request *rq, const rollout_plan *plan,
                     const rollout_output *output, size_t b, work *w, attn_error *err)
{
    const size_t n = plan->n;
    int status = ATTN_OK;
    for (size_t l = 0; l < plan->layer_count && status == ATTN_OK; l++) {
        status = rollout_read_layer(rq, plan, output, l, b, w->a_hat, w->map, err);
        if (status != ATTN_OK)
            break;
        attn_rollout_layer(n, rq->residual, w->a_hat, w->a_hat);
        double *rolled = w->a_hat;                       /* R_1 = Â_1 */
        if (l > 0) {
            attn_rollout_step(n, w->a_hat, w->prev, w->next);
            rolled = w->next;
        }
        const size_t first[4] = {b, l, 0, 0}, count[4] = {1, 1, n, n};
        status = attn_results_write(output->out, output->map, first, count, rolled, err);
        /* R_l becomes the rollout so far; its old buffer takes the next */
        double *spare = w->prev;
        w->prev = rolled;
        if (rolled == w->a_hat)
            w->a_hat = spare;
        else
            w->next = spare;
    }
    return status;
}

int rollout_stream(const rollout_request *rq, const rollout_plan *plan,
                   const rollout_output *output, attn_error *err)
{
    work w;
    int status = work_alloc(plan->n, &w, err);
    for (size_t b = 0; b < plan->batch && status == ATTN_OK; b++)
        status = roll_item(rq, plan, output, b, &w, err);
    work_free(&w);
    return status;
}
