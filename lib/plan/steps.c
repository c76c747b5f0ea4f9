/*
 * steps.c - the work cut into steps that fit the memory cap: the buffers
 * of one batch item, the items (or query rows) of a step, and what the
 * whole computation costs (attn_plan.h).
 *
 * Legend: B batch, H heads, n queries, m keys, D d_model, d_k, d_v.
 */
#include "attn_plan.h"

#include "plan/plan.h"

#include <limits.h>
#include <string.h>

double attn_plan_flops(const attn_dims *d)
{
    double n = (double)d->n, m = (double)d->m, D = (double)d->d_model, H = (double)d->heads;
    double G = (double)attn_kv_heads(d), dk = (double)d->d_k, dv = (double)d->d_v;
    double projections = 2 * n * D * H * dk + 2 * m * D * G * (dk + dv);
    double attention = 2 * H * n * m * dk + 2 * H * n * m * dv;
    double output = 2 * n * H * dv * D;
    return (double)d->batch * (projections + attention + output);
}

/* *total += a * b, all checked. */
static bool add_product(size_t *total, size_t a, size_t b)
{
    size_t p;
    return attn_size_mul(&p, a, b) && attn_size_add(total, *total, p);
}

/* Bytes of the packed room of chunks holding `bytes`, in `chunks` chunks:
 * with compression, the compressor's worst case. */
static bool packed_bytes(size_t *out, size_t bytes, size_t chunks, bool compress)
{
    if (compress)
        return attn_deflate_bound(out, bytes, chunks);
    *out = bytes;
    return true;
}

/* Elements per item of output `which` padded to whole chunks `chunk` (the
 * axes after the batch axis), its query axis `rows` long when rows is not
 * 0, and the chunks that holds (rounded up). */
static bool padded_per_item(const attn_layout *layout, attn_output which, const size_t chunk[4],
                            size_t rows, size_t *elems, size_t *chunks)
{
    size_t dims[4], room = 1, cells = 1;
    const char *labels[4];
    const size_t rank = attn_output_shape(layout, which, dims, labels);
    const size_t first = layout->batched ? 1 : 0, query = attn_output_query_axis(layout, which);
    for (size_t i = first; i < rank; i++) {
        size_t extent = dims[i];
        if (rows != 0 && i == query)
            extent = rows;
        size_t whole = (extent + chunk[i] - 1) / chunk[i];
        if (!attn_size_mul(&room, room, whole * chunk[i]) || !attn_size_mul(&cells, cells, whole))
            return false;
    }
    *elems = room;
    *chunks = cells;
    return true;
}

/* sizes->staging and staging_per_row: the packed room of the outputs, those
 * written by rows in chunks of at most `least` rows (the smallest their
 * chunks get, attn_output_chunk_rows: the most room per row). */
static bool plan_staging(const attn_layout *layout, const attn_step_request *req, size_t least,
                         attn_slice_sizes *sizes)
{
    const attn_store maps = attn_store_for(req->store, req->precision);
    size_t elems, chunks, bytes, chunk[4];
    sizes->staging = sizes->staging_per_row = 0;
    for (int i = 0; i < ATTN_OUT_COUNT; i++) {
        if (!((req->save >> i) & 1u))
            continue;
        const size_t elem = attn_store_size(attn_output_type((attn_output)i, maps, req->precision));
        attn_output_chunk_rows(layout, (attn_output)i, elem, 1, least, chunk);
        if (!attn_output_by_rows((attn_output)i)) {
            if (!padded_per_item(layout, (attn_output)i, chunk, 0, &elems, &chunks) ||
                !attn_size_mul(&bytes, elems, elem) ||
                !packed_bytes(&bytes, bytes, chunks, req->compress) ||
                !attn_size_add(&sizes->staging, sizes->staging, bytes))
                return false;
            continue;
        }
        /* Per row: one row of chunks, divided by the chunk's rows. */
        const size_t chunk_rows = chunk[attn_output_query_axis(layout, (attn_output)i)];
        if (!padded_per_item(layout, (attn_output)i, chunk, chunk_rows, &elems, &chunks) ||
            !attn_size_mul(&bytes, elems, elem) ||
            !packed_bytes(&bytes, bytes, chunks, req->compress) ||
            !attn_size_add(&sizes->staging_per_row, sizes->staging_per_row,
                           (bytes + chunk_rows - 1) / chunk_rows))
            return false;
    }
    return true;
}

/* Query rows of one chunk of a map (B, H, n, m): see attn_output_chunk. */
static size_t map_chunk_rows(const attn_layout *layout, size_t elem)
{
    size_t chunk[4];
    attn_output_chunk(layout, ATTN_OUT_WEIGHTS, elem, 1, chunk);
    return chunk[layout->batched ? 2 : 1];
}

size_t attn_plan_map_count(unsigned save)
{
    size_t made = 0;              /* maps made from the weights, saved */
    for (int map = 0; map < ATTN_WEIGHT_MAP_COUNT; map++)
        made += (save >> attn_weight_map_output((attn_weight_map)map)) & 1u;
    const size_t beside = made - (attn_plan_map_in_weights_place(save) >= 0 ? 1 : 0);
    if ((save >> ATTN_OUT_SCORES) & 1u)
        return 2 + beside;
    const bool weights = ((save >> ATTN_OUT_WEIGHTS) & 1u) || ((save >> ATTN_OUT_MEAN) & 1u);
    return (weights || made > 0 ? 1 : 0) + beside;
}

/* The buffers of one item (sizes) and their bytes: kept whole, by slot,
 * by query row; false on overflow.  With `sliding` (blocks of rows under
 * req->slide_window): no X and no k and v of the whole item, but per
 * block X's rows (one per step parity) and the keys held, which grow with
 * the block's rows beyond a fixed reach. */
static bool size_item(const attn_layout *layout, const attn_step_request *req,
                      attn_slice_sizes *sizes, bool sliding)
{
    const attn_dims *d = &layout->dims;
    const size_t elem = attn_precision_size(req->precision);
    size_t hk, gk, gv, hv, hn, bytes, row_elems, padded_n, slot = 0, twice = 0;
    const size_t G = attn_kv_heads(d);
    const size_t bias_heads = layout->bias_rank != 4 ? 0 : layout->bias_heads_shared ? 1 : d->heads;
    const unsigned save = req->save;
    const size_t result_per_row = (save >> ATTN_OUT_RESULT) & 1u ? d->heads * d->d_model : 0;
    const size_t reach = sliding ? attn_sliding_keys_most(req->slide_window, 0) : 0;
    size_t slide_per_row = 0;    /* sliding: q|k|v and X's rows of both parities */
    memset(sizes, 0, sizeof *sizes);
    sizes->map_count = attn_plan_map_count(save);
    sizes->mean = (save >> ATTN_OUT_MEAN) & 1u ? d->m : 0;
    sizes->least_rows = map_chunk_rows(layout, elem);
    bool ok = attn_size_mul(&hk, d->heads, d->d_k) && attn_size_mul(&hv, d->heads, d->d_v) &&
              attn_size_mul(&gk, G, d->d_k) && attn_size_mul(&gv, G, d->d_v) &&
              attn_size_mul(&sizes->x, d->n, d->d_model) &&
              attn_size_mul(&sizes->y, layout->cross ? d->m : 0, d->d_model) &&
              attn_size_mul(&sizes->q, d->n, hk) && attn_size_mul(&sizes->k, d->m, gk) &&
              attn_size_mul(&sizes->v, d->m, gv) &&
              attn_size_product(&sizes->bias, (size_t[]){bias_heads, d->n, d->m}, 3) &&
              attn_size_add(&sizes->projections, sizes->q, sizes->k) &&
              attn_size_add(&sizes->projections, sizes->projections, sizes->v) &&
              attn_size_product(&sizes->maps, (size_t[]){d->heads, d->n, d->m}, 3) &&
              attn_size_mul(&sizes->heads, d->n, hv) && attn_size_mul(&sizes->concat, d->n, hv) &&
              attn_size_mul(&sizes->output, d->n, d->d_model) &&
              attn_size_product(&sizes->result, (size_t[]){d->n, result_per_row}, 2) &&
              attn_size_mul(&hn, d->heads, d->n) &&
              plan_staging(layout, req, sizes->least_rows, sizes);
    /* Per query row: the maps kept, the mean, q, heads, output, result
     * and the bias's row, in the precision; then the packed room. */
    ok = ok && attn_size_mul(&row_elems, d->heads, d->m) &&
         attn_size_mul(&row_elems, row_elems, sizes->map_count) &&
         attn_size_add(&row_elems, row_elems, sizes->mean) &&
         attn_size_add(&row_elems, row_elems, hk) && attn_size_add(&row_elems, row_elems, hv) &&
         attn_size_add(&row_elems, row_elems, d->d_model) &&
         attn_size_add(&row_elems, row_elems, result_per_row) &&
         add_product(&twice, bias_heads, d->m) &&
         attn_size_add(&row_elems, row_elems, twice) &&
         (!sliding || (attn_size_add(&slide_per_row, gk, gv) &&
                       attn_size_add(&slide_per_row, slide_per_row, hk) &&
                       add_product(&slide_per_row, 2, d->d_model) &&
                       attn_size_add(&row_elems, row_elems, slide_per_row))) &&
         attn_size_mul(&sizes->bytes_per_row, row_elems, elem) &&
         attn_size_add(&sizes->bytes_per_row, sizes->bytes_per_row, sizes->staging_per_row) &&
         attn_size_mul(&twice, twice, elem) &&
         attn_size_add(&sizes->bytes_twice_per_row, twice, sizes->staging_per_row);
    /* each per-query summary saved: (H, n) in the precision, or int32 */
    for (int i = 0; ok && i < ATTN_OUT_COUNT; i++) {
        const attn_output_spec *spec = attn_output_spec_of((attn_output)i);
        if (spec->source == ATTN_FROM_SUMMARY && ((save >> i) & 1u))
            ok = attn_size_mul(&sizes->summary[spec->summary], hn,
                               attn_summary_is_integer(spec->summary) ? sizeof(int32_t) : elem);
    }
    sizes->keep = d->m;
    sizes->positions = (layout->positions_shared ? 0 : d->n) + (layout->kv_positions_shared ? 0 : d->m);
    /* Each slot's inputs; then what is kept for whole items. */
    ok = ok && add_product(&slot, sliding ? 0 : sizes->x, elem) &&
         add_product(&slot, sizes->y, elem) && attn_size_add(&slot, slot, sizes->keep) &&
         add_product(&slot, sizes->positions, sizeof(int64_t));
    sizes->bytes_per_slot = slot;
    bytes = slot;
    if (sliding)
        ok = ok && add_product(&twice, reach, slide_per_row) && add_product(&bytes, twice, elem);
    else
        ok = ok && add_product(&bytes, sizes->k, elem) && add_product(&bytes, sizes->v, elem);
    ok = ok && attn_size_add(&bytes, bytes, sizes->staging);
    for (int i = 0; ok && i < ATTN_SUMMARY_COUNT; i++)
        ok = attn_size_add(&bytes, bytes, sizes->summary[i]);
    /* each per-key summary needed: (H, m) in the precision */
    for (int i = 0; ok && i < ATTN_KEY_SUMMARY_COUNT; i++) {
        ok = attn_size_mul(&sizes->key_summary[i],
                           attn_plan_needs_key_summary(save, (attn_key_summary)i) ? d->heads : 0,
                           d->m) &&
             add_product(&bytes, sizes->key_summary[i], elem);
    }
    sizes->bytes_per_base = bytes;
    padded_n = (d->n + sizes->least_rows - 1) / sizes->least_rows * sizes->least_rows;
    ok = ok && add_product(&bytes, sizes->bytes_per_row, padded_n);
    sizes->bytes_per_item = bytes;
    sizes->bytes_fixed = req->fixed;
    return ok;
}

/* Rows of a step of sizes->rows rows as the buffers count them: whole
 * items rounded up to whole tiles (the maps' chunks). */
static size_t counted_rows(const attn_layout *layout, const attn_slice_sizes *sizes, size_t rows)
{
    const size_t tile = sizes->least_rows != 0 ? sizes->least_rows : 1;
    return rows < layout->dims.n ? rows : (layout->dims.n + tile - 1) / tile * tile;
}

/* One step of `items` items of `rows` rows: slots (1 or 2) of inputs,
 * copies (1 or 2) of what the next step holds as well, and `fixed`. */
static size_t step_total(const attn_layout *layout, const attn_slice_sizes *sizes, size_t items,
                         size_t rows, size_t slots, size_t copies, size_t fixed)
{
    size_t per_item = sizes->bytes_per_base, per_row = sizes->bytes_per_row, total = fixed;
    const size_t n = counted_rows(layout, sizes, rows);
    bool ok = add_product(&per_item, slots - 1, sizes->bytes_per_slot) &&
              add_product(&per_item, copies - 1, sizes->staging) &&
              add_product(&per_row, copies - 1, sizes->bytes_twice_per_row) &&
              add_product(&per_item, per_row, n) && add_product(&total, items, per_item);
    return ok ? total : SIZE_MAX;
}

size_t attn_plan_held_bytes(const attn_layout *layout, const attn_slice_sizes *sizes,
                            size_t items)
{
    return step_total(layout, sizes, items, sizes->rows, items < layout->dims.batch ? 2 : 1, 2,
                      sizes->bytes_fixed);
}

size_t attn_plan_step_bytes(const attn_layout *layout, const attn_slice_sizes *sizes,
                            size_t items)
{
    return step_total(layout, sizes, items, sizes->rows, 1, 1, 0);
}

/* The largest step in budget_bytes (or req->forced items). */
static int fit_step(const attn_layout *layout, const attn_step_request *req, size_t budget_bytes,
                    attn_slice_sizes *sizes, size_t *items, attn_error *err)
{
    const attn_dims *d = &layout->dims;
    const size_t forced = req->forced;
    attn_slice_sizes by_rows;    /* one item in blocks of rows */
    bool ok = size_item(layout, req, sizes, false);
    const size_t least = ok && sizes->least_rows < d->n ? sizes->least_rows : d->n;
    const bool sliding = ok && req->slide_window != 0 && least < d->n;
    by_rows = *sizes;
    if (!ok || (sliding && !size_item(layout, req, &by_rows, true)))
        return attn_fail(err, ATTN_EINPUT,
                         "one batch item (n = %zu, m = %zu, d_model = %zu, H = %zu, d_k = %zu, d_v = %zu) is too large to address",
                         d->n, d->m, d->d_model, d->heads, d->d_k, d->d_v);
    const size_t one_slot = d->batch > 1 ? 2 : 1;
    by_rows.rows = least;
    sizes->least_bytes = by_rows.least_bytes =
        step_total(layout, &by_rows, 1, least, one_slot, 2, by_rows.bytes_fixed);
    sizes->rows = d->n;
    size_t fit;
    if (forced != 0) {
        fit = forced;
    } else if (step_total(layout, sizes, d->batch, d->n, 1, 2, req->fixed) <= budget_bytes) {
        fit = d->batch;
    } else {
        /* Items of more than one slice: both slots' inputs. */
        const size_t per_item = step_total(layout, sizes, 1, d->n, 2, 2, 0);
        fit = budget_bytes > req->fixed && per_item != SIZE_MAX ? (budget_bytes - req->fixed) / per_item : 0;
    }
    if (fit == 0) {
        fit = 1;
        /* Not even one item: its query rows in blocks that fit. */
        *sizes = by_rows;
        const size_t base = step_total(layout, sizes, 1, 0, one_slot, 2, req->fixed);
        const size_t per_row = sizes->bytes_per_row + sizes->bytes_twice_per_row;
        size_t rows = budget_bytes > base && base != SIZE_MAX ? (budget_bytes - base) / per_row : 0;
        rows = rows > least ? plan_floor_pow2(rows) : least;
        sizes->rows = rows < d->n ? rows : d->n;
    }
    sizes->slide_keys = sliding && sizes->rows < d->n
                            ? attn_sliding_keys_most(req->slide_window, sizes->rows) : 0;
    /* A power of two, like the batch extent of the chunks (attn_chunk_shape),
     * so that every slice writes whole chunks. */
    if (forced == 0 && fit < d->batch)
        fit = plan_floor_pow2(fit);
    /* The projections treat a slice as one (items * rows) matrix for CBLAS. */
    size_t rows = d->n > d->m ? d->n : d->m;
    if (fit > (size_t)INT_MAX / rows)
        fit = plan_floor_pow2((size_t)INT_MAX / rows);
    *items = fit < d->batch ? fit : d->batch;
    return ATTN_OK;
}

int attn_plan_slice(const attn_layout *layout, attn_precision precision, unsigned save,
                    size_t budget_bytes, size_t forced, attn_slice_sizes *sizes, size_t *items,
                    attn_error *err)
{
    const attn_step_request req = {
        .precision = precision, .save = save, .memory = budget_bytes, .forced = forced,
        .threads = 1, .task_rows = 128,
    };
    return fit_step(layout, &req, budget_bytes, sizes, items, err);
}

size_t attn_plan_step_blocks(const attn_layout *layout, const attn_slice_sizes *sizes,
                             size_t items, size_t task_rows)
{
    const size_t per = task_rows != 0 ? task_rows : 1;
    return items * layout->dims.heads * ((sizes->rows + per - 1) / per);
}

int attn_plan_steps(const attn_layout *layout, const attn_step_request *req,
                    attn_slice_sizes *sizes, size_t *items, attn_error *err)
{
    const size_t threads = req->threads != 0 ? req->threads : 1;
    /* The steps' own buffers grow from ATTN_STEP_BYTES; what every step
     * holds (the threads' scratch) comes on top, all of it under the cap. */
    size_t step = ATTN_STEP_BYTES, budget;
    if (!attn_size_add(&budget, req->fixed, step) || budget > req->memory)
        budget = req->memory;
    int status = fit_step(layout, req, budget, sizes, items, err);
    /* Grow the step until every thread has its blocks and, when ranks
     * share items' rows (fewer slices than ranks), the steps hold whole
     * items; or until the step is the whole batch or the cap is reached. */
    const size_t ranks = req->ranks != 0 ? req->ranks : 1;
    while (status == ATTN_OK && req->forced == 0 && budget < req->memory &&
           (attn_plan_step_blocks(layout, sizes, *items, req->task_rows) <
                ATTN_BLOCKS_PER_THREAD * threads ||
            (sizes->rows < layout->dims.n &&
             (layout->dims.batch + *items - 1) / *items < ranks)) &&
           !(*items == layout->dims.batch && sizes->rows == layout->dims.n)) {
        step = step > SIZE_MAX / 2 ? SIZE_MAX : 2 * step;
        if (!attn_size_add(&budget, req->fixed, step) || budget > req->memory)
            budget = req->memory;
        status = fit_step(layout, req, budget, sizes, items, err);
    }
    return status;
}

size_t attn_plan_default_memory(size_t threads, size_t physical_bytes)
{
    size_t cap = ATTN_MEMORY_PER_THREAD, bound = physical_bytes / ATTN_MEMORY_SHARE;
    if (!attn_size_mul(&cap, cap, threads != 0 ? threads : 1))
        cap = SIZE_MAX;
    if (physical_bytes != 0 && cap > bound)
        cap = bound;
    return cap > ATTN_STEP_BYTES ? cap : ATTN_STEP_BYTES;
}

