/*
 * run.c - one run from start to end (attn_run.h): options checked,
 * input opened and described, the plan made, then the phases of
 * run_state.h in order, and the output committed or removed.
 *
 * Legend: see run_state.h.
 */
#include "run/run_state.h"

#include "core/guard.h"
#include "h5/index.h"
#include "attn_ranks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

attn_run_options attn_run_defaults(void)
{
    attn_run_options opt;
    memset(&opt, 0, sizeof opt);
    opt.group = "/";
    opt.save = ATTN_SAVE_DEFAULT;
    opt.precision = ATTN_F32;
    opt.variant.norm_eps = 1e-6;
    return opt;
}

const char *attn_input_default_name(attn_input which)
{
    return attn_input_spec_of(which)->default_name;
}

/* name under --weights-group (absolute names as they are), in st->paths. */
static const char *under_weights_group(run_state *st, attn_input which, const char *name,
                                       attn_error *err)
{
    const char *group = st->opt->weights_group;
    if (name[0] == '/' || group == NULL || strcmp(group, "/") == 0 || group[0] == '\0')
        return name;
    size_t len = strlen(group) + strlen(name) + 2;
    char *path = attn_malloc(len);
    if (path == NULL) {
        attn_fail(err, ATTN_ENOMEM, "%s: out of memory", st->opt->input);
        return NULL;
    }
    snprintf(path, len, "%s%s%s", group, group[strlen(group) - 1] == '/' ? "" : "/", name);
    st->paths[which] = path;
    return path;
}

/* Whether Q|K|V come from one fused weight: --wqkv, or a fused preset
 * unless --wq names separate weights. */
static bool fused_weights(const run_state *st)
{
    const attn_run_options *opt = st->opt;
    return opt->names[ATTN_IN_WQKV] != NULL ||
           (st->preset != NULL && st->preset->names[ATTN_IN_WQKV] != NULL &&
            opt->names[ATTN_IN_WQ] == NULL);
}

/*
 * A mask (integer or boolean) that holds floats is the additive kind --
 * 0 to keep a key, a large negative number or -inf to hide it, as Hugging
 * Face passes (B, 1, n, m) -- which is an attention bias here: the
 * refusal says so when t->name is a float dataset.  Returns `status` (the
 * refusal made) otherwise.
 */
static int float_mask(run_state *st, const attn_tensor_info *t, int status, attn_error *err)
{
    attn_tensor_info probe = {.name = t->name};
    attn_error ignored;
    char shape[256];
    if (status != ATTN_EINPUT || t->present ||
        attn_h5in_describe(st->in, ATTN_DATA_FLOAT, true, &probe, &ignored) != ATTN_OK)
        return status;
    return attn_fail_hint_arg(err, ATTN_EINPUT, ATTN_HINT_AS_BIAS, NULL, t->name,
                              "%s: dataset %s has floating-point elements; the key padding mask "
                              "is integer or boolean (nonzero: the key may be attended); floats "
                              "%s added to the logits are an attention bias", st->opt->input,
                              t->name,
                              attn_format_shape(shape, sizeof shape, probe.dims, probe.rank));
}

/*
 * Looks up every input dataset the options name (attn_h5in_describe): the
 * name given, else the preset's, else the default.  A given name must
 * exist; so must a default or preset name, except for biases, which are
 * used when present ("none" drops one).  When one is missing, the others
 * are still looked up (their failures ignored), so that the message can
 * name what the file holds that fits beside them (run_missing_input).
 */
static int describe_inputs(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    const bool fused = fused_weights(st);
    int missing = -1;                          /* the first required input absent */
    const char *missing_relative = NULL;
    bool missing_from_preset = false;
    attn_error ignored;
    for (int i = 0; i < ATTN_IN_COUNT; i++) {
        const attn_input_spec *spec = attn_input_spec_of((attn_input)i);
        attn_tensor_info *t = &st->info[i];
        const char *given = opt->names[i];
        const char *preset = st->preset != NULL ? st->preset->names[i] : NULL;
        const bool separate = (i >= ATTN_IN_WQ && i <= ATTN_IN_WV) ||
                              (i >= ATTN_IN_BQ && i <= ATTN_IN_BV);
        if (given == NULL && ((fused && separate) || (!fused && i == ATTN_IN_BQKV)))
            continue;                              /* the other form's names */
        const char *name = given != NULL ? given : preset != NULL ? preset : spec->default_name;
        if (name == NULL || (spec->optional && strcmp(name, "none") == 0))
            continue;                              /* not wanted */
        bool required = given != NULL || !spec->optional;
        const char *relative = name;
        if (spec->parameter && (name = under_weights_group(st, (attn_input)i, name, err)) == NULL)
            return ATTN_ENOMEM;
        t->name = name;
        attn_data_kind kind = i == ATTN_IN_MASK ? ATTN_DATA_MASK
                            : spec->integer ? ATTN_DATA_INTEGER : ATTN_DATA_FLOAT;
        attn_error *e = missing < 0 ? err : &ignored;
        int status = attn_h5in_describe(st->in, kind, false, t, e);
        if (status == ATTN_OK && !t->present && required) {
            if (missing < 0) {
                missing = i;
                missing_relative = relative;
                missing_from_preset = given == NULL && preset != NULL;
            }
            continue;
        }
        if (i == ATTN_IN_MASK)
            status = float_mask(st, t, status, e);
        if (status != ATTN_OK && given == NULL && preset != NULL && !t->present) {
            size_t len = strlen(e->msg);
            snprintf(e->msg + len, sizeof e->msg - len, " (the %s of preset %s)",
                     spec->role, st->preset->name);
        }
        if (status != ATTN_OK && missing < 0)
            return status;
        if (status != ATTN_OK)
            t->present = false;                /* looked up for the message only */
    }
    if (missing >= 0)
        return run_missing_input(st, (attn_input)missing, missing_relative, missing_from_preset,
                                 err);
    attn_tensor_info *x = &st->info[ATTN_IN_X];
    if (opt->x_sequence_first && x->rank == 3) {      /* (n, B, D) read as (B, n, D) */
        size_t n = x->dims[0];
        x->dims[0] = x->dims[1];
        x->dims[1] = n;
    }
    return ATTN_OK;
}

/* The variants the options and the preset ask for, into st->cfg, once
 * the layout gives d_k: RoPE's dimension is checked against it. */
static int plan_variants(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    const attn_preset *preset = st->preset;
    const attn_layout *layout = &st->report->layout;
    const size_t d_k = layout->dims.d_k;
    attn_config *cfg = &st->cfg;
    if ((opt->qkv_heads || opt->names[ATTN_IN_BQKV] != NULL) && !layout->fused)
        return attn_fail_hint(err, ATTN_EUSAGE,
                              opt->qkv_heads ? ATTN_HINT_QKV_HEADS : ATTN_HINT_FUSED_BIAS,
                              "%s needs fused Q|K|V weights",
                              opt->qkv_heads ? "splitting Q|K|V per head" : "a fused Q|K|V bias");
    if (layout->heads_interleaved && layout->cross)
        return attn_fail_hint(err, ATTN_EUSAGE,
                              opt->qkv_heads ? ATTN_HINT_QKV_HEADS : ATTN_HINT_NONE,
                              "Q|K|V split per head: q, k and v come from one input through "
                              "one weight, so it cannot be cross-attention");
    cfg->variant = opt->variant;
    cfg->variant.causal = opt->variant.causal || (preset != NULL && preset->causal);
    cfg->variant.scale = opt->variant.scale != 0 ? opt->variant.scale : 1.0 / sqrt((double)d_k);
    st->report->alibi = opt->alibi || st->info[ATTN_IN_ALIBI_SLOPES].present ||
                        (preset != NULL && preset->alibi);
    attn_rope *rope = &cfg->variant.rope;
    if (preset != NULL && preset->rope && rope->theta == 0)
        return attn_fail_hint(err, ATTN_EUSAGE, ATTN_HINT_ROPE, "preset %s rotates q and k: it "
                              "needs RoPE's base theta (rope_theta of the model's config.json)",
                              preset->name);
    if (rope->theta == 0)
        return ATTN_OK;
    if (rope->dim == 0)
        rope->dim = d_k;
    if (rope->dim % 2 != 0 || rope->dim > d_k)
        return attn_fail(err, ATTN_EUSAGE, "RoPE dimension %zu: expected an even number of "
                         "features, at most d_k = %zu", rope->dim, d_k);
    if (rope->style == ATTN_ROPE_DEFAULT)
        rope->style = preset != NULL ? preset->rope_style : ATTN_ROPE_NEOX;
    return ATTN_OK;
}

/* Bytes of physical memory (0 when unknown). */
static size_t physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (size_t)pages * (size_t)size : 0;
}

/* Ranks of one job on one machine share its cores: without --threads or
 * OMP_NUM_THREADS, each runs its part of them, or the cores mpirun bound
 * it to (attn_ranks_cores). */
static void share_cores(void)
{
    const char *asked = getenv("OMP_NUM_THREADS");
    if (attn_ranks_on_host() <= 1 || (asked != NULL && asked[0] != '\0'))
        return;
    const size_t online = (size_t)attn_thread_limit() / ATTN_THREADS_PER_CORE;
    attn_set_threads((int)attn_ranks_cores(online));
}

/* What the plan is made from beyond the input and the options, rank 0's
 * for every rank, so that the ranks cut the batch into the same slices
 * and steps (attn_ranks.h). */
typedef struct plan_basis {
    size_t threads, memory;
} plan_basis;

static plan_basis plan_basis_of(const attn_run_options *opt)
{
    plan_basis basis = {(size_t)attn_threads(), opt->memory_budget};
    if (basis.memory == 0)
        basis.memory = attn_plan_default_memory(basis.threads, physical_memory());
    attn_ranks_broadcast(&basis, sizeof basis);
    return basis;
}

/* Fills the report: layout, scale, slice size, bytes and FLOPs. */
/* The window under which the steps may slide their keys (run_sliding),
 * or 0: causal self-attention with a window, no k or v saved (they are
 * written whole), no per-key summary needed (of every key), and finite
 * inputs (a NaN or an infinity in v reaches every query, beyond the
 * window: attn_attend). */
static size_t slide_window(const run_state *st)
{
    const attn_variant *v = &st->cfg.variant;
    bool every_key = run_saved(st, ATTN_OUT_K) || run_saved(st, ATTN_OUT_V);
    for (int i = 0; i < ATTN_KEY_SUMMARY_COUNT; i++)
        every_key = every_key || attn_plan_needs_key_summary(st->opt->save, (attn_key_summary)i);
    if (st->report->layout.cross || !v->causal || v->window == 0 || st->opt->allow_nonfinite ||
        every_key)
        return 0;
    return v->window;
}

static int plan(run_state *st, const plan_basis *basis, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    attn_run_report *report = st->report;
    const attn_preset *preset = st->preset;
    attn_weight_layout weights = opt->layout != ATTN_LAYOUT_DEFAULT ? opt->layout
                               : preset != NULL ? preset->layout : ATTN_LAYOUT_XW;
    const attn_plan_request request = {
        .heads = opt->heads, .kv_heads = opt->kv_heads, .linear = weights == ATTN_LAYOUT_LINEAR,
        .heads_interleaved = opt->qkv_heads || (preset != NULL && preset->qkv_heads &&
                                                 opt->names[ATTN_IN_WQKV] == NULL),
    };
    int status = attn_plan_layout_for(st->info, opt->input, &request, &report->layout, err);
    if (status != ATTN_OK)
        return status;
    attn_dims *d = &report->layout.dims;
    if (report->layout.batched && opt->first_items > 0 && opt->first_items < d->batch)
        d->batch = opt->first_items;           /* items are read by their index */
    st->cfg.dims = *d;
    if ((status = plan_variants(st, err)) != ATTN_OK)
        return status;
    report->save = opt->save;
    report->flops = attn_plan_flops(d);
    report->threads = (size_t)attn_threads();
    if (opt->store == ATTN_STORE_F64 && opt->precision == ATTN_F32)
        return attn_fail_hint(err, ATTN_EUSAGE, ATTN_HINT_PRECISION, "stored type f64: wider than "
                              "the computation's float32");
    report->store = attn_store_for(opt->store, opt->precision);
    report->memory_cap = basis->memory;
    const bool online = attn_plan_map_count(opt->save) == 0;
    report->online = online;
    st->cfg.precision = opt->precision;
    st->cfg.check_overflow = !opt->allow_nonfinite;
    /* What every step holds whatever its size: the threads' scratch of
     * the attention and of the packing (rank 0's threads, as the plan). */
    const size_t packing = basis->threads *
                           attn_store_scratch_bytes(ATTN_CHUNK_BYTES + ATTN_CHUNK_BYTES / 8);
    const attn_step_request request_steps = {
        .precision = opt->precision, .store = report->store, .save = opt->save,
        .compress = opt->compress > 0, .memory = report->memory_cap, .forced = opt->slice_items,
        .threads = basis->threads, .task_rows = attn_task_rows(&st->cfg, online),
        .ranks = attn_rank_count(), .slide_window = slide_window(st),
        .fixed = attn_attend_scratch_bytes_for(&st->cfg, 1, online, basis->threads) + packing,
    };
    status = attn_plan_steps(&report->layout, &request_steps, &st->sizes, &report->slice_items, err);
    if (status != ATTN_OK)
        return status;
    report->slice_rows = st->sizes.rows;
    report->step_blocks = attn_plan_step_blocks(&report->layout, &st->sizes, report->slice_items,
                                                request_steps.task_rows);
    report->slice_bytes = attn_plan_step_bytes(&report->layout, &st->sizes, report->slice_items);
    report->held_bytes = attn_plan_held_bytes(&report->layout, &st->sizes, report->slice_items);
    report->least_bytes = st->sizes.least_bytes;
    report->least_rows = st->sizes.least_rows < d->n ? st->sizes.least_rows : d->n;
    report->slide_keys = st->sizes.slide_keys;
    report->scratch_bytes = st->sizes.bytes_fixed;
    if (report->slice_bytes == SIZE_MAX || report->held_bytes == SIZE_MAX)
        return attn_fail(err, ATTN_EINPUT, "%s: a slice of %zu batch items is too large",
                         opt->input, report->slice_items);
    if ((status = run_plan_stored(st, err)) != ATTN_OK)
        return status;
    report->config = st->cfg;
    memcpy(report->inputs, st->info, sizeof st->info);
    for (int i = 0; i < ATTN_IN_COUNT; i++)
        report->inputs[i].name = NULL;   /* joined names live only as long as the run */
    return ATTN_OK;
}

static void release(run_state *st)
{
    for (int i = 0; i < ATTN_IN_COUNT; i++) {
        free(st->whole[i]);
        free(st->paths[i]);
    }
    free(st->alibi);
    free(st->wo_gram);
    free(st->fused);
    free(st->fused_bias);
    free(st->slice_memory);
    free(st->own_steps);
    free(st->key_bounds);
    for (int i = 0; i < 2; i++) {
        free(st->staging[i]);
        free(st->jobs[i]);
    }
    attn_packer_free(st->packer);
    attn_h5in_close(st->in);
}

/* Opens the input with the lock the run needs: shared to read it,
 * exclusive to replace it (--in-place). */
static int open_input(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    attn_h5in_options in = {
        .lock = attn_rank() != 0 ? ATTN_LOCK_HELD
              : opt->in_place ? ATTN_LOCK_EXCLUSIVE : ATTN_LOCK_SHARED,
        .wait = opt->wait, .allow_external = opt->allow_external, .cancel = opt->cancel,
    };
    return attn_h5in_open_with(opt->input, &in, &st->in, err);
}

/* Appending (options->append): where the results go, checked before any
 * work (also for a dry run, which writes nothing). */
static int check_append(const attn_run_options *opt, attn_index_target *target, attn_error *err)
{
    if (opt->in_place)
        return attn_fail(err, ATTN_EUSAGE, "%s: results are appended to an index, not added to "
                         "the input", opt->input);
    if (opt->output == NULL)
        return attn_fail(err, ATTN_EUSAGE, "appending needs the index file to append to");
    return attn_index_check(target, opt->output, opt->group, opt->force, err);
}

/*
 * Appended results are written like any output, to a temporary beside
 * the index (so options with that name stand for the run's from here on:
 * `part`), and become a part at the commit.
 */
static void become_part(run_state *st, const attn_index_target *append, attn_run_options *part)
{
    if (append == NULL)
        return;
    *part = *st->opt;
    part->output = append->index;
    part->force = true;                /* the index exists: only the temporary is made */
    st->opt = part;
}

/*
 * Every rank's handle on the file rank 0 made (attn_ranks.h): the file
 * closed on rank 0, the temporary's name handed to every rank (so that
 * each one's signal handler can remove it), then opened by all together
 * for their writes.
 */
static int share_output(run_state *st, int status, bool *opened, attn_error *err)
{
    attn_atomic *tx = st->opt->transaction, named;
    memset(&named, 0, sizeof named);
    if (attn_rank() == 0) {
        attn_error close_err;
        int closed = attn_h5out_close(st->out, &close_err);
        st->out = NULL;
        if (status == ATTN_OK && closed != ATTN_OK) {
            status = closed;
            *err = close_err;
        }
        if (status == ATTN_OK)
            status = run_reserve_space(st, tx->temp_path, err);
        named = *tx;
    }
    if ((status = attn_ranks_agree(status, err)) != ATTN_OK)
        return status;
    *opened = true;                    /* on every rank, or on none */
    attn_ranks_broadcast(&named, sizeof named);
    if (attn_rank() != 0) {
        memcpy(tx->final_path, named.final_path, sizeof tx->final_path);
        memcpy(tx->temp_path, named.temp_path, sizeof tx->temp_path);
    }
    status = attn_h5out_open_shared(tx->temp_path, tx->final_path, st->opt->group, &st->out, err);
    for (int i = 0; i < ATTN_OUT_COUNT && status == ATTN_OK; i++)
        if (run_saved(st, (attn_output)i))
            status = attn_h5out_find_dataset(st->out, attn_output_name((attn_output)i),
                                             &st->handles[i], err);
    return attn_ranks_agree(status, err);
}

/* The output, complete: flushed, then (the input still as it was read)
 * renamed into place, or made a part of the index (append) -- by rank 0,
 * the others told how it went. */
static int commit(run_state *st, const attn_index_target *append, attn_error *err)
{
    attn_atomic *tx = st->opt->transaction;
    int status = ATTN_OK;
    /* From here rank 0 alone decides the temporary's fate: a signal the
     * other ranks take leaves it to rank 0 (see attn_atomic.committing),
     * which removes it unless it is already renaming it. */
    if (attn_rank() != 0)
        tx->committing = 1;
    if (attn_rank() == 0) {
        status = attn_atomic_flush(tx, err);
        if (status == ATTN_OK && (status = attn_h5in_check_unchanged(st->in, err)) != ATTN_OK)
            attn_atomic_abort(tx);
        if (status == ATTN_OK)
            status = append != NULL ? attn_index_commit(append, tx, st->opt->cancel, err)
                                    : attn_atomic_publish(tx, st->opt->cancel, err);
    }
    status = attn_ranks_agree(status, err);
    if (attn_rank() != 0)
        tx->temp_path[0] = '\0';     /* renamed, or removed by rank 0 */
    return status;
}

int attn_run(const attn_run_options *options, attn_run_report *report, attn_error *err)
{
    attn_index_target target;
    attn_run_options part;
    const attn_index_target *append = options->append ? &target : NULL;
    const bool shared = attn_ranks_shared_file();
    bool opened = false;               /* the ranks opened the shared file */
    run_state st;
    memset(&st, 0, sizeof st);
    memset(report, 0, sizeof *report);
    st.opt = options;
    st.report = report;
    if (options->transaction != NULL)
        memset(options->transaction, 0, sizeof *options->transaction);

    if (options->threads > 0)          /* the plan sizes its steps for them */
        attn_set_threads(options->threads);
    else
        share_cores();
    const plan_basis basis = plan_basis_of(options);
    int status = run_check_options(options, err);
    if (status == ATTN_OK && append != NULL)
        status = check_append(options, &target, err);
    if (status == ATTN_OK && options->preset != NULL &&
        (st.preset = attn_preset_find(options->preset)) == NULL)
        status = attn_fail(err, ATTN_EUSAGE, "preset '%s': unknown (choose from %s)",
                           options->preset, attn_preset_list());
    attn_h5_prepare();
    attn_h5_allow_plugins(options->allow_plugins);
    struct rlimit saved;
    bool capped = status == ATTN_OK && attn_guard_cap_parse_memory(&saved);
    if (status == ATTN_OK && (status = open_input(&st, err)) == ATTN_OK &&
        (status = describe_inputs(&st, err)) == ATTN_OK &&
        (status = plan(&st, &basis, err)) == ATTN_OK)
        status = run_check_tokens(&st, err);
    if (capped)
        attn_guard_restore_memory(&saved);
    status = attn_ranks_agree(status, err);
    if (status != ATTN_OK || options->dry_run) {
        if (status == ATTN_OK)
            run_report_warnings(&st);
        release(&st);
        return status;
    }
    if ((status = attn_guard_threads(attn_threads(), err)) == ATTN_OK &&
        (status = attn_guard_memory(run_planned_bytes(&st), attn_threads(), err)) == ATTN_OK &&
        (status = run_check_free_space(&st, err)) == ATTN_OK &&
        (status = run_load_parameters(&st, err)) == ATTN_OK &&
        (status = run_load_shared(&st, err)) == ATTN_OK &&
        (status = run_share_steps(&st, err)) == ATTN_OK &&
        (status = run_allocate_slices(&st, err)) == ATTN_OK)
        status = run_allocate_staging(&st, err);
    become_part(&st, append, &part);
    /* With a shared file rank 0 makes it -- datasets, axes, tokens and
     * provenance, as without -- and every rank then writes the values. */
    if ((status = attn_ranks_agree(status, err)) == ATTN_OK && attn_rank() == 0)
        status = run_open_output(&st, err);
    if (shared)
        status = share_output(&st, status, &opened, err);
    if (status == ATTN_OK)
        status = run_steps(&st, err);
    if (opened && status == ATTN_EIO) {      /* the ranks may not close it together */
        attn_atomic_abort(st.opt->transaction);
        attn_ranks_strand();
        release(&st);
        return status;
    }

    /* Close the output whatever happened, then keep it only on success;
     * the input stays open (and locked) until the output is in place. */
    attn_error close_err;
    int closed = attn_h5out_close(st.out, &close_err);
    if (status == ATTN_OK && closed != ATTN_OK) {
        status = closed;
        *err = close_err;
    }
    /* (the ranks' counts for the warnings summed in the same exchange) */
    if ((status = attn_ranks_agree_sum(status, &st.hidden_items, err)) == ATTN_OK &&
        (status = attn_ranks_agree_sum(status, &st.blind_rows, err)) == ATTN_OK)
        status = commit(&st, append, err);
    else
        attn_atomic_abort(st.opt->transaction);
    if (status == ATTN_OK)
        run_report_warnings(&st);
    release(&st);
    return status;
}
