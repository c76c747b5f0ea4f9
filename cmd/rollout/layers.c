/*
 * layers.c - the layers of a rollout (rollout.h): the groups rolled out
 * and the map each holds, checked against one another before anything is
 * written -- the same items and tokens, square maps (self-attention), the
 * same token strings item by item -- and the working set against the
 * memory cap.  Nothing here holds more than one item's tokens of two
 * layers.
 *
 * Legend: B items, H heads, n queries, m keys.
 */
#include "rollout/rollout.h"

#include "attn_math.h"
#include "attn_threads.h"
#include "attn_tokens.h"
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The two maps a layer may hold, the first found used: the head mean, else
 * the weights of every head.  `rank` is the map's rank with the batch axis
 * (a run of a rank-2 X stores one less). */
static const struct {
    const char *name;
    size_t rank;
    bool headed;                  /* an axis of heads after the batch axis */
    const char *shapes;           /* for messages */
} layer_maps[] = {
    {"mean", 3, false, "(B, n, m) or (n, m)"},
    {"weights", 4, true, "(B, H, n, m) or (H, n, m)"},
};

#define LAYER_MAP_COUNT (sizeof layer_maps / sizeof layer_maps[0])

/* What every layer must share: B items of n queries by m keys. */
typedef struct layer_shape {
    size_t batch, n, m;
} layer_shape;

/* Appends " (group G)" to err's message when it does not name the group
 * yet: attn_results.h's messages name the file only. */
static int in_group(attn_error *err, int status, const char *group)
{
    size_t used = strlen(err->msg);
    if (strstr(err->msg, "group ") == NULL && used < sizeof err->msg)
        snprintf(err->msg + used, sizeof err->msg - used, " (group %s)", group);
    return status;
}

int rollout_open_group(const rollout_request *rq, const char *group, attn_results **results,
                       attn_error *err)
{
    const char *input = rq->input;
    int status = attn_results_open_group(rq->file, group, results, err);
    bool index;
    char names[256];
    size_t groups;
    if (status == ATTN_EINPUT &&
        (groups = cli_other_groups(input, group, &index, names, sizeof names)) > 0) {
        size_t used = strlen(err->msg);          /* the group is not there: say which are */
        snprintf(err->msg + used, sizeof err->msg - used, "; %s %s",
                 index ? "the index's groups are" : "results are in", names);
    }
    return status;
}

/* Which map the open group `group` holds, into layer and shape; *found
 * false (no error) when it holds neither. */
static int describe_layer(const rollout_request *rq, attn_results *r, const char *group,
                          rollout_layer *layer, layer_shape *shape, bool *found, attn_error *err)
{
    *found = false;
    for (size_t i = 0; i < LAYER_MAP_COUNT && !*found; i++) {
        attn_tensor_info map = {.name = layer_maps[i].name};
        int status = attn_results_describe(r, &map, err);
        if (status != ATTN_OK)
            return in_group(err, status, group);
        if (!map.present)
            continue;
        char text[256];
        const size_t full = layer_maps[i].rank;
        if (map.rank != full && map.rank != full - 1)
            return attn_fail(err, ATTN_EINPUT, "%s: group %s: %s has shape %s; expected %s",
                             rq->input, group, map.name,
                             attn_format_shape(text, sizeof text, map.dims, map.rank),
                             layer_maps[i].shapes);
        layer->map = layer_maps[i].name;
        layer->batched = map.rank == full;
        const size_t *axes = map.dims + layer->batched;       /* ([H,] n, m) */
        layer->headed = layer_maps[i].headed;
        layer->heads = layer->headed ? axes[0] : 1;
        axes += layer_maps[i].headed;
        *shape = (layer_shape){layer->batched ? map.dims[0] : 1, axes[0], axes[1]};
        for (size_t a = 0; a < map.rank; a++)
            if (map.dims[a] == 0)
                return attn_fail(err, ATTN_EINPUT, "%s: group %s: %s has shape %s: nothing to "
                                 "roll out", rq->input, group, map.name,
                                 attn_format_shape(text, sizeof text, map.dims, map.rank));
        if (shape->n != shape->m)
            return attn_fail(err, ATTN_EINPUT, "%s: group %s: %s has shape %s, %zu queries by "
                             "%zu keys (cross-attention); rollout needs self-attention, whose "
                             "maps are square", rq->input, group, map.name,
                             attn_format_shape(text, sizeof text, map.dims, map.rank),
                             shape->n, shape->m);
        *found = true;
    }
    return ATTN_OK;
}

/* Fails unless `shape` of layer `group` is the first layer's. */
static int same_shape(const rollout_request *rq, const rollout_plan *plan, const char *group,
                      const layer_shape *shape, attn_error *err)
{
    if (shape->batch == plan->batch && shape->n == plan->n)
        return ATTN_OK;
    const rollout_layer *first = &plan->layers[0];
    return attn_fail(err, ATTN_EINPUT, "%s: group %s holds %zu item%s of %zu tokens, but group "
                     "%s holds %zu item%s of %zu; every layer rolled out must come from the same "
                     "input", rq->input, group, shape->batch, shape->batch == 1 ? "" : "s",
                     shape->n, first->group, plan->batch, plan->batch == 1 ? "" : "s", plan->n);
}

/* Notes a group left out, for the warning rollout.c prints. */
static void skip_group(rollout_plan *plan, const char *group)
{
    size_t used = strlen(plan->skipped_names);
    if (plan->skipped < 3)
        snprintf(plan->skipped_names + used, sizeof plan->skipped_names - used, "%s%s",
                 plan->skipped > 0 ? ", " : "", group);
    else if (plan->skipped == 3)
        snprintf(plan->skipped_names + used, sizeof plan->skipped_names - used, ", ...");
    plan->skipped++;
}

/* Whether the open group carries the tokens `name`: item 0's read (their
 * length checked), then freed. */
static int carries_tokens(attn_results *r, const char *group, const char *name, size_t n,
                          bool *carries, attn_error *err)
{
    char **labels = NULL;
    int status = attn_results_labels(r, name, 0, n, &labels, err);
    *carries = labels != NULL;
    attn_labels_free(labels, n);
    return status == ATTN_OK ? ATTN_OK : in_group(err, status, group);
}

/* t->rank of the tokens the open group carries: 1 for (n), the same for
 * every item, 2 for (B, n), which must have a row for each of the B
 * items and no more (tokens of other items are another input's). */
static int token_rank(const rollout_request *rq, const rollout_plan *plan, attn_results *r,
                      const char *group, rollout_tokens *t, attn_error *err)
{
    attn_tensor_info info = {.name = t->name};
    int status = attn_results_describe_labels(r, &info, err);
    if (status != ATTN_OK)
        return in_group(err, status, group);
    t->rank = info.present ? info.rank : 1;
    if (t->rank == 2 && info.dims[0] != plan->batch)
        return attn_fail(err, ATTN_EINPUT, "%s: group %s: %s holds the tokens of %zu items, but "
                         "the maps hold %zu; every layer rolled out must come from the same "
                         "input", rq->input, group, t->name, info.dims[0], plan->batch);
    return ATTN_OK;
}

/* The layers' maps and shapes, one group open at a time: --groups, each
 * of which must hold a map, else the file's groups, those without one
 * skipped. */
static int find_layers(const rollout_request *rq, char **groups, size_t count,
                       rollout_plan *plan, attn_error *err)
{
    if ((plan->layers = attn_calloc(count, sizeof plan->layers[0])) == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    int status = ATTN_OK;
    for (size_t i = 0; i < count && status == ATTN_OK; i++) {
        attn_results *r = NULL;
        rollout_layer layer = {0};
        layer_shape shape;
        bool found = false;
        status = rollout_open_group(rq, groups[i], &r, err);
        if (status == ATTN_OK)
            status = describe_layer(rq, r, groups[i], &layer, &shape, &found, err);
        if (status == ATTN_OK && !found && rq->groups != NULL)
            status = attn_fail(err, ATTN_EINPUT, "%s: group %s holds neither weights nor mean; "
                               "attnrun saves the weights by default, or with --save weights "
                               "(--save mean: their mean over the heads)", rq->input, groups[i]);
        if (status == ATTN_OK && found && plan->layer_count == 0) {
            plan->batch = shape.batch;
            plan->n = shape.n;
        }
        if (status == ATTN_OK && found && plan->layer_count > 0)
            status = same_shape(rq, plan, groups[i], &shape, err);
        for (size_t t = 0; t < 2 && status == ATTN_OK && found; t++) {
            rollout_tokens *tokens = &plan->tokens[t];
            bool carries;
            status = carries_tokens(r, groups[i], tokens->name, shape.n, &carries, err);
            if (status == ATTN_OK && carries && !tokens->present) {
                tokens->present = true;
                tokens->layer = plan->layer_count;
            }
        }
        if (status == ATTN_OK && found) {
            if ((layer.group = attn_strdup(groups[i])) == NULL)
                status = attn_fail(err, ATTN_ENOMEM, "out of memory");
            else
                plan->layers[plan->layer_count++] = layer;
        } else if (status == ATTN_OK) {
            skip_group(plan, groups[i]);
        }
        attn_results_close(r);
    }
    return status;
}

/* The bytes the analysis holds (rollout.h's working_bytes), into *bytes;
 * false when they cannot be addressed. */
static bool working_bytes(const rollout_request *rq, const rollout_plan *plan, size_t *bytes)
{
    size_t matrix, map, layers, search;
    const size_t n = plan->n;
    if (!attn_size_mul(&matrix, n, n) || !attn_size_mul(&map, matrix, sizeof(float)))
        return false;
    if (rq->analysis == ROLLOUT_ROLLOUT)
        return attn_size_mul(&matrix, matrix, 3 * sizeof(double)) &&
               attn_size_add(bytes, matrix, map);
    search = attn_flow_bytes(n, plan->layer_count, plan->threads);
    return attn_size_mul(&layers, matrix, plan->layer_count + 1) &&
           attn_size_mul(&layers, layers, sizeof(double)) && search != SIZE_MAX &&
           attn_size_add(bytes, layers, map) && attn_size_add(bytes, *bytes, search);
}

/* What the analysis holds, in words, for the message of the cap. */
static void describe_working_set(const rollout_request *rq, const rollout_plan *plan,
                                 char *text, size_t size)
{
    if (rq->analysis == ROLLOUT_ROLLOUT)
        snprintf(text, size, "rolling out n = %zu tokens holds three (n, n) float64 matrices "
                 "and one (n, n) float32 map", plan->n);
    else
        snprintf(text, size, "the flow of n = %zu tokens through %zu layers holds every layer "
                 "and the flows as (n, n) float64 matrices and a search of the graph on each "
                 "of %d threads", plan->n, plan->layer_count, plan->threads);
}

/* The bytes the analysis holds, against the cap.  The command line's own
 * check: the message names the option. */
static int check_memory(const rollout_request *rq, rollout_plan *plan, attn_error *err)
{
    size_t bytes;
    char what[256];
    describe_working_set(rq, plan, what, sizeof what);
    if (!working_bytes(rq, plan, &bytes))
        return attn_fail(err, ATTN_ENOMEM, "%s: %s, too large to address", rq->input, what);
    plan->working_bytes = bytes;
    if (bytes <= rq->memory)
        return ATTN_OK;
    char need[32], cap[32];
    /* what --memory takes, rounded up: in MiB, or in KiB below 1 MiB */
    const size_t unit = (size_t)1 << (bytes < ((size_t)1 << 20) ? 10 : 20);
    return attn_fail(err, ATTN_ENOMEM, "%s: %s, %s, over the --memory cap of %s; raise it to at "
                     "least --memory %zu%c%s", rq->input, what,
                     attn_format_bytes(need, sizeof need, (double)bytes),
                     attn_format_bytes(cap, sizeof cap, (double)rq->memory),
                     bytes / unit + (bytes % unit != 0), unit == 1024 ? 'K' : 'M',
                     rq->analysis == ROLLOUT_FLOW && plan->threads > 1
                         ? ", or use fewer --threads" : "");
}

/* Keeps the layers up to --to's, which must be one of them. */
static int cut_at(const rollout_request *rq, rollout_plan *plan, attn_error *err)
{
    if (rq->to == NULL)
        return ATTN_OK;
    for (size_t l = 0; l < plan->layer_count; l++)
        if (strcmp(plan->layers[l].group, rq->to) == 0) {
            for (size_t rest = l + 1; rest < plan->layer_count; rest++)
                free(plan->layers[rest].group);
            plan->layer_count = l + 1;
            return ATTN_OK;
        }
    char names[256] = "";
    for (size_t l = 0, used = 0; l < plan->layer_count && used + 1 < sizeof names; l++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", l > 0 ? ", " : "",
                                 plan->layers[l].group);
    return attn_fail(err, ATTN_EINPUT, "%s: --to %s is not one of the layers (%s); name one of "
                     "them, or list the layers with --groups", rq->input, rq->to, names);
}

/* Fails unless the tokens `want` and `have` (n each) of item b are the
 * same strings. */
static int same_tokens(const rollout_request *rq, const rollout_plan *plan,
                       const rollout_tokens *t, size_t layer, size_t b, char **want,
                       char **have, attn_error *err)
{
    for (size_t i = 0; i < plan->n; i++)
        if (strcmp(want[i], have[i]) != 0)
            return attn_fail(err, ATTN_EINPUT, "%s: group %s: %s of item %zu differs from group "
                             "%s's at %s %zu; every layer rolled out must come from the same input",
                             rq->input, plan->layers[layer].group, t->name, b,
                             plan->layers[t->layer].group, t == &plan->tokens[0] ? "query" : "key",
                             i);
    return ATTN_OK;
}

/* Compares the tokens t of layer `layer` with those of t->layer (open as
 * `first`), item by item; a layer without them is not compared. */
static int compare_layer_tokens(const rollout_request *rq, const rollout_plan *plan,
                                const rollout_tokens *t, attn_results *first, size_t layer,
                                attn_error *err)
{
    const char *group = plan->layers[layer].group;
    attn_results *r = NULL;
    rollout_tokens theirs = {.name = t->name, .layer = layer};
    char **want = NULL, **have = NULL;                   /* (n) item b's each */
    int status = rollout_open_group(rq, group, &r, err);
    if (status == ATTN_OK)
        status = attn_results_labels(r, t->name, 0, plan->n, &have, err);
    if (status != ATTN_OK || have == NULL)
        goto out;
    if ((status = token_rank(rq, plan, r, group, &theirs, err)) != ATTN_OK)
        goto out;
    /* (n) against (n): item 0 says all. */
    const size_t items = t->rank == 1 && theirs.rank == 1 ? 1 : plan->batch;
    for (size_t b = 0; b < items && status == ATTN_OK; b++) {
        if (b > 0) {
            attn_labels_free(have, plan->n);
            have = NULL;
            status = attn_results_labels(r, t->name, b, plan->n, &have, err);
        }
        if (status == ATTN_OK && (b == 0 || t->rank == 2)) {
            attn_labels_free(want, plan->n);
            want = NULL;
            status = attn_results_labels(first, t->name, b, plan->n, &want, err);
            if (status != ATTN_OK)
                status = in_group(err, status, plan->layers[t->layer].group);
        }
        if (status == ATTN_OK && (want == NULL || have == NULL))
            status = attn_fail(err, ATTN_EINPUT, "%s: %s vanished while it was read", rq->input,
                               t->name);
        if (status == ATTN_OK)
            status = same_tokens(rq, plan, t, layer, b, want, have, err);
    }
out:
    if (status != ATTN_OK)
        in_group(err, status, group);
    attn_labels_free(want, plan->n);
    attn_labels_free(have, plan->n);
    attn_results_close(r);
    return status;
}

/* The shape of each axis's tokens, and every layer's against them. */
static int check_tokens(const rollout_request *rq, rollout_plan *plan, attn_error *err)
{
    int status = ATTN_OK;
    for (size_t i = 0; i < 2 && status == ATTN_OK; i++) {
        rollout_tokens *t = &plan->tokens[i];
        attn_results *first = NULL;
        if (!t->present)
            continue;
        status = rollout_open_group(rq, plan->layers[t->layer].group, &first, err);
        if (status == ATTN_OK)
            status = token_rank(rq, plan, first, plan->layers[t->layer].group, t, err);
        for (size_t l = t->layer + 1; l < plan->layer_count && status == ATTN_OK; l++)
            status = compare_layer_tokens(rq, plan, t, first, l, err);
        attn_results_close(first);
    }
    return status;
}

/* The groups to look at: --groups, else the file's own. */
static int candidate_groups(const rollout_request *rq, attn_result_groups *listed,
                            attn_error *err)
{
    memset(listed, 0, sizeof *listed);
    if (rq->groups != NULL)
        return ATTN_OK;
    int status = attn_results_file_groups(rq->file, listed, err);
    if (status == ATTN_OK && listed->count == 0)
        status = attn_fail(err, ATTN_EINPUT, "%s holds no results of attnrun (no group carries "
                           "attnrun_version); name the groups that hold weights with --groups",
                           rq->input);
    return status;
}

int rollout_plan_layers(const rollout_request *rq, rollout_plan *plan, attn_error *err)
{
    memset(plan, 0, sizeof *plan);
    plan->tokens[0].name = ATTN_QUERY_TOKEN;
    plan->tokens[1].name = ATTN_KEY_TOKEN;
    attn_result_groups listed;
    int status = candidate_groups(rq, &listed, err);
    char **groups = rq->groups != NULL ? rq->groups : listed.paths;
    const size_t count = rq->groups != NULL ? rq->group_count : listed.count;
    if (status == ATTN_OK)
        status = find_layers(rq, groups, count, plan, err);
    if (status == ATTN_OK && plan->layer_count == 0)
        status = attn_fail(err, ATTN_EINPUT, "%s: none of %s groups (%s) holds weights or mean; "
                           "attnrun saves the weights by default, or with --save weights "
                           "(--save mean: their mean over the heads)", rq->input,
                           listed.index ? "the index's" : "its", plan->skipped_names);
    attn_result_groups_free(&listed);
    if (status == ATTN_OK)
        status = cut_at(rq, plan, err);
    plan->threads = attn_threads();
    if (status == ATTN_OK)
        status = check_memory(rq, plan, err);
    if (status == ATTN_OK)
        status = check_tokens(rq, plan, err);
    if (status != ATTN_OK)
        rollout_plan_free(plan);
    return status;
}

void rollout_plan_free(rollout_plan *plan)
{
    for (size_t i = 0; i < plan->layer_count; i++)
        free(plan->layers[i].group);
    free(plan->layers);
    plan->layers = NULL;
    plan->layer_count = 0;
}
