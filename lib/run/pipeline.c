/*
 * attn_pipeline.c - the slices of the batch: read, computed and written,
 * the I/O of one step overlapping the compute of the next.
 *
 * Legend: see attn_run_state.h.
 */
#include "run/run_state.h"

#include "attn_ranks.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * Points the projections of a slice of c items into one buffer, side by
 * side for one GEMM: (c, n, q|k|v) for self-attention -- q, k, v as blocks
 * of heads, or per head [q|k|v] when the fused weights interleave them --
 * and (c, n, q) then (c, m, k|v) for --kv.
 */
static void place_projections(const attn_layout *layout, size_t c, size_t elem, char *projections,
                              attn_slice *slice)
{
    const attn_dims *d = &layout->dims;
    const size_t G = attn_kv_heads(d);
    const size_t qk = d->heads * d->d_k, kc = G * d->d_k, vc = G * d->d_v;
    slice->q = projections;
    slice->hsq = d->d_k;
    slice->hsk = d->d_k;
    slice->hsv = d->d_v;
    if (layout->heads_interleaved) {          /* self-attention only */
        slice->ldq = slice->ldk = slice->ldv = qk + kc + vc;
        slice->hsq = slice->hsk = slice->hsv = 3 * d->d_k;
        slice->k = projections + d->d_k * elem;
        slice->v = projections + 2 * d->d_k * elem;
        return;
    }
    if (!layout->cross) {
        slice->ldq = slice->ldk = slice->ldv = qk + kc + vc;
        slice->k = projections + qk * elem;
    } else {
        slice->ldq = qk;
        slice->ldk = slice->ldv = kc + vc;
        slice->k = projections + c * d->n * qk * elem;
    }
    slice->v = (char *)slice->k + kc * elem;
}

/*
 * Points a slice at what every item shares (st->whole) or at its own
 * buffers of c items (keep (c, m), positions (c, n) and (c, m), bias
 * (c, H, n, m)), with the strides attn_slice takes.
 */
static void place_inputs(run_state *st, attn_slice *slice, unsigned char *keep, int64_t *positions,
                         void *bias)
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
        slice->keep = layout->mask_shared ? whole[ATTN_IN_MASK] : keep;
        slice->keep_stride = layout->mask_shared ? 0 : d->m;
    }
    if (st->info[ATTN_IN_POSITIONS].present) {
        slice->positions = layout->positions_shared ? whole[ATTN_IN_POSITIONS] : positions;
        slice->positions_stride = layout->positions_shared ? 0 : d->n;
    }
    if (st->info[ATTN_IN_KV_POSITIONS].present) {
        slice->kv_positions = layout->kv_positions_shared ? whole[ATTN_IN_KV_POSITIONS]
                                                          : positions + (layout->positions_shared ? 0 : c * d->n);
        slice->kv_positions_stride = layout->kv_positions_shared ? 0 : d->m;
    } else if (!layout->cross) {              /* keys are the queries */
        slice->kv_positions = slice->positions;
        slice->kv_positions_stride = slice->positions_stride;
    }
    if (layout->bias_rank != 0) {
        slice->bias = layout->bias_rank == 4 ? bias : whole[ATTN_IN_ATTN_BIAS];
        slice->bias_item_stride = layout->bias_rank == 4 ? d->heads * d->n * d->m : 0;
        slice->bias_head_stride = layout->bias_rank >= 3 ? d->n * d->m : 0;
    }
}

/* One step of the pipeline: a block of query rows of one slice. */
typedef struct step {
    size_t first, count;         /* batch items [first, first + count)    */
    size_t row, rows;            /* query rows [row, row + rows)          */
    attn_slice *slice;           /* its slot                              */
    void *maps[2];               /* scores, weights: the set of its parity */
    bool starts, ends;           /* first / last block of its slice that
                                    this rank computes                   */
    size_t lo, hi;               /* the query rows [lo, hi) of the slice
                                    this rank computes (all n but where
                                    ranks share a slice, attn_ranks.h)  */
    bool keys;                   /* this rank writes the slice's per-key
                                    outputs (k, v): it has its first block */
    bool none;                   /* no step: this rank has run out of steps
                                    while others still write (shared file) */
    int parity;                  /* t mod 2: its maps, staging and jobs    */
} step;

/* Blocks of query rows in one slice. */
static size_t slice_blocks(const run_state *st)
{
    const size_t n = st->report->layout.dims.n, block = st->sizes.rows;
    return (n + block - 1) / block;
}

/* The step with index t of this rank's steps: past its last, a step of
 * nothing.  Without own_steps the run's steps go slice by slice, block by
 * block, and this rank has [step_first, step_first + step_count) of them;
 * with them, each is listed (share_steps). */
static step step_at(run_state *st, size_t t)
{
    const size_t n = st->report->layout.dims.n, block = st->sizes.rows;
    const size_t blocks = slice_blocks(st), batch = st->report->layout.dims.batch;
    const size_t items = st->report->slice_items;
    if (t >= st->step_count)
        return (step){.none = true, .parity = (int)(t % 2)};
    size_t slice, row, rows, lo, hi;
    if (st->own_steps == NULL) {
        const size_t g = st->step_first + t, b = g % blocks;
        slice = g / blocks;
        row = b * block;
        rows = n - row < block ? n - row : block;
        lo = 0;
        hi = n;
    } else {
        const run_step *own = st->own_steps;
        size_t first = t, last = t;       /* this rank's steps of the slice */
        while (first > 0 && own[first - 1].slice == own[t].slice)
            first--;
        while (last + 1 < st->step_count && own[last + 1].slice == own[t].slice)
            last++;
        slice = own[t].slice;
        row = own[t].row;
        rows = own[t].rows;
        lo = own[first].row;
        hi = own[last].row + own[last].rows;
    }
    step s = {
        .first = slice * items, .row = row, .rows = rows, .starts = row == lo,
        .ends = row + rows == hi, .lo = lo, .hi = hi, .keys = lo == 0,
        .slice = &st->slots[slice % 2], .parity = (int)(t % 2),
    };
    s.count = batch - s.first < items ? batch - s.first : items;
    s.maps[0] = st->maps[t % 2][0];
    s.maps[1] = st->maps[t % 2][1];
    return s;
}

/* The query axis of output `which`, counting a batch axis; NO_AXIS when
 * it has none (k and v, along the keys). */
#define NO_AXIS SIZE_MAX
static size_t query_axis(const run_state *st, attn_output which)
{
    const attn_output_spec *spec = attn_output_spec_of(which);
    for (size_t i = 0; i < 3; i++)
        if (spec->axes[i] == ATTN_AXIS_QUERY)
            return i + (st->report->layout.batched ? 1 : 0);
    return NO_AXIS;
}

/* Where output `which` of step s lies in its buffers: the region of
 * the dataset it covers and the strides of its axes (batch, head, row,
 * column, as the dataset has them).  The maps hold one block of rows;
 * q, k, v and heads sit in packed buffers with a stride per head. */
static attn_block block_of(const run_state *st, const step *s, attn_output which)
{
    const attn_layout *layout = &st->report->layout;
    const attn_dims *d = &layout->dims;
    const attn_slice *slice = s->slice;
    const size_t H = d->heads, n = d->n, m = d->m, D = d->d_model;
    const size_t vc = H * d->d_v;
    /* item, head and row strides of each source; the column stride is 1 */
    const struct { const void *base; size_t item, head, row; } from[] = {
        [ATTN_FROM_SCORES] = {s->maps[0], H * s->rows * m, s->rows * m, m},
        [ATTN_FROM_WEIGHTS] = {s->maps[1], H * s->rows * m, s->rows * m, m},
        [ATTN_FROM_CONCAT] = {slice->concat, n * vc, d->d_v, vc},
        [ATTN_FROM_OUTPUT] = {slice->output, n * D, 0, D},
        [ATTN_FROM_Q] = {slice->q, n * slice->ldq, slice->hsq, slice->ldq},
        [ATTN_FROM_K] = {slice->k, m * slice->ldk, slice->hsk, slice->ldk},
        [ATTN_FROM_V] = {slice->v, m * slice->ldv, slice->hsv, slice->ldv},
        [ATTN_FROM_ENTROPY] = {slice->entropy, H * n, 0, n},
        [ATTN_FROM_ARGMAX] = {slice->argmax, H * n, 0, n},
        [ATTN_FROM_DISTANCE] = {slice->distance, H * n, 0, n},
        [ATTN_FROM_MEAN] = {slice->mean, s->rows * m, 0, m},
        [ATTN_FROM_RESULT] = {slice->result, n * H * D, H * D, D},
    };
    const attn_stored *stored = &st->stored[which];
    const attn_source source = attn_output_spec_of(which)->source;
    const size_t rank = stored->rank;
    attn_block b = {.base = from[source].base, .precision = st->opt->precision,
                    .integer = stored->type == ATTN_STORE_I32};
    for (size_t i = 0; i < rank; i++)
        b.count[i] = stored->dims[i];
    size_t axis = 0;
    if (layout->batched) {
        b.first[0] = s->first;
        b.count[0] = s->count;
        b.stride[0] = from[source].item;
        axis = 1;
    }
    if (rank - axis == 3)
        b.stride[axis++] = from[source].head;
    b.stride[axis] = from[source].row;
    b.stride[axis + 1] = 1;
    if (stored->map) {
        b.first[axis] = s->row;
        b.count[axis] = s->rows;
    } else if (s->hi - s->lo < d->n && query_axis(st, which) != NO_AXIS) {
        const size_t q = query_axis(st, which);   /* the rows of the slice it has */
        b.base = (const char *)b.base + s->lo * b.stride[q] * (b.integer ? sizeof(int32_t)
                                                             : attn_precision_size(b.precision));
        b.first[q] = s->lo;
        b.count[q] = s->hi - s->lo;
    }
    return b;
}

/* The outputs step s writes: the maps of its rows, and at the end of its
 * slice (of its part of the slice) the slice's other outputs -- those
 * along the keys by the rank that has the slice's first block. */
static bool step_writes(const run_state *st, const step *s, attn_output which)
{
    if (s->none || !run_saved(st, which))
        return false;
    return st->stored[which].map || (s->ends && (s->keys || query_axis(st, which) != NO_AXIS));
}

/*
 * Lists the chunks step s writes into the jobs of its parity, their room
 * carved from its staging (room NULL: only counted into *jobs, *bytes).
 */
static size_t list_step(run_state *st, const step *s, int parity, bool carve, size_t *bytes)
{
    char *room = carve ? st->staging[parity] : NULL;
    size_t count = 0;
    for (int i = 0; i < ATTN_OUT_COUNT; i++) {
        if (!step_writes(st, s, (attn_output)i))
            continue;
        attn_block *block = &st->blocks[parity][i];
        *block = block_of(st, s, (attn_output)i);
        count += attn_store_list(&st->stored[i], block, st->handles[i], &st->cfg,
                                 carve ? &room : NULL, bytes,
                                 carve ? st->jobs[parity] + count : NULL);
    }
    return count;
}

/*
 * With a shared file: the blocks step s writes, each gathered whole in the
 * stored type, carved from the staging of its parity (carve false: only
 * their bytes counted into *bytes).
 */
static void block_step(run_state *st, const step *s, bool carve, size_t *bytes)
{
    char *room = st->staging[s->parity];
    for (int i = 0; i < ATTN_OUT_COUNT; i++) {
        st->block_data[s->parity][i] = NULL;
        if (!step_writes(st, s, (attn_output)i))
            continue;
        attn_block *block = &st->blocks[s->parity][i];
        *block = block_of(st, s, (attn_output)i);
        const size_t size = (attn_store_block_bytes(&st->stored[i], block) + RUN_ALIGN - 1) /
                            RUN_ALIGN * RUN_ALIGN;
        if (carve) {
            st->block_data[s->parity][i] = room;
            attn_store_gather_block(&st->stored[i], block, &st->cfg, room);
            room += size;
        }
        *bytes += size;
    }
}

/* The staging of a shared file: the largest step's blocks, a step of
 * the first slice that ends it (later slices hold no more items). */
static int allocate_blocks(run_state *st, attn_error *err)
{
    size_t largest = 0;
    for (size_t t = 0; t < st->step_count && (st->own_steps != NULL || t < slice_blocks(st)); t++) {
        step s = step_at(st, t);
        size_t bytes = 0;
        s.ends = true;
        s.keys = true;
        block_step(st, &s, false, &bytes);
        largest = bytes > largest ? bytes : largest;
    }
    for (int i = 0; i < 2; i++) {
        st->staging[i] = run_alloc(st, 1, largest, "the stored blocks of a step", err);
        if (st->staging[i] == NULL)
            return ATTN_ENOMEM;
    }
    st->staging_bytes = largest;
    return ATTN_OK;
}

/*
 * The packed room of a step (by parity) and the per-thread scratch: sized
 * for the largest step, which is one of the first slice's (later slices
 * hold no more items; tiles no query sees take no room).
 */
static int allocate_staging(run_state *st, attn_error *err)
{
    if (attn_ranks_shared_file())
        return allocate_blocks(st, err);
    const size_t n = st->report->layout.dims.n, block = st->sizes.rows;
    const size_t blocks = (n + block - 1) / block;
    size_t largest_chunk = 0;
    for (int i = 0; i < ATTN_OUT_COUNT; i++)
        if (run_saved(st, (attn_output)i)) {
            size_t chunk = attn_store_slot_bytes(&st->stored[i]);
            largest_chunk = chunk > largest_chunk ? chunk : largest_chunk;
        }
    for (size_t t = 0; t < st->step_count && (st->own_steps != NULL || t < blocks); t++) {
        step s = step_at(st, t);
        size_t bytes = 0, jobs = list_step(st, &s, 0, false, &bytes);
        st->staging_bytes = bytes > st->staging_bytes ? bytes : st->staging_bytes;
        st->job_capacity = jobs > st->job_capacity ? jobs : st->job_capacity;
    }
    for (int i = 0; i < 2; i++) {
        st->staging[i] = run_alloc(st, 1, st->staging_bytes, "the packed chunks of a step", err);
        st->jobs[i] = run_alloc(st, st->job_capacity, sizeof *st->jobs[i], "the chunk list", err);
        if (st->staging[i] == NULL || st->jobs[i] == NULL)
            return ATTN_ENOMEM;
    }
    st->packer = attn_packer_new((size_t)attn_threads(), largest_chunk, st->opt->compress);
    if (st->packer == NULL)
        return attn_fail(err, ATTN_ENOMEM, "%s: out of memory for the compression buffers",
                         st->opt->input);
    return ATTN_OK;
}

/* One buffer of a slice: its bytes per item, and whether the two slots
 * share it (only the compute touches it; a step's results leave it
 * packed before the next step starts). */
typedef struct slice_buffer {
    size_t bytes;
    bool shared;
} slice_buffer;

/* The buffers of a slice, in the order run_allocate_slices carves them:
 * x, y, projections, scores, weights, concat, output, keep, positions,
 * bias, entropy, argmax, distance, mean, result (the last five only
 * when saved). */
static void slice_buffers(const run_state *st, slice_buffer b[RUN_SLICE_BUFFERS])
{
    const attn_slice_sizes *sizes = &st->sizes;
    const attn_dims *d = &st->report->layout.dims;
    const size_t elem = attn_precision_size(st->opt->precision);
    const size_t map = d->heads * sizes->rows * d->m;      /* one map, one block of rows */
    const slice_buffer table[RUN_SLICE_BUFFERS] = {
        {sizes->x * elem, false}, {sizes->y * elem, false}, {sizes->projections * elem, true},
        {(sizes->map_count == 2 ? map : 0) * elem, true},
        {(sizes->map_count >= 1 ? map : 0) * elem, true}, {sizes->concat * elem, true},
        {sizes->output * elem, true}, {sizes->keep, false},
        {sizes->positions * sizeof(int64_t), false}, {sizes->bias * elem, false},
        {sizes->summary[0], true}, {sizes->summary[1], true}, {sizes->summary[2], true},
        {sizes->rows * sizes->mean * elem, true}, {sizes->result * elem, true},
    };
    memcpy(b, table, sizeof table);
}

bool run_slice_memory_bytes(const run_state *st, size_t *total)
{
    const size_t c = st->report->slice_items;
    slice_buffer b[RUN_SLICE_BUFFERS];
    slice_buffers(st, b);
    *total = attn_attend_scratch_bytes(&st->cfg, c, st->sizes.map_count == 0) + RUN_ALIGN;
    for (int slot = 0; slot < 2; slot++)
        for (size_t j = 0; j < RUN_SLICE_BUFFERS; j++) {
            size_t bytes;
            if (slot == 1 && b[j].shared)
                continue;
            if (!attn_size_mul(&bytes, c, b[j].bytes) || !attn_size_add(&bytes, bytes, RUN_ALIGN) ||
                !attn_size_add(total, *total, bytes))
                return false;
        }
    return true;
}

/*
 * Carves one allocation into the buffers of two slices: the inputs of the
 * slice computed and of the next one, read beside it (see run_steps).
 * What only the compute touches -- projections, maps (one block of rows),
 * concat and output -- is shared: a step's results leave those buffers,
 * packed, before the next step starts.
 */
/* The work of `rows` query rows from row0 of one item, in (query, key)
 * pairs: the visible keys of each row, plus the projections' share. */
static double rows_cost(const run_state *st, size_t row0, size_t rows)
{
    const attn_dims *d = &st->report->layout.dims;
    const double G = (double)attn_kv_heads(d), H = (double)d->heads;
    const double per_row = (double)d->d_model * (H * (double)d->d_k + G * (double)(d->d_k + d->d_v) +
                                                 H * (double)d->d_v) /
                           (H * (double)(d->d_k + d->d_v));
    return attn_visible_pairs(&st->cfg, row0, rows) + per_row * (double)rows;
}

/* Steps each rank cuts its share of the rows into, when the ranks split
 * items' rows: their rounds are collective, so the steps of one round
 * should cost the same on every rank. */
#define STEPS_PER_RANK 4

/* One rank's units [from, to) of tile rows (tiles per slice, `unit` rows
 * each) as steps of about cost/STEPS_PER_RANK, never across a slice and
 * never over st->sizes.rows rows; into own (when not NULL).  Returns the
 * number of steps. */
static size_t cut_steps(const run_state *st, const double *cost, size_t from, size_t to,
                        size_t tiles, size_t unit, run_step *own)
{
    const size_t n = st->report->layout.dims.n;
    double total = 0, done = 0;
    for (size_t u = from; u < to; u++)
        total += cost[u];
    const double target = total / STEPS_PER_RANK;
    size_t count = 0;
    run_step current = {0};
    for (size_t u = from; u < to; u++) {
        const size_t slice = u / tiles, row = u % tiles * unit;
        const size_t rows = n - row < unit ? n - row : unit;
        const bool joins = current.rows != 0 && current.slice == slice &&
                           current.rows + rows <= st->sizes.rows &&
                           done + cost[u] / 2 <= target;
        if (!joins) {
            if (current.rows != 0 && own != NULL)
                own[count - 1] = current;
            current = (run_step){slice, row, 0};
            done = 0;
            count++;
        }
        current.rows += rows;
        done += cost[u];
    }
    if (current.rows != 0 && own != NULL)
        own[count - 1] = current;
    return count;
}

/*
 * This rank's steps (attn_ranks.h): contiguous ranges of equal work, so
 * that the ranks finish together.  With at least as many slices as ranks
 * each rank has whole slices, run block by block; with fewer, the items'
 * rows are shared out in whole tiles of the maps, and each rank cuts its
 * rows into steps of equal work (causal rows cost more the later they
 * come), listed in own_steps.  Either way the ranges start on chunk
 * boundaries: slices on the batch axis's, rows on the maps' tiles.
 */
static int share_steps(run_state *st, attn_error *err)
{
    const size_t ranks = attn_rank_count(), rank = attn_rank();
    const attn_layout *layout = &st->report->layout;
    const size_t items = st->report->slice_items, batch = layout->dims.batch;
    const size_t n = layout->dims.n;
    const size_t slices = items == 0 ? 0 : (batch + items - 1) / items, blocks = slice_blocks(st);
    if (ranks == 1) {
        st->step_first = 0;
        st->step_rounds = st->step_count = slices * blocks;
        return ATTN_OK;
    }
    const bool whole = slices >= ranks;
    size_t unit = n, chunk[4];
    if (!whole) {                     /* rows of one tile of the maps */
        attn_output_chunk(layout, ATTN_OUT_WEIGHTS, attn_store_size(st->report->store), items,
                          chunk);
        unit = chunk[layout->batched ? 2 : 1];
    }
    const size_t tiles = (n + unit - 1) / unit, units = whole ? slices : slices * tiles;
    double *cost = run_alloc(st, units, sizeof *cost, "the division of the work", err);
    size_t *starts = run_alloc(st, ranks + 1, sizeof *starts, "the division of the work", err);
    int status = cost == NULL || starts == NULL ? ATTN_ENOMEM : ATTN_OK;
    for (size_t u = 0; u < units && status == ATTN_OK; u++) {
        const size_t slice = whole ? u : u / tiles, first = slice * items;
        const size_t count = batch - first < items ? batch - first : items;
        const size_t row = whole ? 0 : u % tiles * unit;
        const size_t rows = whole ? n : n - row < unit ? n - row : unit;
        cost[u] = (double)count * rows_cost(st, row, rows);
    }
    if (status == ATTN_OK)
        attn_ranks_divide(cost, units, ranks, starts);
    st->step_rounds = 0;
    for (size_t r = 0; r < ranks && status == ATTN_OK; r++) {
        const size_t count = whole ? (starts[r + 1] - starts[r]) * blocks
                                   : cut_steps(st, cost, starts[r], starts[r + 1], tiles, unit, NULL);
        st->step_rounds = count > st->step_rounds ? count : st->step_rounds;
        if (r != rank)
            continue;
        st->step_first = whole ? starts[r] * blocks : 0;
        st->step_count = count;
        if (!whole && count > 0 &&
            (st->own_steps = run_alloc(st, count, sizeof *st->own_steps, "the steps", err)) == NULL)
            status = ATTN_ENOMEM;
        else if (!whole)
            cut_steps(st, cost, starts[r], starts[r + 1], tiles, unit, st->own_steps);
    }
    free(cost);
    free(starts);
    return status;
}

int run_allocate_slices(run_state *st, attn_error *err)
{
    int status = share_steps(st, err);
    if (status != ATTN_OK)
        return status;
    const size_t c = st->report->slice_items, elem = attn_precision_size(st->opt->precision);
    const attn_layout *layout = &st->report->layout;
    size_t total;
    if (!run_slice_memory_bytes(st, &total))
        return attn_fail(err, ATTN_ENOMEM, "%s: the slice buffers overflow", st->opt->input);
    st->slice_memory = run_alloc(st, 1, total, "the buffers of two slices", err);
    if (st->slice_memory == NULL) {
        err->hint = ATTN_HINT_MEMORY;
        return ATTN_ENOMEM;
    }
    slice_buffer b[RUN_SLICE_BUFFERS];
    slice_buffers(st, b);
    char *p = run_align_up(st->slice_memory);
    void *first[RUN_SLICE_BUFFERS];                /* slot 0's, to share */
    for (int i = 0; i < 2; i++) {
        attn_slice *slice = &st->slots[i];
        void *projections = NULL, *keep = NULL, *positions = NULL, *bias = NULL;
        void **targets[RUN_SLICE_BUFFERS] = {
            (void **)&slice->x, (void **)&slice->y, &projections, &st->maps[i][0],
            &st->maps[i][1], &slice->concat, &slice->output, &keep, &positions, &bias,
            &slice->entropy, (void **)&slice->argmax, &slice->distance, &slice->mean,
            &slice->result,
        };
        for (size_t j = 0; j < RUN_SLICE_BUFFERS; j++) {
            if (i == 1 && b[j].shared) {
                *targets[j] = first[j];
                continue;
            }
            *targets[j] = first[j] = b[j].bytes != 0 ? p : NULL;   /* NULL: not computed */
            p = run_align_up(p + c * b[j].bytes);
        }
        if (st->sizes.map_count < 2)
            st->maps[i][0] = NULL;
        if (st->sizes.map_count < 1)
            st->maps[i][1] = NULL;
        place_projections(layout, c, elem, projections, slice);
        place_inputs(st, slice, keep, positions, bias);
    }
    st->slots[0].scratch = st->slots[1].scratch = p;   /* steps run one at a time */
    return allocate_staging(st, err);
}

/* Reads what items [first, first + c) have of their own: X, the
 * keys/values, the mask, positions and an attention bias (B, H, n, m). */
static int read_slice(run_state *st, attn_slice *slice, size_t first, size_t c, attn_error *err)
{
    const attn_layout *layout = &st->report->layout;
    const attn_dims *d = &layout->dims;
    const size_t x_first = layout->batched ? first : 0;   /* a rank-2 X is one item */
    const struct { attn_input which; bool own; size_t first, rows; const void *buf; } inputs[] = {
        {ATTN_IN_X, true, x_first, layout->batched ? c : d->n, slice->x},
        {ATTN_IN_KV, !layout->kv_shared, x_first, layout->batched ? c : d->m, slice->y},
        {ATTN_IN_MASK, !layout->mask_shared, first, c, slice->keep},
        {ATTN_IN_POSITIONS, !layout->positions_shared, first, c, slice->positions},
        {ATTN_IN_KV_POSITIONS, !layout->kv_positions_shared, first, c, slice->kv_positions},
        {ATTN_IN_ATTN_BIAS, layout->bias_rank == 4, first, c, slice->bias},
    };
    int status = ATTN_OK;
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0] && status == ATTN_OK; i++)
        if (st->info[inputs[i].which].present && inputs[i].own)
            status = run_read_rows(st, inputs[i].which, inputs[i].first, inputs[i].rows,
                                   (void *)inputs[i].buf, err);
    return status;
}

static int interrupted(const run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    return attn_fail(err, ATTN_EINTR, "%s: interrupted; no output was written",
                     opt->in_place ? opt->input : opt->output);
}

/* The compute of one step, then its outputs packed in chunks (parity:
 * the step's index mod 2). */
static void compute_step(run_state *st, const step *s)
{
    const int parity = s->parity;
    if (s->none)
        return;
    s->slice->count = s->count;
    s->slice->scores = s->maps[0];
    s->slice->weights = s->maps[1];
    if (s->starts)
        attn_project_inputs(&st->cfg, &st->weights, s->slice);
    if (s->starts && s->hi - s->lo < st->report->layout.dims.n) {
        /* Rows other ranks attend project to b_O here, never read. */
        const attn_dims *d = &st->report->layout.dims;
        memset(s->slice->concat, 0, s->count * d->n * d->heads * d->d_v *
                                    attn_precision_size(st->opt->precision));
    }
    attn_attend(&st->cfg, s->slice, s->row, s->rows);
    if (s->slice->mean != NULL)
        attn_head_mean(&st->cfg, s->slice, s->rows);
    if (s->ends)
        attn_project_output(&st->cfg, &st->weights, s->slice);
    if (s->ends && s->slice->result != NULL)
        attn_project_result(&st->cfg, &st->weights, s->slice);
    size_t bytes = 0;
    if (attn_ranks_shared_file()) {
        block_step(st, s, true, &bytes);
        return;
    }
    st->job_count[parity] = list_step(st, s, parity, true, &bytes);
    attn_store_pack(st->jobs[parity], st->job_count[parity], st->packer);
}

/* Writes the chunks step s packed (parity: its index mod 2): its maps,
 * and at the end of its slice the slice's other outputs; then reports
 * the rows done. */
static int write_step(run_state *st, const step *s, attn_error *err)
{
    const int parity = s->parity;
    int status = ATTN_OK;
    if (attn_ranks_shared_file()) {
        /* Every rank writes every saved output, its block or nothing:
         * the writes are collective. */
        for (int i = 0; i < ATTN_OUT_COUNT; i++) {
            if (!run_saved(st, (attn_output)i))
                continue;
            const attn_block *b = &st->blocks[parity][i];
            const bool mine = !s->none && st->block_data[parity][i] != NULL;
            int written = attn_h5out_write_shared(st->out, st->handles[i], b->first,
                                                  mine ? b->count : NULL,
                                                  st->block_data[parity][i],
                                                  status == ATTN_OK ? err : &(attn_error){0});
            status = status == ATTN_OK ? written : status;
        }
        return status;
    }
    for (size_t i = 0; i < st->job_count[parity] && status == ATTN_OK; i++) {
        const attn_chunk_job *job = &st->jobs[parity][i];
        status = attn_h5out_write_chunk(st->out, job->handle, job->offset, job->data, job->bytes,
                                        err);
    }
    const attn_run_options *opt = st->opt;
    if (status == ATTN_OK && opt->progress != NULL) {
        /* In query rows: the items before the step whole, then rows
         * [0, row + rows) of each of its items.  B n fits: X was read. */
        const size_t n = st->report->layout.dims.n;
        const size_t done = s->first * n + s->count * (s->row + s->rows);
        if (!opt->progress(done, st->report->layout.dims.batch * n, opt->progress_context))
            status = attn_fail(err, ATTN_EIO, "%s: stopped: progress could not be reported",
                               opt->in_place ? opt->input : opt->output);
    }
    return status;
}

/* The I/O done beside the compute of one step (see run_steps). */
typedef struct beside {
    run_state *st;
    const step *write;          /* the previous step, or NULL          */
    const step *read;           /* the next step when it starts a slice */
    int status;
    attn_error err;
} beside;

static void beside_io(void *context)
{
    beside *job = context;
    if (job->write != NULL)
        job->status = write_step(job->st, job->write, &job->err);
    if (job->write != NULL && job->status == ATTN_OK)
        attn_h5out_start_writeback(job->st->out);
    if (job->status == ATTN_OK && job->read != NULL)
        job->status = read_slice(job->st, job->read->slice, job->read->first, job->read->count,
                                 &job->err);
}

/*
 * A step computed a NaN or an infinity from finite inputs: values beyond
 * the precision's range.  Refused, naming where and what to do.
 */
static int overflow_failure(const run_state *st, const step *s, attn_error *err)
{
    const int where = s->slice->overflow;
    const char *stage = where & ATTN_OVERFLOW_PROJECTIONS ? "the q, k and v projections"
                      : where & ATTN_OVERFLOW_SCORES ? "the attention scores"
                      : "the output projection";
    if (st->opt->precision == ATTN_F64)
        return attn_fail(err, ATTN_EINPUT,
                         "%s: %s of batch items %zu..%zu overflow float64 (finite inputs give "
                         "infinite or NaN values): the inputs are too large", st->opt->input,
                         stage, s->first, s->first + s->count - 1);
    return attn_fail_hint(err, ATTN_EINPUT, ATTN_HINT_PRECISION,
                          "%s: %s of batch items %zu..%zu overflow float32 (finite inputs give "
                          "infinite or NaN values)", st->opt->input, stage, s->first,
                          s->first + s->count - 1);
}

/* The rows written reported (opt->progress): with a shared file, after
 * each step's agreement, rank 0 reporting every rank's rows. */
static int report_rows(const run_state *st, size_t done, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    const size_t total = st->report->layout.dims.batch * st->report->layout.dims.n;
    if (opt->progress == NULL || opt->progress(done, total, opt->progress_context))
        return ATTN_OK;
    return attn_fail(err, ATTN_EIO, "%s: stopped: progress could not be reported",
                     opt->in_place ? opt->input : opt->output);
}

/*
 * The pipeline.  Step t computes one block of query rows of one slice on
 * every thread; meanwhile thread 0, this thread, writes step t-1 and
 * reads the slice of step t+1 when that starts one (attn_beside), then
 * joins the compute.  So every HDF5 call stays on this thread, and there
 * are never more busy threads than --threads.  Two slots of slice buffers
 * and two sets of maps, packed chunks and chunk lists (by step parity)
 * keep the stages apart.
 *
 * With a shared file every rank runs as many steps as the rank with the
 * most (steps of nothing past its own), because the writes are
 * collective, and after each step the ranks agree on how it went: one
 * rank's failure, or a cancel, stops them all at the same step.
 */
int run_steps(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    const bool shared = attn_ranks_shared_file();
    const size_t steps = st->step_rounds;
    if (steps == 0)
        return ATTN_OK;
    step previous = {0}, current = step_at(st, 0);
    size_t written = 0;                /* this rank's rows written */
    int pending = ATTN_OK;             /* progress failed: told at the next agreement */
    attn_error pending_err;
    int status = current.none ? ATTN_OK
                              : read_slice(st, current.slice, current.first, current.count, err);
    if ((status = attn_ranks_agree(status, err)) != ATTN_OK)
        return status;
    for (size_t t = 0; t < steps; t++) {
        if (!shared && opt->cancel != NULL && *opt->cancel)
            return interrupted(st, err);
        step next = t + 1 < steps ? step_at(st, t + 1) : (step){.none = true};
        beside job = {
            .st = st, .write = t > 0 ? &previous : NULL,
            .read = !next.none && next.starts ? &next : NULL,
        };
        attn_beside(beside_io, &job);
        compute_step(st, &current);
        attn_beside_finish();
        status = job.status;
        if (status != ATTN_OK)
            *err = job.err;
        else if (!current.none && current.slice->overflow != 0)
            status = overflow_failure(st, &current, err);
        else if (shared && opt->cancel != NULL && *opt->cancel)
            status = interrupted(st, err);
        if (shared) {
            if (status == ATTN_OK && pending != ATTN_OK) {
                status = pending;
                *err = pending_err;
            }
            if (t > 0 && !previous.none)
                written += previous.count * previous.rows;
            size_t done = written;
            if ((status = attn_ranks_agree_sum(status, &done, err)) == ATTN_OK && t > 0)
                pending = report_rows(st, done, &pending_err);
        }
        if (status != ATTN_OK)
            return status;
        previous = current;
        current = next;
    }
    if (opt->cancel != NULL && *opt->cancel && !shared)
        return interrupted(st, err);
    status = write_step(st, &previous, err);
    if (shared) {
        if (status == ATTN_OK && pending != ATTN_OK) {
            status = pending;
            *err = pending_err;
        }
        if (!previous.none)
            written += previous.count * previous.rows;
        size_t done = written;
        if ((status = attn_ranks_agree_sum(status, &done, err)) == ATTN_OK)
            status = report_rows(st, done, err);
    }
    return status;
}
