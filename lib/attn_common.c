/* attn_common.c - status messages and checked size arithmetic. */
#include "attn_common.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

size_t attn_precision_size(attn_precision precision)
{
    return precision == ATTN_F64 ? sizeof(double) : sizeof(float);
}

int attn_fail(attn_error *err, int status, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
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
