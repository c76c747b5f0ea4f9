/*
 * attn_pipeline.c - the slices of the batch: read, computed and written,
 * the I/O of one step overlapping the compute of the next.
 *
 * Legend: see attn_run_state.h.
 */
#include "attn_run_state.h"

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

/*
 * Carves one allocation into the buffers of two slices (the pipeline
 * computes one while it writes the other, see run_steps) and two sets of
 * maps (one block of rows each).
 */
int run_allocate_slices(run_state *st, attn_error *err)
{
    const attn_slice_sizes *sizes = &st->sizes;
    const size_t c = st->report->slice_items, elem = attn_precision_size(st->opt->precision);
    const attn_layout *layout = &st->report->layout;
    const attn_dims *d = &layout->dims;
    const size_t map = d->heads * sizes->rows * d->m;      /* one map, one block of rows */
    size_t total;
    if (!run_slice_memory_bytes(st, &total))
        return attn_fail(err, ATTN_ENOMEM, "%s: the slice buffers overflow", st->opt->input);
    st->slice_memory = run_alloc(st, 1, total, "the buffers of two slices (see --memory)", err);
    if (st->slice_memory == NULL)
        return ATTN_ENOMEM;
    char *p = run_align_up(st->slice_memory);
    for (int i = 0; i < 2; i++) {
        attn_slice *slice = &st->slots[i];
        void *projections = NULL, *keep = NULL, *positions = NULL, *bias = NULL;
        void **targets[RUN_SLICE_BUFFERS] = {
            (void **)&slice->x, (void **)&slice->y, &projections, &st->maps[i][0],
            &st->maps[i][1], &slice->concat, &slice->output, &keep, &positions, &bias,
        };
        const size_t bytes[RUN_SLICE_BUFFERS] = {
            sizes->x * elem, sizes->y * elem, sizes->projections * elem,
            (sizes->map_count == 2 ? map : 0) * elem, (sizes->map_count >= 1 ? map : 0) * elem,
            sizes->concat * elem, sizes->output * elem, sizes->keep,
            sizes->positions * sizeof(int64_t), sizes->bias * elem,
        };
        for (size_t j = 0; j < RUN_SLICE_BUFFERS; j++) {
            *targets[j] = p;
            p = run_align_up(p + c * bytes[j]);
        }
        if (sizes->map_count < 2)
            st->maps[i][0] = NULL;
        if (sizes->map_count < 1)
            st->maps[i][1] = NULL;
        place_projections(layout, c, elem, projections, slice);
        place_inputs(st, slice, keep, positions, bias);
    }
    st->slots[0].scratch = st->slots[1].scratch = p;   /* steps run one at a time */
    /* The reordering room is used by the writing thread only: once. */
    st->split = run_alloc(st, c * sizes->reorder, elem, "the output reordering buffer", err);
    return st->split == NULL ? ATTN_ENOMEM : ATTN_OK;
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

/* The slice buffer holding an output; q, k, v and heads reordered
 * head-major, (c, rows, . | ld) -> (c, heads, rows, d). */
static const void *output_buffer(run_state *st, const attn_slice *slice, attn_output which,
                                 size_t c)
{
    const attn_dims *d = &st->report->layout.dims;
    const size_t elem = attn_precision_size(st->opt->precision), G = attn_kv_heads(d);
    const struct { const void *packed; size_t rows, heads, width, ld, hs; } from[] = {
        [ATTN_FROM_CONCAT] = {slice->concat, d->n, d->heads, d->d_v, d->heads * d->d_v, d->d_v},
        [ATTN_FROM_Q] = {slice->q, d->n, d->heads, d->d_k, slice->ldq, slice->hsq},
        [ATTN_FROM_K] = {slice->k, d->m, G, d->d_k, slice->ldk, slice->hsk},
        [ATTN_FROM_V] = {slice->v, d->m, G, d->d_v, slice->ldv, slice->hsv},
    };
    const attn_source source = attn_output_spec_of(which)->source;
    if (source == ATTN_FROM_OUTPUT)
        return slice->output;
    for (size_t b = 0; b < c; b++) {
        const char *packed = (const char *)from[source].packed + b * from[source].rows * from[source].ld * elem;
        char *to = (char *)st->split + b * from[source].rows * from[source].heads * from[source].width * elem;
        if (st->opt->precision == ATTN_F64)
            attn_split_heads_hs_f64((const double *)packed, from[source].ld, from[source].hs,
                                    from[source].rows, from[source].heads, from[source].width,
                                    (double *)to);
        else
            attn_split_heads_hs_f32((const float *)packed, from[source].ld, from[source].hs,
                                    from[source].rows, from[source].heads, from[source].width,
                                    (float *)to);
    }
    return st->split;
}

/* Writes scores and weights of items [first, first + c), query rows
 * [row, row + rows). */
static int write_maps(run_state *st, void *const maps_of[2], size_t first, size_t c, size_t row,
                      size_t rows, attn_error *err)
{
    const attn_layout *layout = &st->report->layout;
    const attn_output maps[2] = {ATTN_OUT_SCORES, ATTN_OUT_WEIGHTS};
    for (int i = 0; i < 2; i++) {
        if (!run_saved(st, maps[i]))
            continue;
        size_t at[4] = {first, 0, row, 0}, count[4] = {c, layout->dims.heads, rows, layout->dims.m};
        const size_t *a = layout->batched ? at : at + 1, *n = layout->batched ? count : count + 1;
        int status = attn_h5out_write_block(st->out, st->handles[maps[i]], a, n, maps_of[i], err);
        if (status != ATTN_OK)
            return status;
    }
    return ATTN_OK;
}

/* Writes every output but the maps for items [first, first + c). */
static int write_slice(run_state *st, const attn_slice *slice, size_t first, size_t c,
                       attn_error *err)
{
    const attn_layout *layout = &st->report->layout;
    for (int i = ATTN_OUT_HEADS; i < ATTN_OUT_COUNT; i++) {
        size_t dims[4];
        const char *labels[4];
        if (!run_saved(st, (attn_output)i))
            continue;
        attn_output_shape(layout, (attn_output)i, dims, labels);
        const void *buf = output_buffer(st, slice, (attn_output)i, c);
        int status = layout->batched ? attn_h5out_write(st->out, st->handles[i], first, c, buf, err)
                                  : attn_h5out_write(st->out, st->handles[i], 0, dims[0], buf, err);
        if (status != ATTN_OK)
            return status;
    }
    return ATTN_OK;
}

static int interrupted(const run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    return attn_fail(err, ATTN_EINTR, "%s: interrupted; no output was written",
                     opt->in_place ? opt->input : opt->output);
}

/* One step of the pipeline: a block of query rows of one slice. */
typedef struct step {
    size_t first, count;         /* batch items [first, first + count)    */
    size_t row, rows;            /* query rows [row, row + rows)          */
    attn_slice *slice;           /* its slot                              */
    void *maps[2];               /* scores, weights: the set of its parity */
    bool starts, ends;           /* first / last block of its slice       */
} step;

/* The step with index t (steps run slice by slice, block by block). */
static step step_at(run_state *st, size_t t)
{
    const size_t n = st->report->layout.dims.n, block = st->sizes.rows;
    const size_t blocks = (n + block - 1) / block, batch = st->report->layout.dims.batch;
    const size_t items = st->report->slice_items, slice = t / blocks, b = t % blocks;
    step s = {
        .first = slice * items, .row = b * block, .starts = b == 0, .ends = b + 1 == blocks,
        .slice = &st->slots[slice % 2],
    };
    s.count = batch - s.first < items ? batch - s.first : items;
    s.rows = n - s.row < block ? n - s.row : block;
    s.maps[0] = st->maps[t % 2][0];
    s.maps[1] = st->maps[t % 2][1];
    return s;
}

/* The compute of one step. */
static void compute_step(run_state *st, const step *s)
{
    s->slice->count = s->count;
    s->slice->scores = s->maps[0];
    s->slice->weights = s->maps[1];
    if (s->starts)
        attn_project_inputs(&st->cfg, &st->weights, s->slice);
    attn_attend(&st->cfg, s->slice, s->row, s->rows);
    if (s->ends)
        attn_project_output(&st->cfg, &st->weights, s->slice);
}

/* Writes what step s computed: its maps, and at the end of its slice the
 * slice's other outputs. */
static int write_step(run_state *st, const step *s, attn_error *err)
{
    int status = write_maps(st, s->maps, s->first, s->count, s->row, s->rows, err);
    if (status == ATTN_OK && s->ends) {
        status = write_slice(st, s->slice, s->first, s->count, err);
        const attn_run_options *opt = st->opt;
        if (status == ATTN_OK && opt->progress != NULL &&
            !opt->progress(s->first + s->count, st->report->layout.dims.batch, opt->progress_context))
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
    return attn_fail(err, ATTN_EINPUT,
                     "%s: %s of batch items %zu..%zu overflow float32 (finite inputs give "
                     "infinite or NaN values); use --precision f64", st->opt->input, stage,
                     s->first, s->first + s->count - 1);
}

/*
 * The pipeline.  Step t computes one block of query rows of one slice on
 * every thread; meanwhile thread 0, this thread, writes step t-1 and
 * reads the slice of step t+1 when that starts one (attn_beside), then
 * joins the compute.  So every HDF5 call stays on this thread, and there
 * are never more busy threads than --threads.  Two slots of slice buffers
 * and two sets of maps (by step parity) keep the stages apart.
 */
int run_steps(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    const size_t n = st->report->layout.dims.n, block = st->sizes.rows;
    const size_t blocks = (n + block - 1) / block, items = st->report->slice_items;
    const size_t steps = (st->report->layout.dims.batch + items - 1) / items * blocks;
    if (steps == 0)
        return ATTN_OK;
    step previous = {0}, current = step_at(st, 0);
    int status = read_slice(st, current.slice, current.first, current.count, err);
    if (status != ATTN_OK)
        return status;
    for (size_t t = 0; t < steps; t++) {
        if (opt->cancel != NULL && *opt->cancel)
            return interrupted(st, err);
        step next = t + 1 < steps ? step_at(st, t + 1) : (step){0};
        beside job = {
            .st = st, .write = t > 0 ? &previous : NULL,
            .read = t + 1 < steps && next.starts ? &next : NULL,
        };
        attn_beside(beside_io, &job);
        compute_step(st, &current);
        attn_beside_finish();
        if (job.status != ATTN_OK) {
            *err = job.err;
            return job.status;
        }
        if (current.slice->overflow != 0)
            return overflow_failure(st, &current, err);
        previous = current;
        current = next;
    }
    if (opt->cancel != NULL && *opt->cancel)
        return interrupted(st, err);
    return write_step(st, &previous, err);
}

