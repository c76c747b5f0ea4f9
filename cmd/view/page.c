/*
 * page.c - the page written (view.h): the template (page/view.html) with
 * its style and script put in, the maps one at a time (maps.c), then the
 * JSON the script reads -- what the plan fixed (view_meta, measured
 * before any map is written), and each map's entry (its level, its
 * colour bars).  docs/view.md states the JSON's members.
 *
 * Legend: I items shown, L layers, H heads, n queries, m keys.
 */
#include "view/view.h"

#include "cli/json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- the JSON */

/* A token as the page shows it: cut after VIEW_TOKEN_BYTES bytes, at a
 * character's end, with an ellipsis.  Writes into text (VIEW_TOKEN_BYTES
 * + 4). */
static const char *shown_token(const char *token, char *text)
{
    size_t len = strlen(token);
    if (len <= VIEW_TOKEN_BYTES)
        return token;
    len = VIEW_TOKEN_BYTES;
    while (len > 0 && ((unsigned char)token[len] & 0xC0) == 0x80)
        len--;                            /* not inside a character */
    memcpy(text, token, len);
    memcpy(text + len, "\xE2\x80\xA6", 4);
    return text;
}

static void write_tokens(json_writer *w, char **tokens, size_t count)
{
    char text[VIEW_TOKEN_BYTES + 4];
    json_array_begin(w, NULL);
    for (size_t i = 0; i < count; i++)
        json_string(w, NULL, shown_token(tokens[i], text));
    json_array_end(w);
}

/* Whether two lists of tokens are the same. */
static bool same_tokens(char **a, char **b, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(a[i], b[i]) != 0)
            return false;
    return true;
}

/* The token lists of one item written so far, the last of each axis
 * (0 queries, 1 keys) kept to be reused: layers mostly share them. */
typedef struct token_memory {
    char **list[2];               /* (len[axis]) owned, or NULL           */
    size_t len[2];
    size_t index[2];              /* its index in "tokens"                */
    size_t written;               /* the lists in "tokens", of every item */
} token_memory;

static void forget_tokens(token_memory *mem)
{
    for (int axis = 0; axis < 2; axis++) {
        attn_labels_free(mem->list[axis], mem->len[axis]);
        mem->list[axis] = NULL;
        mem->len[axis] = 0;
    }
}

/* The index in "tokens" of `tokens` (len) of `axis`: the axis's list
 * before when the same, the layer's queries (query_slot) for keys that
 * are the same, else a new list written.  Takes tokens. */
static size_t place_tokens(json_writer *w, token_memory *mem, int axis, char **tokens, size_t len,
                           size_t query_slot)
{
    size_t slot;
    if (mem->list[axis] != NULL && mem->len[axis] == len &&
        same_tokens(mem->list[axis], tokens, len)) {
        attn_labels_free(tokens, len);
        return mem->index[axis];
    }
    if (axis == 1 && query_slot != SIZE_MAX && mem->len[0] == len &&
        same_tokens(mem->list[0], tokens, len)) {
        slot = query_slot;                          /* the keys are the queries */
    } else {
        write_tokens(w, tokens, len);
        slot = mem->written++;
    }
    attn_labels_free(mem->list[axis], mem->len[axis]);
    mem->list[axis] = tokens;
    mem->len[axis] = len;
    mem->index[axis] = slot;
    return slot;
}

/* Layer l's tokens of item i into "tokens", their indices into slot (2):
 * SIZE_MAX where the layer has none. */
static int layer_tokens(json_writer *w, const census_table *c, size_t l, size_t item,
                        token_memory *mem, size_t *slot, attn_error *err)
{
    const census_layer *layer = &c->layers[l];
    slot[0] = slot[1] = SIZE_MAX;
    if (!layer->tokens)
        return ATTN_OK;
    attn_results *r = NULL;
    int status = attn_results_open_group(c->file, layer->group, &r, err);
    for (int axis = 0; axis < 2 && status == ATTN_OK; axis++) {
        const size_t len = axis == 0 ? layer->n : layer->m;
        char **tokens = NULL;
        status = attn_results_labels(r, axis == 0 ? CENSUS_QUERY_TOKENS : CENSUS_KEY_TOKENS,
                                     layer->batched ? item : 0, len, &tokens, err);
        if (status == ATTN_OK && tokens != NULL)
            slot[axis] = place_tokens(w, mem, axis, tokens, len, slot[0]);
    }
    attn_results_close(r);
    return status;
}

/* "itemTokens": per item shown and layer, [query list, key list] (-1:
 * none), from index (I, L, 2). */
static void write_token_index(json_writer *w, const size_t *index, size_t items, size_t layers)
{
    json_array_begin(w, "itemTokens");
    for (size_t i = 0; i < items; i++) {
        json_array_begin(w, NULL);
        for (size_t l = 0; l < layers; l++) {
            const size_t *slot = index + (i * layers + l) * 2;
            json_array_begin(w, NULL);
            for (int axis = 0; axis < 2; axis++)
                if (slot[axis] == SIZE_MAX)
                    json_real(w, NULL, -1);
                else
                    json_size(w, NULL, slot[axis]);
            json_array_end(w);
        }
        json_array_end(w);
    }
    json_array_end(w);
}

/* "tokens": the distinct lists of every item shown, each once, cut for
 * the page; "itemTokens": where each item's and layer's are. */
static int write_item_tokens(json_writer *w, const view_plan *plan, attn_error *err)
{
    const census_table *c = &plan->census;
    size_t *index = attn_calloc(plan->item_count * c->count * 2 + 1, sizeof *index); /* (I, L, 2) */
    if (index == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    token_memory mem;
    memset(&mem, 0, sizeof mem);
    int status = ATTN_OK;
    json_array_begin(w, "tokens");
    for (size_t i = 0; i < plan->item_count && status == ATTN_OK; i++) {
        for (size_t l = 0; l < c->count && status == ATTN_OK; l++)
            status = layer_tokens(w, c, l, plan->items[i], &mem, index + (i * c->count + l) * 2,
                                  err);
        forget_tokens(&mem);                    /* another item: other tokens */
    }
    json_array_end(w);
    if (status == ATTN_OK)
        write_token_index(w, index, plan->item_count, c->count);
    free(index);
    return status;
}

/* "census": the scores' names and definitions, and per layer and head
 * each score: a number, null when no row qualified, "nan" for a NaN. */
static void write_census(json_writer *w, const census_table *c)
{
    json_object_begin(w, "census");
    json_array_begin(w, "names");
    for (int k = 0; k < ATTN_CENSUS_COUNT; k++)
        json_string(w, NULL, attn_census_name((attn_census_kind)k));
    json_array_end(w);
    json_array_begin(w, "definitions");
    for (int k = 0; k < ATTN_CENSUS_COUNT; k++)
        json_string(w, NULL, attn_census_definition((attn_census_kind)k));
    json_array_end(w);
    json_array_begin(w, "scores");
    for (size_t l = 0; l < c->count; l++) {
        json_array_begin(w, NULL);
        for (size_t h = 0; h < c->heads; h++) {
            const attn_census *census = &c->layers[l].census[h];
            json_array_begin(w, NULL);
            for (int k = 0; k < ATTN_CENSUS_COUNT; k++) {
                const double v = attn_census_score(census, (attn_census_kind)k);
                if (census->rows[k] == 0)
                    json_null(w, NULL);
                else if (isnan(v))
                    json_string(w, NULL, "nan");
                else
                    json_real(w, NULL, v);
            }
            json_array_end(w);
        }
        json_array_end(w);
    }
    json_array_end(w);
    json_object_end(w);
}

static void write_rgb(json_writer *w, const char *key, cli_rgb c)
{
    json_array_begin(w, key);
    json_size(w, NULL, c.r);
    json_size(w, NULL, c.g);
    json_size(w, NULL, c.b);
    json_array_end(w);
}

/* "colours": the colour map and special colours (cli/colours.h, as
 * attnrun plot draws them). */
static void write_colours(json_writer *w)
{
    size_t count;
    const cli_rgb *stops = cli_colour_stops(&count);
    json_object_begin(w, "colours");
    json_array_begin(w, "stops");
    for (size_t i = 0; i < count; i++)
        write_rgb(w, NULL, stops[i]);
    json_array_end(w);
    size_t specials;
    const cli_special_spec *special = cli_specials(&specials);
    static const char *const keys[] = {"negInf", "posInf", "nan"};    /* in cli_specials' order */
    for (size_t i = 0; i < specials && i < sizeof keys / sizeof keys[0]; i++)
        write_rgb(w, keys[i], special[i].colour);
    json_object_end(w);
}

static void write_layers(json_writer *w, const view_plan *plan)
{
    const census_table *c = &plan->census;
    json_array_begin(w, "layers");
    for (size_t l = 0; l < c->count; l++) {
        json_object_begin(w, NULL);
        json_string(w, "group", c->layers[l].group);
        json_size(w, "n", c->layers[l].n);
        json_size(w, "m", c->layers[l].m);
        json_object_end(w);
    }
    json_array_end(w);
}

static void write_rollout(json_writer *w, const view_plan *plan)
{
    const view_rollout *ro = &plan->rollout;
    if (ro->results == NULL) {
        json_null(w, "rollout");
        return;
    }
    json_object_begin(w, "rollout");
    json_string(w, "source", plan->rq->rollout);
    json_size(w, "n", plan->census.layers[0].n);
    json_array_begin(w, "groups");
    for (size_t l = 0; l < ro->layers; l++)
        json_string(w, NULL, ro->groups != NULL ? ro->groups[l] : NULL);
    json_array_end(w);
    json_object_end(w);
}

int view_meta(view_plan *plan, attn_error *err)
{
    FILE *out = open_memstream(&plan->meta, &plan->meta_length);
    if (out == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    json_writer w;
    json_start(&w, out);
    w.markup_safe = true;
    json_object_begin(&w, NULL);
    json_string(&w, "version", ATTN_VERSION);
    json_string(&w, "source", plan->rq->input);
    json_size(&w, "batch", plan->batch);
    json_size(&w, "heads", plan->census.heads);
    json_size(&w, "tokenBytes", VIEW_TOKEN_BYTES);
    json_size(&w, "maxSize", plan->rq->max_size);
    json_array_begin(&w, "items");
    for (size_t i = 0; i < plan->item_count; i++)
        json_size(&w, NULL, plan->items[i]);
    json_array_end(&w);
    write_layers(&w, plan);
    write_rollout(&w, plan);
    write_colours(&w);
    write_census(&w, &plan->census);
    int status = write_item_tokens(&w, plan, err);
    json_array_begin(&w, "maps");           /* write_data adds them, and closes */
    plan->meta_writer = w;
    if (fclose(out) != 0 && status == ATTN_OK)
        status = attn_fail(err, ATTN_ENOMEM, "out of memory");
    return status;
}

/* ---------------------------------------------------------- the page */

size_t view_template_bytes(void)
{
    size_t total = 0, length;
    for (int a = 0; a < VIEW_ASSET_COUNT; a++) {
        view_asset_text((view_asset)a, &length);
        total += length + strlen(view_asset_hash((view_asset)a));
    }
    return total + 256;                     /* the JSON's element and end */
}

/* One map's entry in "maps": its shape, levels and colour bars. */
static void write_entry(json_writer *w, size_t n, size_t m, view_level lv,
                        const view_map_stats *s)
{
    static const cli_scale scales[] = {CLI_LINEAR, CLI_SQRT, CLI_LOG};
    json_object_begin(w, NULL);
    json_size(w, "n", n);
    json_size(w, "m", m);
    json_size(w, "level", lv.detail);
    json_size(w, "thumb", lv.thumb);
    json_size(w, "specials", s->specials);
    json_bool(w, "negative", s->values.any && s->values.lo < 0);
    json_array_begin(w, "bars");
    for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++) {
        const cli_bar bar = cli_bar_of(scales[i], VIEW_BAR_FROM, &s->values);
        json_array_begin(w, NULL);
        json_real(w, NULL, bar.lo);
        json_real(w, NULL, bar.hi);
        json_array_end(w);
    }
    json_array_end(w);
    json_object_end(w);
}

/* The maps, in the order of their ids: per item shown, each layer's heads,
 * then the rollout's layers.  Their entries go into `entries`. */
static int write_maps(const view_plan *plan, FILE *out, json_writer *entries, attn_error *err)
{
    const census_table *c = &plan->census;
    attn_results **groups = attn_calloc(c->count, sizeof *groups);          /* (L) */
    if (groups == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    int status = ATTN_OK;
    for (size_t l = 0; l < c->count && status == ATTN_OK; l++)
        status = attn_results_open_group(c->file, c->layers[l].group, &groups[l], err);
    size_t id = 0;
    view_map_stats stats;
    for (size_t i = 0; i < plan->item_count && status == ATTN_OK; i++) {
        for (size_t l = 0; l < c->count && status == ATTN_OK; l++) {
            const census_layer *layer = &c->layers[l];
            const view_level lv = view_level_of(layer->n, layer->m, plan->level);
            view_source src = {groups[l], CENSUS_WEIGHTS, {0, 0}, 0, layer->n, layer->m};
            if (layer->batched)
                src.lead[src.leads++] = plan->items[i];
            src.leads++;
            for (size_t h = 0; h < c->heads && status == ATTN_OK; h++) {
                src.lead[src.leads - 1] = h;
                status = view_write_map(&src, lv, id++, out, &stats, err);
                write_entry(entries, layer->n, layer->m, lv, &stats);
            }
        }
        const size_t n = c->layers[0].n;
        const view_level lv = view_level_of(n, n, plan->level);
        view_source src = {plan->rollout.results, "rollout", {plan->items[i], 0}, 2, n, n};
        for (size_t l = 0; l < plan->rollout.layers && status == ATTN_OK; l++) {
            src.lead[1] = l;
            status = view_write_map(&src, lv, id++, out, &stats, err);
            write_entry(entries, n, n, lv, &stats);
        }
    }
    for (size_t l = 0; l < c->count; l++)
        attn_results_close(groups[l]);
    free(groups);
    return status;
}

/* The maps, then the JSON: the plan's, the maps' entries, its end. */
static int write_data(const view_plan *plan, FILE *out, attn_error *err)
{
    char *text = NULL;                                  /* the entries */
    size_t length = 0;
    FILE *entries = open_memstream(&text, &length);
    if (entries == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    json_writer w = plan->meta_writer;      /* inside "maps", as the plan left it */
    w.out = entries;
    int status = write_maps(plan, out, &w, err);
    json_array_end(&w);
    json_size(&w, "level", plan->level);     /* chosen once the rest was measured */
    json_object_end(&w);
    if (fclose(entries) != 0 && status == ATTN_OK)
        status = attn_fail(err, ATTN_ENOMEM, "out of memory");
    if (status == ATTN_OK) {
        fputs("<script type=\"application/json\" id=\"attnrun-meta\">", out);
        fwrite(plan->meta, 1, plan->meta_length, out);
        fwrite(text, 1, length, out);
        fputs("</script>\n", out);
    }
    free(text);
    return status;
}

/* The template's markers, "{{NAME}}", and what each stands for. */
static int put_marker(const view_plan *plan, const char *name, size_t len, FILE *out,
                      attn_error *err)
{
    static const struct {
        const char *name;
        view_asset asset;
        bool hash;
    } markers[] = {
        {"STYLE", VIEW_CSS, false}, {"SCRIPT", VIEW_JS, false},
        {"STYLE_HASH", VIEW_CSS, true}, {"SCRIPT_HASH", VIEW_JS, true},
    };
    if (len == 4 && memcmp(name, "DATA", 4) == 0)
        return write_data(plan, out, err);
    for (size_t i = 0; i < sizeof markers / sizeof markers[0]; i++) {
        if (strlen(markers[i].name) != len || memcmp(markers[i].name, name, len) != 0)
            continue;
        size_t length;
        const char *text = view_asset_text(markers[i].asset, &length);
        if (markers[i].hash)
            fputs(view_asset_hash(markers[i].asset), out);
        else
            fwrite(text, 1, length, out);
        return ATTN_OK;
    }
    return attn_fail(err, ATTN_EIO, "the page's template names {{%.*s}}, which attnrun does "
                     "not know (a build fault)", (int)len, name);
}

int view_write_page(const view_plan *plan, FILE *out, attn_error *err)
{
    size_t length;
    const char *html = view_asset_text(VIEW_HTML, &length), *end = html + length;
    int status = ATTN_OK;
    for (const char *p = html; p < end && status == ATTN_OK;) {
        const char *open = strstr(p, "{{");
        const char *close = open != NULL ? strstr(open + 2, "}}") : NULL;
        if (open == NULL || close == NULL) {
            fwrite(p, 1, (size_t)(end - p), out);
            break;
        }
        fwrite(p, 1, (size_t)(open - p), out);
        status = put_marker(plan, open + 2, (size_t)(close - open - 2), out, err);
        p = close + 2;
    }
    if (status == ATTN_OK && ferror(out))
        status = attn_fail(err, ATTN_EIO, "cannot write the page: %s", strerror(errno));
    return status;
}
