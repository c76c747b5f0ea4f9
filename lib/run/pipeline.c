/*
 * pipeline.c - the steps of the run: the slices of the batch read, each
 * step (a block of query rows of one slice) computed, packed in chunks
 * and written, the I/O of one step beside the compute of the next.
 *
 * Legend: see run_state.h.
 */
#include "run/run_state.h"

#include "attn_ranks.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* The step with index t of this rank's steps: past its last, a step of
 * nothing.  Without own_steps the run's steps go slice by slice, block by
 * block, and this rank has [step_first, step_first + step_count) of them;
 * with them, each is listed (rank_steps.c). */
static step step_at(run_state *st, size_t t)
{
    const size_t n = st->report->layout.dims.n, block = st->sizes.rows;
    const size_t blocks = run_slice_blocks(st), batch = st->report->layout.dims.batch;
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
    return attn_output_query_axis(&st->report->layout, which);
}

/* Where output `which` of step s lies in its buffers: the region of
 * the dataset it covers and the strides of its axes (batch, head, row,
 * column, as the dataset has them).  The maps, q, heads, output and
 * result hold the step's block of rows (attn_output_by_rows); k, v and
 * the summaries whole items.  q, k, v and heads sit in packed buffers
 * with a stride per head. */
static attn_block block_of(const run_state *st, const step *s, attn_output which)
{
    const attn_layout *layout = &st->report->layout;
    const attn_dims *d = &layout->dims;
    const attn_slice *slice = s->slice;
    const size_t H = d->heads, n = d->n, m = d->m, D = d->d_model, rows = s->rows;
    const size_t vc = H * d->d_v;
    const attn_output_spec *spec = attn_output_spec_of(which);
    /* q over X holds every row of its items: from the step's first */
    const size_t elem = attn_precision_size(st->opt->precision);
    const char *q_rows = slice->q_over_x ? (const char *)slice->q + s->row * slice->ldq * elem
                                         : slice->q;
    /* item, head and row strides of each source; the column stride is 1 */
    const struct { const void *base; size_t item, head, row; } from[] = {
        [ATTN_FROM_SCORES] = {s->maps[0], H * rows * m, rows * m, m},
        [ATTN_FROM_WEIGHTS] = {s->maps[1], H * rows * m, rows * m, m},
        [ATTN_FROM_CONCAT] = {slice->concat, rows * vc, d->d_v, vc},
        [ATTN_FROM_OUTPUT] = {slice->output, rows * D, 0, D},
        [ATTN_FROM_Q] = {q_rows, (slice->q_over_x ? n : rows) * slice->ldq, slice->hsq, slice->ldq},
        [ATTN_FROM_K] = {slice->k, m * slice->ldk, slice->hsk, slice->ldk},
        [ATTN_FROM_V] = {slice->v, m * slice->ldv, slice->hsv, slice->ldv},
        [ATTN_FROM_SUMMARY] = {slice->summary[spec->summary], H * n, 0, n},
        [ATTN_FROM_MEAN] = {slice->mean, rows * m, 0, m},
        [ATTN_FROM_RESULT] = {slice->result, rows * H * D, H * D, D},
        [ATTN_FROM_WEIGHT_MAP] = {slice->weight_map[spec->index], H * rows * m, rows * m, m},
        [ATTN_FROM_KEY_SUMMARY] = {slice->key_summary[spec->index], H * m, 0, m},
    };
    const attn_stored *stored = &st->stored[which];
    const attn_source source = spec->source;
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
    if (attn_output_by_rows(which)) {
        const size_t q = query_axis(st, which);
        b.first[q] = s->row;
        b.count[q] = s->rows;
    } else if (s->hi - s->lo < d->n && query_axis(st, which) != NO_AXIS) {
        const size_t q = query_axis(st, which);   /* the rows of the slice it has */
        b.base = (const char *)b.base + s->lo * b.stride[q] * (b.integer ? sizeof(int32_t)
                                                             : attn_precision_size(b.precision));
        b.first[q] = s->lo;
        b.count[q] = s->hi - s->lo;
    }
    return b;
}

/* The outputs step s writes: those of its rows (attn_output_by_rows),
 * and at the end of its slice (of its part of the slice) the slice's
 * other outputs -- those along the keys by the rank that has the slice's
 * first block. */
static bool step_writes(const run_state *st, const step *s, attn_output which)
{
    if (s->none || !run_saved(st, which))
        return false;
    return attn_output_by_rows(which) ||
           (s->ends && (s->keys || query_axis(st, which) != NO_AXIS));
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
    for (size_t t = 0; t < st->step_count && (st->own_steps != NULL || t < run_slice_blocks(st)); t++) {
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
int run_allocate_staging(run_state *st, attn_error *err)
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

/* Reads the rows of step s of an attention bias (B, H, n, m) into the
 * bias of its parity. */
static int read_bias_rows(run_state *st, const step *s, attn_error *err)
{
    if (s->none || st->report->layout.bias_rank != 4)
        return ATTN_OK;
    return run_read_block(st, ATTN_IN_ATTN_BIAS, s->first, s->count, 2, s->row, s->rows,
                          st->bias[s->parity], err);
}

/* The first row of X step s projects with sliding keys: its own first,
 * or at the start of its slice (of this rank's part) the first key its
 * rows see, whose k and v no step has made yet. */
static size_t sliding_from(const run_state *st, const step *s)
{
    return s->starts ? attn_sliding_keys_from(&st->cfg, s->row) : s->row;
}

/* Reads the rows of X step s projects with sliding keys into the X rows
 * of its parity. */
static int read_x_rows(run_state *st, const step *s, attn_error *err)
{
    if (s->none || !run_sliding(st))
        return ATTN_OK;
    const size_t from = sliding_from(st, s), rows = s->row + s->rows - from;
    if (!st->report->layout.batched)                  /* a rank-2 X: its rows */
        return run_read_rows(st, ATTN_IN_X, from, rows, st->x_rows[s->parity], err);
    return run_read_block(st, ATTN_IN_X, s->first, s->count, 1, from, rows,
                          st->x_rows[s->parity], err);
}

/* Reads what the items of step s's slice have of their own when s starts
 * it: X (with sliding keys, the rows each step projects, every step), the
 * keys/values, the mask and positions; and the step's rows of an attention
 * bias (B, H, n, m), every step.  The rank with the slice's first rows
 * counts its items whose mask keeps no key (for the warnings). */
static int read_slice(run_state *st, const step *s, attn_error *err)
{
    int status = read_x_rows(st, s, err);
    if (status != ATTN_OK || !s->starts)
        return status == ATTN_OK ? read_bias_rows(st, s, err) : status;
    const attn_layout *layout = &st->report->layout;
    const attn_dims *d = &layout->dims;
    attn_slice *slice = s->slice;
    const size_t first = s->first, c = s->count;
    const size_t x_first = layout->batched ? first : 0;   /* a rank-2 X is one item */
    const struct { attn_input which; bool own; size_t first, rows; const void *buf; } inputs[] = {
        {ATTN_IN_X, !run_sliding(st), x_first, layout->batched ? c : d->n, slice->x},
        {ATTN_IN_KV, !layout->kv_shared, x_first, layout->batched ? c : d->m, slice->y},
        {ATTN_IN_MASK, !layout->mask_shared, first, c, slice->keep},
        {ATTN_IN_POSITIONS, !layout->positions_shared, first, c, slice->positions},
        {ATTN_IN_KV_POSITIONS, !layout->kv_positions_shared, first, c, slice->kv_positions},
    };
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0] && status == ATTN_OK; i++)
        if (st->info[inputs[i].which].present && inputs[i].own)
            status = run_read_rows(st, inputs[i].which, inputs[i].first, inputs[i].rows,
                                   (void *)inputs[i].buf, err);
    if (status == ATTN_OK && st->opt->warn != NULL && s->keys && st->info[ATTN_IN_MASK].present &&
        !layout->mask_shared) {
        st->hidden_items += run_items_without_keys(slice->keep, c, d->m);
        st->blind_rows += run_rows_without_keys(st, slice->keep, c);
    }
    return status == ATTN_OK ? read_bias_rows(st, s, err) : status;
}

static int interrupted(const run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    return attn_fail(err, ATTN_EINTR, "%s: interrupted; no output was written",
                     opt->in_place ? opt->input : opt->output);
}

/*
 * The first step of ranks that share the rows of the one slice
 * (st->key_bounds): this rank projects the q, k and v of its own rows,
 * then the ranks exchange the k and v (of each head, when the heads
 * interleave q, k and v), so that no rank projects every key.
 */
static void share_keys(run_state *st, attn_slice *slice)
{
    const attn_dims *d = &st->report->layout.dims;
    const size_t rank = attn_rank(), elem = attn_precision_size(st->opt->precision);
    const size_t G = attn_kv_heads(d), kc = G * d->d_k, vc = G * d->d_v;
    slice->keys_first = st->key_bounds[rank];
    slice->keys_end = st->key_bounds[rank + 1];
    attn_project_rows(&st->cfg, &st->weights, slice, true);
    slice->keys_first = slice->keys_end = 0;
    /* k and v side by side in each row, or per head k|v between the q's */
    const bool kv_side = (char *)slice->v == (char *)slice->k + kc * elem;
    const size_t groups = kv_side ? 1 : G, width = kv_side ? kc + vc : 2 * d->d_k;
    attn_ranks_gather_rows(slice->k, slice->count, d->m, groups, width, slice->hsk,
                           slice->ldk, elem, st->key_bounds);
}

/* The compute of one step, then its outputs packed in chunks (parity:
 * the step's index mod 2). */
static void compute_step(run_state *st, const step *s)
{
    const int parity = s->parity;
    if (s->none)
        return;
    const attn_layout *layout = &st->report->layout;
    attn_slice *slice = s->slice;
    slice->count = s->count;
    slice->first_item = s->first;         /* the projections' blocks: the batch's */
    slice->scores = s->maps[0];
    slice->weights = s->maps[1];
    slice->block_first = s->row;          /* q, heads, output, result: its rows */
    slice->block_rows = s->rows;
    if (layout->bias_rank == 4) {         /* (c, H, rows, m), read for the step */
        const size_t bias_heads = layout->bias_heads_shared ? 1 : layout->dims.heads;
        slice->bias = st->bias[parity];
        slice->bias_first = s->row;
        slice->bias_item_stride = bias_heads * s->rows * layout->dims.m;
        slice->bias_head_stride = layout->bias_heads_shared ? 0 : s->rows * layout->dims.m;
    }
    if (run_sliding(st)) {                /* X's rows of the step: its parity's */
        slice->x = slice->y = st->x_rows[parity];
        if (s->starts)
            slice->kv_rows = 0;
        attn_project_sliding(&st->cfg, &st->weights, slice, sliding_from(st, s));
    } else if (s->starts && st->key_bounds != NULL) {
        share_keys(st, slice);
    } else {
        attn_project_rows(&st->cfg, &st->weights, slice, s->starts);
    }
    if (s->starts)                        /* of every key of the items */
        attn_key_summaries(&st->cfg, &st->weights, slice);
    attn_attend(&st->cfg, slice, s->row, s->rows);
    if (slice->mean != NULL)
        attn_head_mean(&st->cfg, slice, s->rows);
    attn_weight_maps(&st->cfg, slice, s->rows);    /* after the mean: one may take
                                                      the weights' place */
    attn_project_output(&st->cfg, &st->weights, slice);
    if (slice->result != NULL)
        attn_project_result(&st->cfg, &st->weights, slice);
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
 * the work done. */
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
    if (status == ATTN_OK && st->opt->progress != NULL)
        /* the items before the step whole, then rows [0, row + rows) of
         * each of its items (attn_run_work) */
        status = run_progress_report(st, run_progress_through(st, s->first, s->count,
                                                              s->row + s->rows), err);
    return status;
}

/* The I/O done beside the compute of one step (see run_steps). */
typedef struct beside {
    run_state *st;
    const step *write;          /* the previous step, or NULL          */
    const step *read;           /* the next step when it starts a slice,
                                   or has rows of a 4-D bias to read   */
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
        job->status = read_slice(job->st, job->read, &job->err);
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
    size_t written = 0;                /* this rank's work written (shared file:
                                          reported summed after each agreement) */
    int pending = ATTN_OK;             /* progress failed: told at the next agreement */
    attn_error pending_err;
    int status = current.none ? ATTN_OK : read_slice(st, &current, err);
    if ((status = attn_ranks_agree(status, err)) != ATTN_OK)
        return status;
    run_progress_start(st);
    for (size_t t = 0; t < steps; t++) {
        if (!shared && opt->cancel != NULL && *opt->cancel)
            return interrupted(st, err);
        step next = t + 1 < steps ? step_at(st, t + 1) : (step){.none = true};
        beside job = {
            .st = st, .write = t > 0 ? &previous : NULL,
            .read = !next.none && (next.starts || st->report->layout.bias_rank == 4 ||
                                   run_sliding(st)) ? &next : NULL,
        };
        attn_beside(beside_io, &job);
        if (!current.none)
            run_progress_step(st, current.first, current.count, current.row, current.rows);
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
                written += run_progress_work(st, previous.count, previous.row, previous.rows);
            size_t done = written;
            if ((status = attn_ranks_agree_sum(status, &done, err)) == ATTN_OK && t > 0)
                pending = run_progress_report(st, done, &pending_err);
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
            written += run_progress_work(st, previous.count, previous.row, previous.rows);
        size_t done = written;
        if ((status = attn_ranks_agree_sum(status, &done, err)) == ATTN_OK)
            status = run_progress_report(st, done, err);
    }
    return status;
}
