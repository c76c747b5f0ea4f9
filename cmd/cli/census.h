/*
 * census.h - the census of every head of every layer of a results file,
 * as attnrun heads prints it and attnrun view shows it: the layers found
 * and checked (census_layers.c), then each layer's weights read once, a
 * block of one head's map at a time, into the scores of attn_math.h's
 * head census (census_count.c).
 *
 *     census_table c;
 *     census_find_layers("results.h5", NULL, 0, &c, &err);   // every layer
 *     census_count(&c, &err);
 *     ... c.layers[l].census[h] ...
 *     census_free(&c);
 *
 * Legend: L layers, B items, H heads (the same in every layer), n
 * queries, m keys (a layer's own).
 */
#ifndef ATTN_CMD_CENSUS_H
#define ATTN_CMD_CENSUS_H

#include "attn_math.h"
#include "attn_results.h"

#include <stdbool.h>
#include <stddef.h>

/* The dataset a layer's census reads, and its tokens. */
#define CENSUS_WEIGHTS "weights"
#define CENSUS_QUERY_TOKENS "query_token"
#define CENSUS_KEY_TOKENS "key_token"

/* One layer: a group of the results file holding weights. */
typedef struct census_layer {
    char *group;                  /* its path, as listed or given          */
    bool batched;                 /* weights (B, H, n, m); else (H, n, m)  */
    size_t batch, n, m;           /* B (1 when not batched), n, m          */
    bool tokens;                  /* query_token and key_token: the token
                                     scores are counted                    */
    attn_census *census;          /* (H) one per head                      */
} census_layer;

/* The census of a results file. */
typedef struct census_table {
    const char *source;           /* the results file, as given            */
    attn_results_file *file;      /* it, opened once: every layer is read
                                     from the index as it was then       */
    size_t count;                 /* L                                     */
    size_t heads;                 /* H                                     */
    census_layer *layers;          /* (L) in order                          */
    bool tokens;                  /* every layer has tokens                */
} census_table;

/*
 * The layers of `path`: groups[] (count) in that order when count > 0;
 * else an --append index's groups in the order appended, or the groups
 * of a plain results file that hold weights (by name), or "/" when none
 * is listed but the root holds weights.  Each is checked: weights (B, H,
 * n, m) or (H, n, m), one H for all, tokens of the right lengths.  ATTN_OK
 * with *census filled (its scores zero), else ATTN_EINPUT (a group
 * missing -- the message names those there are --, without weights, of
 * another shape or H), ATTN_EIO, ATTN_ENOMEM; *census holds nothing to
 * free then.  The file stays open (census->file) until census_free.
 */
int census_find_layers(const char *path, char *const *groups, size_t count, census_table *census,
                      attn_error *err);

/* Reads every layer's weights (and tokens) once and fills each head's
 * census.  ATTN_EINPUT for what cannot be read, ATTN_ENOMEM. */
int census_count(census_table *census, attn_error *err);

void census_free(census_table *census);

#endif
