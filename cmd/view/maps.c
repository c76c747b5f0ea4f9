/*
 * maps.c - one map written into the page (view.h): read a block of whole
 * rows at a time, each row added into the rows of its level and of its
 * thumbnail being pooled, each pooled row written as base64 as soon as
 * its block of rows is complete.  So a map of any size takes one block of
 * rows, one pooled row, its thumbnail and its level's means.
 *
 * A pooled level's means are kept until its maxes are out (its level's
 * cells, no more than the page holds of it).
 *
 * Legend: n rows (queries), m columns (keys) of the map; level k pools
 * 2^k x 2^k blocks, mk = ceil(m / 2^k) of them a row.
 */
#include "view/view.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Values read at once: a block is at most this many floats (16 MiB),
 * unless one row alone is longer. */
#define BLOCK_VALUES ((size_t)1 << 22)

/* ---------------------------------------------------------- base64 */

/* Base64 (RFC 4648) to a stream, fed any number of bytes at a time. */
typedef struct base64 {
    FILE *out;
    unsigned char carry[3];       /* bytes waiting for a group of three  */
    size_t carried;
    char text[4096];              /* encoded, not yet written            */
    size_t used;
} base64;

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void base64_group(base64 *b, const unsigned char *g, size_t len)
{
    const unsigned v = (unsigned)g[0] << 16 | (len > 1 ? (unsigned)g[1] << 8 : 0) |
                       (len > 2 ? g[2] : 0);
    if (b->used + 4 > sizeof b->text) {
        fwrite(b->text, 1, b->used, b->out);
        b->used = 0;
    }
    char *t = b->text + b->used;
    t[0] = alphabet[v >> 18 & 63];
    t[1] = alphabet[v >> 12 & 63];
    t[2] = len > 1 ? alphabet[v >> 6 & 63] : '=';
    t[3] = len > 2 ? alphabet[v & 63] : '=';
    b->used += 4;
}

static void base64_put(base64 *b, const unsigned char *bytes, size_t len)
{
    while (len > 0) {
        b->carry[b->carried++] = *bytes++;
        len--;
        if (b->carried == 3) {
            base64_group(b, b->carry, 3);
            b->carried = 0;
        }
    }
}

static void base64_end(base64 *b)
{
    if (b->carried > 0)
        base64_group(b, b->carry, b->carried);
    fwrite(b->text, 1, b->used, b->out);
    b->carried = b->used = 0;
}

/* A float32 as its little-endian bytes (what a Float32Array of the page
 * reads on every machine a browser runs on). */
static void put_float(base64 *b, float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    const unsigned char bytes[4] = {(unsigned char)u, (unsigned char)(u >> 8),
                                    (unsigned char)(u >> 16), (unsigned char)(u >> 24)};
    base64_put(b, bytes, 4);
}

/* ---------------------------------------------------------- pooling */

/* One row of a level being pooled: 2^k source rows summed into it. */
typedef struct pool {
    unsigned k;
    size_t n, m;                  /* the source map's                    */
    size_t cols;                  /* mk                                  */
    float *max;                   /* (mk) each block's max: NaN wins     */
    double *sum;                  /* (mk) each block's sum               */
    size_t rows;                  /* source rows added since the last row out */
} pool;

static int pool_init(pool *p, unsigned k, size_t n, size_t m, attn_error *err)
{
    p->k = k;
    p->n = n;
    p->m = m;
    p->cols = (m >> k) + ((m & (((size_t)1 << k) - 1)) != 0);
    p->rows = 0;
    p->max = attn_calloc(p->cols > 0 ? p->cols : 1, sizeof *p->max);
    p->sum = attn_calloc(p->cols > 0 ? p->cols : 1, sizeof *p->sum);
    if (p->max == NULL || p->sum == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    for (size_t j = 0; j < p->cols; j++)
        p->max[j] = -INFINITY;
    return ATTN_OK;
}

static void pool_free(pool *p)
{
    free(p->max);
    free(p->sum);
}

static void pool_add(pool *p, const float *row)
{
    for (size_t c = 0; c < p->m; c++) {
        const size_t j = c >> p->k;
        const float v = row[c];
        if (isnan(v) || v > p->max[j])
            p->max[j] = isnan(p->max[j]) ? p->max[j] : v;
        p->sum[j] += v;
    }
    p->rows++;
}

/* Whether the pooled row is complete after source row r. */
static bool pool_due(const pool *p, size_t r)
{
    return ((r + 1) & (((size_t)1 << p->k) - 1)) == 0 || r + 1 == p->n;
}

/* Hands out the pooled row: its maxes to b (when not NULL) or to maxes,
 * and its means to means (when not NULL); then clears it. */
static void pool_emit(pool *p, base64 *b, float *maxes, float *means)
{
    const size_t side = (size_t)1 << p->k;
    for (size_t j = 0; j < p->cols; j++) {
        const size_t width = p->m - j * side < side ? p->m - j * side : side;
        if (b != NULL)
            put_float(b, p->max[j]);
        else
            maxes[j] = p->max[j];
        if (means != NULL)
            means[j] = (float)(p->sum[j] / (double)(p->rows * width));
        p->max[j] = -INFINITY;
        p->sum[j] = 0;
    }
    p->rows = 0;
}

/* ---------------------------------------------------------- the map */

static void add_stats(view_map_stats *s, const float *row, size_t m)
{
    cli_values *v = &s->values;
    for (size_t c = 0; c < m; c++) {
        const float x = row[c];
        const unsigned special = cli_special(x);
        if (special != 0) {
            s->specials |= special;
            continue;
        }
        if (!v->any || x < v->lo)
            v->lo = x;
        if (!v->any || x > v->hi)
            v->hi = x;
        v->any = true;
        if (x > 0 && (!v->any_positive || x < v->positive)) {
            v->positive = x;
            v->any_positive = true;
        }
    }
}

/* Reads rows [first, first + rows) of the map into block (rows, m). */
static int read_rows(const view_source *src, size_t first, size_t rows, float *block,
                     attn_error *err)
{
    size_t start[4], count[4], a = 0;
    for (; a < src->leads; a++) {
        start[a] = src->lead[a];
        count[a] = 1;
    }
    start[a] = first;
    count[a++] = rows;
    start[a] = 0;
    count[a] = src->cols;
    return attn_results_read(src->results, src->dataset, start, count, block, err);
}

static void open_element(FILE *out, char kind, size_t id)
{
    fprintf(out, "<script type=\"application/octet-stream\" id=\"%c%zu\">", kind, id);
}

int view_write_map(const view_source *src, view_level level, size_t id, FILE *out,
                   view_map_stats *stats, attn_error *err)
{
    const size_t n = src->rows, m = src->cols;
    memset(stats, 0, sizeof *stats);
    size_t rows = m > 0 && m < BLOCK_VALUES ? BLOCK_VALUES / m : 1;
    rows = rows < n ? rows : (n > 0 ? n : 1);
    const bool thumbed = level.thumb > level.detail;
    pool detail, thumb;
    memset(&detail, 0, sizeof detail);
    memset(&thumb, 0, sizeof thumb);
    float *block = attn_calloc(rows * (m > 0 ? m : 1), sizeof *block);      /* (rows, m) */
    float *thumbs = NULL;                     /* (nt, mt) the thumbnail's maxes */
    float *means = NULL;                      /* (nd, md) the level's means, written
                                                 after its maxes                 */
    int status = block == NULL ? attn_fail(err, ATTN_ENOMEM, "out of memory") : ATTN_OK;
    if (status == ATTN_OK && level.detail > 0)
        status = pool_init(&detail, level.detail, n, m, err);
    if (status == ATTN_OK && thumbed)
        status = pool_init(&thumb, level.thumb, n, m, err);
    const size_t thumb_rows =
        thumbed ? (n >> level.thumb) + ((n & (((size_t)1 << level.thumb) - 1)) != 0) : 0;
    if (status == ATTN_OK && thumbed &&
        (thumbs = attn_calloc(thumb_rows * thumb.cols + 1, sizeof *thumbs)) == NULL)
        status = attn_fail(err, ATTN_ENOMEM, "out of memory");
    const size_t detail_rows =
        level.detail > 0 ? (n >> level.detail) + ((n & (((size_t)1 << level.detail) - 1)) != 0) : 0;
    if (status == ATTN_OK && level.detail > 0 &&
        (means = attn_calloc(detail_rows * detail.cols + 1, sizeof *means)) == NULL)
        status = attn_fail(err, ATTN_ENOMEM, "out of memory");
    base64 b = {.out = out};
    open_element(out, 'm', id);
    size_t thumb_row = 0, detail_row = 0;
    for (size_t first = 0; first < n && status == ATTN_OK; first += rows) {
        const size_t count = n - first < rows ? n - first : rows;
        if ((status = read_rows(src, first, count, block, err)) != ATTN_OK)
            break;
        for (size_t i = 0; i < count; i++) {
            const float *row = block + i * m;
            const size_t r = first + i;
            add_stats(stats, row, m);
            if (level.detail == 0) {
                for (size_t c = 0; c < m; c++)
                    put_float(&b, row[c]);
            } else {
                pool_add(&detail, row);
                if (pool_due(&detail, r))
                    pool_emit(&detail, &b, NULL, means + detail_row++ * detail.cols);
            }
            if (thumbed) {
                pool_add(&thumb, row);
                if (pool_due(&thumb, r))
                    pool_emit(&thumb, NULL, thumbs + thumb_row++ * thumb.cols, NULL);
            }
        }
    }
    base64_end(&b);
    fputs("</script>\n", out);
    if (status == ATTN_OK && level.detail > 0) {
        open_element(out, 'a', id);
        for (size_t i = 0; i < detail_rows * detail.cols; i++)
            put_float(&b, means[i]);
        base64_end(&b);
        fputs("</script>\n", out);
    }
    if (status == ATTN_OK && thumbed) {
        open_element(out, 't', id);
        for (size_t i = 0; i < thumb_rows * thumb.cols; i++)
            put_float(&b, thumbs[i]);
        base64_end(&b);
        fputs("</script>\n", out);
    }
    free(block);
    free(thumbs);
    free(means);
    pool_free(&detail);
    pool_free(&thumb);
    return status;
}
