/*
 * store.c - chunks packed in their stored form (store.h).
 *
 * Legend: a chunk is (chunk[0], ..., chunk[rank-1]) elements, row-major;
 * a "run" is its last axis, contiguous in both the block and the chunk.
 */
#include "math/store.h"

#include "attn_threads.h"

#include <assert.h>
#include <math.h>
#include <string.h>
#include <libdeflate.h>
#include <stdlib.h>

#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_thread_num(void) { return 0; }
#endif

/* ---------------------------------------------------------- conversions */

/* A float's bit pattern, and back (unions pun as C allows). */
typedef union float_bits { float f; uint32_t u; } float_bits;

static inline uint32_t bits_of(float f)
{
    return ((float_bits){.f = f}).u;
}

/* binary16 of one float, to nearest even, without branches (the loops
 * below vectorise): normal values rebias the exponent and round the 13
 * dropped bits; below 2^-14 the steps are 2^-24, so |f| * 2^24 rounded
 * to an integer is the pattern (adding 2^23 rounds it, to even). */
static inline uint16_t f16_of(float f)
{
    const uint32_t b = bits_of(f), sign = (b >> 16) & 0x8000u, a = b & 0x7FFFFFFFu;
    const uint32_t r = a - 0x38000000u;               /* exponent bias 127 -> 15 */
    const uint32_t normal = (r + 0xFFFu + ((r >> 13) & 1u)) >> 13;
    const uint32_t small = bits_of(((float_bits){.u = a}).f * 0x1p24f + 0x1p23f) - 0x4B000000u;
    const uint32_t top = 0x7C00u | (uint32_t)(a > 0x7F800000u) << 9;  /* inf; NaN quiet */
    const uint32_t is_normal = 0u - (uint32_t)(a >= 0x38800000u);     /* masks */
    const uint32_t is_big = 0u - (uint32_t)(a >= 0x477FF000u);        /* >= 65520: inf */
    const uint32_t h = (normal & is_normal) | (small & ~is_normal);
    return (uint16_t)(sign | (top & is_big) | (h & ~is_big));
}

/* bfloat16 of one float: the top half, the dropped half rounded to even. */
static inline uint16_t bf16_of(float f)
{
    const uint32_t b = bits_of(f);
    const uint32_t rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
    const uint32_t is_nan = 0u - (uint32_t)((b & 0x7FFFFFFFu) > 0x7F800000u);
    return (uint16_t)((((b >> 16) | 0x0040u) & is_nan) | (rounded & ~is_nan));
}

/*
 * x rounded to float "to odd": toward zero, with the last bit set when
 * inexact.  Rounding that float to nearest even in a type of fewer than
 * 23 mantissa bits gives what rounding x itself would (the odd bit keeps
 * the information that x was not exactly halfway), so a double is
 * rounded once.  Beyond FLT_MAX it gives FLT_MAX, which still rounds to
 * inf in binary16 and bfloat16.
 */
static float odd_float(double x)
{
    float f = (float)x;
    if (isnan(x) || (double)f == x)
        return f;
    if (fabs((double)f) > fabs(x))
        f = nextafterf(f, 0.0f);
    return ((float_bits){.u = bits_of(f) | 1u}).f;
}

ATTN_VECTOR_CLONES
void attn_store_f16_from_f32(const float *in, uint16_t *out, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        out[i] = f16_of(in[i]);
}

ATTN_VECTOR_CLONES
void attn_store_bf16_from_f32(const float *in, uint16_t *out, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        out[i] = bf16_of(in[i]);
}

void attn_store_f16_from_f64(const double *in, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = f16_of(odd_float(in[i]));
}

void attn_store_bf16_from_f64(const double *in, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = bf16_of(odd_float(in[i]));
}

/* Each conversion as the table below calls it: n values at in, stored
 * at out (float32 from float64 rounded to nearest even). */
static void f16_of_f32(const void *in, void *out, size_t n) { attn_store_f16_from_f32(in, out, n); }
static void f16_of_f64(const void *in, void *out, size_t n) { attn_store_f16_from_f64(in, out, n); }
static void bf16_of_f32(const void *in, void *out, size_t n) { attn_store_bf16_from_f32(in, out, n); }
static void bf16_of_f64(const void *in, void *out, size_t n) { attn_store_bf16_from_f64(in, out, n); }
static void copy_f32(const void *in, void *out, size_t n) { memcpy(out, in, n * sizeof(float)); }
static void copy_f64(const void *in, void *out, size_t n) { memcpy(out, in, n * sizeof(double)); }

static void copy_i32(const void *in, void *out, size_t n) { memcpy(out, in, n * sizeof(int32_t)); }

static void f32_of_f64(const void *in, void *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ((float *)out)[i] = (float)((const double *)in)[i];
}

/* The conversions: [stored type][computed in float64]; float64 is never
 * stored from float32 (the plan refuses it); int32 is computed as int32
 * whatever the precision. */
typedef void (*convert_fn)(const void *in, void *out, size_t n);
static const convert_fn conversions[][2] = {
    [ATTN_STORE_F16] = {f16_of_f32, f16_of_f64},
    [ATTN_STORE_BF16] = {bf16_of_f32, bf16_of_f64},
    [ATTN_STORE_F32] = {copy_f32, f32_of_f64},
    [ATTN_STORE_F64] = {NULL, copy_f64},
    [ATTN_STORE_I32] = {copy_i32, copy_i32},
};

/* count values of `precision` (int32 for ATTN_STORE_I32) at in, stored
 * as `type` at out. */
static void convert_run(const void *in, attn_precision precision, void *out, attn_store type,
                        size_t count)
{
    const convert_fn convert = conversions[type][precision == ATTN_F64];
    assert(convert != NULL);
    convert(in, out, count);
}

/* ---------------------------------------------------------- chunk lists */

static size_t chunk_elements(const attn_stored *s)
{
    size_t count = 1;
    for (size_t i = 0; i < s->rank; i++)
        count *= s->chunk[i];
    return count;
}

size_t attn_store_slot_bytes(const attn_stored *stored)
{
    const size_t bytes = chunk_elements(stored) * attn_store_size(stored->type);
    size_t room = bytes;
    if (stored->compress > 0 && stored->raw)
        (void)attn_deflate_bound(&room, bytes, 1);    /* a chunk's bytes: no overflow */
    return (room + 63) / 64 * 64;
}

/* Whether some query sees the chunk at offset (a tile of a map). */
static bool chunk_visible(const attn_stored *s, const attn_config *cfg, const size_t *offset)
{
    if (!s->skip_hidden || cfg == NULL)
        return true;
    const size_t r = s->rank - 2, k = s->rank - 1;
    const size_t rows = s->dims[r] - offset[r] < s->chunk[r] ? s->dims[r] - offset[r] : s->chunk[r];
    const size_t keys = s->dims[k] - offset[k] < s->chunk[k] ? s->dims[k] - offset[k] : s->chunk[k];
    return attn_tile_visible(cfg, offset[r], rows, offset[k], keys);
}

size_t attn_store_list(const attn_stored *stored, const attn_block *block, int handle,
                       const attn_config *cfg, char **room, size_t *room_bytes,
                       attn_chunk_job *jobs)
{
    const size_t rank = stored->rank, slot = attn_store_slot_bytes(stored);
    size_t grid[4] = {1, 1, 1, 1}, cells = 1, listed = 0;
    for (size_t i = 0; i < rank; i++) {
        assert(block->first[i] % stored->chunk[i] == 0);
        grid[i] = (block->count[i] + stored->chunk[i] - 1) / stored->chunk[i];
        cells *= grid[i];
    }
    for (size_t cell = 0; cell < cells; cell++) {
        size_t at[4], offset[4];
        attn_unravel_index(cell, grid, rank, at);
        for (size_t i = 0; i < rank; i++)
            offset[i] = block->first[i] + at[i] * stored->chunk[i];
        if (!chunk_visible(stored, cfg, offset))
            continue;
        if (jobs != NULL) {
            attn_chunk_job *job = &jobs[listed];
            *job = (attn_chunk_job){.stored = stored, .block = block, .handle = handle};
            memcpy(job->offset, offset, sizeof offset);
            if (room != NULL) {
                job->data = *room;
                *room += slot;
            }
        }
        *room_bytes += slot;
        listed++;
    }
    return listed;
}

/* ---------------------------------------------------------- packing */

size_t attn_store_scratch_bytes(size_t chunk_bytes)
{
    return 2 * ((chunk_bytes + 63) / 64 * 64);
}

/* The fill value of s in its stored type, at out (one element). */
static void stored_fill(const attn_stored *s, const attn_block *b, unsigned char *out)
{
    const double fill_value = s->fill;
    const float fill_f32 = (float)fill_value;
    const int32_t fill_i32 = (int32_t)fill_value;
    convert_run(b->integer ? (const void *)&fill_i32
                : b->precision == ATTN_F64 ? (const void *)&fill_value : (const void *)&fill_f32,
                b->precision, out, s->type, 1);
}

/* The chunk of job in the stored type at out: its runs from the block,
 * the fill past the dataset's end. */
static void gather(const attn_chunk_job *job, char *out)
{
    const attn_stored *s = job->stored;
    const attn_block *b = job->block;
    const size_t rank = s->rank, width = s->chunk[rank - 1], elem = attn_store_size(s->type);
    const size_t in_elem = b->integer ? sizeof(int32_t) : attn_precision_size(b->precision);
    const size_t runs = chunk_elements(s) / width;
    const size_t last = s->dims[rank - 1] - job->offset[rank - 1];
    const size_t kept = last < width ? last : width;
    unsigned char fill[8];
    stored_fill(s, b, fill);
    size_t at[4] = {0};                   /* the run's index in the chunk */
    for (size_t run = 0; run < runs; run++) {
        size_t from = 0;
        bool inside = true;
        for (size_t i = 0; i + 1 < rank; i++) {
            const size_t index = job->offset[i] + at[i];
            inside = inside && index < s->dims[i];
            from += (index - b->first[i]) * b->stride[i];
        }
        char *to = out + run * width * elem;
        size_t done = 0;
        if (inside) {
            from += job->offset[rank - 1] - b->first[rank - 1];
            convert_run((const char *)b->base + from * in_elem, b->precision, to, s->type, kept);
            done = kept;
        }
        for (size_t i = done; i < width; i++)
            memcpy(to + i * elem, fill, elem);
        for (size_t i = rank - 1; i-- > 0 && ++at[i] == s->chunk[i];)   /* the next run */
            at[i] = 0;
    }
}

/* HDF5's shuffle filter: byte j of element i goes to j * count + i. */
static void shuffle(const unsigned char *in, unsigned char *out, size_t count, size_t elem)
{
    for (size_t j = 0; j < elem; j++)
        for (size_t i = 0; i < count; i++)
            out[j * count + i] = in[i * elem + j];
}

struct attn_packer {
    size_t threads, scratch_bytes;
    char *scratch;                                   /* (threads, scratch_bytes) */
    struct libdeflate_compressor **compressors;      /* (threads) or NULL        */
};

attn_packer *attn_packer_new(size_t threads, size_t chunk_bytes, int level)
{
    attn_packer *p = attn_calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->threads = threads;
    p->scratch_bytes = attn_store_scratch_bytes(chunk_bytes);
    size_t total;
    if (!attn_size_mul(&total, threads, p->scratch_bytes) ||
        (p->scratch = attn_malloc(total)) == NULL ||
        (level > 0 && (p->compressors = attn_calloc(threads, sizeof *p->compressors)) == NULL)) {
        attn_packer_free(p);
        return NULL;
    }
    for (size_t i = 0; level > 0 && i < threads; i++)
        if ((p->compressors[i] = libdeflate_alloc_compressor(level)) == NULL) {
            attn_packer_free(p);
            return NULL;
        }
    return p;
}

void attn_packer_free(attn_packer *packer)
{
    if (packer == NULL)
        return;
    for (size_t i = 0; packer->compressors != NULL && i < packer->threads; i++)
        libdeflate_free_compressor(packer->compressors[i]);
    free(packer->compressors);
    free(packer->scratch);
    free(packer);
}

/* One job: gathered straight into its room, or gathered, shuffled and
 * deflated into it (HDF5's deflate filter reads any zlib stream). */
static void pack_one(attn_chunk_job *job, char *scratch, size_t half,
                     struct libdeflate_compressor *compressor)
{
    const attn_stored *s = job->stored;
    const size_t elem = attn_store_size(s->type), bytes = chunk_elements(s) * elem;
    if (s->compress == 0 || !s->raw) {
        gather(job, job->data);
        job->bytes = bytes;
        return;
    }
    assert(bytes <= half && compressor != NULL);
    gather(job, scratch);
    shuffle((const unsigned char *)scratch, (unsigned char *)scratch + half, bytes / elem, elem);
    job->bytes = libdeflate_zlib_compress(compressor, scratch + half, bytes, job->data,
                                          attn_store_slot_bytes(s));
    assert(job->bytes != 0);       /* the room is the bound: it always fits */
}

void attn_store_pack(attn_chunk_job *jobs, size_t count, attn_packer *packer)
{
    const size_t half = packer->scratch_bytes / 2;
    const int threads = attn_threads() < (int)packer->threads ? attn_threads() : (int)packer->threads;
#pragma omp parallel num_threads(threads)
    {
    attn_beside_run();
    const size_t me = (size_t)omp_get_thread_num();
    char *mine = packer->scratch + me * packer->scratch_bytes;
#pragma omp for schedule(dynamic, 1)
    for (size_t i = 0; i < count; i++)
        pack_one(&jobs[i], mine, half, packer->compressors ? packer->compressors[me] : NULL);
    }
}

/* ---------------------------------------------------------- whole blocks */

size_t attn_store_block_bytes(const attn_stored *stored, const attn_block *block)
{
    size_t count = attn_store_size(stored->type);
    for (size_t i = 0; i < stored->rank; i++)
        count *= block->count[i];
    return count;
}

void attn_store_gather_block(const attn_stored *stored, const attn_block *block,
                             const attn_config *cfg, void *out)
{
    const attn_stored *s = stored;
    const attn_block *b = block;
    const size_t rank = s->rank, width = b->count[rank - 1], elem = attn_store_size(s->type);
    const size_t in_elem = b->integer ? sizeof(int32_t) : attn_precision_size(b->precision);
    const bool tiles = s->skip_hidden && cfg != NULL;
    const size_t r = rank - 2, k = rank - 1;      /* a map's query and key axes */
    size_t runs = 1;
    for (size_t i = 0; i + 1 < rank; i++)
        runs *= b->count[i];
    unsigned char fill[8];
    stored_fill(s, b, fill);
#pragma omp parallel for schedule(dynamic, 64) num_threads(attn_threads())
    for (size_t run = 0; run < runs; run++) {
        size_t at[4] = {0}, from = 0;
        attn_unravel_index(run, b->count, rank - 1, at);
        for (size_t i = 0; i + 1 < rank; i++)
            from += at[i] * b->stride[i];
        const char *in = (const char *)b->base + from * in_elem;
        char *to = (char *)out + run * width * elem;
        if (!tiles) {
            convert_run(in, b->precision, to, s->type, width);
            continue;
        }
        /* Tile by tile along the keys, by attn_store_list's rule: the
         * hidden ones hold the fill. */
        const size_t row = b->first[r] + at[r];
        size_t tile[4] = {0};                 /* the tile's first element */
        tile[r] = row - row % s->chunk[r];
        for (size_t key = 0; key < width; key += s->chunk[k]) {
            const size_t keys = width - key < s->chunk[k] ? width - key : s->chunk[k];
            tile[k] = b->first[k] + key;
            if (chunk_visible(s, cfg, tile)) {
                convert_run(in + key * in_elem, b->precision, to + key * elem, s->type, keys);
                continue;
            }
            for (size_t i = 0; i < keys; i++)
                memcpy(to + (key + i) * elem, fill, elem);
        }
    }
}
