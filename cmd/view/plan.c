/*
 * plan.c - what the page holds (view.h): the layers and their census, the
 * items shown, the rollout file, and the level of the maps -- the finest
 * whose page fits --max-size -- all decided before the page is written.
 *
 * Legend: B items, I items shown, L layers, H heads, n queries, m keys.
 */
#include "view/view.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The levels tried, at most: 2^40 cells a side is beyond any file. */
#define MAX_LEVEL 40

/* a + b and a * b, SIZE_MAX when either overflows: a size that large
 * fits no page. */
static size_t add(size_t a, size_t b)
{
    size_t s;
    return attn_size_add(&s, a, b) ? s : SIZE_MAX;
}

static size_t mul(size_t a, size_t b)
{
    size_t p;
    return attn_size_mul(&p, a, b) ? p : SIZE_MAX;
}

/* ceil(x / 2^k) */
static size_t pooled(size_t x, unsigned k)
{
    return (x >> k) + ((x & (((size_t)1 << k) - 1)) != 0);
}

view_level view_level_of(size_t n, size_t m, unsigned level)
{
    view_level lv = {0, 0};
    while (lv.thumb < MAX_LEVEL &&
           (pooled(n, lv.thumb) > VIEW_THUMB_SIDE || pooled(m, lv.thumb) > VIEW_THUMB_SIDE))
        lv.thumb++;
    lv.detail = level < lv.thumb ? level : lv.thumb;
    return lv;
}

/* One element of base64 float32 values: its wrapper, and 4 characters
 * per 3 bytes. */
static size_t element_bytes(size_t values)
{
    static const char wrapper[] = "<script type=\"application/octet-stream\" id=\"m\"></script>\n";
    size_t bytes = mul(values, 4);
    return add(sizeof wrapper + 20, mul(bytes / 3 + (bytes % 3 != 0), 4));
}

size_t view_map_bytes(size_t n, size_t m, view_level level)
{
    size_t cells = mul(pooled(n, level.detail), pooled(m, level.detail));
    size_t bytes = element_bytes(cells);                  /* the values, or the maxes */
    if (level.detail > 0)
        bytes = add(bytes, element_bytes(cells));          /* and the means           */
    if (level.thumb > level.detail)
        bytes = add(bytes, element_bytes(mul(pooled(n, level.thumb), pooled(m, level.thumb))));
    return bytes;
}

/* The page's bytes, at most, with its maps at `level`. */
static size_t page_bytes(const view_plan *plan, unsigned level)
{
    const census_table *c = &plan->census;
    size_t bytes = add(plan->fixed_bytes, mul(plan->maps, VIEW_MAP_ENTRY_BYTES));
    for (size_t l = 0; l < c->count; l++) {
        const census_layer *layer = &c->layers[l];
        const view_level lv = view_level_of(layer->n, layer->m, level);
        const size_t one = view_map_bytes(layer->n, layer->m, lv);
        bytes = add(bytes, mul(mul(one, c->heads), plan->item_count));
    }
    if (plan->rollout.results != NULL) {
        const size_t n = c->layers[0].n;
        size_t one = view_map_bytes(n, n, view_level_of(n, n, level));
        bytes = add(bytes, mul(mul(one, plan->rollout.layers), plan->item_count));
    }
    return bytes;
}

/* The items of --items, each once in the order given, else the first
 * VIEW_DEFAULT_ITEMS; each below B. */
static int pick_items(const view_request *rq, view_plan *plan, attn_error *err)
{
    size_t count = 0;
    if (rq->items == NULL)
        count = plan->batch < VIEW_DEFAULT_ITEMS ? plan->batch : VIEW_DEFAULT_ITEMS;
    for (size_t i = 0; i < rq->item_ranges; i++) {
        const cli_range *r = &rq->items[i];
        if (r->last >= plan->batch)
            return attn_fail(err, ATTN_EUSAGE, "--items: %s holds %zu item%s (0 to %zu); item "
                             "%zu is not one of them", rq->input, plan->batch,
                             plan->batch == 1 ? "" : "s", plan->batch - 1, r->last);
        count = add(count, r->last - r->first + 1);
    }
    if (count > plan->batch)
        count = plan->batch;                       /* repeats are shown once */
    if ((plan->items = attn_calloc(count > 0 ? count : 1, sizeof *plan->items)) == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    if (rq->items == NULL) {
        for (size_t i = 0; i < count; i++)
            plan->items[i] = i;
        plan->item_count = count;
        return ATTN_OK;
    }
    unsigned char *seen = attn_calloc(plan->batch, 1);           /* (B) */
    if (seen == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    for (size_t i = 0; i < rq->item_ranges; i++)
        for (size_t b = rq->items[i].first; b <= rq->items[i].last; b++)
            if (!seen[b]) {
                seen[b] = 1;
                plan->items[plan->item_count++] = b;
            }
    free(seen);
    return ATTN_OK;
}

/* The rollout file of --rollout: attnrun rollout's, of the layers' B and
 * n. */
static int open_rollout(const view_request *rq, view_plan *plan, attn_error *err)
{
    view_rollout *ro = &plan->rollout;
    char *analysis = NULL;
    int status = attn_results_open(rq->rollout, "/", &ro->results, err);
    if (status != ATTN_OK)
        return status;
    if ((status = attn_results_attribute_text(ro->results, "attnrun_analysis", &analysis,
                                              err)) != ATTN_OK)
        return status;
    const bool is_rollout = analysis != NULL && strcmp(analysis, "rollout") == 0;
    free(analysis);
    if (!is_rollout)
        return attn_fail(err, ATTN_EINPUT, "--rollout %s: not a file of attnrun rollout; make "
                         "one with attnrun rollout %s -o rollout.h5", rq->rollout, rq->input);
    attn_tensor_info info = {.name = "rollout"};
    if ((status = attn_results_describe(ro->results, &info, err)) != ATTN_OK)
        return status;
    const census_layer *first = &plan->census.layers[0];
    if (!info.present || info.rank != 4 || info.dims[2] != info.dims[3])
        return attn_fail(err, ATTN_EINPUT, "--rollout %s: no rollout (B, L, n, n) in it",
                         rq->rollout);
    if (info.dims[0] != plan->batch || info.dims[2] != first->n || first->n != first->m)
        return attn_fail(err, ATTN_EINPUT, "--rollout %s: its rollout is of %zu items of %zu "
                         "tokens; %s holds %zu items of %zu queries and %zu keys: roll out "
                         "this results file", rq->rollout, info.dims[0], info.dims[2], rq->input,
                         plan->batch, first->n, first->m);
    ro->layers = info.dims[1];
    return attn_results_labels(ro->results, "layer_group", 0, ro->layers, &ro->groups, err);
}

/* B: every layer's; the layers must agree. */
static int find_batch(view_plan *plan, attn_error *err)
{
    const census_table *c = &plan->census;
    plan->batch = c->layers[0].batch;
    for (size_t l = 1; l < c->count; l++)
        if (c->layers[l].batch != plan->batch)
            return attn_fail(err, ATTN_EINPUT, "%s: group %s holds %zu items, group %s %zu; "
                             "choose layers of one batch with --groups", c->source,
                             c->layers[0].group, plan->batch, c->layers[l].group,
                             c->layers[l].batch);
    return ATTN_OK;
}

/* The finest level whose page fits --max-size. */
static int choose_level(const view_request *rq, view_plan *plan, attn_error *err)
{
    for (unsigned level = 0; level <= MAX_LEVEL; level++) {
        plan->level = level;
        plan->bytes = page_bytes(plan, level);
        if (plan->bytes <= rq->max_size)
            return ATTN_OK;
        if (page_bytes(plan, level + 1) == plan->bytes)
            break;                      /* every map is a thumbnail already */
    }
    return attn_fail(err, ATTN_EUSAGE, "--max-size %zu bytes holds no page of these %zu maps: "
                     "the smallest takes %zu bytes; show fewer with --items or --groups, or "
                     "pass a larger --max-size", rq->max_size, plan->maps, plan->bytes);
}

int view_plan_make(const view_request *rq, view_plan *plan, attn_error *err)
{
    memset(plan, 0, sizeof *plan);
    plan->rq = rq;
    int status = census_find_layers(rq->input, rq->groups, rq->group_count, &plan->census, err);
    if (status != ATTN_OK)
        return status;
    status = find_batch(plan, err);
    if (status == ATTN_OK && plan->batch == 0)
        status = attn_fail(err, ATTN_EINPUT, "%s: the weights hold no item", rq->input);
    if (status == ATTN_OK)
        status = census_count(&plan->census, err);
    if (status == ATTN_OK)
        status = pick_items(rq, plan, err);
    if (status == ATTN_OK && rq->rollout != NULL)
        status = open_rollout(rq, plan, err);
    if (status == ATTN_OK) {
        plan->maps = mul(plan->item_count,
                         add(mul(plan->census.count, plan->census.heads), plan->rollout.layers));
        status = view_meta(plan, err);
    }
    if (status == ATTN_OK) {
        plan->fixed_bytes = add(view_template_bytes(), plan->meta_length);
        status = choose_level(rq, plan, err);
    }
    if (status != ATTN_OK)
        view_plan_free(plan);
    return status;
}

void view_plan_free(view_plan *plan)
{
    census_free(&plan->census);
    free(plan->items);
    attn_labels_free(plan->rollout.groups, plan->rollout.layers);
    attn_results_close(plan->rollout.results);
    free(plan->meta);
    memset(plan, 0, sizeof *plan);
}
