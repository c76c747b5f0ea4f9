/*
 * attn_outfile.c - the output group: room made for this run's names, the
 * datasets created with chunks and axes, and the provenance attributes.
 *
 * Legend: see attn_run_state.h.
 */
#include "attn_run_state.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* Attributes written on the output group. */
static const char *const provenance_names[] = {
    "attnrun_version", "command_line", "input_file", "heads", "d_k", "d_v",
    "scale", "causal", "precision", "created_utc",
};
#define PROVENANCE_COUNT (sizeof provenance_names / sizeof provenance_names[0])

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
    for (int i = 0; i < ATTN_OUT_COUNT && status == ATTN_OK; i++) {
        size_t dims[4];
        const char *labels[4];
        if (!run_saved(st, (attn_output)i))
            continue;
        size_t rank = attn_output_shape(&st->report->layout, (attn_output)i, dims, labels);
        for (size_t a = 0; a < rank && status == ATTN_OK; a++)
            status = attn_h5out_clear_axis(st->out, labels[a], dims[a], force, err);
    }
    for (size_t i = 0; i < PROVENANCE_COUNT && status == ATTN_OK; i++)
        status = attn_h5out_clear_attribute(st->out, provenance_names[i], force, err);
    return status;
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
    const attn_run_options *opt = st->opt;
    const attn_dims *d = &st->report->layout.dims;
    char stamp[64];
    utc_stamp(time(NULL), stamp, sizeof stamp);
    int status;
    if ((status = attn_h5out_attr_string(st->out, "attnrun_version", ATTN_VERSION, err)) != ATTN_OK ||
        (status = attn_h5out_attr_string(st->out, "command_line", opt->command_line ? opt->command_line : "", err)) != ATTN_OK ||
        (status = attn_h5out_attr_string(st->out, "input_file", opt->input, err)) != ATTN_OK ||
        (status = attn_h5out_attr_int(st->out, "heads", (long long)d->heads, err)) != ATTN_OK ||
        (status = attn_h5out_attr_int(st->out, "d_k", (long long)d->d_k, err)) != ATTN_OK ||
        (status = attn_h5out_attr_int(st->out, "d_v", (long long)d->d_v, err)) != ATTN_OK ||
        (status = attn_h5out_attr_double(st->out, "scale", st->report->scale, err)) != ATTN_OK ||
        (status = attn_h5out_attr_int(st->out, "causal", opt->causal, err)) != ATTN_OK ||
        (status = attn_h5out_attr_string(st->out, "precision", opt->precision == ATTN_F64 ? "f64" : "f32", err)) != ATTN_OK)
        return status;
    return attn_h5out_attr_string(st->out, "created_utc", stamp, err);
}

/* Creates every saved dataset with its chunks, labels and description. */
static int create_datasets(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    for (int i = 0; i < ATTN_OUT_COUNT; i++) {
        size_t dims[4], chunk[4];
        const char *labels[4];
        if (!run_saved(st, (attn_output)i))
            continue;
        size_t rank = attn_output_shape(&st->report->layout, (attn_output)i, dims, labels);
        size_t cap = st->report->layout.batched ? st->report->slice_items : 0;
        attn_chunk_shape(rank, dims, attn_precision_size(opt->precision), ATTN_CHUNK_BYTES, cap, chunk);
        attn_dataset_spec spec = {
            .name = attn_output_name((attn_output)i), .precision = opt->precision, .rank = rank,
            .dims = dims, .chunk = chunk, .labels = labels,
            .description = attn_output_description((attn_output)i), .compress = opt->compress,
        };
        int status = attn_h5out_add_dataset(st->out, &spec, &st->handles[i], err);
        if (status != ATTN_OK)
            return status;
    }
    return write_provenance(st, err);
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

