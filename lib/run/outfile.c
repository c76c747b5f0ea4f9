/*
 * attn_outfile.c - the output group: room made for this run's names, the
 * datasets created with chunks and axes, and the provenance attributes.
 *
 * Legend: see attn_run_state.h.
 */
#include "run/run_state.h"

#include "attn_ranks.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* One provenance attribute: its name and this run's value. */
typedef struct provenance {
    const char *name;
    enum { TEXT, INTEGER, REAL } type;
    const char *text;
    long long integer;
    double real;
} provenance;

#define PROVENANCE_COUNT 33

/* The name of a dataset the run read, or "" when it read none. */
static const char *input_name(const run_state *st, attn_input which)
{
    return st->info[which].present ? st->info[which].name : "";
}

/*
 * The provenance table: every attribute written on the output group, with
 * this run's value (stamp: created_utc).  Settings not in use read as 0
 * or "".
 */
static void provenance_of(const run_state *st, const char *stamp, provenance p[PROVENANCE_COUNT])
{
    const attn_run_options *opt = st->opt;
    const attn_layout *layout = &st->report->layout;
    const attn_dims *d = &layout->dims;
    const attn_config *cfg = &st->cfg;
    const bool rope = cfg->rope.theta != 0;
    const provenance table[PROVENANCE_COUNT] = {
        {"attnrun_version", TEXT, ATTN_VERSION, 0, 0},
        {"command_line", TEXT, opt->command_line ? opt->command_line : "", 0, 0},
        {"input_file", TEXT, opt->input, 0, 0},
        {"weights_group", TEXT, opt->weights_group ? opt->weights_group : "/", 0, 0},
        {"preset", TEXT, st->preset ? st->preset->name : "", 0, 0},
        {"layout", TEXT, layout->linear ? "linear" : "xw", 0, 0},
        {"qkv_split", TEXT, !layout->fused ? "" : layout->heads_interleaved ? "heads" : "blocks", 0, 0},
        {"heads", INTEGER, NULL, (long long)d->heads, 0},
        {"kv_heads", INTEGER, NULL, (long long)attn_kv_heads(d), 0},
        {"d_k", INTEGER, NULL, (long long)d->d_k, 0},
        {"d_v", INTEGER, NULL, (long long)d->d_v, 0},
        {"scale", REAL, NULL, 0, st->report->scale},
        {"causal", INTEGER, NULL, cfg->causal, 0},
        {"window", INTEGER, NULL, (long long)cfg->window, 0},
        {"softcap", REAL, NULL, 0, cfg->softcap},
        {"alibi", INTEGER, NULL, st->report->alibi, 0},
        {"alibi_slopes", TEXT, input_name(st, ATTN_IN_ALIBI_SLOPES), 0, 0},
        {"rope_theta", REAL, NULL, 0, cfg->rope.theta},
        {"rope_dim", INTEGER, NULL, rope ? (long long)cfg->rope.dim : 0, 0},
        {"rope_style", TEXT, !rope ? "" : cfg->rope.style == ATTN_ROPE_GPTJ ? "gptj" : "neox", 0, 0},
        {"positions", TEXT, input_name(st, ATTN_IN_POSITIONS), 0, 0},
        {"kv_positions", TEXT, input_name(st, ATTN_IN_KV_POSITIONS), 0, 0},
        {"q_norm", TEXT, input_name(st, ATTN_IN_Q_NORM), 0, 0},
        {"k_norm", TEXT, input_name(st, ATTN_IN_K_NORM), 0, 0},
        {"norm_eps", REAL, NULL, 0, st->weights.q_norm || st->weights.k_norm ? cfg->norm_eps : 0},
        {"attn_bias", TEXT, input_name(st, ATTN_IN_ATTN_BIAS), 0, 0},
        {"mask_invert", INTEGER, NULL, opt->mask_invert, 0},
        {"precision", TEXT, opt->precision == ATTN_F64 ? "f64" : "f32", 0, 0},
        {"store", TEXT, attn_store_name(st->report->store), 0, 0},
        {"compress", INTEGER, NULL, opt->compress, 0},
        {"tokens_source", TEXT, opt->tokens ? opt->tokens : "", 0, 0},
        {"kv_tokens_source", TEXT, opt->kv_tokens ? opt->kv_tokens : "", 0, 0},
        {"created_utc", TEXT, stamp, 0, 0},
    };
    memcpy(p, table, sizeof table);
}

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
    provenance attributes[PROVENANCE_COUNT];
    provenance_of(st, "", attributes);
    for (size_t i = 0; i < PROVENANCE_COUNT && status == ATTN_OK; i++)
        status = attn_h5out_clear_attribute(st->out, attributes[i].name, force, err);
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
    char stamp[64];
    provenance attributes[PROVENANCE_COUNT];
    utc_stamp(time(NULL), stamp, sizeof stamp);
    provenance_of(st, stamp, attributes);
    int status = ATTN_OK;
    for (size_t i = 0; i < PROVENANCE_COUNT && status == ATTN_OK; i++) {
        const provenance *a = &attributes[i];
        status = a->type == TEXT ? attn_h5out_attr_string(st->out, a->name, a->text, err)
               : a->type == INTEGER ? attn_h5out_attr_int(st->out, a->name, a->integer, err)
                                    : attn_h5out_attr_double(st->out, a->name, a->real, err);
    }
    return status;
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
        attn_output_chunk(&report->layout, (attn_output)i, attn_store_size(s->type),
                          report->slice_items, s->chunk);
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

