/*
 * suggest.c - what a missing input could have meant (run_state.h): the
 * group that holds a weight looked up under the wrong group, else the
 * datasets of the file whose type, rank and an axis fit what the input
 * must be, else the nearest names.  The message says what is there; the
 * hint names the setting and its value (ATTN_HINT_WEIGHTS_GROUP,
 * ATTN_HINT_NAME).
 *
 * Legend: B batch, n queries, m keys, D d_model.
 */
#include "run/run_state.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Datasets named in a message, at most. */
#define SHOWN 3

/* What the inputs found so far say of the sizes: 0 where unknown. */
typedef struct known_sizes {
    size_t batch, n, m, d_model;
    size_t weight_axes[16];     /* every axis of the weights found, when
                                   X is missing: d_model is one of them */
    size_t weight_axis_count;
} known_sizes;

static known_sizes sizes_known(const run_state *st)
{
    known_sizes k;
    memset(&k, 0, sizeof k);
    const attn_tensor_info *x = &st->info[ATTN_IN_X], *kv = &st->info[ATTN_IN_KV];
    if (x->present && x->rank >= 2 && x->rank <= 3) {
        k.d_model = x->dims[x->rank - 1];
        k.n = k.m = x->dims[x->rank - 2];
        k.batch = x->rank == 3 ? x->dims[0] : 1;
    }
    if (kv->present && kv->rank >= 2)
        k.m = kv->dims[kv->rank - 2];
    static const attn_input weights[] = {ATTN_IN_WQ, ATTN_IN_WK, ATTN_IN_WV, ATTN_IN_WO,
                                         ATTN_IN_WQKV};
    for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++) {
        const attn_tensor_info *w = &st->info[weights[i]];
        for (size_t a = 0; w->present && a < w->rank && a < 3 &&
                           k.weight_axis_count < sizeof k.weight_axes / sizeof k.weight_axes[0];
             a++)
            k.weight_axes[k.weight_axis_count++] = w->dims[a];
    }
    return k;
}

/* Whether length may be d_model: it is, or the weights have such an
 * axis, or nothing says. */
static bool may_be_d_model(const known_sizes *k, size_t length)
{
    if (k->d_model != 0)
        return length == k->d_model;
    for (size_t i = 0; i < k->weight_axis_count; i++)
        if (k->weight_axes[i] == length)
            return true;
    return k->weight_axis_count == 0;
}

/* Whether o has some axis that may be d_model. */
static bool has_d_model_axis(const known_sizes *k, const attn_h5in_object *o)
{
    for (size_t a = 0; a < o->rank; a++)
        if (may_be_d_model(k, o->dims[a]))
            return true;
    return false;
}

/* Whether the dataset o could be input `which`: its element type, its
 * rank and an axis of a size the other inputs already give. */
static bool fits(const known_sizes *k, attn_input which, const attn_h5in_object *o)
{
    const attn_input_spec *spec = attn_input_spec_of(which);
    const size_t r = o->rank, last = r > 0 ? o->dims[r - 1] : 0;
    if (r == 0 || r > 4)
        return false;
    if ((which == ATTN_IN_MASK || spec->integer) ? !o->integer : !o->floating)
        return false;
    switch (which) {
    case ATTN_IN_X:
        return r >= 2 && r <= 3 && may_be_d_model(k, last);
    case ATTN_IN_KV:
        return r >= 2 && r <= 3 && may_be_d_model(k, last);
    case ATTN_IN_MASK:
    case ATTN_IN_KV_POSITIONS:
        return r <= 2 && (k->m == 0 || last == k->m);
    case ATTN_IN_POSITIONS:
        return r <= 2 && (k->n == 0 || last == k->n);
    case ATTN_IN_WQ: case ATTN_IN_WK: case ATTN_IN_WV: case ATTN_IN_WO: case ATTN_IN_WQKV:
        return r >= 2 && r <= 3 && has_d_model_axis(k, o);
    case ATTN_IN_BQ: case ATTN_IN_BK: case ATTN_IN_BV: case ATTN_IN_BO: case ATTN_IN_BQKV:
        return r <= 2;
    case ATTN_IN_Q_NORM: case ATTN_IN_K_NORM: case ATTN_IN_ALIBI_SLOPES:
        return r == 1;
    case ATTN_IN_ATTN_BIAS:
        return r >= 2 && (k->n == 0 || o->dims[r - 2] == k->n) && (k->m == 0 || last == k->m);
    case ATTN_IN_COUNT:
        break;
    }
    return false;
}

/* name without leading slashes: "/X" and "X" are one dataset. */
static const char *from_root(const char *name)
{
    return name + strspn(name, "/");
}

/* Whether another input found already reads the dataset at path. */
static bool used(const run_state *st, const char *path)
{
    for (int i = 0; i < ATTN_IN_COUNT; i++)
        if (st->info[i].present && st->info[i].name != NULL &&
            strcmp(from_root(st->info[i].name), from_root(path)) == 0)
            return true;
    return false;
}

/* The last name of a path. */
static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

/* A dataset's path as an option would take it: without the leading "/"
 * at the root, unless names are looked up under a weights group. */
static const char *as_given(const run_state *st, attn_input which, const char *path)
{
    const char *group = st->opt->weights_group;
    const bool grouped = attn_input_spec_of(which)->parameter && group != NULL &&
                         from_root(group)[0] != '\0';
    return !grouped && strchr(path + 1, '/') == NULL ? path + 1 : path;
}

/* A dataset that could be meant, and how likely. */
typedef struct candidate {
    const attn_h5in_object *object;
    size_t edits;               /* from the name looked up (its last part) */
    bool beside;                /* in the group the name was looked up in */
    size_t order;               /* in the file's listing                  */
} candidate;

/* The likelier first: fewer edits, then beside the name, then the file's
 * order. */
static int compare_candidates(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->edits != y->edits)
        return x->edits < y->edits ? -1 : 1;
    if (x->beside != y->beside)
        return x->beside ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Appends to err->msg. */
static void append(attn_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void append(attn_error *err, const char *fmt, ...)
{
    size_t len = strlen(err->msg);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg + len, sizeof err->msg - len, fmt, ap);
    va_end(ap);
}

/* The groups of the file other than `searched` (where the lookup went:
 * NULL or "" for the root) holding `relative` as a dataset: their count,
 * and into first the first inside `searched`, else the first (in the
 * file's order of names; "/" for the root). */
static size_t groups_holding(const attn_h5in_list *list, const char *relative,
                             const char *searched, char *first, size_t first_len)
{
    size_t count = 0, len = strlen(relative);
    bool found_inside = false;
    const char *skip = searched != NULL ? from_root(searched) : "";
    size_t skip_len = strlen(skip);
    while (skip_len > 0 && skip[skip_len - 1] == '/')
        skip_len--;
    for (size_t i = 0; i < list->count; i++) {
        const attn_h5in_object *o = &list->objects[i];
        const size_t at = strlen(o->path);
        if (o->group || at <= len || strcmp(o->path + at - len, relative) != 0 ||
            o->path[at - len - 1] != '/')
            continue;
        /* the group's path from the root, without slashes around it */
        const char *group = o->path + 1;
        const size_t group_len = at - len - 1 > 0 ? at - len - 2 : 0;
        if (group_len == skip_len && strncmp(group, skip, skip_len) == 0)
            continue;
        const bool inside = skip_len > 0 && group_len > skip_len &&
                            strncmp(group, skip, skip_len) == 0 && group[skip_len] == '/';
        if (count++ == 0 || (inside && !found_inside))
            snprintf(first, first_len, "/%.*s", (int)group_len, group);
        found_inside = found_inside || inside;
    }
    return count;
}

int run_missing_input(run_state *st, attn_input which, const char *relative, bool from_preset,
                      attn_error *err)
{
    const attn_input_spec *spec = attn_input_spec_of(which);
    const attn_tensor_info *t = &st->info[which];
    attn_h5in_list list;
    attn_error ignored;
    int status = attn_fail(err, ATTN_EINPUT, "%s: no dataset %s", st->opt->input, t->name);
    if (from_preset)
        append(err, " (the %s of preset %s)", spec->role, st->preset->name);
    if (attn_h5in_list_objects(st->in, &list, &ignored) != ATTN_OK)
        return status;

    /* a weight under another group: that group (the first inside the
     * group searched, else the first in the file's order of names) */
    char group[sizeof err->hint_arg];
    size_t count = 0;
    if (spec->parameter && relative[0] != '/' &&
        (count = groups_holding(&list, relative, st->opt->weights_group, group,
                                sizeof group)) > 0) {
        append(err, "; group %s holds %s", group, relative);
        if (count > 1)
            append(err, " (as do %zu other groups)", count - 1);
        err->hint = ATTN_HINT_WEIGHTS_GROUP;
        snprintf(err->hint_arg, sizeof err->hint_arg, "%s", group);
        attn_h5in_list_free(&list);
        return status;
    }

    /* datasets whose type, rank and sizes fit, the likeliest first */
    const known_sizes k = sizes_known(st);
    candidate *fit = attn_calloc(list.count, sizeof *fit);     /* (count) */
    const char *looked_up = from_root(t->name), *wanted = base_name(looked_up);
    const size_t wanted_len = strlen(wanted), limit = wanted_len / 3 > 1 ? wanted_len / 3 : 1;
    const size_t group_len = wanted > looked_up ? (size_t)(wanted - looked_up) - 1 : 0;
    candidate nearest = {.edits = SIZE_MAX};
    if (fit == NULL) {
        attn_h5in_list_free(&list);
        return status;
    }
    count = 0;
    for (size_t i = 0; i < list.count; i++) {
        const attn_h5in_object *o = &list.objects[i];
        const bool typed = (which == ATTN_IN_MASK || spec->integer) ? o->integer : o->floating;
        if (o->group || o->ours || !typed || used(st, o->path))
            continue;
        const char *name = from_root(o->path), *base = base_name(name);
        const size_t len = base > name ? (size_t)(base - name) - 1 : 0;
        const candidate c = {
            .object = o, .edits = attn_edit_distance(wanted, base), .order = i,
            .beside = len == group_len && strncmp(name, looked_up, len) == 0,
        };
        if (fits(&k, which, o))
            fit[count++] = c;
        else if (c.edits <= limit && compare_candidates(&c, &nearest) < 0)
            nearest = c;                       /* the nearest name, of another shape */
    }
    qsort(fit, count, sizeof *fit, compare_candidates);
    const attn_h5in_object *hinted;
    if (count > 0) {
        append(err, "; ");
        for (size_t i = 0; i < count && i < SHOWN; i++) {
            const attn_h5in_object *o = fit[i].object;
            char shape[128];
            append(err, "%s%s %s", i == 0 ? "" : i + 1 == count ? " or " : ", ",
                   as_given(st, which, o->path),
                   attn_format_shape(shape, sizeof shape, o->dims, o->rank));
        }
        if (count > SHOWN)
            append(err, " or %zu more", count - SHOWN);
        append(err, " could be the %s", spec->role);
        hinted = fit[0].object;
    } else if (nearest.object != NULL) {
        append(err, "; the nearest name is %s", as_given(st, which, nearest.object->path));
        hinted = nearest.object;
    } else {
        free(fit);
        attn_h5in_list_free(&list);
        return status;
    }
    free(fit);
    err->hint = ATTN_HINT_NAME;
    snprintf(err->hint_arg, sizeof err->hint_arg, "%s", as_given(st, which, hinted->path));
    snprintf(err->hint_name, sizeof err->hint_name, "%s", spec->key);
    attn_h5in_list_free(&list);
    return status;
}

int run_missing_tokens(const run_state *st, const char *name, const char *setting,
                       const char *role, size_t batch, size_t length, int status,
                       attn_error *err)
{
    attn_tensor_info probe = {.name = name};
    attn_h5in_list list;
    attn_error ignored;
    if (status != ATTN_EINPUT || attn_h5in_describe(st->in, ATTN_DATA_FLOAT, false, &probe,
                                                    &ignored) != ATTN_OK || probe.present ||
        attn_h5in_list_objects(st->in, &list, &ignored) != ATTN_OK)
        return status;                   /* not a missing dataset, or nothing to list */
    const attn_h5in_object *fit = NULL;
    size_t count = 0;
    for (size_t i = 0; i < list.count; i++) {
        const attn_h5in_object *o = &list.objects[i];
        if (o->group || o->ours || !o->strings || o->rank < 1 || o->rank > 2 ||
            o->dims[o->rank - 1] != length || (o->rank == 2 && o->dims[0] != batch))
            continue;
        if (count++ == 0)
            fit = o;
    }
    if (fit != NULL) {
        char shape[128];
        const char *given = strchr(fit->path + 1, '/') == NULL ? fit->path + 1 : fit->path;
        append(err, "; %s %s could be the %s", given,
               attn_format_shape(shape, sizeof shape, fit->dims, fit->rank), role);
        if (count > 1)
            append(err, " (or %zu other string datasets)", count - 1);
        err->hint = ATTN_HINT_NAME;
        snprintf(err->hint_arg, sizeof err->hint_arg, "%s", given);
        snprintf(err->hint_name, sizeof err->hint_name, "%s", setting);
    }
    attn_h5in_list_free(&list);
    return status;
}
