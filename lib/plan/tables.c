/*
 * tables.c - the input and output tables and what they say of each dataset:
 * names, roles, axes, shapes, stored types (attn_plan.h).
 *
 * Legend: B batch, H heads, n queries, m keys, D d_model, d_k, d_v.
 */
#include "attn_plan.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

/* The input table: every input dataset, how it is named and read. */
static const attn_input_spec input_table[ATTN_IN_COUNT] = {
    [ATTN_IN_X]    = {"x", "X", "queries", false, false, false},
    [ATTN_IN_KV]   = {"kv", NULL, "keys/values source", false, false, false},
    [ATTN_IN_MASK] = {"mask", NULL, "key padding mask", false, false, false},
    [ATTN_IN_WQ]   = {"wq", "W_Q", "query weights", false, true, false},
    [ATTN_IN_WK]   = {"wk", "W_K", "key weights", false, true, false},
    [ATTN_IN_WV]   = {"wv", "W_V", "value weights", false, true, false},
    [ATTN_IN_WO]   = {"wo", "W_O", "output weights", false, true, false},
    [ATTN_IN_BQ]   = {"bq", "b_Q", "query bias", false, true, true},
    [ATTN_IN_BK]   = {"bk", "b_K", "key bias", false, true, true},
    [ATTN_IN_BV]   = {"bv", "b_V", "value bias", false, true, true},
    [ATTN_IN_BO]   = {"bo", "b_O", "output bias", false, true, true},
    [ATTN_IN_WQKV] = {"wqkv", NULL, "fused Q|K|V weights", false, true, false},
    [ATTN_IN_BQKV] = {"bqkv", NULL, "fused Q|K|V bias", false, true, true},
    [ATTN_IN_Q_NORM] = {"q-norm", NULL, "q RMSNorm weights", false, true, false},
    [ATTN_IN_K_NORM] = {"k-norm", NULL, "k RMSNorm weights", false, true, false},
    [ATTN_IN_ALIBI_SLOPES] = {"alibi-slopes", NULL, "ALiBi slopes", false, true, false},
    [ATTN_IN_POSITIONS] = {"positions", NULL, "query positions", true, false, false},
    [ATTN_IN_KV_POSITIONS] = {"kv-positions", NULL, "key positions", true, false, false},
    [ATTN_IN_ATTN_BIAS] = {"attn-bias", NULL, "attention bias", false, false, false},
};

/* The output table: every output dataset, its axes and where it comes from. */
static const attn_output_spec output_table[ATTN_OUT_COUNT] = {
    [ATTN_OUT_SCORES] = {"scores",
        "attention logits entering the softmax: Q K^T * scale, then softcap, then ALiBi and "
        "attention bias added; masked entries are -inf",
        {ATTN_AXIS_HEAD, ATTN_AXIS_QUERY, ATTN_AXIS_KEY}, ATTN_FROM_SCORES},
    [ATTN_OUT_WEIGHTS] = {"weights",
        "attention weights: softmax of scores over keys; rows sum to 1, or are 0 where every key is masked",
        {ATTN_AXIS_HEAD, ATTN_AXIS_QUERY, ATTN_AXIS_KEY}, ATTN_FROM_WEIGHTS},
    [ATTN_OUT_HEADS] = {"heads", "per-head attention outputs: weights V",
        {ATTN_AXIS_HEAD, ATTN_AXIS_QUERY, ATTN_AXIS_D_V}, ATTN_FROM_CONCAT},
    [ATTN_OUT_OUTPUT] = {"output", "projected output: concat(heads) W_O + b_O",
        {ATTN_AXIS_QUERY, ATTN_AXIS_D_MODEL, ATTN_AXIS_NONE}, ATTN_FROM_OUTPUT},
    [ATTN_OUT_Q] = {"q", "per-head queries: X W_Q + b_Q (then q-norm and rotary embedding)",
        {ATTN_AXIS_HEAD, ATTN_AXIS_QUERY, ATTN_AXIS_D_K}, ATTN_FROM_Q},
    [ATTN_OUT_K] = {"k",
        "per-head keys: Y W_K + b_K (Y is X, or the keys/values source; then k-norm and rotary embedding)",
        {ATTN_AXIS_KV_HEAD, ATTN_AXIS_KEY, ATTN_AXIS_D_K}, ATTN_FROM_K},
    [ATTN_OUT_V] = {"v", "per-head values: Y W_V + b_V (Y is X, or the keys/values source)",
        {ATTN_AXIS_KV_HEAD, ATTN_AXIS_KEY, ATTN_AXIS_D_V}, ATTN_FROM_V},
    [ATTN_OUT_ENTROPY] = {"entropy",
        "entropy of each query's attention weights over the keys, in nats: -sum p log p "
        "(0 where every key is masked)",
        {ATTN_AXIS_HEAD, ATTN_AXIS_QUERY, ATTN_AXIS_NONE}, ATTN_FROM_SUMMARY, ATTN_SUMMARY_ENTROPY},
    [ATTN_OUT_ARGMAX] = {"argmax",
        "the most-attended key of each query: the first key with the largest logit "
        "(-1 where every key is masked or the weights are NaN)",
        {ATTN_AXIS_HEAD, ATTN_AXIS_QUERY, ATTN_AXIS_NONE}, ATTN_FROM_SUMMARY, ATTN_SUMMARY_ARGMAX},
    [ATTN_OUT_DISTANCE] = {"distance",
        "mean distance attended: sum over keys of weight * |query position - key position|",
        {ATTN_AXIS_HEAD, ATTN_AXIS_QUERY, ATTN_AXIS_NONE}, ATTN_FROM_SUMMARY, ATTN_SUMMARY_DISTANCE},
    [ATTN_OUT_MEAN] = {"mean", "attention weights averaged over the heads",
        {ATTN_AXIS_QUERY, ATTN_AXIS_KEY, ATTN_AXIS_NONE}, ATTN_FROM_MEAN},
    [ATTN_OUT_RESULT] = {"result",
        "each head's contribution to the output: heads W_O restricted to the head's rows, "
        "without b_O (the sum over heads plus b_O is output)",
        {ATTN_AXIS_QUERY, ATTN_AXIS_HEAD, ATTN_AXIS_D_MODEL}, ATTN_FROM_RESULT},
    [ATTN_OUT_NORMS] = {"norms",
        "norm-based attention (Kobayashi et al. 2020): weights times value_norm of the key, "
        "|| weight * (v W_O[head]) ||; 0 where every key is masked",
        {ATTN_AXIS_HEAD, ATTN_AXIS_QUERY, ATTN_AXIS_KEY}, ATTN_FROM_WEIGHT_MAP,
        .index = ATTN_WEIGHT_MAP_NORMS},
    [ATTN_OUT_VALUE_NORM] = {"value_norm",
        "length of each key's transformed value: || v W_O[head] ||, v with b_V, W_O[head] the "
        "head's rows of W_O, without b_O",
        {ATTN_AXIS_HEAD, ATTN_AXIS_KEY, ATTN_AXIS_NONE}, ATTN_FROM_KEY_SUMMARY,
        .index = ATTN_KEY_SUMMARY_VALUE_NORM},
};

const char *attn_qkv_split_name(attn_qkv_split split)
{
    static const char *const names[] = {[ATTN_QKV_BLOCKS] = "blocks", [ATTN_QKV_HEADS] = "heads"};
    static_assert(sizeof names / sizeof names[0] == ATTN_QKV_SPLIT_COUNT,
                  "a name for every split");
    return names[split];
}

const attn_input_spec *attn_input_spec_of(attn_input which)
{
    return &input_table[which];
}

const attn_output_spec *attn_output_spec_of(attn_output which)
{
    return &output_table[which];
}

bool attn_output_is_map(attn_output which)
{
    const attn_source source = output_table[which].source;
    return source == ATTN_FROM_SCORES || source == ATTN_FROM_WEIGHTS || source == ATTN_FROM_MEAN ||
           source == ATTN_FROM_WEIGHT_MAP;
}

attn_output attn_weight_map_output(attn_weight_map map)
{
    static const attn_output outputs[] = {
#define OUTPUT(NAME, factor) ATTN_OUT_##NAME,
        ATTN_WEIGHT_MAPS(OUTPUT)
#undef OUTPUT
    };
    static_assert(sizeof outputs / sizeof outputs[0] == ATTN_WEIGHT_MAP_COUNT, "every map");
    return outputs[map];
}

attn_output attn_key_summary_output(attn_key_summary key)
{
    static const attn_output outputs[] = {
#define OUTPUT(NAME) ATTN_OUT_##NAME,
        ATTN_KEY_SUMMARIES(OUTPUT)
#undef OUTPUT
    };
    static_assert(sizeof outputs / sizeof outputs[0] == ATTN_KEY_SUMMARY_COUNT, "every summary");
    return outputs[key];
}

bool attn_plan_needs_key_summary(unsigned save, attn_key_summary key)
{
    bool needed = (save >> attn_key_summary_output(key)) & 1u;
    for (int map = 0; map < ATTN_WEIGHT_MAP_COUNT; map++)
        needed = needed || (attn_weight_map_factor((attn_weight_map)map) == key &&
                            ((save >> attn_weight_map_output((attn_weight_map)map)) & 1u));
    return needed;
}

int attn_plan_map_in_weights_place(unsigned save)
{
    if ((save >> ATTN_OUT_WEIGHTS) & 1u)
        return -1;
    for (int map = 0; map < ATTN_WEIGHT_MAP_COUNT; map++)
        if ((save >> attn_weight_map_output((attn_weight_map)map)) & 1u)
            return map;
    return -1;
}

bool attn_output_by_rows(attn_output which)
{
    const attn_source source = output_table[which].source;
    return attn_output_is_map(which) || source == ATTN_FROM_CONCAT ||
           source == ATTN_FROM_OUTPUT || source == ATTN_FROM_Q || source == ATTN_FROM_RESULT;
}

size_t attn_output_query_axis(const attn_layout *layout, attn_output which)
{
    for (size_t i = 0; i < 3; i++)
        if (output_table[which].axes[i] == ATTN_AXIS_QUERY)
            return i + (layout->batched ? 1 : 0);
    return SIZE_MAX;
}

attn_store attn_output_type(attn_output which, attn_store maps, attn_precision precision)
{
    if (attn_output_is_map(which))
        return maps;
    const attn_output_spec *spec = &output_table[which];
    return spec->source == ATTN_FROM_SUMMARY && attn_summary_is_integer(spec->summary)
               ? ATTN_STORE_I32 : attn_store_of(precision);
}

const char *attn_output_name(attn_output which)
{
    return output_table[which].name;
}

const char *attn_output_description(attn_output which)
{
    return output_table[which].description;
}

int attn_parse_save_list(const char *list, unsigned *save, attn_error *err)
{
    unsigned chosen = 0;
    const char *p = list;
    for (;;) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < ATTN_OUT_COUNT; i++)
            if (strlen(output_table[i].name) == len && strncmp(p, output_table[i].name, len) == 0)
                found = i;
        if (found < 0) {
            char names[256] = "";
            for (int i = 0; i < ATTN_OUT_COUNT; i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                         i ? "," : "", output_table[i].name);
            return attn_fail(err, ATTN_EUSAGE,
                             "unknown output '%.*s' in '%s' (choose from %s)",
                             (int)len, p, list, names);
        }
        chosen |= 1u << found;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    *save = chosen;
    return ATTN_OK;
}

const char *attn_axis_label(const attn_layout *layout, attn_axis axis)
{
    static const char *const labels[] = {
        [ATTN_AXIS_NONE] = "", [ATTN_AXIS_BATCH] = "batch", [ATTN_AXIS_HEAD] = "head",
        [ATTN_AXIS_KV_HEAD] = "kv_head", [ATTN_AXIS_QUERY] = "query", [ATTN_AXIS_KEY] = "key",
        [ATTN_AXIS_D_K] = "d_k", [ATTN_AXIS_D_V] = "d_v", [ATTN_AXIS_D_MODEL] = "d_model",
    };
    if (axis == ATTN_AXIS_KV_HEAD && attn_kv_heads(&layout->dims) == layout->dims.heads)
        axis = ATTN_AXIS_HEAD;
    return labels[axis];
}

/* The length of an axis. */
static size_t axis_length(const attn_layout *layout, attn_axis axis)
{
    const attn_dims *d = &layout->dims;
    const size_t lengths[] = {
        [ATTN_AXIS_NONE] = 0, [ATTN_AXIS_BATCH] = d->batch, [ATTN_AXIS_HEAD] = d->heads,
        [ATTN_AXIS_KV_HEAD] = attn_kv_heads(d), [ATTN_AXIS_QUERY] = d->n, [ATTN_AXIS_KEY] = d->m,
        [ATTN_AXIS_D_K] = d->d_k, [ATTN_AXIS_D_V] = d->d_v, [ATTN_AXIS_D_MODEL] = d->d_model,
    };
    return lengths[axis];
}

size_t attn_output_shape(const attn_layout *layout, attn_output which, size_t dims[4],
                         const char *labels[4])
{
    const attn_output_spec *spec = &output_table[which];
    size_t rank = 0;
    if (layout->batched) {
        dims[rank] = layout->dims.batch;
        labels[rank++] = "batch";
    }
    for (size_t i = 0; i < 3 && spec->axes[i] != ATTN_AXIS_NONE; i++) {
        dims[rank] = axis_length(layout, spec->axes[i]);
        labels[rank++] = attn_axis_label(layout, spec->axes[i]);
    }
    return rank;
}

int attn_output_bytes(const attn_layout *layout, attn_output which, attn_precision precision,
                      size_t *bytes, attn_error *err)
{
    size_t dims[4], count;
    const char *labels[4];
    size_t rank = attn_output_shape(layout, which, dims, labels);
    const attn_store type = attn_output_type(which, attn_store_of(precision), precision);
    if (!attn_size_product(&count, dims, rank) ||
        !attn_size_mul(bytes, count, attn_store_size(type))) {
        char s[256];
        return attn_fail(err, ATTN_EINPUT, "output %s of shape %s is too large to address",
                         output_table[which].name, attn_format_shape(s, sizeof s, dims, rank));
    }
    return ATTN_OK;
}

