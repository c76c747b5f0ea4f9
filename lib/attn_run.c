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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
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
    const size_t scratch = attn_attend_scratch_bytes(&st->cfg, c, sizes->map_count == 0);
    /* Every buffer starts on a 64-byte boundary (ALIGN): the slice's bytes
     * (checked by the plan) plus at most ALIGN per buffer, 8 per slot. */
    size_t total;
    if (!attn_size_add(&total, st->report->slice_bytes, 8 * ALIGN) ||
        !attn_size_mul(&total, 2, total) || !attn_size_add(&total, total, scratch + ALIGN))
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

/* "1.6 GB", for messages. */
static const char *size_text(double bytes, char *buf, size_t len)
{
    const char *units[] = {"bytes", "kB", "MB", "GB", "TB", "PB"};
    int u = 0;
    while (bytes >= 1000 && u < 5) {
        bytes /= 1000;
        u++;
    }
    snprintf(buf, len, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
    return buf;
}

/*
 * Refuses a plan that cannot fit: the outputs (the --dry-run total) and,
 * for --in-place, the copy of IN, against the free space of the file
 * system the output goes to.  --force skips the check.
 */
static int check_free_space(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    const char *target = opt->in_place ? opt->input : opt->output;
    char dir[PATH_MAX], need_text[32], free_text[32];
    struct statvfs fs;
    struct stat in;
    /* Compressed outputs take less than the plan says, by how much is not
     * known before writing: no check then. */
    if (opt->force || opt->compress > 0)
        return ATTN_OK;
    snprintf(dir, sizeof dir, "%s", target);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (statvfs(dir, &fs) != 0 || fs.f_blocks == 0)
        return ATTN_OK;                 /* no figures: the writes will tell */
    double need = (double)st->report->total_bytes;
    if (opt->in_place && stat(opt->input, &in) == 0)
        need += (double)in.st_size;
    double available = (double)fs.f_bavail * (double)fs.f_frsize;
    if (need <= available)
        return ATTN_OK;
    return attn_fail(err, ATTN_EIO,
                     "%s: needs %s (%s) but %s has %s free; use --force to try anyway",
                     target, size_text(need, need_text, sizeof need_text),
                     opt->in_place ? "the copy of the input and the outputs" : "the outputs",
                     dir, size_text(available, free_text, sizeof free_text));
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
        if (status == ATTN_OK && opt->progress != NULL)
            opt->progress(s->first + s->count, st->report->layout.dims.batch, opt->progress_context);
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

/* Address space HDF5 may add while it parses the input's metadata. */
#define PARSE_MEMORY ((rlim_t)1 << 30)

/*
 * Caps the address space at its current size plus PARSE_MEMORY while the
 * input is opened, described and planned: a damaged file can make HDF5
 * allocate gigabytes for one piece of metadata (the fuzzer found 5.7 GB
 * for a 9 kB file), and with the cap that allocation fails at once.
 * attnrun itself allocates almost nothing before the plan.  Not under
 * AddressSanitizer, whose shadow memory this would upset.  Returns whether
 * *saved must be restored.
 */
static bool limit_memory(struct rlimit *saved)
{
#if defined(__SANITIZE_ADDRESS__)
    (void)saved;
    return false;
#else
    unsigned long pages = 0;
    FILE *statm = fopen("/proc/self/statm", "r");
    if (statm == NULL)
        return false;
    bool read = fscanf(statm, "%lu", &pages) == 1;
    fclose(statm);
    long page = sysconf(_SC_PAGESIZE);
    if (!read || page <= 0 || getrlimit(RLIMIT_AS, saved) != 0)
        return false;
    struct rlimit tight = *saved;
    rlim_t cap = (rlim_t)pages * (rlim_t)page + PARSE_MEMORY;
    if (tight.rlim_cur != RLIM_INFINITY && tight.rlim_cur <= cap)
        return false;                       /* already as tight */
    tight.rlim_cur = cap;
    return setrlimit(RLIMIT_AS, &tight) == 0;
#endif
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
    free(st->fused);
    free(st->fused_bias);
    free(st->slice_memory);
    free(st->split);
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
    attn_h5_prepare();
    attn_h5_allow_plugins(options->allow_plugins);
    struct rlimit saved;
    bool limited = status == ATTN_OK && limit_memory(&saved);
    if (status == ATTN_OK && (status = attn_h5in_open(options->input, &st.in, err)) == ATTN_OK)
        attn_h5in_allow_external(st.in, options->allow_external);
    if (status == ATTN_OK && (status = describe_inputs(&st, err)) == ATTN_OK)
        status = plan(&st, err);
    if (limited)
        setrlimit(RLIMIT_AS, &saved);
    if (options->threads > 0)
        attn_set_threads(options->threads);
    if (status != ATTN_OK || options->dry_run) {
        release(&st);
        return status;
    }
    if ((status = check_free_space(&st, err)) == ATTN_OK &&
        (status = load_parameters(&st, err)) == ATTN_OK &&
        (status = allocate_slices(&st, err)) == ATTN_OK &&
        (status = load_shared(&st, err)) == ATTN_OK &&
        (status = open_output(&st, err)) == ATTN_OK)
        status = run_steps(&st, err);

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
