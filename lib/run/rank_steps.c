/*
 * rank_steps.c - this rank's share of the run's steps (attn_ranks.h): the
 * work divided among the ranks of an MPI job by its cost, in contiguous
 * ranges, so that they finish together; with one rank, every step.
 *
 * Legend: see run_state.h.
 */
#include "run/run_state.h"

#include "attn_ranks.h"

#include <stdlib.h>

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

/* Steps each rank cuts its share of the rows into at the least, when the
 * ranks split items' rows. */
#define STEPS_PER_RANK 4

/*
 * One rank's units [from, to) of tile rows (tiles per slice, `unit` rows
 * each) cut into steps, into own (when not NULL); returns the number of
 * steps.  A step never crosses a slice nor exceeds st->sizes.rows rows
 * (forced cuts).  With a profile (`marks` cumulative shares of the work,
 * increasing to 1), step j also ends at the unit boundary nearest to
 * profile[j] of this rank's work: the ranks' rounds are collective, so
 * round j should cost the same on every rank.  Without one (marks 0),
 * only the forced cuts, and *shares (when not NULL) gets the cumulative
 * share of the work at the end of each step.
 */
static size_t cut_steps(const run_state *st, const double *cost, size_t from, size_t to,
                        size_t tiles, size_t unit, const double *profile, size_t marks,
                        double *shares, run_step *own)
{
    const size_t n = st->report->layout.dims.n;
    double total = 0, done = 0;
    for (size_t u = from; u < to; u++)
        total += cost[u];
    size_t count = 0, mark = 0;
    run_step current = {0};
    for (size_t u = from; u < to; u++) {
        const size_t slice = u / tiles, row = u % tiles * unit;
        const size_t rows = n - row < unit ? n - row : unit;
        /* the profile's next mark passed: end the step at the nearer
         * boundary, before this unit or after it */
        bool ends = false;
        while (mark < marks && done + cost[u] / 2 > profile[mark] * total) {
            ends = true;
            mark++;
        }
        const bool joins = current.rows != 0 && current.slice == slice &&
                           current.rows + rows <= st->sizes.rows && !ends;
        if (!joins) {
            if (current.rows != 0) {
                if (own != NULL)
                    own[count - 1] = current;
                if (shares != NULL)
                    shares[count - 1] = total > 0 ? done / total : 1;
            }
            current = (run_step){slice, row, 0};
            count++;
        }
        current.rows += rows;
        done += cost[u];
    }
    if (current.rows != 0) {
        if (own != NULL)
            own[count - 1] = current;
        if (shares != NULL)
            shares[count - 1] = 1;
    }
    return count;
}

/*
 * The profile every rank cuts its share by (profile, *marks): that of
 * the rank whose share the forced cuts (slices, st->sizes.rows) divide
 * most, or STEPS_PER_RANK equal shares when none has as many.  NULL when
 * out of memory.
 */
static double *step_profile(const run_state *st, const double *cost, const size_t *starts,
                            size_t ranks, size_t tiles, size_t unit, size_t *marks,
                            attn_error *err)
{
    size_t most = STEPS_PER_RANK, widest = ranks;
    for (size_t r = 0; r < ranks; r++) {
        const size_t count = cut_steps(st, cost, starts[r], starts[r + 1], tiles, unit, NULL, 0,
                                       NULL, NULL);
        if (count > most) {
            most = count;
            widest = r;
        }
    }
    double *profile = run_alloc(st, most, sizeof *profile, "the division of the work", err);
    if (profile == NULL)
        return NULL;
    if (widest == ranks)
        for (size_t j = 0; j < most; j++)
            profile[j] = (double)(j + 1) / (double)most;
    else
        cut_steps(st, cost, starts[widest], starts[widest + 1], tiles, unit, NULL, 0, profile,
                  NULL);
    *marks = most;
    return profile;
}

/*
 * Whether the ranks that share the rows of the one slice project only the
 * keys of their own rows and exchange them (st->key_bounds): with every
 * rank holding rows, each share starting on a projection block, and the
 * keys made with the queries (self-attention, whole keys: not sliding),
 * finite inputs (a NaN in another rank's v is its overflow, and stops
 * every rank).  Then each rank's first step is the first round.
 */
static bool ranks_share_keys(const run_state *st, const size_t *starts, size_t ranks,
                             size_t slices, size_t unit)
{
    if (slices != 1 || st->report->layout.cross || run_sliding(st) || st->opt->allow_nonfinite ||
        unit % attn_project_block_rows() != 0)
        return false;
    for (size_t r = 0; r < ranks; r++)
        if (starts[r + 1] == starts[r])
            return false;
    return true;
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
int run_share_steps(run_state *st, attn_error *err)
{
    const size_t ranks = attn_rank_count(), rank = attn_rank();
    const attn_layout *layout = &st->report->layout;
    const size_t items = st->report->slice_items, batch = layout->dims.batch;
    const size_t n = layout->dims.n;
    const size_t slices = items == 0 ? 0 : (batch + items - 1) / items, blocks = run_slice_blocks(st);
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
    double *profile = NULL;
    size_t marks = 0;
    if (status == ATTN_OK && !whole &&
        (profile = step_profile(st, cost, starts, ranks, tiles, unit, &marks, err)) == NULL)
        status = ATTN_ENOMEM;
    st->step_rounds = 0;
    for (size_t r = 0; r < ranks && status == ATTN_OK; r++) {
        const size_t count = whole ? (starts[r + 1] - starts[r]) * blocks
                                   : cut_steps(st, cost, starts[r], starts[r + 1], tiles, unit,
                                               profile, marks, NULL, NULL);
        st->step_rounds = count > st->step_rounds ? count : st->step_rounds;
        if (r != rank)
            continue;
        st->step_first = whole ? starts[r] * blocks : 0;
        st->step_count = count;
        if (!whole && count > 0 &&
            (st->own_steps = run_alloc(st, count, sizeof *st->own_steps, "the steps", err)) == NULL)
            status = ATTN_ENOMEM;
        else if (!whole)
            cut_steps(st, cost, starts[r], starts[r + 1], tiles, unit, profile, marks, NULL,
                      st->own_steps);
    }
    free(profile);
    if (status == ATTN_OK && !whole && ranks_share_keys(st, starts, ranks, slices, unit)) {
        if ((st->key_bounds = run_alloc(st, ranks + 1, sizeof *st->key_bounds,
                                        "the division of the work", err)) == NULL)
            status = ATTN_ENOMEM;
        for (size_t r = 0; status == ATTN_OK && r <= ranks; r++)
            st->key_bounds[r] = starts[r] * unit < n ? starts[r] * unit : n;
    }
    free(cost);
    free(starts);
    return status;
}

