/*
 * census.c - the census of attention heads behind attnrun heads
 * (attn_math.h): each score of one head summed row by row over its maps,
 * and the keys a query's token scores read, indexed once per item.
 *
 * Legend: n queries, m keys of one item; a block is `rows` query rows of
 * one head's map (rows, m), its first row query `first`; p is one row.
 */
#include "attn_math.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A row of the table: the score's value of one row p and which rows
 * count beyond those that are not all zero (", with ..." or ""), then
 * what it tells; the definition and the description are made of them. */
#define ALL_ROWS " over the (item, query) rows p of the head's weights that are not all zero"
#define SCORE(name, value, rows, note, tokens)                                               \
    {name, value rows, "mean of " value ALL_ROWS rows "; " note "; NaN when no row qualifies", \
     tokens}

/* The scores: name (CSV column, dataset), definition, description, needs
 * the tokens. */
static const struct census_row {
    const char *name;
    const char *definition;
    const char *description;
    bool tokens;
} census_table[] = {
    [ATTN_CENSUS_ENTROPY] = SCORE("entropy", "-sum_k p_k ln p_k (nats, 0 ln 0 = 0)", "",
                                  "low when a head attends to few keys", false),
    [ATTN_CENSUS_DISTANCE] = SCORE("distance", "sum_k p_k |q - k|", "",
                                   "how far a head looks, in positions (q the query's index, "
                                   "k the key's)", false),
    [ATTN_CENSUS_FIRST] = SCORE("first", "p_0", "", "the weight on key 0", false),
    [ATTN_CENSUS_PREVIOUS] = SCORE("previous", "p_(q-1)", ", with 1 <= q <= m",
                                   "the weight on the key just before the query; near 1 for a "
                                   "previous-token head", false),
    [ATTN_CENSUS_SELF] = SCORE("self", "p_q", ", with q < m",
                               "the weight on the key at the query's own index", false),
    [ATTN_CENSUS_DUPLICATE] = SCORE("duplicate",
                                    "sum of p_k over the keys k < q with key_token[k] = "
                                    "query_token[q]", ", when there is such a key",
                                    "the weight on earlier occurrences of the query's token; "
                                    "near 1 for a duplicate-token head", true),
    [ATTN_CENSUS_INDUCTION] = SCORE("induction",
                                    "sum of p_k over the keys 1 <= k <= q with key_token[k-1] = "
                                    "query_token[q]", ", when there is such a key",
                                    "the weight on the keys that followed earlier occurrences "
                                    "of the query's token; near 1 for an induction head "
                                    "(Olsson et al. 2022)", true),
};

static_assert(sizeof census_table / sizeof census_table[0] == ATTN_CENSUS_COUNT,
              "census_table has a row per attn_census_kind");

const char *attn_census_name(attn_census_kind kind)
{
    assert(kind < ATTN_CENSUS_COUNT);
    return census_table[kind].name;
}

const char *attn_census_definition(attn_census_kind kind)
{
    assert(kind < ATTN_CENSUS_COUNT);
    return census_table[kind].definition;
}

const char *attn_census_description(attn_census_kind kind)
{
    assert(kind < ATTN_CENSUS_COUNT);
    return census_table[kind].description;
}

bool attn_census_needs_tokens(attn_census_kind kind)
{
    assert(kind < ATTN_CENSUS_COUNT);
    return census_table[kind].tokens;
}

double attn_census_score(const attn_census *census, attn_census_kind kind)
{
    assert(kind < ATTN_CENSUS_COUNT);
    return census->rows[kind] == 0 ? NAN : census->sum[kind] / (double)census->rows[kind];
}

/* ---- the keys of the token scores --------------------------------------- */

/* A key's token id and its index: the keys are ordered by both. */
typedef struct key_entry {
    int32_t id;
    size_t key;
} key_entry;

static int compare_entries(const key_entry *a, const key_entry *b)
{
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return a->key < b->key ? -1 : a->key > b->key;
}

static int compare_keys(const void *a, const void *b)
{
    return compare_entries(a, b);
}

/* The first of sorted (m) that is not before `at`. */
static size_t lower_bound(const key_entry *sorted, size_t m, key_entry at)
{
    size_t lo = 0, hi = m;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (compare_entries(&sorted[mid], &at) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int attn_census_tokens_build(attn_census_tokens *tokens, size_t n, size_t m,
                             const int32_t *query_ids, const int32_t *key_ids, attn_error *err)
{
    memset(tokens, 0, sizeof *tokens);
    key_entry *sorted = NULL;                                   /* (m) */
    size_t bytes;
    if (!attn_size_mul(&bytes, m, sizeof *sorted) || (sorted = attn_malloc(bytes)) == NULL ||
        (tokens->keys = attn_calloc(m, sizeof *tokens->keys)) == NULL ||
        (tokens->start = attn_calloc(n, sizeof *tokens->start)) == NULL ||
        (tokens->earlier = attn_calloc(n, sizeof *tokens->earlier)) == NULL) {
        free(sorted);
        attn_census_tokens_free(tokens);
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    }
    tokens->n = n;
    tokens->m = m;
    for (size_t k = 0; k < m; k++)
        sorted[k] = (key_entry){key_ids[k], k};
    qsort(sorted, m, sizeof *sorted, compare_keys);
    for (size_t k = 0; k < m; k++)
        tokens->keys[k] = sorted[k].key;
    /* Query q's token's keys are one run of sorted; those before q, its
     * beginning. */
    for (size_t q = 0; q < n; q++) {
        const size_t start = lower_bound(sorted, m, (key_entry){query_ids[q], 0});
        tokens->start[q] = start;
        tokens->earlier[q] = lower_bound(sorted, m, (key_entry){query_ids[q], q}) - start;
    }
    free(sorted);
    return ATTN_OK;
}

void attn_census_tokens_free(attn_census_tokens *tokens)
{
    free(tokens->keys);
    free(tokens->start);
    free(tokens->earlier);
    memset(tokens, 0, sizeof *tokens);
}

/* ---- the scores, row by row --------------------------------------------- */

/* Adds one value of score `kind`. */
static void add_value(attn_census *census, attn_census_kind kind, double value)
{
    census->sum[kind] += value;
    census->rows[kind]++;
}

/* The scores of row p (m) of query q that need no tokens.  False, adding
 * nothing, when the row is all zero (a query that sees no key). */
static bool add_row(attn_census *census, size_t q, size_t m, const float *p)
{
    double entropy = 0, distance = 0;
    bool seen = false;
    for (size_t k = 0; k < m; k++) {
        const double w = p[k];
        if (w != 0) {                         /* NaN too: it is no masked row */
            seen = true;
            entropy -= w * log(w);
            distance += w * (double)(q > k ? q - k : k - q);
        }
    }
    if (!seen)
        return false;
    add_value(census, ATTN_CENSUS_ENTROPY, entropy);
    add_value(census, ATTN_CENSUS_DISTANCE, distance);
    add_value(census, ATTN_CENSUS_FIRST, p[0]);
    if (q >= 1 && q - 1 < m)
        add_value(census, ATTN_CENSUS_PREVIOUS, p[q - 1]);
    if (q < m)
        add_value(census, ATTN_CENSUS_SELF, p[q]);
    return true;
}

/* The token scores of row p (m) of query q: its earlier keys of the same
 * token (duplicate) and the keys right after them (induction), read from
 * the index, never searched for. */
static void add_token_row(attn_census *census, size_t q, size_t m, const float *p,
                          const attn_census_tokens *tokens)
{
    const size_t *keys = tokens->keys + tokens->start[q];    /* (earlier[q]) ascending, < q */
    const size_t earlier = tokens->earlier[q];
    double duplicate = 0, induction = 0;
    bool follows = false;
    for (size_t i = 0; i < earlier; i++) {
        duplicate += p[keys[i]];
        if (keys[i] + 1 < m) {                  /* k = keys[i] + 1 <= q */
            induction += p[keys[i] + 1];
            follows = true;
        }
    }
    if (earlier > 0)
        add_value(census, ATTN_CENSUS_DUPLICATE, duplicate);
    if (follows)
        add_value(census, ATTN_CENSUS_INDUCTION, induction);
}

void attn_census_add(attn_census *census, size_t first, size_t rows, size_t m,
                     const float *weights, const attn_census_tokens *tokens)
{
    assert(tokens == NULL || (tokens->m == m && first + rows <= tokens->n));
    for (size_t r = 0; r < rows; r++) {
        const float *p = weights + r * m;
        if (add_row(census, first + r, m, p) && tokens != NULL)
            add_token_row(census, first + r, m, p, tokens);
    }
}
