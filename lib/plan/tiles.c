/*
 * tiles.c - the chunks of the output datasets: near 1 MiB along the
 * access people use, the maps in square tiles, and the bytes of the tiles
 * some query sees (attn_plan.h).
 *
 * Legend: B batch, H heads, n queries, m keys, D d_model, d_k, d_v.
 */
#include "attn_plan.h"

#include "plan/plan.h"


void attn_chunk_shape(size_t rank, const size_t *dims, size_t elem_size, size_t target_bytes,
                      size_t first_cap, size_t *chunk)
{
    size_t room = target_bytes / elem_size;     /* elements still allowed */
    if (room == 0)
        room = 1;
    for (size_t i = rank; i-- > 0;) {
        size_t limit = dims[i];
        if (i == 0 && first_cap != 0 && first_cap < limit)
            limit = first_cap;
        chunk[i] = limit <= room ? limit : plan_floor_pow2(room);
        if (chunk[i] == 0)           /* a zero-length axis still chunks by 1 */
            chunk[i] = 1;
        room /= chunk[i];
        if (room == 0)
            room = 1;
    }
}

/* Tile sides (rows, keys) of an (n, m) map: T x T clipped, a short axis
 * whole and the other as long as a tile of ATTN_MAP_TILE^2 elements. */
static void map_tile(size_t n, size_t m, size_t *rows, size_t *keys)
{
    const size_t T = ATTN_MAP_TILE, area = T * T;
    *rows = n < T ? n : T;
    *keys = m < T ? m : T;
    if (m < T && m != 0)
        *rows = n < plan_floor_pow2(area / m) ? n : plan_floor_pow2(area / m);
    else if (n < T && n != 0)
        *keys = m < plan_floor_pow2(area / n) ? m : plan_floor_pow2(area / n);
    if (*rows == 0)
        *rows = 1;
    if (*keys == 0)
        *keys = 1;
}

void attn_output_chunk(const attn_layout *layout, attn_output which, size_t elem_size,
                       size_t items, size_t chunk[4])
{
    attn_output_chunk_rows(layout, which, elem_size, items, 0, chunk);
}

void attn_output_chunk_rows(const attn_layout *layout, attn_output which, size_t elem_size,
                            size_t items, size_t rows, size_t chunk[4])
{
    size_t dims[4];
    const char *labels[4];
    const size_t rank = attn_output_shape(layout, which, dims, labels);
    const size_t query = attn_output_query_axis(layout, which);
    /* Written a block of rows at a time: chunked as if the query axis were
     * one block long, so that a chunk never spans two blocks. */
    if (rows != 0 && rows < layout->dims.n && !attn_output_is_map(which) &&
        attn_output_by_rows(which))
        dims[query] = rows;
    const size_t cap = layout->batched ? items : 0;
    const bool map = attn_output_is_map(which);
    const size_t n = layout->dims.n, m = layout->dims.m;
    const bool whole_maps = n != 0 && m <= ATTN_MAP_TILE * ATTN_MAP_TILE / n;
    if (!map || whole_maps) {
        attn_chunk_shape(rank, dims, elem_size,
                         map ? ATTN_MAP_TILE * ATTN_MAP_TILE * elem_size : ATTN_CHUNK_BYTES, cap,
                         chunk);
        /* Slices start on chunk boundaries (--batch-slice need not be a
         * power of two). */
        while (cap != 0 && cap % chunk[0] != 0)
            chunk[0]--;
        return;
    }
    for (size_t i = 0; i + 2 < rank; i++)
        chunk[i] = 1;
    map_tile(n, m, &chunk[rank - 2], &chunk[rank - 1]);
}

int attn_output_stored_bytes(const attn_layout *layout, const attn_config *cfg,
                             attn_output which, size_t elem_size, const size_t chunk[4],
                             size_t *bytes, attn_error *err)
{
    size_t dims[4], count, visible = 0;
    const char *labels[4];
    const size_t rank = attn_output_shape(layout, which, dims, labels);
    bool ok = attn_size_product(&count, dims, rank - 2);
    if (ok && attn_output_is_map(which) && cfg != NULL) {
        /* The (n, m) elements of the tiles some query sees. */
        const size_t n = dims[rank - 2], m = dims[rank - 1];
        const size_t tr = chunk[rank - 2], tk = chunk[rank - 1];
        for (size_t r = 0; r < n; r += tr)
            for (size_t k = 0; k < m; k += tk)
                if (attn_tile_visible(cfg, r, n - r < tr ? n - r : tr, k, m - k < tk ? m - k : tk))
                    visible += (n - r < tr ? n - r : tr) * (m - k < tk ? m - k : tk);
    } else {
        ok = ok && attn_size_mul(&visible, dims[rank - 2], dims[rank - 1]);
    }
    if (!ok || !attn_size_mul(&count, count, visible) || !attn_size_mul(bytes, count, elem_size)) {
        char s[256];
        return attn_fail(err, ATTN_EINPUT, "output %s of shape %s is too large to address",
                         attn_output_name(which), attn_format_shape(s, sizeof s, dims, rank));
    }
    return ATTN_OK;
}

