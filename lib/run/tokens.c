/*
 * tokens.c - the tokens of the query and key axes (attn_tokens.h):
 * found and checked before any output exists, then copied into the output
 * group and named in the `coordinates` attribute of every result along
 * their axes.
 *
 * Nothing is kept between the two: the check reads every token, and the
 * copy reads them again, a block at a time, so memory does not grow with
 * B x n.  In self-attention the keys are the queries: key_token is a copy
 * of query_token.
 *
 * Legend: B batch, n queries, m keys.
 */
#include "attn_tokens.h"

#include "run/run_state.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tokens read (and written) at a time, and at most these bytes of
 * fixed-length strings; an attribute is read whole. */
#define TOKENS_PER_READ ((size_t)4096)
#define FIXED_BYTES_PER_READ ((size_t)1 << 20)

int attn_token_source_parse(const char *text, attn_token_source *source, attn_error *err)
{
    if (source != NULL)
        source->object = source->attribute = NULL;
    if (text == NULL || text[0] == '\0')
        return attn_fail(err, ATTN_EUSAGE, "'': expected a dataset name, or OBJECT@ATTRIBUTE for "
                         "an attribute");
    const char *at = strrchr(text, '@');
    if (at != NULL && at[1] == '\0')
        return attn_fail(err, ATTN_EUSAGE, "'%s': no attribute name after '@'", text);
    if (source == NULL)
        return ATTN_OK;
    if ((source->object = attn_strdup(text)) == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    if (at != NULL) {
        source->object[at - text] = '\0';
        source->attribute = source->object + (at - text) + 1;
    }
    return ATTN_OK;
}

void attn_token_source_free(attn_token_source *source)
{
    free(source->object);
    source->object = source->attribute = NULL;
}

/* RFC 3629's table of well-formed sequences: by lead byte, how many
 * bytes follow and the range of the first of them (the others are
 * 0x80 to 0xBF). */
static const struct utf8_lead {
    unsigned char first, last;     /* lead bytes                   */
    unsigned char low, high;       /* the byte after them          */
    unsigned char follow;          /* bytes after the lead         */
} utf8_leads[] = {
    {0x00, 0x7F, 0, 0, 0},
    {0xC2, 0xDF, 0x80, 0xBF, 1},
    {0xE0, 0xE0, 0xA0, 0xBF, 2},     /* no overlong forms            */
    {0xE1, 0xEC, 0x80, 0xBF, 2},
    {0xED, 0xED, 0x80, 0x9F, 2},     /* no surrogates                */
    {0xEE, 0xEF, 0x80, 0xBF, 2},
    {0xF0, 0xF0, 0x90, 0xBF, 3},     /* no overlong forms            */
    {0xF1, 0xF3, 0x80, 0xBF, 3},
    {0xF4, 0xF4, 0x80, 0x8F, 3},     /* nothing above U+10FFFF       */
};

static const struct utf8_lead *utf8_lead_of(unsigned char c)
{
    for (size_t i = 0; i < sizeof utf8_leads / sizeof utf8_leads[0]; i++)
        if (c >= utf8_leads[i].first && c <= utf8_leads[i].last)
            return &utf8_leads[i];
    return NULL;                   /* 0x80 to 0xC1, 0xF5 to 0xFF */
}

bool attn_utf8_valid(const char *bytes, size_t length, size_t *offset)
{
    const unsigned char *s = (const unsigned char *)bytes;
    for (size_t i = 0; i < length;) {
        const struct utf8_lead *lead = utf8_lead_of(s[i]);
        if (lead == NULL) {
            *offset = i;
            return false;
        }
        for (size_t k = 1; k <= lead->follow; k++) {
            unsigned char low = k == 1 ? lead->low : 0x80, high = k == 1 ? lead->high : 0xBF;
            if (i + k >= length || s[i + k] < low || s[i + k] > high) {
                *offset = i + k;
                return false;
            }
        }
        i += 1 + (size_t)lead->follow;
    }
    return true;
}

attn_token_fault attn_token_check(const char *bytes, size_t length, size_t *offset)
{
    const char *nul = memchr(bytes, '\0', length);
    if (length > ATTN_TOKEN_MAX_BYTES) {
        *offset = ATTN_TOKEN_MAX_BYTES;
        return ATTN_TOKEN_TOO_LONG;
    }
    if (nul != NULL) {
        *offset = (size_t)(nul - bytes);
        return ATTN_TOKEN_NUL;
    }
    return attn_utf8_valid(bytes, length, offset) ? ATTN_TOKEN_OK : ATTN_TOKEN_NOT_UTF8;
}

/* One axis' tokens: where they come from and the shape they must have. */
typedef struct token_axis {
    const char *given;            /* the source as given; NULL: none      */
    bool keys;                    /* the key axis, else the query axis    */
    attn_token_source source;
    const char *role;             /* "tokens", "key tokens"               */
    const char *of;               /* the dataset the axis is an axis of   */
    size_t batch;                 /* B; 0 when X has no batch axis        */
    size_t length;                /* n, or m                              */
    char what[640];               /* "the tokens dataset tok", for messages */
    attn_tensor_info info;        /* what the file holds                  */
    size_t fixed;                 /* bytes of a fixed-length string, or 0 */
} token_axis;

/* The token axes of the run: [0] the queries', [1] the keys' (in
 * self-attention the queries' tokens again). */
static void plan_axes(const run_state *st, token_axis axes[2])
{
    const attn_layout *layout = &st->report->layout;
    const bool cross = layout->cross;
    memset(axes, 0, 2 * sizeof *axes);
    for (int i = 0; i < 2; i++) {
        token_axis *a = &axes[i];
        a->keys = i == 1;
        a->given = a->keys && cross ? st->opt->kv_tokens : st->opt->tokens;
        a->role = a->keys && cross ? "key tokens" : "tokens";
        a->of = st->info[a->keys && cross ? ATTN_IN_KV : ATTN_IN_X].name;
        a->batch = layout->batched ? layout->dims.batch : 0;
        a->length = a->keys ? layout->dims.m : layout->dims.n;
    }
}

static void release_axes(token_axis axes[2])
{
    attn_token_source_free(&axes[0].source);
    attn_token_source_free(&axes[1].source);
}

/* Finds the source of an axis and checks its type and shape: (n) or
 * (B, n) -- (m) or (B, m) for keys -- without a batch axis only (n). */
static int find_axis(const run_state *st, token_axis *a, attn_error *err)
{
    char shape[160], expected[160];
    int status = attn_token_source_parse(a->given, &a->source, err);
    if (status != ATTN_OK)
        return status;
    const attn_token_source *s = &a->source;
    if (s->attribute == NULL)
        snprintf(a->what, sizeof a->what, "the %s dataset %.500s", a->role, s->object);
    else
        snprintf(a->what, sizeof a->what, "the %s attribute %.250s of %.250s", a->role,
                 s->attribute, s->object[0] != '\0' ? s->object : "/");
    status = attn_h5in_describe_strings(st->in, s->object, s->attribute, a->what,
                                        ATTN_TOKEN_MAX_BYTES, &a->info, &a->fixed, err);
    if (status != ATTN_OK && s->attribute == NULL)
        return run_missing_tokens(st, s->object, a->keys && st->report->layout.cross ? "kv-tokens"
                                                                                    : "tokens",
                                  a->role, a->batch, a->length, status, err);
    if (status != ATTN_OK)
        return status;
    const size_t rank = a->info.rank, *dims = a->info.dims;
    if ((rank == 1 && dims[0] == a->length) ||
        (rank == 2 && a->batch > 0 && dims[0] == a->batch && dims[1] == a->length))
        return ATTN_OK;
    const size_t shared[1] = {a->length}, per_item[2] = {a->batch, a->length};
    char one[48], each[80];
    attn_format_shape(one, sizeof one, shared, 1);
    attn_format_shape(each, sizeof each, per_item, 2);
    snprintf(expected, sizeof expected, "%s%s%s", one, a->batch > 0 ? " or " : "",
             a->batch > 0 ? each : "");
    const bool swapped = rank == 2 && a->batch > 0 && dims[0] == a->length &&
                         dims[1] == a->batch && a->length != a->batch;
    return attn_fail(err, ATTN_EINPUT, "%s: %s has shape %s%s; expected %s: one token per %s of %s%s",
                     st->opt->input, a->what, attn_format_shape(shape, sizeof shape, dims, rank),
                     rank == 0 ? " (one string, not an array)" : "", expected,
                     a->keys ? "key" : "query", a->of,
                     swapped ? "; X looks transposed, stored (n, B, D) as torch keeps it with "
                               "batch_first=False: store X.transpose(0, 1)" : "");
}

/* The shape and axis labels of an axis's output dataset; returns its rank. */
static size_t axis_shape(const run_state *st, const token_axis *a, size_t dims[2],
                         const char *labels[2])
{
    const attn_layout *layout = &st->report->layout;
    const size_t rank = a->info.rank;
    if (rank == 2) {
        dims[0] = a->batch;
        labels[0] = attn_axis_label(layout, ATTN_AXIS_BATCH);
    }
    dims[rank - 1] = a->length;
    labels[rank - 1] = attn_axis_label(layout, a->keys ? ATTN_AXIS_KEY : ATTN_AXIS_QUERY);
    return rank;
}

/* What is wrong with a token, for messages: whether to show the byte
 * concerned (else the limit). */
static const struct {
    const char *phrase;
    bool show_byte;
} token_faults[] = {
    [ATTN_TOKEN_OK] = {"", false},
    [ATTN_TOKEN_TOO_LONG] = {"is too long", false},
    [ATTN_TOKEN_NUL] = {"holds a NUL byte", true},
    [ATTN_TOKEN_NOT_UTF8] = {"is not valid UTF-8", true},
};

/*
 * Checks the tokens of one block read at first[] (rows, columns), count[]
 * (the block's shape, row-major) and adds their bytes to *total.
 */
static int check_block(const run_state *st, const token_axis *a, const attn_strings *block,
                       const size_t first[2], const size_t count[2], size_t *total,
                       attn_error *err)
{
    for (size_t i = 0; i < block->count; i++) {
        const char *token = block->strings[i];
        const size_t length = block->lengths[i];
        size_t at = 0;
        attn_token_fault fault = attn_token_check(token, length, &at);
        if (fault == ATTN_TOKEN_OK && attn_size_add(total, *total, length) &&
            *total <= ATTN_TOKENS_MAX_BYTES)
            continue;
        if (fault == ATTN_TOKEN_OK)
            return attn_fail(err, ATTN_EINPUT, "%s: %s holds more than %zu bytes of text; tokens "
                             "are labels, not documents", st->opt->input, a->what,
                             ATTN_TOKENS_MAX_BYTES);
        char index[64], byte[64] = "";
        const size_t row = first[0] + i / count[1], column = first[1] + i % count[1];
        if (a->info.rank == 2)
            snprintf(index, sizeof index, "[%zu, %zu]", row, column);
        else
            snprintf(index, sizeof index, "[%zu]", column);
        if (token_faults[fault].show_byte && at < length)
            snprintf(byte, sizeof byte, "; byte %zu is 0x%02x", at, (unsigned char)token[at]);
        else if (token_faults[fault].show_byte)
            snprintf(byte, sizeof byte, "; it ends inside a character");
        else
            snprintf(byte, sizeof byte, "; at most %zu per token", ATTN_TOKEN_MAX_BYTES);
        return attn_fail(err, ATTN_EINPUT, "%s: %s: token %s %s (%zu bytes%s)", st->opt->input,
                         a->what, index, token_faults[fault].phrase, length, byte);
    }
    return ATTN_OK;
}

/*
 * Reads every token of an axis, a block at a time (whole rows while they
 * fit in a block, else parts of one row), checks them, and writes each
 * block to the output datasets handles[0, handle_count).
 */
static int copy_axis(run_state *st, const token_axis *a, const int *handles, size_t handle_count,
                     attn_error *err)
{
    const size_t rank = a->info.rank;
    const size_t rows = rank == 2 ? a->info.dims[0] : 1, columns = a->info.dims[rank - 1];
    size_t per_read = TOKENS_PER_READ, total = 0;
    if (a->source.attribute != NULL)
        per_read = SIZE_MAX;
    else if (a->fixed > 0 && FIXED_BYTES_PER_READ / a->fixed < per_read)
        per_read = FIXED_BYTES_PER_READ / a->fixed > 0 ? FIXED_BYTES_PER_READ / a->fixed : 1;
    const size_t block_columns = columns < per_read ? columns : per_read;
    size_t block_rows = 1;
    if (block_columns == columns)
        block_rows = per_read / columns < rows ? per_read / columns : rows;
    for (size_t r = 0; r < rows; r += block_rows) {
        for (size_t c = 0; c < columns; c += block_columns) {
            const size_t first[2] = {r, c};
            const size_t count[2] = {block_rows < rows - r ? block_rows : rows - r,
                                     block_columns < columns - c ? block_columns : columns - c};
            const size_t *at = rank == 2 ? first : first + 1, *size = rank == 2 ? count : count + 1;
            attn_strings block;
            int status = attn_h5in_read_strings(st->in, a->source.object, a->source.attribute, at,
                                                size, &block, err);
            if (status == ATTN_OK)
                status = check_block(st, a, &block, first, count, &total, err);
            for (size_t h = 0; h < handle_count && status == ATTN_OK; h++)
                status = attn_h5out_write_strings(st->out, handles[h], at, size,
                                                  (const char *const *)block.strings, err);
            attn_strings_free(&block);
            if (status != ATTN_OK)
                return status;
        }
    }
    return ATTN_OK;
}

int run_check_tokens(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    token_axis axes[2];
    int status = ATTN_OK;
    if (opt->kv_tokens != NULL && !st->report->layout.cross)
        return attn_fail(err, ATTN_EUSAGE, "key tokens (%s) are for cross-attention; in "
                         "self-attention the keys are the queries, labelled by their tokens",
                         opt->kv_tokens);
    plan_axes(st, axes);
    /* In self-attention the keys' tokens are the queries': read once. */
    const int count = st->report->layout.cross ? 2 : 1;
    for (int i = 0; i < count && status == ATTN_OK; i++)
        if (axes[i].given != NULL && (status = find_axis(st, &axes[i], err)) == ATTN_OK)
            status = copy_axis(st, &axes[i], NULL, 0, err);
    release_axes(axes);
    return status;
}

int run_clear_tokens(run_state *st, attn_error *err)
{
    static const char *const names[2] = {ATTN_QUERY_TOKEN, ATTN_KEY_TOKEN};
    const bool force = st->opt->force;
    token_axis axes[2];
    int status = ATTN_OK;
    plan_axes(st, axes);
    for (int i = 0; i < 2 && status == ATTN_OK; i++)
        if (axes[i].given != NULL && (status = find_axis(st, &axes[i], err)) == ATTN_OK)
            status = attn_h5out_clear_result(st->out, names[i], force, err);
    /* Their axes once every old token dataset is detached from them. */
    for (int i = 0; i < 2 && status == ATTN_OK; i++) {
        size_t dims[2];
        const char *labels[2];
        if (axes[i].given == NULL)
            continue;
        size_t rank = axis_shape(st, &axes[i], dims, labels);
        for (size_t k = 0; k < rank && status == ATTN_OK; k++)
            status = attn_h5out_clear_axis(st->out, labels[k], dims[k], force, err);
    }
    release_axes(axes);
    return status;
}

/* Names the token datasets (handles[0] queries', [1] keys', -1: none) in
 * the `coordinates` attribute of every result along their axes, as CF
 * conventions do, so that netCDF readers (xarray) show them as
 * coordinates. */
static int name_coordinates(run_state *st, const int handles[2], attn_error *err)
{
    const attn_layout *layout = &st->report->layout;
    const char *query = attn_axis_label(layout, ATTN_AXIS_QUERY);
    const char *key = attn_axis_label(layout, ATTN_AXIS_KEY);
    int status = ATTN_OK;
    for (int i = 0; i < ATTN_OUT_COUNT && status == ATTN_OK; i++) {
        size_t dims[4];
        const char *labels[4];
        bool on_query = false, on_key = false;
        if (!run_saved(st, (attn_output)i))
            continue;
        size_t rank = attn_output_shape(layout, (attn_output)i, dims, labels);
        for (size_t a = 0; a < rank; a++) {
            on_query = on_query || (handles[0] >= 0 && strcmp(labels[a], query) == 0);
            on_key = on_key || (handles[1] >= 0 && strcmp(labels[a], key) == 0);
        }
        const char *names = on_query && on_key ? ATTN_QUERY_TOKEN " " ATTN_KEY_TOKEN
                          : on_query ? ATTN_QUERY_TOKEN : on_key ? ATTN_KEY_TOKEN : NULL;
        if (names != NULL)
            status = attn_h5out_dataset_attr_string(st->out, st->handles[i], "coordinates",
                                                    names, err);
    }
    return status;
}

int run_write_tokens(run_state *st, attn_error *err)
{
    static const char *const names[2] = {ATTN_QUERY_TOKEN, ATTN_KEY_TOKEN};
    static const char *const descriptions[2] = {
        "the token of each query (UTF-8 text), a coordinate of the results",
        "the token of each key (UTF-8 text), a coordinate of the results",
    };
    token_axis axes[2];
    int handles[2] = {-1, -1}, status = ATTN_OK;
    plan_axes(st, axes);
    for (int i = 0; i < 2 && status == ATTN_OK; i++) {
        size_t dims[2];
        const char *labels[2];
        if (axes[i].given == NULL || (status = find_axis(st, &axes[i], err)) != ATTN_OK)
            continue;
        size_t rank = axis_shape(st, &axes[i], dims, labels);
        status = attn_h5out_add_strings(st->out, names[i], rank, dims, labels, descriptions[i],
                                        &handles[i], err);
    }
    if (status == ATTN_OK && st->report->layout.cross) {
        for (int i = 0; i < 2 && status == ATTN_OK; i++)
            if (handles[i] >= 0)
                status = copy_axis(st, &axes[i], &handles[i], 1, err);
    } else if (status == ATTN_OK && handles[0] >= 0) {
        status = copy_axis(st, &axes[0], handles, 2, err);     /* keys = queries */
    }
    if (status == ATTN_OK)
        status = name_coordinates(st, handles, err);
    release_axes(axes);
    return status;
}
