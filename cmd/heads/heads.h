/*
 * heads.h - `attnrun heads`: a census of every head of every layer of a
 * results file, over the whole batch -- the scores of attn_math.h's head
 * census (entropy, distance, first, previous, self, duplicate, induction)
 * as CSV on standard output and, with -o, as HDF5.  Four phases, one file
 * each:
 *
 *     heads.c      the command line: options, messages, exit codes, the
 *                  census file written atomically
 *     layers.c     the layers: the groups listed (or given), each checked
 *                  -- weights, their shape, the heads, the tokens --
 *                  before any map is read
 *     count.c      the census: each layer read once, an item's tokens and
 *                  a block of one head's map at a time
 *     write.c      the census written: CSV, and the HDF5 file
 *
 *     heads_census c;
 *     heads_find_layers("results.h5", NULL, 0, &c, &err);   // every layer
 *     heads_count(&c, &err);
 *     heads_print_csv(&c, stdout);
 *     heads_census_free(&c);
 *
 * Legend: L layers, B items, H heads (the same in every layer), n
 * queries, m keys (a layer's own).
 */
#ifndef ATTN_CMD_HEADS_H
#define ATTN_CMD_HEADS_H

#include "attn_math.h"
#include "attn_results.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The dataset a layer's census reads, and its tokens. */
#define HEADS_WEIGHTS "weights"
#define HEADS_QUERY_TOKENS "query_token"
#define HEADS_KEY_TOKENS "key_token"

/* One layer: a group of the results file holding weights. */
typedef struct heads_layer {
    char *group;                  /* its path, as listed or given          */
    bool batched;                 /* weights (B, H, n, m); else (H, n, m)  */
    size_t batch, n, m;           /* B (1 when not batched), n, m          */
    bool tokens;                  /* query_token and key_token: the token
                                     scores are counted                    */
    attn_census *census;          /* (H) one per head                      */
} heads_layer;

/* The census of a results file. */
typedef struct heads_census {
    const char *source;           /* the results file, as given            */
    attn_results_file *file;      /* it, opened once: every layer is read
                                     from the index as it was then       */
    size_t count;                 /* L                                     */
    size_t heads;                 /* H                                     */
    heads_layer *layers;          /* (L) in order                          */
    bool tokens;                  /* every layer has tokens                */
} heads_census;

/*
 * The layers of `path`: groups[] (count) in that order when count > 0;
 * else an --append index's groups in the order appended, or the groups
 * of a plain results file that hold weights (by name), or "/" when none
 * is listed but the root holds weights.  Each is checked: weights (B, H,
 * n, m) or (H, n, m), one H for all, tokens of the right lengths.  ATTN_OK
 * with *census filled (its scores zero), else ATTN_EINPUT (a group
 * missing -- the message names those there are --, without weights, of
 * another shape or H), ATTN_EIO, ATTN_ENOMEM; *census holds nothing to
 * free then.  The file stays open (census->file) until heads_census_free.
 */
int heads_find_layers(const char *path, char *const *groups, size_t count, heads_census *census,
                      attn_error *err);

/* Reads every layer's weights (and tokens) once and fills each head's
 * census.  ATTN_EINPUT for what cannot be read, ATTN_ENOMEM. */
int heads_count(heads_census *census, attn_error *err);

/* The census as CSV: the header, then one line per layer and head. */
void heads_print_csv(const heads_census *census, FILE *out);

/* The census as a new HDF5 file at path (`label` in messages).  ATTN_OK,
 * ATTN_EIO, ATTN_ENOMEM. */
int heads_write_file(const heads_census *census, const char *path, const char *label,
                     attn_error *err);

void heads_census_free(heads_census *census);

/* `attnrun heads ...`: argv[0] is "heads".  Returns the exit status. */
int heads_main(int argc, char **argv);

#endif
