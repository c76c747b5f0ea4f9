/*
 * outfile.c - the output group: room made for this run's names, the
 * datasets created with chunks and axes, and the provenance attributes.
 *
 * Legend: see run_state.h.
 */
#include "run/run_state.h"

#include "attn_ranks.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/*
 * Makes way in the group (--in-place) for what this run adds: its result
 * datasets, then their axis scales (once the results they replace are
 * detached from them), then the provenance attributes.  --force replaces
 * only what attnrun wrote (see attn_h5out_clear_result); anything in the
 * way is refused, and the copy of IN with it.
 */
static int check_targets(run_state *st, attn_error *err)
{
    const bool force = st->opt->force;
    int status = ATTN_OK;
    for (int i = 0; i < ATTN_OUT_COUNT && status == ATTN_OK; i++)
        if (run_saved(st, (attn_output)i))
            status = attn_h5out_clear_result(st->out, attn_output_name((attn_output)i), force, err);
    if (status == ATTN_OK)
        status = run_clear_tokens(st, err);
    for (int i = 0; i < ATTN_OUT_COUNT && status == ATTN_OK; i++) {
        size_t dims[4];
        const char *labels[4];
        if (!run_saved(st, (attn_output)i))
            continue;
        size_t rank = attn_output_shape(&st->report->layout, (attn_output)i, dims, labels);
        for (size_t a = 0; a < rank && status == ATTN_OK; a++)
            status = attn_h5out_clear_axis(st->out, labels[a], dims[a], force, err);
    }
    return status == ATTN_OK ? run_clear_provenance(st, err) : status;
}

/*
 * The time for created_utc: ISO 8601 in UTC for the years 1 to 9999, else
 * (a clock far off) "@" and the seconds since 1970, the form `date -d`
 * reads.
 */
static void utc_stamp(time_t now, char *buf, size_t len)
{
    struct tm utc;
    if (gmtime_r(&now, &utc) != NULL && utc.tm_year >= 1 - 1900 && utc.tm_year <= 9999 - 1900)
        snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                 utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec);
    else
        snprintf(buf, len, "@%lld", (long long)now);
}

static int write_provenance(run_state *st, attn_error *err)
{
    char stamp[64];
    utc_stamp(time(NULL), stamp, sizeof stamp);
    return run_write_provenance(st, stamp, err);
}

int run_plan_stored(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    attn_run_report *report = st->report;
    report->total_bytes = 0;
    for (int i = 0; i < ATTN_OUT_COUNT; i++) {
        const bool map = attn_output_is_map((attn_output)i);
        attn_stored *s = &st->stored[i];
        const char *labels[4];
        *s = (attn_stored){
            .type = attn_output_type((attn_output)i, report->store, opt->precision),
            .compress = opt->compress,
            .map = map, .fill = i == ATTN_OUT_SCORES ? -INFINITY : 0, .raw = true,
            /* A NaN in a row of scores (--allow-nonfinite) makes the whole
             * row of weights NaN, hidden keys too: then every tile is kept. */
            .skip_hidden = map && (i == ATTN_OUT_SCORES || !opt->allow_nonfinite),
        };
        s->rank = attn_output_shape(&report->layout, (attn_output)i, s->dims, labels);
        attn_output_chunk_rows(&report->layout, (attn_output)i, attn_store_size(s->type),
                               report->slice_items, report->slice_rows, s->chunk);
        /* The ranks of a shared file write every tile: HDF5 allocates
         * them all when they open it. */
        const bool hidden_left_out = s->skip_hidden && !attn_ranks_shared_file();
        int status = attn_output_stored_bytes(&report->layout, hidden_left_out ? &st->cfg : NULL,
                                              (attn_output)i,
                                              attn_store_size(s->type), s->chunk,
                                              &report->output_bytes[i], err);
        if (status != ATTN_OK)
            return status;
        memcpy(report->output_chunk[i], s->chunk, sizeof s->chunk);
        report->output_store[i] = s->type;
        if (run_saved(st, (attn_output)i) &&
            !attn_size_add(&report->total_bytes, report->total_bytes, report->output_bytes[i]))
            return attn_fail(err, ATTN_EINPUT, "%s: the outputs are too large to address", opt->input);
    }
    return ATTN_OK;
}

/* Every output and the two token datasets (tokens.c) fit in one file. */
static_assert(ATTN_OUT_COUNT + 2 <= ATTN_H5OUT_MAX_DATASETS,
              "an output needs more datasets than attn_h5out holds");

/* Creates every saved dataset with its chunks, labels and description;
 * a map's tiles left unwritten read as its fill value. */
static int create_datasets(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    for (int i = 0; i < ATTN_OUT_COUNT; i++) {
        size_t dims[4];
        const char *labels[4];
        attn_stored *s = &st->stored[i];
        if (!run_saved(st, (attn_output)i))
            continue;
        attn_output_shape(&st->report->layout, (attn_output)i, dims, labels);
        attn_dataset_spec spec = {
            .name = attn_output_name((attn_output)i), .precision = opt->precision,
            .store = s->type, .has_fill = s->map, .fill = s->fill, .rank = s->rank,
            .whole = attn_ranks_shared_file(),
            .dims = s->dims, .chunk = s->chunk, .labels = labels,
            .description = attn_output_description((attn_output)i), .compress = s->compress,
        };
        int status = attn_h5out_add_dataset(st->out, &spec, &st->handles[i], err);
        if (status != ATTN_OK)
            return status;
        s->raw = attn_h5out_raw_chunks(st->out, st->handles[i]);
    }
    int status = run_write_tokens(st, err);
    return status != ATTN_OK ? status : write_provenance(st, err);
}

/* Opens the output: a new temporary, or a copy of IN for --in-place. */
int run_open_output(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    attn_atomic *tx = opt->transaction;
    int status = opt->in_place
                     ? attn_atomic_begin_copy(tx, opt->input, attn_h5in_descriptor(st->in), err)
                     : attn_atomic_begin(tx, opt->output, opt->force, err);
    if (status != ATTN_OK)
        return status;
    status = opt->in_place ? attn_h5out_open(tx->temp_path, tx->final_path, opt->group, &st->out, err)
                           : attn_h5out_create(tx->temp_path, tx->final_path, opt->group, &st->out, err);
    if (status == ATTN_OK && opt->in_place)
        status = check_targets(st, err);
    if (status == ATTN_OK)
        status = create_datasets(st, err);
    return status;
}

