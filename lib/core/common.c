/* common.c - status messages, checked size arithmetic, allocation, and
 * whether HDF5 is parsing a file libattn reads (attn_common.h). */
#include "attn_common.h"

#include "core/core.h"

#include <signal.h>
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ATTN_FAULT_INJECTION
/* The test build: ATTN_FAIL_ALLOC=N makes the Nth allocation fail. */
static bool allocation_fails(void)
{
    static unsigned long calls, fail_at;
    static bool read;
    if (!read) {
        const char *at = getenv("ATTN_FAIL_ALLOC");
        fail_at = at != NULL ? strtoul(at, NULL, 10) : 0;
        read = true;
    }
    return ++calls == fail_at;
}
#else
static bool allocation_fails(void)
{
    return false;
}
#endif

void *attn_malloc(size_t size)
{
    return allocation_fails() ? NULL : malloc(size ? size : 1);
}

void *attn_calloc(size_t count, size_t size)
{
    return allocation_fails() ? NULL : calloc(count ? count : 1, size ? size : 1);
}

char *attn_strdup(const char *text)
{
    size_t len = strlen(text) + 1;
    char *copy = attn_malloc(len);
    if (copy != NULL)
        memcpy(copy, text, len);
    return copy;
}

/* Calls into HDF5 that parse a file libattn reads, nested: a count. */
static volatile sig_atomic_t parsing;

void attn_parsing_enter(void)
{
    parsing++;
}

void attn_parsing_leave(void)
{
    parsing--;
}

bool attn_parsing_file(void)
{
    return parsing != 0;
}

int attn_open_status(int error)
{
    switch (error) {
    case ENOENT: case ENOTDIR: case ELOOP: case ENAMETOOLONG: case EISDIR: case ENXIO:
    case ENODEV:
        return ATTN_EINPUT;
    case ENOMEM:
        return ATTN_ENOMEM;
    default:
        return ATTN_EIO;
    }
}

size_t attn_precision_size(attn_precision precision)
{
    return precision == ATTN_F64 ? sizeof(double) : sizeof(float);
}

attn_store attn_store_of(attn_precision precision)
{
    return precision == ATTN_F64 ? ATTN_STORE_F64 : ATTN_STORE_F32;
}

attn_store attn_store_for(attn_store asked, attn_precision precision)
{
    return asked != ATTN_STORE_DEFAULT ? asked : attn_store_of(precision);
}

const char *attn_precision_name(attn_precision precision)
{
    static const char *const names[] = {[ATTN_F32] = "f32", [ATTN_F64] = "f64"};
    static_assert(sizeof names / sizeof names[0] == ATTN_PRECISION_COUNT,
                  "a name for every precision");
    return names[precision];
}

/* The store types: name and element bytes. */
static const struct { const char *name; size_t size; } store_table[] = {
    [ATTN_STORE_DEFAULT] = {"", 0}, [ATTN_STORE_F16] = {"f16", 2}, [ATTN_STORE_BF16] = {"bf16", 2},
    [ATTN_STORE_F32] = {"f32", 4}, [ATTN_STORE_F64] = {"f64", 8}, [ATTN_STORE_I32] = {"i32", 4},
};
static_assert(sizeof store_table / sizeof store_table[0] == ATTN_STORE_COUNT,
              "a row for every store type");

size_t attn_store_size(attn_store store)
{
    return store_table[store].size;
}

const char *attn_store_name(attn_store store)
{
    return store_table[store].name;
}

static void set_error(attn_error *err, attn_hint hint, const char *fmt, va_list ap)
{
    if (err != NULL) {
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        err->hint = hint;
        err->hint_arg[0] = err->hint_name[0] = '\0';
    }
}

int attn_fail(attn_error *err, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error(err, ATTN_HINT_NONE, fmt, ap);
    va_end(ap);
    return status;
}

int attn_fail_hint(attn_error *err, int status, attn_hint hint, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error(err, hint, fmt, ap);
    va_end(ap);
    return status;
}

int attn_fail_hint_arg(attn_error *err, int status, attn_hint hint, const char *name,
                       const char *arg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error(err, hint, fmt, ap);
    va_end(ap);
    if (err != NULL) {
        snprintf(err->hint_arg, sizeof err->hint_arg, "%s", arg != NULL ? arg : "");
        snprintf(err->hint_name, sizeof err->hint_name, "%s", name != NULL ? name : "");
    }
    return status;
}

bool attn_size_mul(size_t *out, size_t a, size_t b)
{
    if (a != 0 && b > SIZE_MAX / a)
        return false;
    *out = a * b;
    return true;
}

bool attn_size_add(size_t *out, size_t a, size_t b)
{
    if (b > SIZE_MAX - a)
        return false;
    *out = a + b;
    return true;
}

bool attn_deflate_bound(size_t *out, size_t bytes, size_t chunks)
{
    size_t blocks, framing;
    return attn_size_add(&blocks, bytes / 5000, chunks) && attn_size_mul(&blocks, blocks, 5) &&
           attn_size_add(out, bytes, blocks) && attn_size_mul(&framing, chunks, 32) &&
           attn_size_add(out, *out, framing);
}

void attn_unravel_index(size_t flat, const size_t *dims, size_t rank, size_t *idx)
{
    for (size_t i = rank; i-- > 0;) {
        idx[i] = dims[i] ? flat % dims[i] : 0;
        flat = dims[i] ? flat / dims[i] : 0;
    }
}

bool attn_size_product(size_t *out, const size_t *dims, size_t count)
{
    size_t total = 1;
    for (size_t i = 0; i < count; i++)
        if (!attn_size_mul(&total, total, dims[i]))
            return false;
    *out = total;
    return true;
}

char *attn_format_shape(char *buf, size_t buflen, const size_t *dims, size_t rank)
{
    size_t used = 0;
    if (buflen == 0)
        return buf;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, buflen, "(");
    for (size_t i = 0; i < rank && used < buflen; i++)
        used += (size_t)snprintf(buf + used, buflen - used, "%s%zu", i ? ", " : "", dims[i]);
    if (used < buflen)
        snprintf(buf + used, buflen - used, rank == 1 ? ",)" : ")");
    return buf;
}

char *attn_format_bytes(char *buf, size_t buflen, double bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    size_t u = 0;
    while (bytes >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, buflen, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
    return buf;
}
