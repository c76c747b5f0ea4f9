/*
 * census_count.c - the census counted (census.h): each layer read once, item by
 * item; an item's tokens numbered and indexed once for all its heads;
 * each head's map read a block of whole query rows at a time, so that
 * memory stays bounded whatever B, n and m are.
 *
 * Legend: B items, H heads, n queries, m keys of a layer; a block is
 * (rows, m) of the map of one item and one head.
 */
#include "cli/census.h"

#include "attn_results.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Values read at once: a block is at most this many floats (16 MiB),
 * unless one row alone is longer. */
#define BLOCK_VALUES ((size_t)1 << 22)

/* One of an item's token strings and its place: query q at q, key k at
 * n + k. */
typedef struct token_place {
    const char *text;
    size_t place;
} token_place;

static int compare_places(const void *a, const void *b)
{
    const token_place *x = a, *y = b;
    int order = strcmp(x->text, y->text);
    return order != 0 ? order : (x->place > y->place) - (x->place < y->place);
}

/* ids (n + m): the queries' then the keys' token ids, equal for equal
 * strings (their rank among the distinct strings of the item). */
static int number_tokens(char **query, size_t n, char **key, size_t m, int32_t *ids,
                         attn_error *err)
{
    token_place *places = attn_calloc(n + m, sizeof *places);      /* (n + m) */
    if (places == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    for (size_t i = 0; i < n + m; i++)
        places[i] = (token_place){i < n ? query[i] : key[i - n], i};
    qsort(places, n + m, sizeof *places, compare_places);
    int32_t id = 0;
    for (size_t i = 0; i < n + m; i++) {
        if (i > 0 && strcmp(places[i - 1].text, places[i].text) != 0)
            id++;
        ids[places[i].place] = id;
    }
    free(places);
    return ATTN_OK;
}

/* Item `item`'s tokens, read, numbered and indexed into *index. */
static int index_item(attn_results *r, const census_layer *layer, size_t item,
                      attn_census_tokens *index, attn_error *err)
{
    const size_t n = layer->n, m = layer->m;
    char **query = NULL, **key = NULL;                  /* (n), (m) */
    int32_t *ids = NULL;                                /* (n + m) */
    int status = attn_results_labels(r, CENSUS_QUERY_TOKENS, item, n, &query, err);
    if (status == ATTN_OK)
        status = attn_results_labels(r, CENSUS_KEY_TOKENS, item, m, &key, err);
    if (status == ATTN_OK && (query == NULL || key == NULL))
        status = attn_fail(err, ATTN_EINPUT, "%s: the tokens of group %s went missing while it "
                           "was read", attn_results_path(r), layer->group);
    if (status == ATTN_OK && (ids = attn_calloc(n + m, sizeof *ids)) == NULL)
        status = attn_fail(err, ATTN_ENOMEM, "out of memory");
    if (status == ATTN_OK)
        status = number_tokens(query, n, key, m, ids, err);
    if (status == ATTN_OK)
        status = attn_census_tokens_build(index, n, m, ids, ids + n, err);
    free(ids);
    attn_labels_free(query, n);
    attn_labels_free(key, m);
    return status;
}

/* Reads rows [first, first + rows) of the map of `item` and `head` into
 * block (rows, m). */
static int read_block(attn_results *r, const census_layer *layer, size_t item, size_t head,
                      size_t first, size_t rows, float *block, attn_error *err)
{
    size_t start[4], count[4], a = 0;
    if (layer->batched) {
        start[a] = item;
        count[a++] = 1;
    }
    start[a] = head;
    count[a++] = 1;
    start[a] = first;
    count[a++] = rows;
    start[a] = 0;
    count[a++] = layer->m;
    return attn_results_read(r, CENSUS_WEIGHTS, start, count, block, err);
}

/* The census of one layer: items outer, heads inner, blocks of rows. */
static int count_layer(attn_results_file *file, census_layer *layer, size_t heads, attn_error *err)
{
    const size_t n = layer->n, m = layer->m;
    if (n == 0 || m == 0 || layer->batch == 0)
        return ATTN_OK;                    /* no row, or only rows of nothing */
    size_t rows = m < BLOCK_VALUES ? BLOCK_VALUES / m : 1;
    rows = rows < n ? rows : n;
    attn_results *r = NULL;
    float *block = NULL;                                /* (rows, m) */
    attn_census_tokens index;
    memset(&index, 0, sizeof index);
    int status = attn_results_open_group(file, layer->group, &r, err);
    if (status == ATTN_OK && (block = attn_calloc(rows * m, sizeof *block)) == NULL)
        status = attn_fail(err, ATTN_ENOMEM, "out of memory");
    for (size_t b = 0; b < layer->batch && status == ATTN_OK; b++) {
        if (layer->tokens)
            status = index_item(r, layer, b, &index, err);
        for (size_t h = 0; h < heads && status == ATTN_OK; h++)
            for (size_t q = 0; q < n && status == ATTN_OK; q += rows) {
                const size_t count = n - q < rows ? n - q : rows;
                status = read_block(r, layer, b, h, q, count, block, err);
                if (status == ATTN_OK)
                    attn_census_add(&layer->census[h], q, count, m, block,
                                    layer->tokens ? &index : NULL);
            }
        attn_census_tokens_free(&index);
    }
    free(block);
    attn_results_close(r);
    return status;
}

int census_count(census_table *census, attn_error *err)
{
    int status = ATTN_OK;
    for (size_t i = 0; i < census->count && status == ATTN_OK; i++)
        status = count_layer(census->file, &census->layers[i], census->heads, err);
    return status;
}
