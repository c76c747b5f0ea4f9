/*
 * rollout.h - `attnrun rollout` and `attnrun flow`: attention rollout and
 * attention flow (Abnar & Zuidema 2020) through the layers of a results
 * file, one item at a time, written as a new HDF5 file.  The two read the
 * same layers the same way and differ only in what they compute from
 * them.  Four phases, one file each:
 *
 *     rollout.c    the command line of both: options, messages, exit
 *                  codes, and the output file written atomically (its
 *                  datasets, attributes and labels)
 *     layers.c     the layers: which groups, their maps and shapes, their
 *                  tokens, checked against each other and the memory cap
 *                  before anything is written
 *     stream.c     the rollout: each item's head maps read one (n, n) map
 *                  at a time into each layer's mean, rolled out
 *                  (lib/math/rollout.c) and written
 *     flow.c       the flow: each item's layers read the same way, all of
 *                  them held, the maximum flows (lib/math/flow.c) written
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

/* What the layers become. */
typedef enum rollout_analysis {
    ROLLOUT_ROLLOUT,              /* attnrun rollout: (B, L, n, n)         */
    ROLLOUT_FLOW,                 /* attnrun flow: (B, n, n)               */
} rollout_analysis;

/* What to roll out, from the command line. */
typedef struct rollout_request {
    rollout_analysis analysis;
    const char *input;            /* RESULTS.h5                           */
    attn_results_file *file;      /* it, opened once: every group read is
                                     of the index as it was then        */
    char **groups;                /* (group_count) --groups, in order; NULL:
                                     the file's own groups                */
    size_t group_count;
    double residual;              /* r, 0 <= r <= 1                        */
    const char *to;               /* --to: the last layer, or NULL: all    */
    size_t memory;                /* the cap on the working set, bytes     */
    bool quiet;                   /* -q: no progress either                */
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
    size_t working_bytes;         /* rollout: three (n, n) float64 matrices
                                     and one (n, n) float32 map; flow: L
                                     (n, n) float64 layers, one (n, n)
                                     float64 flow and map, and the flow's
                                     searches (attn_flow_bytes)          */
    int threads;                  /* the flow's threads (attn_threads())   */
    size_t skipped;               /* groups left out: neither weights nor mean */
    char skipped_names[256];      /* the first few, "/a, /b, ..."          */
} rollout_plan;

/*
 * Finds the layers (--groups, else the file's groups holding weights or a
 * mean, in attn_results_groups' order; up to --to's), checks that they share B and n
 * and are square, that their tokens agree item by item, and that the
 * working set fits rq->memory.  ATTN_EINPUT, each with one line naming the
 * file, the group and what differs; ATTN_ENOMEM for the cap (the message
 * names --memory and what it must be) or an allocation; ATTN_EIO when the
 * file cannot be opened.  On failure *plan holds nothing to free.
 */
int rollout_plan_layers(const rollout_request *rq, rollout_plan *plan, attn_error *err);

void rollout_plan_free(rollout_plan *plan);

/* The output's datasets, added by rollout.c and written by rollout_stream
 * or flow_stream. */
typedef struct rollout_output {
    attn_results_out *out;
    int map;                      /* rollout (B, L, n, n) float64 written,
                                     float32 stored; flow (B, n, n) float64 */
    int tokens[2];                /* like plan.tokens, or -1 where absent  */
    double gap;                   /* flow: the largest gap between a flow
                                     and its cut (attn_flow_report)       */
} rollout_output;

/*
 * For each item: each layer's head mean, Â, the rollout through it written
 * at (item, layer); the item's tokens (those of rank 2).  Rank-1 tokens
 * are written here too, once.  ATTN_EINPUT for a map or token that cannot
 * be read, ATTN_ENOMEM, ATTN_EIO for a failed write.
 */
int rollout_stream(const rollout_request *rq, const rollout_plan *plan,
                   const rollout_output *output, attn_error *err);

/*
 * Layer l of item b: its head mean (n, n) into mean, read one head's map
 * (n, n) at a time into map; the item's tokens written from it when they
 * are the output's (rollout_stream's tokens).  The errors of
 * rollout_stream.
 */
int rollout_read_layer(const rollout_request *rq, const rollout_plan *plan,
                       const rollout_output *output, size_t l, size_t b, double *mean,
                       float *map, attn_error *err);

/*
 * For each item: every layer's Â held, the maximum flow of every pair
 * through them (attn_flow) written at (item); output->gap the largest
 * certificate gap.  ATTN_EINPUT also for a layer holding a negative or
 * non-finite value; the errors of rollout_stream otherwise.
 */
int flow_stream(const rollout_request *rq, const rollout_plan *plan, rollout_output *output,
                attn_error *err);

/* Opens the group of the results file, its failure naming the groups
 * there are when the group is not one of them. */
int rollout_open_group(const rollout_request *rq, const char *group, attn_results **results,
                       attn_error *err);

/* `attnrun rollout ...` and `attnrun flow ...`: argv[0] is "rollout" or
 * "flow".  Returns the exit status. */
int rollout_main(int argc, char **argv);

#endif
