/*
 * attn_run.c - one run from start to end (attn_run.h): options checked,
 * input opened and described, the plan made, then the phases of
 * attn_run_state.h in order, and the output committed or removed.
 *
 * Legend: see attn_run_state.h.
 */
#include "attn_run_state.h"

#include "attn_guard.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static const char *const default_names[ATTN_IN_COUNT] = {
    [ATTN_IN_X] = "X",     [ATTN_IN_WQ] = "W_Q", [ATTN_IN_WK] = "W_K",
    [ATTN_IN_WV] = "W_V",  [ATTN_IN_WO] = "W_O", [ATTN_IN_BQ] = "b_Q",
    [ATTN_IN_BK] = "b_K",  [ATTN_IN_BV] = "b_V", [ATTN_IN_BO] = "b_O",
};

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

    int status = run_check_options(options, err);
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
        (status = attn_guard_memory(run_planned_bytes(&st), attn_threads(), err)) == ATTN_OK &&
        (status = run_check_free_space(&st, err)) == ATTN_OK &&
        (status = run_load_parameters(&st, err)) == ATTN_OK &&
        (status = run_allocate_slices(&st, err)) == ATTN_OK &&
        (status = run_load_shared(&st, err)) == ATTN_OK &&
        (status = run_open_output(&st, err)) == ATTN_OK)
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
