/*
 * attn_common.h - status codes, error messages and checked sizes shared by
 * every libattn module.
 *
 * libattn never prints and never exits: each function that can fail returns
 * an attn_status (ATTN_OK, or a negative code) and, on failure, writes one
 * line of explanation into an attn_error that the caller prints.
 *
 *     attn_error err = {0};
 *     size_t bytes;
 *     if (!attn_size_mul(&bytes, rows, cols))
 *         return attn_fail(&err, ATTN_EINPUT, "shape (%zu, %zu) overflows", rows, cols);
 */
#ifndef ATTN_COMMON_H
#define ATTN_COMMON_H

#include <stdbool.h>
#include <stddef.h>

#define ATTN_VERSION "1.9.0"

/* Every status a libattn function returns. */
typedef enum attn_status {
    ATTN_OK = 0,
    ATTN_EIO = -1,     /* runtime or I/O failure: write error, disk full     */
    ATTN_ENOMEM = -2,  /* an allocation failed                               */
    ATTN_EINPUT = -3,  /* input rejected: missing dataset, shape, type, NaN  */
    ATTN_EUSAGE = -4,  /* options that cannot work: OUT exists, OUT == IN    */
    ATTN_EINTR = -5    /* cancelled by a signal                              */
} attn_status;

/*
 * The caller's own setting (attn_run_options) that a failure is about, or
 * that would resolve it.  The message says what is wrong, in the library's
 * terms; the hint lets a program name its own way to change the setting
 * (attnrun adds the option to use).
 */
typedef enum attn_hint {
    ATTN_HINT_NONE = 0,
    ATTN_HINT_REPLACE,       /* force: replace the existing output or results */
    ATTN_HINT_LOW_SPACE,     /* force: write although the space looks short  */
    ATTN_HINT_IN_PLACE,      /* in_place: add the results to the input       */
    ATTN_HINT_OTHER_GROUP,   /* group: put the results in another group      */
    ATTN_HINT_WAIT,          /* wait: wait for the lock on the input         */
    ATTN_HINT_EXTERNAL,      /* allow_external: read the other files         */
    ATTN_HINT_PLUGINS,       /* allow_plugins: let HDF5 load the filter      */
    ATTN_HINT_NONFINITE,     /* allow_nonfinite: accept the value            */
    ATTN_HINT_PRECISION,     /* precision ATTN_F64: compute in float64       */
    ATTN_HINT_THREADS,       /* threads: run fewer                           */
    ATTN_HINT_MEMORY,        /* memory_budget: smaller steps                 */
    ATTN_HINT_HEADS,         /* heads: say (or correct) the number of heads  */
    ATTN_HINT_ROPE,          /* rope_theta: give RoPE's base                 */
    ATTN_HINT_FUSED_AND_SEPARATE, /* names: fused Q|K|V weights with separate
                                     Q, K or V names                        */
    ATTN_HINT_FUSED_BIAS,    /* names: a fused bias without fused weights    */
    ATTN_HINT_QKV_HEADS,     /* qkv_heads: without fused weights, or across  */
    ATTN_HINT_MASK_INVERT,   /* mask_invert: without a mask                  */
    ATTN_HINT_NAME,          /* names (tokens, kv_tokens): the input
                                hint_name (its key, "x") reads the dataset
                                hint_arg                                    */
    ATTN_HINT_WEIGHTS_GROUP, /* weights_group: look the weights up under the
                                group hint_arg                              */
    ATTN_HINT_LAYOUT,        /* layout: the weights are stored as the layout
                                hint_arg says ("linear", "xw")              */
    ATTN_HINT_AS_BIAS,       /* names: the dataset hint_arg, given as the
                                mask, is an attention bias                  */
    ATTN_HINT_ATTN_MASK,     /* causal, or the names' attention bias: a mask
                                of a key per query, torch's attn_mask     */
    ATTN_HINT_COUNT
} attn_hint;

/* One line of explanation, filled by the function that failed. */
typedef struct attn_error {
    char msg[1024];
    attn_hint hint;         /* ATTN_HINT_NONE, or the setting to change */
    char hint_arg[256];     /* the value the hint's setting would take: a
                               dataset, a group, a layout; "" for none   */
    char hint_name[32];     /* ATTN_HINT_NAME: which input's name
                               (attn_input_spec.key: "x", "wq"; "tokens",
                               "kv-tokens" for the token labels); else "" */
} attn_error;

/* Which floating type the computation uses and the output stores. */
typedef enum attn_precision { ATTN_F32 = 0, ATTN_F64 = 1, ATTN_PRECISION_COUNT } attn_precision;

/* "f32", "f64". */
const char *attn_precision_name(attn_precision precision);

/* The type the maps (scores, weights) are stored as (--store): the
 * compute precision's, or a narrower float.  Only the stored values round
 * (to nearest even); the computation is the same. */
typedef enum attn_store {
    ATTN_STORE_DEFAULT = 0,   /* the compute precision's type             */
    ATTN_STORE_F16,           /* IEEE binary16: 5 exponent, 10 mantissa bits */
    ATTN_STORE_BF16,          /* bfloat16: 8 exponent, 7 mantissa bits     */
    ATTN_STORE_F32,
    ATTN_STORE_F64,
    ATTN_STORE_I32,           /* int32: integer outputs (argmax), never a
                                 choice of --store                         */
    ATTN_STORE_COUNT
} attn_store;

/* The store type of `precision` (ATTN_STORE_F32 or ATTN_STORE_F64). */
attn_store attn_store_of(attn_precision precision);

/* `asked`, or for ATTN_STORE_DEFAULT the store type of `precision`. */
attn_store attn_store_for(attn_store asked, attn_precision precision);

/* Bytes of one stored element (2, 4 or 8); ATTN_STORE_DEFAULT is not a type. */
size_t attn_store_size(attn_store store);

/* "f16", "bf16", "f32", "f64", "i32"; "" for ATTN_STORE_DEFAULT. */
const char *attn_store_name(attn_store store);

/* The hot loops (omp simd) are compiled for AVX-512, AVX2 and the
 * baseline, picked at load time for the machine. */
#if defined(__x86_64__) && !defined(__clang__)
#define ATTN_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ATTN_VECTOR_CLONES
#endif

#define ATTN_MAX_RANK 32   /* HDF5's own limit on dataset rank */

/* What a file says of one dataset: its name, whether it is there, its shape. */
typedef struct attn_tensor_info {
    const char *name;               /* dataset path, for messages   */
    bool present;                   /* false: absent or not wanted  */
    size_t rank;
    size_t dims[ATTN_MAX_RANK];
} attn_tensor_info;

/* Size in bytes of one element of the given precision (4 or 8). */
size_t attn_precision_size(attn_precision precision);

/*
 * Formats fmt into err (when err is not NULL) and returns status, so that
 * `return attn_fail(err, ATTN_EINPUT, "...")` reports and propagates at once.
 */
int attn_fail(attn_error *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* attn_fail, with the setting that would resolve the failure (attn_fail
 * itself sets ATTN_HINT_NONE). */
int attn_fail_hint(attn_error *err, int status, attn_hint hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* attn_fail_hint, with the value the setting would take (err->hint_arg)
 * and, for ATTN_HINT_NAME, the input it names (err->hint_name; NULL for
 * none):
 *     attn_fail_hint_arg(err, ATTN_EINPUT, ATTN_HINT_NAME, "x", "hidden_states",
 *                        "%s: no dataset X", path);                       */
int attn_fail_hint_arg(attn_error *err, int status, attn_hint hint, const char *name,
                       const char *arg, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/*
 * The one overflow-checked product: *out = a * b.
 * Returns true, or false (leaving *out untouched) when a * b does not fit
 * in a size_t.
 */
bool attn_size_mul(size_t *out, size_t a, size_t b);

/*
 * Edits between the names a and b -- a letter replaced, left out or added,
 * or two neighbours swapped (optimal string alignment), case ignored --
 * for a "did you mean" after an unknown name; SIZE_MAX when either is
 * longer than ATTN_EDIT_NAME_MAX bytes.  Needs only libc (lib/core/names.c).
 */
#define ATTN_EDIT_NAME_MAX 256
size_t attn_edit_distance(const char *a, const char *b);

/* *out = a + b, or false on overflow. */
bool attn_size_add(size_t *out, size_t a, size_t b);

/* *out = dims[0] * ... * dims[count - 1] (1 when count is 0), or false. */
bool attn_size_product(size_t *out, const size_t *dims, size_t count);

/* Turns a flat row-major index into per-axis indices idx (rank) of dims (rank). */
void attn_unravel_index(size_t flat, const size_t *dims, size_t rank, size_t *idx);

/* *out = the most `bytes` can take deflated, in `chunks` chunks
 * (libdeflate's zlib bound: 5 bytes per block of at least 5000 bytes, and
 * per chunk the header, the trailer and padding); false on overflow. */
bool attn_deflate_bound(size_t *out, size_t bytes, size_t chunks);

/* Formats dims as "(4, 6)" into buf; returns buf.  Rank 0 gives "()". */
char *attn_format_shape(char *buf, size_t buflen, const size_t *dims, size_t rank);

/* Formats a byte count in binary units into buf ("512 B", "1.5 GiB",
 * "128.0 MiB"); returns buf.  Every message and plan of attnrun says
 * sizes so. */
char *attn_format_bytes(char *buf, size_t buflen, double bytes);

/*
 * Whether HDF5 is, right now, parsing a file libattn reads and did not
 * make (an input, a results file).  HDF5 does not read damaged or
 * hostile files safely: a fatal signal while this holds is that file's
 * doing, which a program's signal handler may say.  Safe to call from a
 * signal handler.
 */
bool attn_parsing_file(void);

/*
 * Every allocation of attnrun's own goes through these (free() releases
 * them).  A size of 0 allocates 1 byte.  In the test build made with
 * -DATTN_FAULT_INJECTION, ATTN_FAIL_ALLOC=N makes the Nth call fail, so
 * that tests/cli/test_alloc.sh can check every failure path.
 */
void *attn_malloc(size_t size);
void *attn_calloc(size_t count, size_t size);
char *attn_strdup(const char *text);

#endif
