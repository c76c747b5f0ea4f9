/*
 * attn_run.c - the pipeline (attn_run.h).
 *
 * Legend: B batch, c items in a slice, H heads, n queries, m keys,
 *         D d_model, dk, dv.
 */
#include "attn_run.h"

#include "attn_h5.h"
#include "attn_math.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHUNK_TARGET_BYTES ((size_t)1 << 20)

static const char *const default_names[ATTN_IN_COUNT] = {
    [ATTN_IN_X] = "X",     [ATTN_IN_WQ] = "W_Q", [ATTN_IN_WK] = "W_K",
    [ATTN_IN_WV] = "W_V",  [ATTN_IN_WO] = "W_O", [ATTN_IN_BQ] = "b_Q",
    [ATTN_IN_BK] = "b_K",  [ATTN_IN_BV] = "b_V", [ATTN_IN_BO] = "b_O",
};

/* Attributes written on the output group. */
static const char *const provenance_names[] = {
    "attnrun_version", "command_line", "input_file", "heads", "d_k", "d_v",
    "scale", "causal", "precision", "created_utc",
};
#define PROVENANCE_COUNT (sizeof provenance_names / sizeof provenance_names[0])

typedef struct run_state {
    const attn_run_options *opt;
    attn_run_report *report;
    attn_tensor_info info[ATTN_IN_COUNT];
    attn_h5in *in;
    attn_h5out *out;
    attn_config cfg;
    void *parameters[8];          /* packed W_Q W_K W_V W_O b_Q b_K b_V b_O */
    attn_weights weights;
    attn_slice_sizes sizes;
    void *slice_memory;           /* every per-slice buffer, carved below   */
    void *split;                  /* (c, H, rows, d) scratch for q, k, v    */
    void *y_shared;               /* (m, D) when --kv is shared by all items */
    unsigned char *keep_shared;   /* (m) when --mask is shared               */
    attn_slice slice;
    int handles[ATTN_OUT_COUNT];
} run_state;

attn_run_options attn_run_defaults(void)
{
    attn_run_options opt;
    memset(&opt, 0, sizeof opt);
    opt.group = "/";
    opt.save = ATTN_SAVE_DEFAULT;
    opt.precision = ATTN_F32;
    opt.memory_budget = ATTN_DEFAULT_MEMORY;
    return opt;
}

const char *attn_input_default_name(attn_input which)
{
    return default_names[which];
}

static bool saved(const run_state *st, attn_output which)
{
    return (st->opt->save >> which) & 1u;
}

/* malloc of count * size bytes, checked, or NULL with err filled. */
static void *alloc_array(const run_state *st, size_t count, size_t size, const char *what,
                         attn_error *err)
{
    size_t bytes;
    void *p = NULL;
    if (!attn_size_mul(&bytes, count, size))
        attn_fail(err, ATTN_ENOMEM, "%s: %s: %zu x %zu bytes overflow", st->opt->input, what,
                  count, size);
    else if ((p = malloc(bytes ? bytes : 1)) == NULL)
        attn_fail(err, ATTN_ENOMEM, "%s: out of memory: %zu bytes for %s", st->opt->input, bytes,
                  what);
    return p;
}

/* Looks up every input dataset the options name (attn_h5in_describe). */
static int describe_inputs(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    for (int i = 0; i < ATTN_IN_COUNT; i++) {
        attn_tensor_info *t = &st->info[i];
        const char *given = opt->names[i];
        bool optional_bias = i >= ATTN_IN_BQ;
        t->name = given != NULL ? given : default_names[i];
        if (t->name == NULL || (optional_bias && strcmp(t->name, "none") == 0))
            continue;                              /* not wanted */
        bool required = given != NULL || !optional_bias;
        attn_data_kind kind = i == ATTN_IN_MASK ? ATTN_DATA_MASK : ATTN_DATA_FLOAT;
        int status = attn_h5in_describe(st->in, kind, required, t, err);
        if (status != ATTN_OK)
            return status;
    }
    return ATTN_OK;
}

/* Fills the report: layout, scale, slice size, bytes and FLOPs. */
static int plan(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    attn_run_report *report = st->report;
    int status = attn_plan_layout(st->info, opt->input, opt->heads, &report->layout, err);
    if (status != ATTN_OK)
        return status;
    const attn_dims *d = &report->layout.dims;
    report->scale = opt->has_scale ? opt->scale : 1.0 / sqrt((double)d->d_k);
    report->save = opt->save;
    report->flops = attn_plan_flops(d);
    status = attn_plan_slice(&report->layout, opt->precision, opt->memory_budget, opt->slice_items,
                             &st->sizes, &report->slice_items, err);
    if (status != ATTN_OK)
        return status;
    if (!attn_size_mul(&report->slice_bytes, report->slice_items, st->sizes.bytes_per_item))
        return attn_fail(err, ATTN_EINPUT, "%s: a slice of %zu batch items is too large",
                         opt->input, report->slice_items);
    for (int i = 0; i < ATTN_OUT_COUNT; i++) {
        status = attn_output_bytes(&report->layout, (attn_output)i, opt->precision,
                                   &report->output_bytes[i], err);
        if (status != ATTN_OK)
            return status;
        if (((opt->save >> i) & 1u) &&
            !attn_size_add(&report->total_bytes, report->total_bytes, report->output_bytes[i]))
            return attn_fail(err, ATTN_EINPUT, "%s: the outputs are too large to address", opt->input);
    }
    st->cfg.dims = *d;
    st->cfg.scale = report->scale;
    st->cfg.causal = opt->causal;
    st->cfg.precision = opt->precision;
    return ATTN_OK;
}

/* Index of the first non-finite value of buf (count) in precision p. */
static size_t first_nonfinite(attn_precision p, const void *buf, size_t count)
{
    return p == ATTN_F64 ? attn_find_nonfinite_f64(buf, count)
                         : attn_find_nonfinite_f32(buf, count);
}

/*
 * Rejects a non-finite value in buf, which holds `count` values from rows
 * [first, ...) of dataset t; the message gives the value's index in t.
 */
static int check_finite(const run_state *st, const attn_tensor_info *t, const void *buf,
                        size_t first, size_t count, attn_error *err)
{
    if (st->opt->allow_nonfinite)
        return ATTN_OK;
    size_t at = first_nonfinite(st->opt->precision, buf, count);
    if (at == count)
        return ATTN_OK;
    size_t idx[ATTN_MAX_RANK];
    char where[512];
    size_t used = 0;
    attn_unravel_index(at, t->dims, t->rank, idx);
    if (t->rank > 0)
        idx[0] += first;
    for (size_t i = 0; i < t->rank && used < sizeof where; i++)
        used += (size_t)snprintf(where + used, sizeof where - used, "%s%zu", i ? ", " : "[", idx[i]);
    if (used < sizeof where)
        snprintf(where + used, sizeof where - used, "]");
    double value = st->opt->precision == ATTN_F64 ? ((const double *)buf)[at]
                                                  : (double)((const float *)buf)[at];
    double stored;
    if (st->opt->precision == ATTN_F32 && isinf(value) &&
        attn_h5in_read_value(st->in, t->name, idx, t->rank, &stored, NULL) == ATTN_OK &&
        isfinite(stored))
        return attn_fail(err, ATTN_EINPUT,
                         "%s: dataset %s holds %g at %s, too large for float32; use --precision f64",
                         st->opt->input, t->name, stored, where);
    return attn_fail(err, ATTN_EINPUT,
                     "%s: dataset %s has a non-finite value (%s) at %s; use --allow-nonfinite to accept it",
                     st->opt->input, t->name, isnan(value) ? "nan" : value > 0 ? "inf" : "-inf", where);
}

/* Reads a weight or bias whole, checks it, and packs 3-D (H, D, d)
 * projection weights into (D, H*d).  Absent inputs leave *packed NULL. */
static int load_parameter(run_state *st, attn_input which, void **packed, attn_error *err)
{
    const attn_tensor_info *t = &st->info[which];
    const size_t elem = attn_precision_size(st->opt->precision);
    char *raw = NULL, *repacked = NULL;
    size_t count;
    int status = ATTN_OK;
    *packed = NULL;
    if (!t->present)
        return ATTN_OK;
    attn_size_product(&count, t->dims, t->rank);       /* checked by the plan */
    if ((raw = alloc_array(st, count, elem, t->name, err)) == NULL) {
        status = ATTN_ENOMEM;
        goto out;
    }
    if ((status = attn_h5in_read_floats(st->in, t->name, st->opt->precision, 0, t->dims[0], raw, err)) != ATTN_OK ||
        (status = check_finite(st, t, raw, 0, count, err)) != ATTN_OK)
        goto out;
    if (t->rank != 3 || which == ATTN_IN_WO) {    /* (H, d_v, D) is packed already */
        *packed = raw;
        raw = NULL;
        goto out;
    }
    if ((repacked = alloc_array(st, count, elem, t->name, err)) == NULL) {
        status = ATTN_ENOMEM;
        goto out;
    }
    size_t heads = t->dims[0], rows = t->dims[1], width = t->dims[2];
    for (size_t h = 0; h < heads; h++)            /* (H, D, d) -> (D, H*d) */
        for (size_t r = 0; r < rows; r++)
            memcpy(repacked + (r * heads + h) * width * elem, raw + (h * rows + r) * width * elem,
                   width * elem);
    *packed = repacked;
out:
    free(raw);
    return status;
}

static int load_parameters(run_state *st, attn_error *err)
{
    static const attn_input order[8] = {ATTN_IN_WQ, ATTN_IN_WK, ATTN_IN_WV, ATTN_IN_WO,
                                        ATTN_IN_BQ, ATTN_IN_BK, ATTN_IN_BV, ATTN_IN_BO};
    for (int i = 0; i < 8; i++) {
        int status = load_parameter(st, order[i], &st->parameters[i], err);
        if (status != ATTN_OK)
            return status;
    }
    st->weights = (attn_weights){
        .w_q = st->parameters[0], .w_k = st->parameters[1], .w_v = st->parameters[2],
        .w_o = st->parameters[3], .b_q = st->parameters[4], .b_k = st->parameters[5],
        .b_v = st->parameters[6], .b_o = st->parameters[7],
    };
    return ATTN_OK;
}

/* Carves one allocation into the slice buffers of attn_slice. */
static int allocate_slice(run_state *st, attn_error *err)
{
    const attn_slice_sizes *sizes = &st->sizes;
    const size_t c = st->report->slice_items, elem = attn_precision_size(st->opt->precision);
    const attn_layout *layout = &st->report->layout;
    st->slice_memory = alloc_array(st, c, sizes->bytes_per_item, "the buffers of one slice (see --batch-slice)", err);
    if (st->slice_memory == NULL)
        return ATTN_ENOMEM;
    char *p = st->slice_memory;
    void **targets[] = {(void **)&st->slice.x, (void **)&st->slice.y, &st->slice.q, &st->slice.k,
                        &st->slice.v, &st->slice.scores, &st->slice.weights, &st->slice.heads,
                        &st->slice.concat, &st->slice.output, &st->split};
    size_t split = sizes->q > sizes->k ? sizes->q : sizes->k;
    split = split > sizes->v ? split : sizes->v;
    const size_t lengths[] = {sizes->x, sizes->y, sizes->q, sizes->k, sizes->v, sizes->maps, sizes->maps,
                              sizes->heads, sizes->concat, sizes->output, split};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        *targets[i] = p;
        p += c * lengths[i] * elem;
    }
    st->slice.keep = layout->mask_shared || !st->info[ATTN_IN_MASK].present ? NULL
                                                                          : (unsigned char *)p;
    st->slice.keep_stride = layout->mask_shared ? 0 : layout->dims.m;
    if (!layout->cross) {
        st->slice.y = st->slice.x;
        st->slice.y_stride = layout->dims.n * layout->dims.d_model;
    } else {
        st->slice.y_stride = layout->kv_shared ? 0 : layout->dims.m * layout->dims.d_model;
    }
    return ATTN_OK;
}

/* --kv (m, D) and --mask (m) shared by every item: read once. */
static int load_shared(run_state *st, attn_error *err)
{
    const attn_layout *layout = &st->report->layout;
    const attn_tensor_info *kv = &st->info[ATTN_IN_KV], *mask = &st->info[ATTN_IN_MASK];
    int status;
    if (layout->kv_shared) {
        size_t count = layout->dims.m * layout->dims.d_model;
        st->y_shared = alloc_array(st, count, attn_precision_size(st->opt->precision), kv->name, err);
        if (st->y_shared == NULL)
            return ATTN_ENOMEM;
        if ((status = attn_h5in_read_floats(st->in, kv->name, st->opt->precision, 0, layout->dims.m,
                                            st->y_shared, err)) != ATTN_OK ||
            (status = check_finite(st, kv, st->y_shared, 0, count, err)) != ATTN_OK)
            return status;
        st->slice.y = st->y_shared;
    }
    if (mask->present && layout->mask_shared) {
        st->keep_shared = alloc_array(st, layout->dims.m, 1, mask->name, err);
        if (st->keep_shared == NULL)
            return ATTN_ENOMEM;
        if ((status = attn_h5in_read_mask(st->in, mask->name, 0, layout->dims.m, st->keep_shared, err)) != ATTN_OK)
            return status;
        st->slice.keep = st->keep_shared;
    }
    return ATTN_OK;
}

/* The names this run adds to the group: datasets, scales, attributes. */
static int check_targets(run_state *st, attn_error *err)
{
    const char *names[ATTN_OUT_COUNT * 5 + PROVENANCE_COUNT];
    size_t count = 0;
    for (int i = 0; i < ATTN_OUT_COUNT; i++) {
        size_t dims[4];
        const char *labels[4];
        if (!saved(st, (attn_output)i))
            continue;
        names[count++] = attn_output_name((attn_output)i);
        size_t rank = attn_output_shape(&st->report->layout, (attn_output)i, dims, labels);
        for (size_t a = 0; a < rank; a++)
            names[count++] = labels[a];
    }
    for (size_t i = 0; i < PROVENANCE_COUNT; i++)
        names[count++] = provenance_names[i];
    for (size_t i = 0; i < count; i++) {
        bool link, attribute;
        int status = attn_h5out_exists(st->out, names[i], &link, &attribute, err);
        if (status != ATTN_OK)
            return status;
        if (!link && !attribute)
            continue;
        if (!st->opt->force)
            return attn_fail(err, ATTN_EUSAGE, "%s: group %s already has %s %s; use --force to replace it",
                             st->opt->input, st->opt->group, link ? "an object named" : "an attribute",
                             names[i]);
        if ((status = attn_h5out_remove(st->out, names[i], err)) != ATTN_OK)
            return status;
    }
    return ATTN_OK;
}

static int write_provenance(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    const attn_dims *d = &st->report->layout.dims;
    char stamp[64];
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &utc);
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
        if (!saved(st, (attn_output)i))
            continue;
        size_t rank = attn_output_shape(&st->report->layout, (attn_output)i, dims, labels);
        size_t cap = st->report->layout.batched ? st->report->slice_items : 0;
        attn_chunk_shape(rank, dims, attn_precision_size(opt->precision), CHUNK_TARGET_BYTES, cap, chunk);
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
static int open_output(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    attn_atomic *tx = opt->transaction;
    int status = opt->in_place ? attn_atomic_begin_copy(tx, opt->input, err)
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

/* Reads X, the keys/values and the mask of items [first, first + c). */
static int read_slice(run_state *st, size_t first, size_t c, attn_error *err)
{
    const attn_layout *layout = &st->report->layout;
    const attn_dims *d = &layout->dims;
    const attn_tensor_info *x = &st->info[ATTN_IN_X], *kv = &st->info[ATTN_IN_KV];
    const attn_precision p = st->opt->precision;
    size_t rows_first = layout->batched ? first : 0, rows = layout->batched ? c : d->n;
    int status = attn_h5in_read_floats(st->in, x->name, p, rows_first, rows, (void *)st->slice.x, err);
    if (status == ATTN_OK)
        status = check_finite(st, x, st->slice.x, rows_first, c * d->n * d->d_model, err);
    if (status == ATTN_OK && layout->cross && !layout->kv_shared) {
        rows = layout->batched ? c : d->m;
        status = attn_h5in_read_floats(st->in, kv->name, p, rows_first, rows, (void *)st->slice.y, err);
        if (status == ATTN_OK)
            status = check_finite(st, kv, st->slice.y, rows_first, c * d->m * d->d_model, err);
    }
    if (status == ATTN_OK && st->info[ATTN_IN_MASK].present && !layout->mask_shared)
        status = attn_h5in_read_mask(st->in, st->info[ATTN_IN_MASK].name, first, c,
                                     (unsigned char *)st->slice.keep, err);
    return status;
}

/* The slice buffer holding an output, reordered head-major for q, k, v. */
static const void *output_buffer(run_state *st, attn_output which, size_t c)
{
    const attn_dims *d = &st->report->layout.dims;
    const size_t elem = attn_precision_size(st->opt->precision);
    const void *packed;
    size_t rows, width;
    switch (which) {
    case ATTN_OUT_SCORES:  return st->slice.scores;
    case ATTN_OUT_WEIGHTS: return st->slice.weights;
    case ATTN_OUT_HEADS:   return st->slice.heads;
    case ATTN_OUT_OUTPUT:  return st->slice.output;
    case ATTN_OUT_Q: packed = st->slice.q; rows = d->n; width = d->d_k; break;
    case ATTN_OUT_K: packed = st->slice.k; rows = d->m; width = d->d_k; break;
    case ATTN_OUT_V:
    default:         packed = st->slice.v; rows = d->m; width = d->d_v; break;
    }
    for (size_t b = 0; b < c; b++) {       /* (c, rows, H*w) -> (c, H, rows, w) */
        size_t offset = b * rows * d->heads * width * elem;
        if (st->opt->precision == ATTN_F64)
            attn_split_heads_f64((const double *)((const char *)packed + offset), rows, d->heads,
                                 width, (double *)((char *)st->split + offset));
        else
            attn_split_heads_f32((const float *)((const char *)packed + offset), rows, d->heads,
                                 width, (float *)((char *)st->split + offset));
    }
    return st->split;
}

static int write_slice(run_state *st, size_t first, size_t c, attn_error *err)
{
    const attn_layout *layout = &st->report->layout;
    for (int i = 0; i < ATTN_OUT_COUNT; i++) {
        size_t dims[4];
        const char *labels[4];
        if (!saved(st, (attn_output)i))
            continue;
        attn_output_shape(layout, (attn_output)i, dims, labels);
        const void *buf = output_buffer(st, (attn_output)i, c);
        int status = layout->batched ? attn_h5out_write(st->out, st->handles[i], first, c, buf, err)
                                  : attn_h5out_write(st->out, st->handles[i], 0, dims[0], buf, err);
        if (status != ATTN_OK)
            return status;
    }
    return ATTN_OK;
}

static int compute(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    const size_t batch = st->report->layout.dims.batch, step = st->report->slice_items;
    for (size_t first = 0; first < batch; first += step) {
        size_t c = batch - first < step ? batch - first : step;
        if (opt->cancel != NULL && *opt->cancel)
            return attn_fail(err, ATTN_EINTR, "%s: interrupted; no output was written",
                             opt->in_place ? opt->input : opt->output);
        int status = read_slice(st, first, c, err);
        if (status != ATTN_OK)
            return status;
        st->slice.count = c;
        attn_forward(&st->cfg, &st->weights, &st->slice);
        if ((status = write_slice(st, first, c, err)) != ATTN_OK)
            return status;
        if (opt->progress != NULL)
            opt->progress(first + c, batch, opt->progress_context);
    }
    return ATTN_OK;
}

/* "/" or "/a/b": absolute, no empty, "." or ".." parts, no trailing "/". */
static bool group_path_valid(const char *group)
{
    if (group == NULL || group[0] != '/')
        return false;
    if (group[1] == '\0')
        return true;
    for (const char *part = group + 1;;) {
        size_t len = strcspn(part, "/");
        if (len == 0 || (len == 1 && part[0] == '.') || (len == 2 && strncmp(part, "..", 2) == 0))
            return false;
        if (part[len] == '\0')
            return true;
        part += len + 1;
    }
}

static int check_options(const attn_run_options *opt, attn_error *err)
{
    bool writes = !opt->dry_run;
    if (opt->input == NULL ||
        (writes && ((!opt->in_place && opt->output == NULL) || opt->transaction == NULL)))
        return attn_fail(err, ATTN_EUSAGE, "an input and an output (or --in-place) are required");
    if (!opt->in_place && opt->output != NULL && attn_same_file(opt->input, opt->output))
        return attn_fail(err, ATTN_EUSAGE, "%s: the output is the input; use --in-place to add results to it",
                         opt->output);
    if (opt->compress < 0 || opt->compress > 9)
        return attn_fail(err, ATTN_EUSAGE, "--compress %d: expected 0 to 9", opt->compress);
    if (!group_path_valid(opt->group))
        return attn_fail(err, ATTN_EUSAGE,
                         "--group '%s': expected / or an absolute path of names such as /results/run1",
                         opt->group ? opt->group : "");
    if (opt->save == 0)
        return attn_fail(err, ATTN_EUSAGE, "--save: nothing to save");
    if (opt->has_scale && !(isfinite(opt->scale) && opt->scale > 0))
        return attn_fail(err, ATTN_EUSAGE, "--scale %g: expected a finite positive number", opt->scale);
    return ATTN_OK;
}

static void release(run_state *st)
{
    for (int i = 0; i < 8; i++)
        free(st->parameters[i]);
    free(st->slice_memory);
    free(st->y_shared);
    free(st->keep_shared);
    attn_h5in_close(st->in);
}

int attn_run(const attn_run_options *options, attn_run_report *report, attn_error *err)
{
    run_state st;
    memset(&st, 0, sizeof st);
    memset(report, 0, sizeof *report);
    st.opt = options;
    st.report = report;
    if (options->transaction != NULL)
        memset(options->transaction, 0, sizeof *options->transaction);

    int status = check_options(options, err);
    if (status == ATTN_OK && (status = attn_h5in_open(options->input, &st.in, err)) == ATTN_OK &&
        (status = describe_inputs(&st, err)) == ATTN_OK)
        status = plan(&st, err);
    if (status != ATTN_OK || options->dry_run) {
        release(&st);
        return status;
    }
    if (options->threads > 0)
        attn_set_threads(options->threads);
    if ((status = load_parameters(&st, err)) == ATTN_OK &&
        (status = allocate_slice(&st, err)) == ATTN_OK &&
        (status = load_shared(&st, err)) == ATTN_OK &&
        (status = open_output(&st, err)) == ATTN_OK)
        status = compute(&st, err);

    /* Close the output whatever happened, then keep it only on success. */
    attn_error close_err;
    int closed = attn_h5out_close(st.out, &close_err);
    if (status == ATTN_OK && closed != ATTN_OK) {
        status = closed;
        *err = close_err;
    }
    release(&st);
    if (status == ATTN_OK && options->cancel != NULL && *options->cancel)
        status = attn_fail(err, ATTN_EINTR, "%s: interrupted; no output was written",
                           options->in_place ? options->input : options->output);
    if (status == ATTN_OK)
        status = attn_atomic_commit(options->transaction, err);
    else
        attn_atomic_abort(options->transaction);
    return status;
}
