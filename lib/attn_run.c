/*
 * attn_run.c - the pipeline (attn_run.h).
 *
 * Legend: B batch, c items in a slice, H heads, n queries, m keys,
 *         D d_model, dk, dv.
 */
#include "attn_run.h"

#include "attn_guard.h"
#include "attn_h5.h"
#include "attn_math.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
    void *fused;                  /* (D, H*(2dk+dv)) = [W_Q | W_K | W_V]    */
    void *fused_bias;             /* (H*(2dk+dv)), zeros for absent biases  */
    attn_weights weights;
    attn_slice_sizes sizes;
    void *slice_memory;           /* every per-slice buffer, carved below   */
    void *split;                  /* (c, H, rows, d): q, k, v or heads
                                     reordered head-major for writing     */
    void *y_shared;               /* (m, D) when --kv is shared by all items */
    unsigned char *keep_shared;   /* (m) when --mask is shared               */
    attn_slice slots[2];          /* the slice computed and the one written */
    void *maps[2][2];             /* [step parity][scores, weights]         */
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
    else if ((p = attn_malloc(bytes)) == NULL)
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
    status = attn_plan_slice(&report->layout, opt->precision, opt->save, opt->memory_budget,
                             opt->slice_items, &st->sizes, &report->slice_items, err);
    if (status != ATTN_OK)
        return status;
    report->slice_rows = st->sizes.rows;
    report->online = st->sizes.map_count == 0;
    size_t per_item = st->sizes.bytes_per_item;
    if (st->sizes.rows < d->n)     /* the maps of one block of rows only */
        per_item -= st->sizes.bytes_per_row * (d->n - st->sizes.rows);
    if (!attn_size_mul(&report->slice_bytes, report->slice_items, per_item))
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
    st->cfg.check_overflow = !opt->allow_nonfinite;
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

/*
 * [W_Q | W_K | W_V] as one (D, H*(2dk+dv)) matrix, and the three biases end
 * to end (zeros for an absent one), so that one GEMM projects all three.
 */
static int fuse_parameters(run_state *st, attn_error *err)
{
    const attn_dims *d = &st->report->layout.dims;
    const size_t elem = attn_precision_size(st->opt->precision);
    const size_t qk = d->heads * d->d_k, widths[3] = {qk, qk, d->heads * d->d_v};
    const size_t all = widths[0] + widths[1] + widths[2];
    char *fused = alloc_array(st, d->d_model * all, elem, "the fused projection weights", err);
    if (fused == NULL)
        return ATTN_ENOMEM;
    st->fused = fused;
    size_t column = 0;
    for (int i = 0; i < 3; i++) {
        const char *part = st->parameters[i];
        for (size_t r = 0; r < d->d_model; r++)
            memcpy(fused + (r * all + column) * elem, part + r * widths[i] * elem, widths[i] * elem);
        column += widths[i];
    }
    st->weights.w_qkv = fused;
    if (st->parameters[4] == NULL && st->parameters[5] == NULL && st->parameters[6] == NULL)
        return ATTN_OK;
    char *bias = alloc_array(st, all, elem, "the fused biases", err);
    if (bias == NULL)
        return ATTN_ENOMEM;
    memset(bias, 0, all * elem);
    st->fused_bias = bias;
    column = 0;
    for (int i = 0; i < 3; i++) {
        if (st->parameters[4 + i] != NULL)
            memcpy(bias + column * elem, st->parameters[4 + i], widths[i] * elem);
        column += widths[i];
    }
    st->weights.b_qkv = bias;
    return ATTN_OK;
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
    return fuse_parameters(st, err);
}

#define ALIGN ((size_t)64)

static char *align_up(void *p)
{
    uintptr_t at = (uintptr_t)p;
    return (char *)((at + ALIGN - 1) / ALIGN * ALIGN);
}

/*
 * Bytes of the one allocation allocate_slices carves: two slices' buffers
 * (the slice's bytes, checked by the plan, plus at most ALIGN for each of
 * its 8 buffers to start on a 64-byte boundary) and the attend scratch.
 */
static bool slice_memory_bytes(const run_state *st, size_t *total)
{
    const size_t scratch = attn_attend_scratch_bytes(&st->cfg, st->report->slice_items,
                                                     st->sizes.map_count == 0);
    return attn_size_add(total, st->report->slice_bytes, 8 * ALIGN) &&
           attn_size_mul(total, 2, *total) && attn_size_add(total, *total, scratch + ALIGN);
}

/*
 * Every buffer the run will allocate, roughly (for attn_guard_memory): the
 * parameters as read and repacked, the fused projection, the slices, the
 * reordering room and a shared --kv.
 */
static size_t planned_bytes(const run_state *st)
{
    const attn_dims *d = &st->report->layout.dims;
    const size_t elem = attn_precision_size(st->opt->precision);
    size_t total = 0, part;
    for (int i = ATTN_IN_WQ; i < ATTN_IN_COUNT; i++)
        if (st->info[i].present && attn_size_product(&part, st->info[i].dims, st->info[i].rank))
            total += 2 * part * elem;
    total += d->d_model * d->heads * (2 * d->d_k + d->d_v) * elem;
    if (slice_memory_bytes(st, &part))
        total += part;
    total += st->report->slice_items * st->sizes.reorder * elem;
    if (st->report->layout.kv_shared)
        total += d->m * d->d_model * elem;
    return total;
}

/*
 * Carves one allocation into the buffers of two slices (the pipeline
 * computes one while it writes the other, see compute) and two sets of
 * maps (one block of rows each).
 */
static int allocate_slices(run_state *st, attn_error *err)
{
    const attn_slice_sizes *sizes = &st->sizes;
    const size_t c = st->report->slice_items, elem = attn_precision_size(st->opt->precision);
    const attn_layout *layout = &st->report->layout;
    const attn_dims *d = &layout->dims;
    const size_t map = d->heads * sizes->rows * d->m;      /* one map, one block of rows */
    const size_t qk = d->heads * d->d_k, vc = d->heads * d->d_v;
    size_t total;
    if (!slice_memory_bytes(st, &total))
        return attn_fail(err, ATTN_ENOMEM, "%s: the slice buffers overflow", st->opt->input);
    st->slice_memory = alloc_array(st, 1, total, "the buffers of two slices (see --memory)", err);
    if (st->slice_memory == NULL)
        return ATTN_ENOMEM;
    char *p = align_up(st->slice_memory);
    for (int i = 0; i < 2; i++) {
        attn_slice *slice = &st->slots[i];
        void *projections = NULL, *keep = NULL;
        void **targets[] = {(void **)&slice->x, (void **)&slice->y, &projections,
                            &st->maps[i][0], &st->maps[i][1], &slice->concat, &slice->output,
                            &keep};
        const size_t bytes[] = {sizes->x * elem, sizes->y * elem, sizes->projections * elem,
                                (sizes->map_count == 2 ? map : 0) * elem,
                                (sizes->map_count >= 1 ? map : 0) * elem,
                                sizes->concat * elem, sizes->output * elem, sizes->keep};
        for (size_t j = 0; j < sizeof bytes / sizeof bytes[0]; j++) {
            *targets[j] = p;
            p = align_up(p + c * bytes[j]);
        }
        if (sizes->map_count < 2)
            st->maps[i][0] = NULL;
        if (sizes->map_count < 1)
            st->maps[i][1] = NULL;
        /* Projections side by side, for one GEMM: (c, n, q|k|v) for
         * self-attention, (c, n, q) then (c, m, k|v) for --kv. */
        slice->q = projections;
        if (!layout->cross) {
            slice->ldq = slice->ldk = slice->ldv = 2 * qk + vc;
            slice->k = (char *)projections + qk * elem;
        } else {
            slice->ldq = qk;
            slice->ldk = slice->ldv = qk + vc;
            slice->k = (char *)projections + c * d->n * qk * elem;
        }
        slice->v = (char *)slice->k + qk * elem;
        slice->keep = layout->mask_shared || !st->info[ATTN_IN_MASK].present ? NULL : keep;
        slice->keep_stride = layout->mask_shared ? 0 : d->m;
        if (!layout->cross) {
            slice->y = slice->x;
            slice->y_stride = d->n * d->d_model;
        } else {
            slice->y_stride = layout->kv_shared ? 0 : d->m * d->d_model;
        }
    }
    st->slots[0].scratch = st->slots[1].scratch = p;   /* steps run one at a time */
    /* The reordering room is used by the writing thread only: once. */
    st->split = alloc_array(st, c * sizes->reorder, elem, "the output reordering buffer", err);
    return st->split == NULL ? ATTN_ENOMEM : ATTN_OK;
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
        st->slots[0].y = st->slots[1].y = st->y_shared;
    }
    if (mask->present && layout->mask_shared) {
        st->keep_shared = alloc_array(st, layout->dims.m, 1, mask->name, err);
        if (st->keep_shared == NULL)
            return ATTN_ENOMEM;
        if ((status = attn_h5in_read_mask(st->in, mask->name, 0, layout->dims.m, st->keep_shared, err)) != ATTN_OK)
            return status;
        st->slots[0].keep = st->slots[1].keep = st->keep_shared;
    }
    return ATTN_OK;
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
        if (saved(st, (attn_output)i))
            status = attn_h5out_clear_result(st->out, attn_output_name((attn_output)i), force, err);
    for (int i = 0; i < ATTN_OUT_COUNT && status == ATTN_OK; i++) {
        size_t dims[4];
        const char *labels[4];
        if (!saved(st, (attn_output)i))
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
        if (!saved(st, (attn_output)i))
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

/*
 * Refuses a plan that cannot fit: the outputs (the --dry-run total) and,
 * for --in-place, the copy of IN, against the free space of the file
 * system the output goes to (IN's real one for --in-place).  --force
 * skips the check; so do compressed outputs, which take less than the
 * plan says, by how much is not known before writing.
 */
static int check_free_space(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    struct stat in;
    if (opt->force || opt->compress > 0)
        return ATTN_OK;
    double need = (double)st->report->total_bytes;
    if (opt->in_place && fstat(attn_h5in_descriptor(st->in), &in) == 0)
        need += (double)in.st_size;
    return attn_guard_free_space(opt->in_place ? opt->input : opt->output, need,
                                 opt->in_place ? "the copy of the input and the outputs"
                                               : "the outputs", err);
}

/* Opens the output: a new temporary, or a copy of IN for --in-place. */
static int open_output(run_state *st, attn_error *err)
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

/* Reads X, the keys/values and the mask of items [first, first + c). */
static int read_slice(run_state *st, attn_slice *slice, size_t first, size_t c, attn_error *err)
{
    const attn_layout *layout = &st->report->layout;
    const attn_dims *d = &layout->dims;
    const attn_tensor_info *x = &st->info[ATTN_IN_X], *kv = &st->info[ATTN_IN_KV];
    const attn_precision p = st->opt->precision;
    size_t rows_first = layout->batched ? first : 0, rows = layout->batched ? c : d->n;
    int status = attn_h5in_read_floats(st->in, x->name, p, rows_first, rows, (void *)slice->x, err);
    if (status == ATTN_OK)
        status = check_finite(st, x, slice->x, rows_first, c * d->n * d->d_model, err);
    if (status == ATTN_OK && layout->cross && !layout->kv_shared) {
        rows = layout->batched ? c : d->m;
        status = attn_h5in_read_floats(st->in, kv->name, p, rows_first, rows, (void *)slice->y, err);
        if (status == ATTN_OK)
            status = check_finite(st, kv, slice->y, rows_first, c * d->m * d->d_model, err);
    }
    if (status == ATTN_OK && st->info[ATTN_IN_MASK].present && !layout->mask_shared)
        status = attn_h5in_read_mask(st->in, st->info[ATTN_IN_MASK].name, first, c,
                                     (unsigned char *)slice->keep, err);
    return status;
}

/* The slice buffer holding an output; q, k, v and heads reordered
 * head-major, (c, rows, H*d | ld) -> (c, H, rows, d). */
static const void *output_buffer(run_state *st, const attn_slice *slice, attn_output which,
                                 size_t c)
{
    const attn_dims *d = &st->report->layout.dims;
    const size_t elem = attn_precision_size(st->opt->precision);
    const char *packed;
    size_t rows, width, ld;
    switch (which) {
    case ATTN_OUT_OUTPUT:  return slice->output;
    case ATTN_OUT_HEADS:
        packed = slice->concat; rows = d->n; width = d->d_v; ld = d->heads * d->d_v; break;
    case ATTN_OUT_Q: packed = slice->q; rows = d->n; width = d->d_k; ld = slice->ldq; break;
    case ATTN_OUT_K: packed = slice->k; rows = d->m; width = d->d_k; ld = slice->ldk; break;
    case ATTN_OUT_V:
    default:         packed = slice->v; rows = d->m; width = d->d_v; ld = slice->ldv; break;
    }
    for (size_t b = 0; b < c; b++) {
        const char *from = packed + b * rows * ld * elem;
        char *to = (char *)st->split + b * rows * d->heads * width * elem;
        if (st->opt->precision == ATTN_F64)
            attn_split_heads_ld_f64((const double *)from, ld, rows, d->heads, width, (double *)to);
        else
            attn_split_heads_ld_f32((const float *)from, ld, rows, d->heads, width, (float *)to);
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
        if (!saved(st, maps[i]))
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
        if (!saved(st, (attn_output)i))
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
static int run_steps(run_state *st, attn_error *err)
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

/* OUT must name a file attnrun can create and seek in. */
static int check_output_name(const char *output, attn_error *err)
{
    struct stat st;
    size_t len = strlen(output);
    if (len == 0)
        return attn_fail(err, ATTN_EUSAGE, "-o '': expected a file name");
    if (strcmp(output, "-") == 0)
        return attn_fail(err, ATTN_EUSAGE, "-o -: HDF5 output needs a file it can seek in, not "
                         "standard output; give a file name");
    if (output[len - 1] == '/' || (stat(output, &st) == 0 && S_ISDIR(st.st_mode)))
        return attn_fail(err, ATTN_EUSAGE, "-o %s: names a directory; expected a file name", output);
    return ATTN_OK;
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
    if (opt->has_scale && opt->precision == ATTN_F32 &&
        (isinf((float)opt->scale) || (float)opt->scale == 0))
        return attn_fail(err, ATTN_EUSAGE,
                         "--scale %g does not fit float32 (%g to %g), the computation's type; "
                         "use --precision f64", opt->scale, (double)FLT_TRUE_MIN, (double)FLT_MAX);
    if (opt->threads > attn_thread_limit())
        return attn_fail(err, ATTN_EUSAGE, "--threads %d: at most %d here (%d per core)",
                         opt->threads, attn_thread_limit(), ATTN_THREADS_PER_CORE);
    return writes && !opt->in_place ? check_output_name(opt->output, err) : ATTN_OK;
}

static void release(run_state *st)
{
    for (int i = 0; i < 8; i++)
        free(st->parameters[i]);
    free(st->fused);
    free(st->fused_bias);
    free(st->slice_memory);
    free(st->split);
    free(st->y_shared);
    free(st->keep_shared);
    attn_h5in_close(st->in);
}

/* Opens the input with the lock the run needs: shared to read it,
 * exclusive to replace it (--in-place). */
static int open_input(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    attn_h5in_options in = {
        .lock = opt->in_place ? ATTN_LOCK_EXCLUSIVE : ATTN_LOCK_SHARED,
        .wait = opt->wait, .allow_external = opt->allow_external, .cancel = opt->cancel,
    };
    return attn_h5in_open_with(opt->input, &in, &st->in, err);
}

/* The output, complete: flushed, then (the input still as it was read)
 * renamed into place. */
static int commit(run_state *st, attn_error *err)
{
    attn_atomic *tx = st->opt->transaction;
    int status = attn_atomic_flush(tx, err);
    if (status == ATTN_OK && (status = attn_h5in_check_unchanged(st->in, err)) != ATTN_OK)
        attn_atomic_abort(tx);
    if (status == ATTN_OK)
        status = attn_atomic_publish(tx, st->opt->cancel, err);
    return status;
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
    attn_h5_prepare();
    attn_h5_allow_plugins(options->allow_plugins);
    struct rlimit saved;
    bool capped = status == ATTN_OK && attn_guard_cap_parse_memory(&saved);
    if (status == ATTN_OK && (status = open_input(&st, err)) == ATTN_OK &&
        (status = describe_inputs(&st, err)) == ATTN_OK)
        status = plan(&st, err);
    if (capped)
        attn_guard_restore_memory(&saved);
    if (options->threads > 0)
        attn_set_threads(options->threads);
    if (status != ATTN_OK || options->dry_run) {
        release(&st);
        return status;
    }
    if ((status = attn_guard_threads(attn_threads(), err)) == ATTN_OK &&
        (status = attn_guard_memory(planned_bytes(&st), attn_threads(), err)) == ATTN_OK &&
        (status = check_free_space(&st, err)) == ATTN_OK &&
        (status = load_parameters(&st, err)) == ATTN_OK &&
        (status = allocate_slices(&st, err)) == ATTN_OK &&
        (status = load_shared(&st, err)) == ATTN_OK &&
        (status = open_output(&st, err)) == ATTN_OK)
        status = run_steps(&st, err);

    /* Close the output whatever happened, then keep it only on success;
     * the input stays open (and locked) until the output is in place. */
    attn_error close_err;
    int closed = attn_h5out_close(st.out, &close_err);
    if (status == ATTN_OK && closed != ATTN_OK) {
        status = closed;
        *err = close_err;
    }
    if (status == ATTN_OK)
        status = commit(&st, err);
    else
        attn_atomic_abort(options->transaction);
    release(&st);
    return status;
}
