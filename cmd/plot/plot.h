/*
 * plot.h - `attnrun plot`: a picture of the maps a run saved, one heat map
 * per head, as PNG, SVG or PDF.  Three phases, one file each:
 *
 *     plot.c       the command line: options, messages, exit codes, the
 *                  output file written atomically
 *     read.c       the results file: one item's maps of the chosen heads,
 *                  max-pooled to at most PLOT_POOL_LIMIT cells per axis
 *                  while they are read, their range, the token labels
 *     draw.c       the layout, the colour map and the drawing (cairo)
 *
 *     plot_request rq = {.input = "out.h5", .group = "/", .what = PLOT_WEIGHTS};
 *     plot_data data;
 *     plot_read(&rq, &data, &err);
 *     plot_draw(&data, PLOT_PNG, file, &err);
 *     plot_data_free(&data);
 *
 * Legend: B items, H heads, n queries, m keys, k heads drawn; a "source
 * map" is what one panel shows before pooling: (n, m) of one head for
 * scores and weights, (k, n) -- heads by queries -- for entropy.
 */
#ifndef ATTN_CMD_PLOT_H
#define ATTN_CMD_PLOT_H

#include "attn_common.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Source maps longer than this along an axis are max-pooled down to it. */
#define PLOT_POOL_LIMIT 512

/* At most this many panels (heads) in one picture. */
#define PLOT_MAX_HEADS 1024

typedef enum plot_what { PLOT_WEIGHTS, PLOT_SCORES, PLOT_ENTROPY, PLOT_WHAT_COUNT } plot_what;

/* One row of the --what table: what it reads and what the picture calls it. */
typedef struct plot_what_spec {
    const char *name;          /* --what's word, and the dataset read         */
    size_t batched_rank;       /* rank with the batch axis; one less without */
    bool from_zero;            /* the scale is 0..max, not min..max          */
    const char *shapes;        /* for messages                               */
    const char *title;         /* the figure's title and the bar's           */
    const char *rows, *cols;   /* what a panel's rows and columns are        */
    const char *row_axis, *col_axis;   /* the axes' names                    */
} plot_what_spec;

/* The row of the --what table for `what`. */
const plot_what_spec *plot_what_of(plot_what what);

typedef enum plot_format { PLOT_PNG, PLOT_SVG, PLOT_PDF } plot_format;

/* Which special values a picture shows (bits of plot_data.specials). */
enum { PLOT_NEG_INF = 1, PLOT_POS_INF = 2, PLOT_NAN = 4 };

/* The bit of a value outside every colour scale; 0 for a finite one. */
static inline unsigned plot_special(float v)
{
    return isnan(v) ? PLOT_NAN : v == -INFINITY ? PLOT_NEG_INF : v == INFINITY ? PLOT_POS_INF : 0;
}

/* Heads first..last, both included (one item of --heads). */
typedef struct plot_range {
    size_t first, last;
} plot_range;

/* What to draw, from the command line. */
typedef struct plot_request {
    const char *input;            /* the results file                     */
    const char *group;            /* the group holding the results: "/"   */
    size_t item;                  /* batch item                           */
    const plot_range *heads;      /* (head_ranges); NULL: every head      */
    size_t head_ranges;
    plot_what what;
} plot_request;

/* One picture's data, as plot_read leaves it for plot_draw. */
typedef struct plot_data {
    plot_what what;
    const char *input, *group;    /* for the title (the request's)        */
    bool batched;                 /* the maps have a batch axis           */
    size_t item;
    size_t panels;                /* maps: k; entropy: 1                  */
    size_t head_count;            /* k                                    */
    size_t *heads;                /* (k) head index, ascending            */
    size_t rows, cols;            /* a source map: (n, m), entropy (k, n) */
    size_t pool_rows, pool_cols;  /* max-pooling factors along each axis  */
    size_t out_rows, out_cols;    /* ceil(rows / pool_rows), ceil(cols / pool_cols) */
    float *values;                /* (panels, out_rows, out_cols)         */
    double lo, hi;                /* the colour scale's range, lo < hi    */
    unsigned specials;            /* PLOT_NEG_INF | PLOT_POS_INF | PLOT_NAN drawn */
    char **row_labels;            /* (rows) tokens, or NULL: indices      */
    char **col_labels;            /* (cols) tokens, or NULL: indices      */
} plot_data;

/*
 * Reads what `rq` asks for.  ATTN_EINPUT when the file, group or dataset
 * is missing or unreadable, or holds something else than a float map of
 * the expected rank, when --item or --heads lie outside it (the message
 * names what is there), or when the picture would exceed plot_size's
 * limits; ATTN_ENOMEM; ATTN_EIO for a failed read.  On failure *data
 * holds nothing to free.
 */
int plot_read(const plot_request *rq, plot_data *data, attn_error *err);

void plot_data_free(plot_data *data);

/* The format a file name's extension asks for (.png, .svg, .pdf, any
 * case); false for any other name. */
bool plot_format_of(const char *path, plot_format *format);

/* The picture's size in pixels (PNG) or points (SVG, PDF); false when it
 * exceeds what one picture may be (32767 a side, 2^26 pixels). */
bool plot_size(const plot_data *data, size_t *width, size_t *height);

/*
 * Draws the picture and writes it to `out` in `format`.  ATTN_EIO when
 * cairo or the write fails, ATTN_ENOMEM.  The caller closes `out`.
 */
int plot_draw(const plot_data *data, plot_format format, FILE *out, attn_error *err);

/* `attnrun plot ...`: argv[0] is "plot".  Returns the exit status. */
int plot_main(int argc, char **argv);

#endif
