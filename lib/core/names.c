/* names.c - how far apart two names are, for "did you mean" (attn_common.h).
 * Self-contained (libc only): the command line's option code, which some
 * programs build without libattn, compiles it beside itself. */
#include "attn_common.h"

#include <stdint.h>
#include <string.h>

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

size_t attn_edit_distance(const char *a, const char *b)
{
    const size_t la = strlen(a), lb = strlen(b);
    if (la > ATTN_EDIT_NAME_MAX || lb > ATTN_EDIT_NAME_MAX)
        return SIZE_MAX;
    /* d[i][j]: edits from a[0..i) to b[0..j); three rows kept */
    size_t rows[3][ATTN_EDIT_NAME_MAX + 1];
    size_t *before = rows[0], *last = rows[1], *row = rows[2];
    for (size_t j = 0; j <= lb; j++)
        last[j] = j;
    for (size_t i = 1; i <= la; i++) {
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            const size_t cost = lower(a[i - 1]) != lower(b[j - 1]);
            size_t best = last[j - 1] + cost;                     /* keep or replace */
            if (last[j] + 1 < best)
                best = last[j] + 1;                               /* delete a[i-1] */
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;                            /* insert b[j-1] */
            if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
                lower(a[i - 2]) == lower(b[j - 1]) && before[j - 2] + 1 < best)
                best = before[j - 2] + 1;                         /* swap two */
            row[j] = best;
        }
        size_t *spare = before;
        before = last;
        last = row;
        row = spare;
    }
    return last[lb];
}
