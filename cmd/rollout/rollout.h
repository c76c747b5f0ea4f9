/*
 * rollout.h - `attnrun rollout`: attention rollout (Abnar & Zuidema 2020)
 * through the layers of a results file, one item at a time, written as a
 * new HDF5 file.  Three phases, one file each:
 *
 *     rollout.c    the command line: options, messages, exit codes, and
 *                  the output file written atomically (its datasets,
 *                  attributes and labels)
 *     layers.c     the layers: which groups, their maps and shapes, their
 *                  tokens, checked against each other and the memory cap
 *                  before anything is written
 *     stream.c     the rollout itself: each item's head maps read one
 *                  (n, n) map at a time into each layer's mean, rolled out
 *                  (lib/math/rollout.c) and written
 *
 *     rollout_request rq = {.input = "results.h5", .residual = 0.5, .memory = cap};
 *     rollout_plan plan;
 *     rollout_plan_layers(&rq, &plan, &err);       // checks, no output yet
 *     ... create the output, its datasets (rollout_output) ...
 *     rollout_stream(&rq, &plan, &output, &err);   // every item, every layer
 *     rollout_plan_free(&plan);
 *
 * Legend: B items, L layers, H heads of a layer, n tokens (queries =
 * keys: rollout needs self-attention).
 */
#ifndef ATTN_CMD_ROLLOUT_H
#define ATTN_CMD_ROLLOUT_H

#include "attn_common.h"
#include "attn_results.h"

#include <stdbool.h>
#include <stddef.h>

/* The default --residual: half attention, half the residual connection,
 * as Abnar & Zuidema's rollout. */
#define ROLLOUT_RESIDUAL 0.5

/* What to roll out, from the command line. */
typedef struct rollout_request {
    const char *input;            /* RESULTS.h5                           */
    attn_results_file *file;      /* it, opened once: every group read is
                                     of the index as it was then        */
    char **groups;                /* (group_count) --groups, in order; NULL:
                                     the file's own groups                */
    size_t group_count;
    double residual;              /* r, 0 <= r <= 1                        */
    size_t memory;                /* the cap on the working set, bytes     */
} rollout_request;

/* One layer: a group and the map read from it. */
typedef struct rollout_layer {
    char *group;                  /* its path, "/layer0" (owned)          */
    const char *map;              /* "mean" (B, n, n) | (n, n), else
                                     "weights" (B, H, n, n) | (H, n, n)   */
    bool batched;                 /* the map has the batch axis           */
    bool headed;                  /* the map has an axis of heads (weights) */
    size_t heads;                 /* H for weights; 1 for the mean        */
} rollout_layer;

/* The tokens of one axis (query_token, key_token), when the layers carry
 * them: those of the first layer that does, (n) or (B, n). */
typedef struct rollout_tokens {
    const char *name;             /* ATTN_QUERY_TOKEN, ATTN_KEY_TOKEN     */
    bool present;
    size_t rank;                  /* 1: (n), the same for every item; 2: (B, n) */
    size_t layer;                 /* the layer they are copied from       */
} rollout_tokens;

/* The layers and what every one of them shares, from rollout_plan_layers. */
typedef struct rollout_plan {
    size_t batch;                 /* B (1 for maps without a batch axis)  */
    size_t n;                     /* n                                    */
    size_t layer_count;           /* L                                    */
    rollout_layer *layers;        /* (L), in the order rolled out         */
    rollout_tokens tokens[2];     /* [0] query_token, [1] key_token       */
    size_t working_bytes;         /* three (n, n) float64 matrices and one
                                     (n, n) float32 map                   */
    size_t skipped;               /* groups left out: neither weights nor mean */
    char skipped_names[256];      /* the first few, "/a, /b, ..."          */
} rollout_plan;

/*
 * Finds the layers (--groups, else the file's groups holding weights or a
 * mean, in attn_results_groups' order), checks that they share B and n
 * and are square, that their tokens agree item by item, and that the
 * working set fits rq->memory.  ATTN_EINPUT, each with one line naming the
 * file, the group and what differs; ATTN_ENOMEM for the cap (the message
 * names --memory and what it must be) or an allocation; ATTN_EIO when the
 * file cannot be opened.  On failure *plan holds nothing to free.
 */
int rollout_plan_layers(const rollout_request *rq, rollout_plan *plan, attn_error *err);

void rollout_plan_free(rollout_plan *plan);

/* The output's datasets, added by rollout.c and written by rollout_stream. */
typedef struct rollout_output {
    attn_results_out *out;
    int rollout;                  /* (B, L, n, n) float64 written, float32 stored */
    int tokens[2];                /* like plan.tokens, or -1 where absent  */
} rollout_output;

/*
 * For each item: each layer's head mean, Â, the rollout through it written
 * at (item, layer); the item's tokens (those of rank 2).  Rank-1 tokens
 * are written here too, once.  ATTN_EINPUT for a map or token that cannot
 * be read, ATTN_ENOMEM, ATTN_EIO for a failed write.
 */
int rollout_stream(const rollout_request *rq, const rollout_plan *plan,
                   const rollout_output *output, attn_error *err);

/* Opens the group of the results file, its failure naming the groups
 * there are when the group is not one of them. */
int rollout_open_group(const rollout_request *rq, const char *group, attn_results **results,
                       attn_error *err);

/* `attnrun rollout ...`: argv[0] is "rollout".  Returns the exit status. */
int rollout_main(int argc, char **argv);

#endif
