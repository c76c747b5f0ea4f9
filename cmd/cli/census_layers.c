/*
 * census_layers.c - the layers of a census (census.h): the groups that hold them,
 * and each checked -- its weights, their shape, its heads, its tokens --
 * before any map is read, so that a census that cannot be made is
 * refused at once.
 *
 * Legend: L layers, B items, H heads, n queries, m keys of a layer.
 */
#include "cli/census.h"

#include "attn_results.h"
#include "cli/cli.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most heads a layer may have: attnrun's own limit. */
#define MAX_HEADS ((size_t)1 << 20)

/* Appends to err's message the groups of path that hold results, when
 * `group` is not one of them: what --groups could name instead. */
static void name_other_groups(const char *path, const char *group, attn_error *err)
{
    bool index;
    char names[256];
    size_t groups = cli_other_groups(path, group, &index, names, sizeof names);
    if (groups == 0)
        return;
    size_t used = strlen(err->msg);
    snprintf(err->msg + used, sizeof err->msg - used, "; %s %s; choose layers with --groups",
             index ? "the index's groups are" : "results are in", names);
}

/* The shape of weights w of `group`, into layer: (B, H, n, m) or (H, n,
 * m), with the H of the layers before. */
static int check_weights(census_table *c, const char *group, const attn_tensor_info *w,
                         census_layer *layer, attn_error *err)
{
    char shape[256];
    if (!w->present)
        return attn_fail(err, ATTN_EINPUT, "%s: group %s holds no weights; run attnrun with "
                         "--save weights to keep them", c->source, group);
    if (w->rank != 3 && w->rank != 4)
        return attn_fail(err, ATTN_EINPUT, "%s: weights of group %s have shape %s; expected "
                         "(B, H, n, m) or (H, n, m)", c->source, group,
                         attn_format_shape(shape, sizeof shape, w->dims, w->rank));
    layer->batched = w->rank == 4;
    const size_t *dims = w->dims + layer->batched;          /* (H, n, m) */
    layer->batch = layer->batched ? w->dims[0] : 1;
    layer->n = dims[1];
    layer->m = dims[2];
    if (dims[0] == 0 || dims[0] > MAX_HEADS)
        return attn_fail(err, ATTN_EINPUT, "%s: weights of group %s have shape %s: %s", c->source,
                         group, attn_format_shape(shape, sizeof shape, w->dims, w->rank),
                         dims[0] == 0 ? "no heads" : "more heads than attnrun makes");
    if (c->count > 0 && dims[0] != c->heads)
        return attn_fail(err, ATTN_EINPUT, "%s: group %s has %zu heads, group %s has %zu; a "
                         "census is one grid of layers by heads: choose layers with one number "
                         "of heads with --groups", c->source, group, dims[0],
                         c->layers[0].group, c->heads);
    c->heads = dims[0];
    return ATTN_OK;
}

/* Whether the group has both token datasets, read for its first and last
 * items so that their lengths and rows are checked now. */
static int check_tokens(attn_results *r, census_layer *layer, attn_error *err)
{
    const size_t items[2] = {0, layer->batch > 0 ? layer->batch - 1 : 0};
    int status = ATTN_OK;
    for (size_t i = 0; i < 2 && status == ATTN_OK; i++) {    /* (n) or (B, n), no more rows */
        attn_tensor_info t = {.name = i == 0 ? CENSUS_QUERY_TOKENS : CENSUS_KEY_TOKENS};
        status = attn_results_describe_labels(r, &t, err);
        if (status == ATTN_OK && t.present && t.rank == 2 && t.dims[0] != layer->batch)
            status = attn_fail(err, ATTN_EINPUT, "%s: group %s: %s holds the tokens of %zu "
                               "items, but its weights hold %zu", attn_results_path(r),
                               attn_results_group(r), t.name, t.dims[0], layer->batch);
    }
    layer->tokens = layer->batch > 0;
    for (size_t i = 0; i < 2 && status == ATTN_OK && layer->tokens; i++) {
        char **query = NULL, **key = NULL;                   /* (n), (m) */
        status = attn_results_labels(r, CENSUS_QUERY_TOKENS, items[i], layer->n, &query, err);
        if (status == ATTN_OK)
            status = attn_results_labels(r, CENSUS_KEY_TOKENS, items[i], layer->m, &key, err);
        layer->tokens = query != NULL && key != NULL;
        attn_labels_free(query, layer->n);
        attn_labels_free(key, layer->m);
    }
    if (status == ATTN_OK && layer->tokens && layer->n > (size_t)INT32_MAX - layer->m)
        return attn_fail(err, ATTN_EINPUT, "%s: %zu query and %zu key tokens are more than a "
                         "census numbers", attn_results_path(r), layer->n, layer->m);
    return status;
}

/* Opens `group`, checks it, and appends it to c's layers (room for it
 * allocated). */
static int add_layer(census_table *c, const char *group, attn_error *err)
{
    census_layer *layer = &c->layers[c->count];
    attn_results *r = NULL;
    attn_tensor_info w = {.name = CENSUS_WEIGHTS};
    memset(layer, 0, sizeof *layer);
    int status = attn_results_open_group(c->file, group, &r, err);
    if (status == ATTN_EINPUT)
        name_other_groups(c->source, group, err);
    if (status == ATTN_OK)
        status = attn_results_describe(r, &w, err);
    if (status == ATTN_OK)
        status = check_weights(c, group, &w, layer, err);
    if (status == ATTN_OK)
        status = check_tokens(r, layer, err);
    if (status == ATTN_OK && ((layer->group = attn_strdup(group)) == NULL ||
                              (layer->census = attn_calloc(c->heads, sizeof *layer->census)) == NULL))
        status = attn_fail(err, ATTN_ENOMEM, "out of memory");
    attn_results_close(r);
    if (status != ATTN_OK) {
        free(layer->group);
        free(layer->census);
        memset(layer, 0, sizeof *layer);
        return status;
    }
    c->count++;
    return ATTN_OK;
}

/* Whether `group` of c's file holds a dataset of weights. */
static int holds_weights(const census_table *c, const char *group, bool *holds, attn_error *err)
{
    attn_results *r = NULL;
    attn_tensor_info w = {.name = CENSUS_WEIGHTS};
    int status = attn_results_open_group(c->file, group, &r, err);
    if (status == ATTN_OK)
        status = attn_results_describe(r, &w, err);
    attn_results_close(r);
    *holds = status == ATTN_OK && w.present;
    return status;
}

/* A plain results file: its groups of results that hold weights, by name,
 * else the root when it holds weights (a file written by hand, say). */
static int add_plain(census_table *c, const attn_result_groups *listed, attn_error *err)
{
    bool holds = false;
    int status = ATTN_OK;
    for (size_t i = 0; i < listed->count && status == ATTN_OK; i++) {
        status = holds_weights(c, listed->paths[i], &holds, err);
        if (status == ATTN_OK && holds)
            status = add_layer(c, listed->paths[i], err);
    }
    if (status != ATTN_OK || c->count > 0)
        return status;
    status = holds_weights(c, "/", &holds, err);
    if (status == ATTN_OK && !holds && listed->count > 0)
        return attn_fail(err, ATTN_EINPUT, "%s: none of its results holds weights; run attnrun "
                         "with --save weights to keep them", c->source);
    if (status == ATTN_OK && !holds)
        return attn_fail(err, ATTN_EINPUT, "%s: no results of attnrun, and no weights at /; run "
                         "attnrun with --save weights to keep them", c->source);
    return status == ATTN_OK ? add_layer(c, "/", err) : status;
}

int census_find_layers(const char *path, char *const *groups, size_t count, census_table *census,
                      attn_error *err)
{
    attn_result_groups listed = {0};
    memset(census, 0, sizeof *census);
    census->source = path;
    int status = attn_results_file_open(path, &census->file, err);
    if (status == ATTN_OK && count == 0)
        status = attn_results_file_groups(census->file, &listed, err);
    if (status == ATTN_OK && count == 0 && listed.index && listed.count == 0)
        status = attn_fail(err, ATTN_EINPUT, "%s: an --append index of no groups", path);
    const size_t room = count > 0 ? count : listed.count + 1;
    if (status == ATTN_OK && (census->layers = attn_calloc(room, sizeof *census->layers)) == NULL)
        status = attn_fail(err, ATTN_ENOMEM, "out of memory");
    if (status == ATTN_OK && count > 0) {
        for (size_t i = 0; i < count && status == ATTN_OK; i++)
            status = add_layer(census, groups[i], err);
    } else if (status == ATTN_OK && listed.index) {
        for (size_t i = 0; i < listed.count && status == ATTN_OK; i++)
            status = add_layer(census, listed.paths[i], err);
    } else if (status == ATTN_OK) {
        status = add_plain(census, &listed, err);
    }
    attn_result_groups_free(&listed);
    census->tokens = census->count > 0;
    for (size_t i = 0; i < census->count; i++)
        census->tokens = census->tokens && census->layers[i].tokens;
    if (status != ATTN_OK)
        census_free(census);
    return status;
}

void census_free(census_table *census)
{
    for (size_t i = 0; census->layers != NULL && i < census->count; i++) {
        free(census->layers[i].group);
        free(census->layers[i].census);
    }
    free(census->layers);
    census->layers = NULL;
    census->count = 0;
    attn_results_file_close(census->file);
    census->file = NULL;
}
