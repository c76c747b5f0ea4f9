/*
 * diagnose.c - when --expect finds a difference: the first item re-run
 * under the conventions people confuse -- the weights' layout, the causal
 * mask, the mask's sense, the number of heads, the scale, RoPE's style,
 * the K/V heads, X's first two axes -- one change at a time, then two at a time, until the
 * references match; one line says which (expect.h).
 *
 * Each re-run is attn_run itself (first_items 1) into a temporary results
 * file of its own beside the results, removed once compared: the written
 * results are never touched.  Bounded by DIAGNOSE_RUNS runs.
 */
#include "attnrun/expect.h"

#include "attn_ranks.h"
#include "cli/cli.h"

#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DIAGNOSE_RUNS 64
#define CHANGES_MAX 24

/* One convention changed from the run's. */
typedef enum change_kind {
    CHANGE_NONE, CHANGE_LAYOUT, CHANGE_CAUSAL, CHANGE_MASK_INVERT, CHANGE_HEADS, CHANGE_SCALE,
    CHANGE_ROPE_STYLE, CHANGE_KV_HEADS, CHANGE_X_TRANSPOSED
} change_kind;

typedef struct change {
    change_kind kind;
    size_t count;                 /* HEADS, KV_HEADS                       */
    double scale;                 /* SCALE                                 */
    char text[48];                /* as an option: "--layout linear"       */
} change;

typedef struct changes {
    change list[CHANGES_MAX];
    size_t count;
} changes;

static void add(changes *c, change one)
{
    if (c->count < CHANGES_MAX)
        c->list[c->count++] = one;
}

/* The layout the run read the weights in. */
static attn_weight_layout run_layout(const attn_run_options *opt)
{
    const attn_preset *preset = opt->preset != NULL ? attn_preset_find(opt->preset) : NULL;
    return opt->layout != ATTN_LAYOUT_DEFAULT ? opt->layout
         : preset != NULL ? preset->layout : ATTN_LAYOUT_XW;
}

/* Up to `most` divisors of `whole` other than `now`, nearest to it first
 * (by ratio), each at most `limit`. */
static size_t other_divisors(size_t whole, size_t now, size_t limit, size_t most, size_t *out)
{
    size_t found = 0;
    for (size_t pass = 0; pass < most; pass++) {
        size_t best = 0;
        double best_distance = INFINITY;
        for (size_t d = 1; d <= limit && d <= whole; d++) {
            bool taken = d == now;
            for (size_t i = 0; i < found; i++)
                taken = taken || out[i] == d;
            double distance = fabs(log((double)d / (double)now));
            if (whole % d == 0 && !taken && distance < best_distance) {
                best = d;
                best_distance = distance;
            }
        }
        if (best == 0)
            break;
        out[found++] = best;
    }
    return found;
}

/* The conventions worth trying against this run. */
static void list_changes(const attn_run_options *opt, const attn_run_report *report,
                         changes *c)
{
    const attn_variant *v = &report->config.variant;
    const attn_dims *d = &report->layout.dims;
    const attn_preset *preset = opt->preset != NULL ? attn_preset_find(opt->preset) : NULL;
    change one = {.kind = CHANGE_LAYOUT};
    snprintf(one.text, sizeof one.text, "--layout %s",
             run_layout(opt) == ATTN_LAYOUT_LINEAR ? "xw" : "linear");
    add(c, one);
    if (!v->causal || preset == NULL || !preset->causal) {   /* a preset's stays */
        one = (change){.kind = CHANGE_CAUSAL};
        snprintf(one.text, sizeof one.text, "%s", v->causal ? "without --causal" : "--causal");
        add(c, one);
    }
    if (report->inputs[ATTN_IN_MASK].present) {
        one = (change){.kind = CHANGE_MASK_INVERT};
        snprintf(one.text, sizeof one.text, "%s",
                 opt->mask_invert ? "without --mask-invert" : "--mask-invert");
        add(c, one);
    }
    const bool heads_of_shape = opt->heads == 0 && report->inputs[ATTN_IN_WQ].rank == 3;
    size_t found[8];
    size_t n = heads_of_shape ? 0 : other_divisors(d->heads * d->d_k, d->heads, 256, 6, found);
    for (size_t i = 0; i < n; i++) {
        one = (change){.kind = CHANGE_HEADS, .count = found[i]};
        snprintf(one.text, sizeof one.text, "--heads %zu", found[i]);
        add(c, one);
    }
    const double scales[3] = {1 / sqrt((double)d->d_k), 1 / (double)d->d_k, 1};
    const char *names[3] = {"1/sqrt(d_k)", "1/d_k", "1"};
    for (size_t i = 0; i < 3; i++) {
        if (fabs(scales[i] - v->scale) <= 1e-12 * scales[i])
            continue;
        one = (change){.kind = CHANGE_SCALE, .scale = scales[i]};
        snprintf(one.text, sizeof one.text, "--scale %.8g (%s)", scales[i], names[i]);
        add(c, one);
    }
    if (v->rope.theta != 0) {
        one = (change){.kind = CHANGE_ROPE_STYLE};
        snprintf(one.text, sizeof one.text, "--rope-style %s",
                 attn_rope_style_name(v->rope.style == ATTN_ROPE_GPTJ ? ATTN_ROPE_NEOX
                                                                     : ATTN_ROPE_GPTJ));
        add(c, one);
    }
    if (report->layout.batched && report->inputs[ATTN_IN_X].rank == 3 && d->batch == d->n &&
        !report->layout.cross) {     /* else X transposed has other shapes, refused before */
        one = (change){.kind = CHANGE_X_TRANSPOSED};
        snprintf(one.text, sizeof one.text, "X transposed (store x.transpose(0, 1))");
        add(c, one);
    }
    if (report->layout.fused) {
        n = other_divisors(d->heads, attn_kv_heads(d), d->heads, 4, found);
        for (size_t i = 0; i < n; i++) {
            one = (change){.kind = CHANGE_KV_HEADS, .count = found[i]};
            snprintf(one.text, sizeof one.text, "--kv-heads %zu", found[i]);
            add(c, one);
        }
    }
}

static void apply(const change *one, const attn_run_report *report, attn_run_options *o)
{
    const attn_variant *v = &report->config.variant;
    switch (one->kind) {
    case CHANGE_NONE:
        break;
    case CHANGE_LAYOUT:
        o->layout = run_layout(o) == ATTN_LAYOUT_LINEAR ? ATTN_LAYOUT_XW : ATTN_LAYOUT_LINEAR;
        break;
    case CHANGE_CAUSAL:
        o->variant.causal = !v->causal;
        break;
    case CHANGE_MASK_INVERT:
        o->mask_invert = !o->mask_invert;
        break;
    case CHANGE_HEADS:
        o->heads = one->count;
        break;
    case CHANGE_SCALE:
        o->variant.scale = one->scale;
        break;
    case CHANGE_ROPE_STYLE:
        o->variant.rope.style = v->rope.style == ATTN_ROPE_GPTJ ? ATTN_ROPE_NEOX : ATTN_ROPE_GPTJ;
        break;
    case CHANGE_KV_HEADS:
        o->kv_heads = one->count;
        break;
    case CHANGE_X_TRANSPOSED:
        o->x_sequence_first = !o->x_sequence_first;
        break;
    }
}

/* Whether two changes can be tried together (not two of one kind). */
static bool compatible(const change *a, const change *b)
{
    return a->kind != b->kind;
}

/* What one re-run found: the largest excess over the references (infinite
 * when the run failed or a shape differs), and the largest difference. */
typedef struct trial {
    double worst, abs;
    bool matched;
} trial;

/* Rank 0: the re-run's outputs in `path` against the references' first
 * item(s). */
static trial judge(const attnrun_expect *e, const attn_run_options *opt, const char *path)
{
    trial t = {0, 0, true};
    attn_results *got = NULL, *in = NULL;
    attn_error err;
    if (attn_results_open(path, "/", &got, &err) != ATTN_OK ||
        attn_results_open(opt->input, "/", &in, &err) != ATTN_OK) {
        attn_results_close(got);
        return (trial){INFINITY, INFINITY, false};
    }
    for (size_t i = 0; i < e->count && t.matched; i++) {
        const char *name = attn_output_name(e->pairs[i].which);
        const char *ref = expect_in_root(e->pairs[i].reference);
        attn_tensor_info a = {.name = name}, b = {.name = ref};
        expect_diff d;
        bool fits = attn_results_describe(got, &a, &err) == ATTN_OK &&
                    attn_results_describe(in, &b, &err) == ATTN_OK && a.present && b.present &&
                    a.rank == b.rank && a.dims[0] <= b.dims[0];
        for (size_t k = 1; fits && k < a.rank; k++)
            fits = a.dims[k] == b.dims[k];
        if (!fits || expect_diff_of(got, name, in, ref, &d, &err) != ATTN_OK) {
            t = (trial){INFINITY, INFINITY, false};
            break;
        }
        double tol = expect_tolerance(e, opt->precision, &d);
        t.worst = d.worst > t.worst ? d.worst : t.worst;
        t.abs = d.abs > t.abs ? d.abs : t.abs;
        t.matched = d.worst <= tol;
    }
    attn_results_close(got);
    attn_results_close(in);
    return t;
}

/* One re-run of the first item with `a` and `b` changed; the trial on
 * every rank. */
static trial try(const attnrun_expect *e, const attn_run_options *opt,
                 const attn_run_report *report, const change *a, const change *b,
                 const char *path)
{
    attn_run_options o = *opt;
    attn_run_report r;
    attn_error err;
    unsigned save = 0;
    for (size_t i = 0; i < e->count; i++)
        save |= 1u << e->pairs[i].which;
    o.output = path;
    o.in_place = o.append = o.force = o.dry_run = false;
    o.group = "/";
    o.save = save;
    o.compress = 0;
    o.tokens = o.kv_tokens = NULL;
    o.progress = NULL;
    o.warn = NULL;
    o.command_line = "attnrun --expect (a re-run of the first item)";
    o.first_items = 1;
    apply(a, report, &o);
    apply(b, report, &o);
    trial t = {INFINITY, INFINITY, false};
    int status = attn_run(&o, &r, &err);
    if (attn_rank() == 0 && status == ATTN_OK) {
        t = judge(e, opt, path);
        unlink(path);
    }
    attn_ranks_broadcast(&t, sizeof t);
    return t;
}

/* "they match" (several outputs, or a plural one), "it matches". */
static const char *they_match(const attnrun_expect *e)
{
    return e->count > 1 || plural(attn_output_name(e->pairs[0].which)) ? "they match"
                                                                       : "it matches";
}

/* "with --layout linear --causal", "without --mask-invert", "with --heads 8
 * without --causal": the changes as options (b may be CHANGE_NONE). */
static const char *phrase(const change *a, const change *b)
{
    static char text[128];
    const bool a_off = strncmp(a->text, "without ", 8) == 0;
    const bool b_off = strncmp(b->text, "without ", 8) == 0;
    if (a_off && !b_off && b->kind != CHANGE_NONE)
        return phrase(b, a);               /* what to add first */
    snprintf(text, sizeof text, "%s%s%s%s", a_off ? "" : "with ", a->text,
             b->kind == CHANGE_NONE ? "" : " ", b->text);
    return text;
}

/* The re-runs' file: beside the results, named for this process. */
static void scratch_path(const attn_run_options *opt, char path[1024])
{
    if (attn_rank() == 0) {
        char copy[1024];
        snprintf(copy, sizeof copy, "%s", opt->output != NULL ? opt->output : opt->input);
        snprintf(path, 1024, "%s/.attnrun-expect-%ld.h5", dirname(copy), (long)getpid());
    }
    attn_ranks_broadcast(path, 1024);
}

void expect_diagnose(const attnrun_expect *e, const attn_run_options *opt,
                     const attn_run_report *report, const char *failure)
{
    changes c = {.count = 0};
    char path[1024];
    list_changes(opt, report, &c);
    scratch_path(opt, path);
    const change none = {.kind = CHANGE_NONE};
    trial as_run = try(e, opt, report, &none, &none, path);
    if (as_run.matched) {
        fprintf(stderr, "attnrun: expect: %s, but the first item matches as run (%.2g): "
                "the items after it differ, which no convention explains\n", failure,
                as_run.abs);
        return;
    }
    size_t runs = 1;
    const change *best_a = &none, *best_b = &none;
    double best = as_run.worst, best_abs = as_run.abs;
    for (size_t i = 0; i < c.count && runs < DIAGNOSE_RUNS; i++, runs++) {
        trial t = try(e, opt, report, &c.list[i], &none, path);
        if (t.matched) {
            fprintf(stderr, "attnrun: expect: %s; %s (%.2g) %s\n", failure, they_match(e),
                    t.abs, phrase(&c.list[i], &none));
            return;
        }
        if (t.worst < best) {
            best = t.worst;
            best_abs = t.abs;
            best_a = &c.list[i];
        }
    }
    for (size_t i = 0; i < c.count && runs < DIAGNOSE_RUNS; i++)
        for (size_t j = i + 1; j < c.count && runs < DIAGNOSE_RUNS; j++) {
            if (!compatible(&c.list[i], &c.list[j]))
                continue;
            trial t = try(e, opt, report, &c.list[i], &c.list[j], path);
            runs++;
            if (t.matched) {
                fprintf(stderr, "attnrun: expect: %s; %s (%.2g) %s\n", failure,
                        they_match(e), t.abs, phrase(&c.list[i], &c.list[j]));
                return;
            }
            if (t.worst < best) {
                best = t.worst;
                best_abs = t.abs;
                best_a = &c.list[i];
                best_b = &c.list[j];
            }
        }
    char tried[1024] = "";
    size_t len = 0;
    for (size_t i = 0; i < c.count; i++)
        len += (size_t)snprintf(tried + len, len < sizeof tried ? sizeof tried - len : 0, "%s%s",
                                i ? ", " : "", c.list[i].text);
    if (best_a == &none)
        fprintf(stderr, "attnrun: expect: %s; no convention tried matches the first item "
                "(%zu runs: %s, and their pairs)\n", failure, runs, tried);
    else
        fprintf(stderr, "attnrun: expect: %s; no convention tried matches the first item "
                "(%zu runs: %s, and their pairs); the nearest, %s%s%s, differs by %.3g\n",
                failure, runs, tried, best_a->text, best_b == &none ? "" : " ", best_b->text,
                best_abs);
}
