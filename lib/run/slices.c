/*
 * slices.c - the buffers of the pipeline's two slots: one table names
 * every buffer of a slice, its bytes per batch item and whether the two
 * slots share it; one allocation is carved by it, and each slot's
 * attn_slice pointed into its buffers.  What the keys need is kept for
 * whole items (X, --kv, k and v, the summaries); the rest holds one block
 * of query rows (sizes.rows): q, heads, output, result, the maps, a 4-D
 * attention bias.
 *
 * Legend: see run_state.h.
 */
#include "run/run_state.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The buffers of one slot, by name: a slice's inputs and what its steps
 * compute, each (c items, ...) as its row of the table says. */
typedef struct slot_buffers {
    void *x, *y;                  /* (c, n, D), (c, m, D) with --kv        */
    void *projections;            /* q (c, rows, H*dk), one block of rows,
                                     then k and v (c, m, G*dk | G*dv); or
                                     (c, n, q|k|v) for whole items of
                                     self-attention, (slide_keys, q|k|v)
                                     with sliding keys (place_projections) */
    void *scores, *weights;       /* (c, H, rows, m): one block of rows     */
    void *concat, *output;        /* (c, rows, H*dv), (c, rows, D)          */
    void *keep, *positions;       /* (c, m) flags, (c, n + m) int64: what
                                     items own                            */
    void *bias;                   /* (c, H, rows, m): the rows of a step,
                                     by step parity (st->bias)           */
    void *x_rows;                 /* (slide_keys, D): X's rows of a step
                                     with sliding keys, by step parity   */
    void *summary[ATTN_SUMMARY_COUNT];   /* (c, H, n) each               */
    void *mean;                   /* (c, rows, m)                           */
    void *result;                 /* (c, rows, H, D)                        */
    void *weight_map[ATTN_WEIGHT_MAP_COUNT];     /* (c, H, rows, m) each,
                                     but one in the weights' place        */
    void *key_summary[ATTN_KEY_SUMMARY_COUNT];   /* (c, H, m) each         */
} slot_buffers;

/*
 * Points the projections of a slice of c items into one buffer.  Steps of
 * whole items of self-attention: side by side, (c, n, q|k|v) -- q, k, v
 * as blocks of heads, or per head [q|k|v] when the fused weights
 * interleave them -- for one GEMM of all three.  Else q (c, rows, H*dk)
 * packed, one block of rows, or over X (q_over_x: (c, n, H*dk | D)), then
 * k and v side by side (c, m, G*dk | G*dv), for one GEMM of both
 * (attn_project_rows keeps them so from the fused GEMM of self-attention,
 * whatever order the fused weights hold them in).
 */
static void place_projections(const attn_layout *layout, size_t c, size_t rows, bool q_over_x,
                              bool sliding, size_t elem, char *projections, attn_slice *slice)
{
    const attn_dims *d = &layout->dims;
    const size_t G = attn_kv_heads(d);
    const size_t qk = d->heads * d->d_k, kc = G * d->d_k, vc = G * d->d_v;
    slice->q = projections;
    slice->hsq = d->d_k;
    slice->hsk = d->d_k;
    slice->hsv = d->d_v;
    if (sliding)                          /* the keys' rows, q|k|v side by side */
        rows = d->n;
    if (!layout->cross && rows == d->n && layout->heads_interleaved) {
        slice->ldq = slice->ldk = slice->ldv = qk + kc + vc;
        slice->hsq = slice->hsk = slice->hsv = 3 * d->d_k;
        slice->k = projections + d->d_k * elem;
        slice->v = projections + 2 * d->d_k * elem;
        return;
    }
    if (!layout->cross && rows == d->n) {
        slice->ldq = slice->ldk = slice->ldv = qk + kc + vc;
        slice->k = projections + qk * elem;
    } else if (q_over_x) {
        slice->q = (void *)slice->x;
        slice->q_over_x = true;
        slice->ldq = d->d_model;
        slice->ldk = slice->ldv = kc + vc;
        slice->k = projections;
    } else {
        slice->ldq = qk;
        slice->ldk = slice->ldv = kc + vc;
        slice->k = projections + c * rows * qk * elem;
    }
    slice->v = (char *)slice->k + kc * elem;
}

/*
 * Points a slice at what every item shares (st->whole) or at its own
 * buffers of c items (b: keep (c, m), positions (c, n) and (c, m), bias
 * (c, H, n, m)), with the strides attn_slice takes.
 */
static void place_inputs(run_state *st, attn_slice *slice, const slot_buffers *b)
{
    const attn_layout *layout = &st->report->layout;
    const attn_dims *d = &layout->dims;
    const size_t c = st->report->slice_items;
    void *const *whole = st->whole;
    if (!layout->cross) {
        slice->y = slice->x;
        slice->y_stride = d->n * d->d_model;
    } else {
        slice->y_stride = layout->kv_shared ? 0 : d->m * d->d_model;
        if (layout->kv_shared)
            slice->y = whole[ATTN_IN_KV];
    }
    if (st->info[ATTN_IN_MASK].present) {
        slice->keep = layout->mask_shared ? whole[ATTN_IN_MASK] : b->keep;
        slice->keep_stride = layout->mask_shared ? 0 : d->m;
    }
    if (st->info[ATTN_IN_POSITIONS].present) {
        slice->positions = layout->positions_shared ? whole[ATTN_IN_POSITIONS] : b->positions;
        slice->positions_stride = layout->positions_shared ? 0 : d->n;
    }
    if (st->info[ATTN_IN_KV_POSITIONS].present) {
        slice->kv_positions = layout->kv_positions_shared
                                  ? whole[ATTN_IN_KV_POSITIONS]
                                  : (int64_t *)b->positions + (layout->positions_shared ? 0 : c * d->n);
        slice->kv_positions_stride = layout->kv_positions_shared ? 0 : d->m;
    } else if (!layout->cross) {              /* keys are the queries */
        slice->kv_positions = slice->positions;
        slice->kv_positions_stride = slice->positions_stride;
    }
    if (layout->bias_rank != 0 && layout->bias_rank < 4) {
        slice->bias = whole[ATTN_IN_ATTN_BIAS];
        slice->bias_item_stride = 0;
        slice->bias_head_stride = layout->bias_rank >= 3 && !layout->bias_heads_shared
                                      ? d->n * d->m : 0;
    }
}

/* Bytes of count computed values. */
static size_t elements(const run_state *st, size_t count)
{
    return count * attn_precision_size(st->opt->precision);
}

/* One map of one block of rows (H, rows, m), or 0 when not kept. */
static size_t map_block(const run_state *st, size_t kept_from)
{
    const attn_dims *d = &st->report->layout.dims;
    return st->sizes.map_count >= kept_from ? elements(st, d->heads * st->sizes.rows * d->m) : 0;
}

/* Bytes of one block of rows (sizes.rows) of a buffer of `whole` values
 * for all n rows of an item. */
static size_t by_rows(const run_state *st, size_t whole)
{
    return elements(st, whole / st->report->layout.dims.n * st->sizes.rows);
}

/* Bytes per item of each buffer (index: of a row with several). */
static size_t x_bytes(const run_state *st, size_t i) { (void)i; return run_sliding(st) ? 0 : elements(st, st->sizes.x); }
static size_t x_rows_bytes(const run_state *st, size_t i) { (void)i; return elements(st, st->sizes.slide_keys * st->report->layout.dims.d_model); }
static size_t y_bytes(const run_state *st, size_t i) { (void)i; return elements(st, st->sizes.y); }
static size_t projection_bytes(const run_state *st, size_t i)
{
    (void)i;
    const size_t m = st->report->layout.dims.m;
    if (run_sliding(st))                  /* (slide_keys, q|k|v) */
        return elements(st, (st->sizes.q / st->report->layout.dims.n +
                             (st->sizes.k + st->sizes.v) / m) * st->sizes.slide_keys);
    return (run_q_over_x(st) ? 0 : by_rows(st, st->sizes.q)) + elements(st, st->sizes.k + st->sizes.v);
}
static size_t scores_bytes(const run_state *st, size_t i) { (void)i; return run_saved(st, ATTN_OUT_SCORES) ? map_block(st, 2) : 0; }
static size_t weight_map_bytes(const run_state *st, size_t i)
{
    const bool own = run_saved(st, attn_weight_map_output((attn_weight_map)i)) &&
                     attn_plan_map_in_weights_place(st->opt->save) != (int)i;
    return own ? map_block(st, 1) : 0;
}
static size_t key_summary_bytes(const run_state *st, size_t i) { return elements(st, st->sizes.key_summary[i]); }
static size_t weights_bytes(const run_state *st, size_t i) { (void)i; return map_block(st, 1); }
static size_t concat_bytes(const run_state *st, size_t i) { (void)i; return by_rows(st, st->sizes.concat); }
static size_t output_bytes(const run_state *st, size_t i) { (void)i; return by_rows(st, st->sizes.output); }
static size_t keep_bytes(const run_state *st, size_t i) { (void)i; return st->sizes.keep; }
static size_t positions_bytes(const run_state *st, size_t i) { (void)i; return st->sizes.positions * sizeof(int64_t); }
static size_t bias_bytes(const run_state *st, size_t i) { (void)i; return by_rows(st, st->sizes.bias); }
static size_t summary_bytes(const run_state *st, size_t i) { return st->sizes.summary[i]; }
static size_t mean_bytes(const run_state *st, size_t i) { (void)i; return elements(st, st->sizes.rows * st->sizes.mean); }
static size_t result_bytes(const run_state *st, size_t i) { (void)i; return by_rows(st, st->sizes.result); }

/* Who holds a buffer: each slot (the next slice is read beside a step;
 * one when the batch is one slice), the two slots together (only the
 * compute touches it: a step's results leave it, packed, before the next
 * step starts), or each step parity (read beside the step before). */
typedef enum holder { BY_SLOT, SHARED, BY_PARITY } holder;

/*
 * The table of a slot's buffers, in the order they are carved, each on a
 * RUN_ALIGN boundary.  A buffer of 0 bytes is not computed (NULL).
 */
static const struct slice_buffer {
    const char *name;
    size_t field;                 /* offsetof(slot_buffers, ...)           */
    size_t count;                 /* pointers from field: 1, or more        */
    holder held;
    size_t (*bytes)(const run_state *st, size_t index);   /* per item      */
} slice_buffers[] = {
    {"x", offsetof(slot_buffers, x), 1, BY_SLOT, x_bytes},
    {"y", offsetof(slot_buffers, y), 1, BY_SLOT, y_bytes},
    {"projections", offsetof(slot_buffers, projections), 1, SHARED, projection_bytes},
    {"scores", offsetof(slot_buffers, scores), 1, SHARED, scores_bytes},
    {"weights", offsetof(slot_buffers, weights), 1, SHARED, weights_bytes},
    {"concat", offsetof(slot_buffers, concat), 1, SHARED, concat_bytes},
    {"output", offsetof(slot_buffers, output), 1, SHARED, output_bytes},
    {"keep", offsetof(slot_buffers, keep), 1, BY_SLOT, keep_bytes},
    {"positions", offsetof(slot_buffers, positions), 1, BY_SLOT, positions_bytes},
    {"bias", offsetof(slot_buffers, bias), 1, BY_PARITY, bias_bytes},
    {"x rows", offsetof(slot_buffers, x_rows), 1, BY_PARITY, x_rows_bytes},
    {"summary", offsetof(slot_buffers, summary), ATTN_SUMMARY_COUNT, SHARED, summary_bytes},
    {"mean", offsetof(slot_buffers, mean), 1, SHARED, mean_bytes},
    {"result", offsetof(slot_buffers, result), 1, SHARED, result_bytes},
    {"weight maps", offsetof(slot_buffers, weight_map), ATTN_WEIGHT_MAP_COUNT, SHARED, weight_map_bytes},
    {"key summaries", offsetof(slot_buffers, key_summary), ATTN_KEY_SUMMARY_COUNT, SHARED, key_summary_bytes},
};

/* Whether slot 1 takes slot 0's buffer of row `row`. */
static bool second_shares(const run_state *st, const struct slice_buffer *row)
{
    const bool one_slice = st->report->slice_items >= st->report->layout.dims.batch;
    return row->held == SHARED || (row->held == BY_SLOT && one_slice);
}

#define SLICE_BUFFER_COUNT (sizeof slice_buffers / sizeof slice_buffers[0])

/* Where buffer i of row `row` of slot buffers b is kept. */
static void **buffer_at(slot_buffers *b, const struct slice_buffer *row, size_t i)
{
    return (void **)((char *)b + row->field) + i;
}

bool run_slice_memory_bytes(const run_state *st, size_t *total)
{
    const size_t c = st->report->slice_items;
    *total = attn_attend_scratch_bytes(&st->cfg, c, st->sizes.map_count == 0) + RUN_ALIGN;
    for (int slot = 0; slot < 2; slot++)
        for (size_t j = 0; j < SLICE_BUFFER_COUNT; j++)
            for (size_t i = 0; i < slice_buffers[j].count; i++) {
                size_t bytes;
                if (slot == 1 && second_shares(st, &slice_buffers[j]))
                    continue;
                if (!attn_size_mul(&bytes, c, slice_buffers[j].bytes(st, i)) ||
                    !attn_size_add(&bytes, bytes, RUN_ALIGN) || !attn_size_add(total, *total, bytes))
                    return false;
            }
    return true;
}

/* Points slot `i`'s slice and maps at its buffers. */
static void place_slot(run_state *st, int i, const slot_buffers *b)
{
    const attn_layout *layout = &st->report->layout;
    attn_slice *slice = &st->slots[i];
    slice->x = b->x;
    slice->y = b->y;
    slice->concat = b->concat;
    slice->output = b->output;
    memcpy(slice->summary, b->summary, sizeof slice->summary);
    slice->mean = b->mean;
    slice->result = b->result;
    memcpy(slice->key_summary, b->key_summary, sizeof slice->key_summary);
    /* maps made from the weights: beside the weights, or one in their place */
    for (int map = 0; map < ATTN_WEIGHT_MAP_COUNT; map++)
        slice->weight_map[map] = map == attn_plan_map_in_weights_place(st->opt->save)
                                     ? b->weights : b->weight_map[map];
    st->maps[i][0] = b->scores;
    st->maps[i][1] = b->weights;
    st->bias[i] = b->bias;        /* a 4-D bias: the step of parity i's rows */
    st->x_rows[i] = b->x_rows;    /* sliding keys: X's rows of the step */
    slice->keys_slide = run_sliding(st);
    place_projections(layout, st->report->slice_items, st->sizes.rows, run_q_over_x(st),
                      run_sliding(st), attn_precision_size(st->opt->precision), b->projections,
                      slice);
    place_inputs(st, slice, b);
}

/*
 * Carves one allocation into the buffers of two slices: the inputs of the
 * slice computed and of the next one, read beside it (see run_steps), by
 * the table above.
 */
int run_allocate_slices(run_state *st, attn_error *err)
{
    const size_t c = st->report->slice_items;
    size_t total;
    if (!run_slice_memory_bytes(st, &total))
        return attn_fail(err, ATTN_ENOMEM, "%s: the slice buffers overflow", st->opt->input);
    st->slice_memory = run_alloc(st, 1, total, "the buffers of two slices", err);
    if (st->slice_memory == NULL) {
        err->hint = ATTN_HINT_MEMORY;
        return ATTN_ENOMEM;
    }
    char *p = run_align_up(st->slice_memory);
    slot_buffers slots[2];
    for (int s = 0; s < 2; s++) {
        for (size_t j = 0; j < SLICE_BUFFER_COUNT; j++)
            for (size_t i = 0; i < slice_buffers[j].count; i++) {
                void **at = buffer_at(&slots[s], &slice_buffers[j], i);
                const size_t bytes = slice_buffers[j].bytes(st, i);
                if (s == 1 && second_shares(st, &slice_buffers[j])) {
                    *at = *buffer_at(&slots[0], &slice_buffers[j], i);
                    continue;
                }
                *at = bytes != 0 ? p : NULL;           /* NULL: not computed */
                p = run_align_up(p + c * bytes);
            }
        place_slot(st, s, &slots[s]);
    }
    st->slots[0].scratch = st->slots[1].scratch = p;   /* steps run one at a time */
    return ATTN_OK;
}
