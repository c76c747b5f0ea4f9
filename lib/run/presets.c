/*
 * presets.c - the model families attnrun knows by name (attn_run.h):
 * where each keeps its attention weights, how it stores them, and what
 * it always does (causal, rotary style, ALiBi).  Names are those of the
 * Hugging Face checkpoints, under the weights group; the biases are used
 * when present.  What a family's config decides per model -- the heads,
 * the K/V heads and the numbers of the variant (attn_variant) -- stays
 * with the ordinary options.
 */
#include "attn_run.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* The projections Hugging Face names q_proj ... o_proj (LLaMA and its kin). */
#define PROJ_NAMES(out)                                                        \
    [ATTN_IN_WQ] = "q_proj.weight", [ATTN_IN_WK] = "k_proj.weight",           \
    [ATTN_IN_WV] = "v_proj.weight", [ATTN_IN_WO] = out ".weight",             \
    [ATTN_IN_BQ] = "q_proj.bias", [ATTN_IN_BK] = "k_proj.bias",               \
    [ATTN_IN_BV] = "v_proj.bias", [ATTN_IN_BO] = out ".bias"

#define ROTARY(style) .causal = true, .rope = true, .rope_style = style

static const attn_preset presets[] = {
    {.name = "gpt2", .layout = ATTN_LAYOUT_XW, .causal = true,
     .names = {[ATTN_IN_WQKV] = "c_attn.weight", [ATTN_IN_BQKV] = "c_attn.bias",
               [ATTN_IN_WO] = "c_proj.weight", [ATTN_IN_BO] = "c_proj.bias"}},
    {.name = "torch-mha", .layout = ATTN_LAYOUT_LINEAR,
     .names = {[ATTN_IN_WQKV] = "in_proj_weight", [ATTN_IN_BQKV] = "in_proj_bias",
               [ATTN_IN_WO] = "out_proj.weight", [ATTN_IN_BO] = "out_proj.bias"}},
    {.name = "llama", .layout = ATTN_LAYOUT_LINEAR, ROTARY(ATTN_ROPE_NEOX),
     .names = {PROJ_NAMES("o_proj")}},
    {.name = "mistral", .layout = ATTN_LAYOUT_LINEAR, ROTARY(ATTN_ROPE_NEOX),
     .names = {PROJ_NAMES("o_proj")}},
    {.name = "qwen2", .layout = ATTN_LAYOUT_LINEAR, ROTARY(ATTN_ROPE_NEOX),
     .names = {PROJ_NAMES("o_proj")}},
    {.name = "qwen3", .layout = ATTN_LAYOUT_LINEAR, ROTARY(ATTN_ROPE_NEOX),
     .names = {PROJ_NAMES("o_proj"), [ATTN_IN_Q_NORM] = "q_norm.weight",
               [ATTN_IN_K_NORM] = "k_norm.weight"}},
    {.name = "gemma2", .layout = ATTN_LAYOUT_LINEAR, ROTARY(ATTN_ROPE_NEOX),
     .names = {PROJ_NAMES("o_proj")}},
    {.name = "neox", .layout = ATTN_LAYOUT_LINEAR, .qkv_heads = true, ROTARY(ATTN_ROPE_NEOX),
     .names = {[ATTN_IN_WQKV] = "query_key_value.weight", [ATTN_IN_BQKV] = "query_key_value.bias",
               [ATTN_IN_WO] = "dense.weight", [ATTN_IN_BO] = "dense.bias"}},
    {.name = "gptj", .layout = ATTN_LAYOUT_LINEAR, ROTARY(ATTN_ROPE_GPTJ),
     .names = {PROJ_NAMES("out_proj")}},
    {.name = "bloom", .layout = ATTN_LAYOUT_LINEAR, .qkv_heads = true, .causal = true,
     .alibi = true,
     .names = {[ATTN_IN_WQKV] = "query_key_value.weight", [ATTN_IN_BQKV] = "query_key_value.bias",
               [ATTN_IN_WO] = "dense.weight", [ATTN_IN_BO] = "dense.bias"}},
    {.name = "bert", .layout = ATTN_LAYOUT_LINEAR,
     .names = {[ATTN_IN_WQ] = "self.query.weight", [ATTN_IN_WK] = "self.key.weight",
               [ATTN_IN_WV] = "self.value.weight", [ATTN_IN_WO] = "output.dense.weight",
               [ATTN_IN_BQ] = "self.query.bias", [ATTN_IN_BK] = "self.key.bias",
               [ATTN_IN_BV] = "self.value.bias", [ATTN_IN_BO] = "output.dense.bias"}},
};

#define PRESET_COUNT (sizeof presets / sizeof presets[0])

size_t attn_preset_count(void)
{
    return PRESET_COUNT;
}

const attn_preset *attn_preset_at(size_t index)
{
    return &presets[index];
}

const attn_preset *attn_preset_find(const char *name)
{
    for (size_t i = 0; i < PRESET_COUNT; i++)
        if (strcmp(presets[i].name, name) == 0)
            return &presets[i];
    return NULL;
}

/* Every preset's name, ", " between, made once. */
static char preset_names[PRESET_COUNT * 32];

static void list_presets(void)
{
    size_t used = 0;
    for (size_t i = 0; i < PRESET_COUNT && used < sizeof preset_names; i++)
        used += (size_t)snprintf(preset_names + used, sizeof preset_names - used, "%s%s",
                                 i ? ", " : "", presets[i].name);
}

const char *attn_preset_list(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, list_presets);
    return preset_names;
}
