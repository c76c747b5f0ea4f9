/*
 * plan_json.c - the plan of a dry run as one JSON object (plan_json.h;
 * docs/outputs.md, "Plans as JSON", lists every key).  The inputs, the outputs and
 * the settings are written by walking their tables, so a new one appears
 * here by itself.
 *
 * Legend: B batch, H heads, G K/V heads, n queries, m keys, D d_model.
 */
#include "attnrun/plan_json.h"
#include "cli/json.h"

#include <string.h>

/* A shape as an array of whole numbers. */
static void write_shape(json_writer *w, const char *key, const size_t *dims, size_t rank)
{
    json_array_begin(w, key);
    for (size_t i = 0; i < rank; i++)
        json_size(w, NULL, dims[i]);
    json_array_end(w);
}

/* The layer's sizes. */
static void write_dims(json_writer *w, const attn_run_report *rep)
{
    const attn_dims *d = &rep->layout.dims;
    json_object_begin(w, "dims");
    json_size(w, "batch", d->batch);
    json_bool(w, "batched", rep->layout.batched);
    json_size(w, "n", d->n);
    json_size(w, "m", d->m);
    json_size(w, "d_model", d->d_model);
    json_size(w, "heads", d->heads);
    json_size(w, "kv_heads", attn_kv_heads(d));
    json_size(w, "d_k", d->d_k);
    json_size(w, "d_v", d->d_v);
    json_object_end(w);
}

/* Each input of the input table by its short name ("attn-bias" ->
 * "attn_bias"): its shape, or null when the run does not use it. */
static void write_inputs(json_writer *w, const attn_run_report *rep)
{
    json_object_begin(w, "inputs");
    for (int i = 0; i < ATTN_IN_COUNT; i++) {
        char key[64];
        snprintf(key, sizeof key, "%s", attn_input_spec_of((attn_input)i)->key);
        for (char *c = key; *c != '\0'; c++)
            *c = *c == '-' ? '_' : *c;
        const attn_tensor_info *t = &rep->inputs[i];
        if (t->present)
            write_shape(w, key, t->dims, t->rank);
        else
            json_null(w, key);
    }
    json_object_end(w);
}

const char *plan_dtype_name(attn_store store)
{
    static const char *const names[] = {
        [ATTN_STORE_F16] = "float16", [ATTN_STORE_BF16] = "bfloat16",
        [ATTN_STORE_F32] = "float32", [ATTN_STORE_F64] = "float64", [ATTN_STORE_I32] = "int32",
    };
    if ((size_t)store < sizeof names / sizeof names[0] && names[store] != NULL)
        return names[store];
    return attn_store_name(store);
}

/* One saved output: name, shape and axes, stored type, bytes, chunks. */
static void write_output(json_writer *w, const attn_run_report *rep, attn_output which)
{
    size_t dims[4], dense;
    const char *labels[4];
    const size_t rank = attn_output_shape(&rep->layout, which, dims, labels);
    const attn_store type = rep->output_store[which];
    json_object_begin(w, NULL);
    json_string(w, "name", attn_output_name(which));
    write_shape(w, "shape", dims, rank);
    json_array_begin(w, "axes");
    for (size_t i = 0; i < rank; i++)
        json_string(w, NULL, labels[i]);
    json_array_end(w);
    json_string(w, "dtype", plan_dtype_name(type));
    json_size(w, "bytes", rep->output_bytes[which]);
    if (attn_size_product(&dense, dims, rank) && attn_size_mul(&dense, dense, attn_store_size(type)))
        json_size(w, "dense_bytes", dense);
    else
        json_null(w, "dense_bytes");
    write_shape(w, "chunk", rep->output_chunk[which], rank);
    json_object_end(w);
}

/* How the work is cut: steps of items x rows, their memory, threads. */
static void write_plan(json_writer *w, const attn_run_report *rep)
{
    const attn_dims *d = &rep->layout.dims;
    const size_t rows = rep->slice_rows, items = rep->slice_items;
    const size_t blocks = rows != 0 ? (d->n + rows - 1) / rows : 0;
    const size_t slices = items != 0 ? (d->batch + items - 1) / items : 0;
    json_object_begin(w, "plan");
    json_size(w, "items_per_step", items);
    json_size(w, "rows_per_block", rows);
    json_size(w, "row_blocks", blocks);
    json_size(w, "slices", slices);
    json_size(w, "steps", slices * blocks);      /* <= B n */
    json_size(w, "step_bytes", rep->slice_bytes);
    json_size(w, "memory_cap", rep->memory_cap);
    json_size(w, "held_bytes", rep->held_bytes);
    json_size(w, "least_step_bytes", rep->least_bytes);
    json_size(w, "least_step_rows", rep->least_rows);
    json_bool(w, "least_step_over_cap", rep->least_bytes > rep->memory_cap);
    json_size(w, "slide_keys", rep->slide_keys);
    json_size(w, "blocks_per_step", rep->step_blocks);
    json_size(w, "threads", rep->threads);
    json_bool(w, "online_softmax", rep->online);
    json_object_end(w);
}

/* One setting's value under key (NULL inside an array); null when the
 * run does not use it and the setting says so. */
static void write_setting(json_writer *w, const char *key, const attn_setting *s,
                          const attn_setting_value *v)
{
    if (!v->used && (s->shown & ATTN_SHOWN_JSON_NULL)) {
        json_null(w, key);
        return;
    }
    switch (s->kind) {
    case ATTN_SETTING_TEXT: json_string(w, key, v->text); break;
    case ATTN_SETTING_INTEGER: json_size(w, key, (size_t)v->integer); break;
    case ATTN_SETTING_REAL: json_real(w, key, v->real); break;
    case ATTN_SETTING_FLAG: json_bool(w, key, v->integer != 0); break;
    }
}

/*
 * The settings whose place in the plan starts with `prefix` ("" for the
 * top level: keys without a '.'; "variant." for those of that object),
 * from the settings table.  A place with one more '.' ("variant.rope.dim")
 * is a member of an object ("rope"), null as a whole when its first member
 * is null.
 */
static void write_settings(json_writer *w, const char *prefix, const attn_run_options *opt,
                           const attn_run_report *rep)
{
    const size_t skip = strlen(prefix);
    char group[64] = "";                /* the object open, or "" */
    bool group_null = false;
    for (size_t i = 0; i < attn_setting_count(); i++) {
        const attn_setting *s = attn_setting_at(i);
        if (s->json == NULL || strncmp(s->json, prefix, skip) != 0 ||
            (skip == 0 && strchr(s->json, '.') != NULL))
            continue;
        const char *key = s->json + skip, *dot = strchr(key, '.');
        const size_t group_len = dot != NULL ? (size_t)(dot - key) : 0;
        const attn_setting_value v = attn_setting_value_of(i, opt, rep);
        if (group[0] != '\0' && (dot == NULL || strncmp(group, key, group_len) != 0 ||
                                 group[group_len] != '\0')) {
            if (!group_null)
                json_object_end(w);
            group[0] = '\0';
        }
        if (dot != NULL && group[0] == '\0') {
            snprintf(group, sizeof group, "%.*s", (int)group_len, key);
            group_null = !v.used && (s->shown & ATTN_SHOWN_JSON_NULL);
            if (group_null)
                json_null(w, group);
            else
                json_object_begin(w, group);
        }
        if (dot != NULL && group_null)
            continue;
        write_setting(w, dot != NULL ? dot + 1 : key, s, &v);
    }
    if (group[0] != '\0' && !group_null)
        json_object_end(w);
}

void plan_json_print(FILE *out, const attn_run_options *opt, const attn_run_report *rep)
{
    json_writer w;
    json_start(&w, out);
    json_object_begin(&w, NULL);
    json_size(&w, "schema_version", PLAN_JSON_SCHEMA);
    json_string(&w, "attnrun_version", ATTN_VERSION);
    json_string(&w, "input", opt->input);
    json_string(&w, "output", opt->output);
    json_bool(&w, "in_place", opt->in_place);
    json_string(&w, "group", opt->group);
    json_string(&w, "weights_group", opt->weights_group);
    write_dims(&w, rep);
    write_inputs(&w, rep);
    write_settings(&w, "", opt, rep);
    json_real(&w, "flops", rep->flops);
    json_size(&w, "total_bytes", rep->total_bytes);
    json_array_begin(&w, "save");
    for (int i = 0; i < ATTN_OUT_COUNT; i++)
        if ((rep->save >> i) & 1u)
            json_string(&w, NULL, attn_output_name((attn_output)i));
    json_array_end(&w);
    json_array_begin(&w, "outputs");
    for (int i = 0; i < ATTN_OUT_COUNT; i++)
        if ((rep->save >> i) & 1u)
            write_output(&w, rep, (attn_output)i);
    json_array_end(&w);
    write_plan(&w, rep);
    json_object_begin(&w, "variant");
    write_settings(&w, "variant.", opt, rep);
    json_object_end(&w);
    json_object_end(&w);
    json_finish(&w);
}
