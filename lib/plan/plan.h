/*
 * plan.h - what the plan's own files share (internal to the plan layer).
 */
#ifndef ATTN_PLAN_INTERNAL_H
#define ATTN_PLAN_INTERNAL_H

#include <stddef.h>

/* The largest power of two <= v (v >= 1): step items, chunk and tile
 * sides are powers of two so that slices start on chunk boundaries. */
static inline size_t plan_floor_pow2(size_t v)
{
    size_t p = 1;
    while (p <= v / 2)
        p *= 2;
    return p;
}

#endif
