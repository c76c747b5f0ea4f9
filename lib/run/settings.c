/*
 * settings.c - the settings of a run, one table (attn_run.h): for each,
 * how its value is read from the run, where it is shown (the output
 * group's provenance attributes, the JSON plan, the text plan), and for
 * the numbers of the variant the check the options must pass.
 *
 * The provenance attributes are written in the order of the table.
 */
#include "run/run_state.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* What a setting is read from. */
typedef struct setting_source {
    const attn_run_options *opt;
    const attn_run_report *report;
    const char *const *inputs;    /* (ATTN_IN_COUNT) the datasets the run
                                     read, or NULL outside the run       */
    const char *stamp;            /* created_utc, or NULL                */
} setting_source;

typedef struct setting_row setting_row;

struct setting_row {
    attn_setting setting;
    attn_setting_value (*read)(const setting_source *src, const setting_row *row);
    size_t offset;                /* of the number in attn_variant       */
    attn_input input;             /* the dataset a name is of            */
    const char *what, *expected;  /* the check of a number of the variant
                                     (finite, >= 0) as its message says
                                     it, or NULL                        */
};

static attn_setting_value text_value(bool used, const char *text)
{
    return (attn_setting_value){.used = used, .text = text};
}

static attn_setting_value integer_value(bool used, long long value)
{
    return (attn_setting_value){.used = used, .integer = value};
}

static attn_setting_value real_value(bool used, double value)
{
    return (attn_setting_value){.used = used, .real = value};
}

/* ---- read from the variant, as computed (report->config.variant) ------ */

/* A number of the variant (REAL, INTEGER: a size_t, FLAG: a bool); used
 * when not 0, or always when the JSON plan shows it whatever it is. */
static attn_setting_value read_variant(const setting_source *src, const setting_row *row)
{
    const char *at = (const char *)&src->report->config.variant + row->offset;
    const bool always = !(row->setting.shown & ATTN_SHOWN_JSON_NULL);
    switch (row->setting.kind) {
    case ATTN_SETTING_REAL: {
        double v;
        memcpy(&v, at, sizeof v);
        return real_value(always || v != 0, v);
    }
    case ATTN_SETTING_FLAG: {
        bool v;
        memcpy(&v, at, sizeof v);
        return integer_value(always || v, v);
    }
    default: {
        size_t v;
        memcpy(&v, at, sizeof v);
        return integer_value(always || v != 0, (long long)v);
    }
    }
}

static attn_setting_value read_rope_style(const setting_source *src, const setting_row *row)
{
    const attn_rope *rope = &src->report->config.variant.rope;
    (void)row;
    return text_value(rope->theta != 0, attn_rope_style_name(rope->theta != 0 ? rope->style
                                                                           : ATTN_ROPE_DEFAULT));
}

static attn_setting_value read_scale_given(const setting_source *src, const setting_row *row)
{
    (void)row;
    return integer_value(true, src->opt->variant.scale != 0);
}

/* The RMSNorm epsilon counts where q or k is normed. */
static bool qk_norm(const setting_source *src)
{
    const attn_tensor_info *in = src->report->inputs;
    return in[ATTN_IN_Q_NORM].present || in[ATTN_IN_K_NORM].present;
}

static attn_setting_value read_norm_eps(const setting_source *src, const setting_row *row)
{
    (void)row;
    return real_value(qk_norm(src), src->report->config.variant.norm_eps);
}

static attn_setting_value read_qk_norm(const setting_source *src, const setting_row *row)
{
    (void)row;
    return integer_value(true, qk_norm(src));
}

/* ---- read from the options and the plan -------------------------------- */

static attn_setting_value read_version(const setting_source *src, const setting_row *row)
{
    (void)src;
    (void)row;
    return text_value(true, ATTN_VERSION);
}

static attn_setting_value read_command_line(const setting_source *src, const setting_row *row)
{
    (void)row;
    return text_value(src->opt->command_line != NULL, src->opt->command_line);
}

static attn_setting_value read_input_file(const setting_source *src, const setting_row *row)
{
    (void)row;
    return text_value(true, src->opt->input);
}

static attn_setting_value read_weights_group(const setting_source *src, const setting_row *row)
{
    (void)row;
    return text_value(true, src->opt->weights_group != NULL ? src->opt->weights_group : "/");
}

static attn_setting_value read_preset(const setting_source *src, const setting_row *row)
{
    (void)row;
    const attn_preset *preset =
        src->opt->preset != NULL ? attn_preset_find(src->opt->preset) : NULL;
    return text_value(preset != NULL, preset != NULL ? preset->name : NULL);
}

static attn_setting_value read_layout(const setting_source *src, const setting_row *row)
{
    (void)row;
    return text_value(true, attn_weight_layout_name(src->report->layout.linear ? ATTN_LAYOUT_LINEAR
                                                                               : ATTN_LAYOUT_XW));
}

static attn_setting_value read_qkv_fused(const setting_source *src, const setting_row *row)
{
    (void)row;
    return integer_value(true, src->report->layout.fused);
}

static attn_setting_value read_qkv_split(const setting_source *src, const setting_row *row)
{
    const attn_layout *layout = &src->report->layout;
    (void)row;
    return text_value(layout->fused,
                      attn_qkv_split_name(layout->heads_interleaved ? ATTN_QKV_HEADS
                                                                    : ATTN_QKV_BLOCKS));
}

/* A size of the layer: which one is the row's offset into attn_dims. */
static attn_setting_value read_dims(const setting_source *src, const setting_row *row)
{
    attn_dims d = src->report->layout.dims;
    d.kv_heads = attn_kv_heads(&d);
    size_t v;
    memcpy(&v, (const char *)&d + row->offset, sizeof v);
    return integer_value(true, (long long)v);
}

static attn_setting_value read_alibi(const setting_source *src, const setting_row *row)
{
    (void)row;
    return integer_value(src->report->alibi, src->report->alibi);
}

/* The name of the dataset the run read for the row's input, "" when it
 * read none (and outside the run). */
static attn_setting_value read_input_name(const setting_source *src, const setting_row *row)
{
    const char *name = src->inputs != NULL && src->report->inputs[row->input].present
                           ? src->inputs[row->input] : NULL;
    return text_value(name != NULL, name);
}

static attn_setting_value read_attn_bias_rank(const setting_source *src, const setting_row *row)
{
    (void)row;
    return integer_value(true, (long long)src->report->layout.bias_rank);
}

static attn_setting_value read_mask(const setting_source *src, const setting_row *row)
{
    (void)row;
    return integer_value(true, src->report->inputs[ATTN_IN_MASK].present);
}

static attn_setting_value read_mask_invert(const setting_source *src, const setting_row *row)
{
    (void)row;
    return integer_value(src->opt->mask_invert, src->opt->mask_invert);
}

static attn_setting_value read_cross(const setting_source *src, const setting_row *row)
{
    (void)row;
    return integer_value(true, src->report->layout.cross);
}

static attn_setting_value read_precision(const setting_source *src, const setting_row *row)
{
    (void)row;
    return text_value(true, attn_precision_name(src->opt->precision));
}

static attn_setting_value read_store(const setting_source *src, const setting_row *row)
{
    (void)row;
    return text_value(true, attn_store_name(src->report->store));
}

static attn_setting_value read_compress(const setting_source *src, const setting_row *row)
{
    (void)row;
    return integer_value(src->opt->compress > 0, src->opt->compress);
}

static attn_setting_value read_tokens(const setting_source *src, const setting_row *row)
{
    (void)row;
    return text_value(src->opt->tokens != NULL, src->opt->tokens);
}

static attn_setting_value read_kv_tokens(const setting_source *src, const setting_row *row)
{
    (void)row;
    return text_value(src->opt->kv_tokens != NULL, src->opt->kv_tokens);
}

static attn_setting_value read_stamp(const setting_source *src, const setting_row *row)
{
    (void)row;
    return text_value(src->stamp != NULL, src->stamp);
}

/* ---- the table ----------------------------------------------------------- */

#define TEXT ATTN_SETTING_TEXT
#define INTEGER ATTN_SETTING_INTEGER
#define REAL ATTN_SETTING_REAL
#define FLAG ATTN_SETTING_FLAG
#define PROV ATTN_SHOWN_PROVENANCE
#define PLAN ATTN_SHOWN_TEXT
#define NUL ATTN_SHOWN_JSON_NULL

/* A row read from the variant. */
#define VARIANT(name, json, kind, shown, field)                                 \
    {{name, json, kind, shown}, read_variant, offsetof(attn_variant, field), 0, NULL, NULL}
/* ... a number the options must give finite and >= 0 (0: not used). */
#define VARIANT_CHECKED(name, json, shown, field, what, expected)              \
    {{name, json, REAL, shown}, read_variant, offsetof(attn_variant, field), 0, what, expected}
#define DIMS(name, field) {{name, NULL, INTEGER, PROV}, read_dims, offsetof(attn_dims, field), 0, NULL, NULL}
#define INPUT(name, which) {{name, NULL, TEXT, PROV}, read_input_name, 0, which, NULL, NULL}
#define READ(name, json, kind, shown, read) {{name, json, kind, shown}, read, 0, 0, NULL, NULL}

static const setting_row settings[] = {
    READ("attnrun_version", NULL, TEXT, PROV, read_version),
    READ("command_line", NULL, TEXT, PROV, read_command_line),
    READ("input_file", NULL, TEXT, PROV, read_input_file),
    READ("weights_group", NULL, TEXT, PROV, read_weights_group),
    READ("preset", "variant.preset", TEXT, PROV | PLAN | NUL, read_preset),
    READ("layout", "variant.layout", TEXT, PROV | PLAN, read_layout),
    READ("qkv_fused", "variant.qkv_fused", FLAG, 0, read_qkv_fused),
    READ("qkv_split", "variant.qkv_split", TEXT, PROV | PLAN | NUL, read_qkv_split),
    DIMS("heads", heads),
    DIMS("kv_heads", kv_heads),
    DIMS("d_k", d_k),
    DIMS("d_v", d_v),
    VARIANT_CHECKED("scale", "variant.scale", PROV | PLAN, scale, "scale",
                    "a finite positive number"),
    READ("scale_given", "variant.scale_given", FLAG, 0, read_scale_given),
    VARIANT("causal", "variant.causal", FLAG, PROV | PLAN, causal),
    VARIANT("window", "variant.window", INTEGER, PROV | PLAN | NUL, window),
    VARIANT_CHECKED("softcap", "variant.softcap", PROV | PLAN | NUL, softcap, "soft cap",
                    "a positive number"),
    READ("alibi", "variant.alibi", FLAG, PROV | PLAN, read_alibi),
    INPUT("alibi_slopes", ATTN_IN_ALIBI_SLOPES),
    VARIANT_CHECKED("rope_theta", "variant.rope.theta", PROV | PLAN | NUL, rope.theta, "RoPE base",
                    "a positive number"),
    VARIANT("rope_dim", "variant.rope.dim", INTEGER, PROV | PLAN | NUL, rope.dim),
    READ("rope_style", "variant.rope.style", TEXT, PROV | PLAN | NUL, read_rope_style),
    INPUT("positions", ATTN_IN_POSITIONS),
    INPUT("kv_positions", ATTN_IN_KV_POSITIONS),
    INPUT("q_norm", ATTN_IN_Q_NORM),
    INPUT("k_norm", ATTN_IN_K_NORM),
    READ("qk_norm", "variant.qk_norm", FLAG, 0, read_qk_norm),
    {{"norm_eps", "variant.norm_eps", REAL, PROV | PLAN}, read_norm_eps,
     offsetof(attn_variant, norm_eps), 0, "norm epsilon", "a small positive number"},
    INPUT("attn_bias", ATTN_IN_ATTN_BIAS),
    READ("attn_bias_rank", "variant.attn_bias_rank", INTEGER, 0, read_attn_bias_rank),
    READ("mask", "variant.mask", FLAG, 0, read_mask),
    READ("mask_invert", "variant.mask_invert", FLAG, PROV | PLAN, read_mask_invert),
    READ("cross", "variant.cross", FLAG, 0, read_cross),
    READ("precision", "precision", TEXT, PROV | PLAN, read_precision),
    READ("store", "store", TEXT, PROV | PLAN, read_store),
    READ("compress", "compress", INTEGER, PROV | PLAN, read_compress),
    READ("tokens_source", NULL, TEXT, PROV, read_tokens),
    READ("kv_tokens_source", NULL, TEXT, PROV, read_kv_tokens),
    READ("created_utc", NULL, TEXT, PROV, read_stamp),
};

#define SETTING_COUNT (sizeof settings / sizeof settings[0])

size_t attn_setting_count(void)
{
    return SETTING_COUNT;
}

const attn_setting *attn_setting_at(size_t index)
{
    return &settings[index].setting;
}

attn_setting_value attn_setting_value_of(size_t index, const attn_run_options *options,
                                         const attn_run_report *report)
{
    const setting_source src = {.opt = options, .report = report};
    return settings[index].read(&src, &settings[index]);
}

const char *attn_weight_layout_name(attn_weight_layout layout)
{
    static const char *const names[] = {
        [ATTN_LAYOUT_DEFAULT] = "", [ATTN_LAYOUT_XW] = "xw", [ATTN_LAYOUT_LINEAR] = "linear",
    };
    static_assert(sizeof names / sizeof names[0] == ATTN_LAYOUT_COUNT,
                  "a name for every weight layout");
    return names[layout];
}

int run_check_variant(const attn_run_options *opt, attn_error *err)
{
    for (size_t i = 0; i < SETTING_COUNT; i++) {
        const setting_row *row = &settings[i];
        double v;
        if (row->what == NULL)
            continue;
        memcpy(&v, (const char *)&opt->variant + row->offset, sizeof v);
        if (!(isfinite(v) && v >= 0))
            return attn_fail(err, ATTN_EUSAGE, "%s %g: expected %s", row->what, v, row->expected);
    }
    return ATTN_OK;
}

int run_write_provenance(const run_state *st, const char *stamp, attn_error *err)
{
    const char *inputs[ATTN_IN_COUNT];
    for (int i = 0; i < ATTN_IN_COUNT; i++)
        inputs[i] = st->info[i].name;
    const setting_source src = {.opt = st->opt, .report = st->report, .inputs = inputs,
                                .stamp = stamp};
    int status = ATTN_OK;
    for (size_t i = 0; i < SETTING_COUNT && status == ATTN_OK; i++) {
        const setting_row *row = &settings[i];
        if (!(row->setting.shown & ATTN_SHOWN_PROVENANCE))
            continue;
        const attn_setting_value v = row->read(&src, row);
        switch (row->setting.kind) {
        case ATTN_SETTING_TEXT:
            status = attn_h5out_attr_string(st->out, row->setting.name, v.used ? v.text : "", err);
            break;
        case ATTN_SETTING_REAL:
            status = attn_h5out_attr_double(st->out, row->setting.name, v.used ? v.real : 0, err);
            break;
        default:
            status = attn_h5out_attr_int(st->out, row->setting.name, v.used ? v.integer : 0, err);
            break;
        }
    }
    return status;
}

int run_clear_provenance(run_state *st, attn_error *err)
{
    int status = ATTN_OK;
    for (size_t i = 0; i < SETTING_COUNT && status == ATTN_OK; i++)
        if (settings[i].setting.shown & ATTN_SHOWN_PROVENANCE)
            status = attn_h5out_clear_attribute(st->out, settings[i].setting.name, st->opt->force,
                                                err);
    return status;
}
