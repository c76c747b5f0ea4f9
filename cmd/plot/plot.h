/*
 * plot.h - `attnrun plot`: a picture of the maps a run saved (one heat map
 * per head), of a rollout (one per layer) or of a census of heads (one
 * grid of layers by heads per score), as PNG, SVG or PDF.  Three phases,
 * one file each:
 *
 *     plot.c       the command line: options, messages, exit codes, the
 *                  output file written atomically; the tables of what can
 *                  be drawn (--what) and of how each is laid out in panels
 *     read.c       the results file: what it is (results, rollout,
 *                  census), one item's maps of the chosen heads or layers,
 *                  zoomed, max-pooled to at most PLOT_POOL_LIMIT cells per
 *                  axis while they are read, their ranges, the labels
 *     draw.c       the layout, the colour map and scales, the drawing (cairo)
 *
 *     plot_request rq = {.input = "out.h5", .group = "/", .what = PLOT_WHAT_DEFAULT};
 *     plot_data data;
 *     plot_read(&rq, &data, &err);
 *     plot_draw(&data, PLOT_PNG, file, &err);
 *     plot_data_free(&data);
 *
 * Legend: B items, H heads, L layers, n queries, m keys, k heads drawn; a
 * "source map" is what one panel shows before pooling: (n, m) of one head
 * or layer, (k, n) -- heads by queries -- for entropy, (L, H) for a census
 * grid; zoomed (--queries, --keys), a block of it.
 */
#ifndef ATTN_CMD_PLOT_H
#define ATTN_CMD_PLOT_H

#include "attn_common.h"
#include "cli/cli.h"
#include "cli/colours.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Source maps longer than this along an axis are max-pooled down to it. */
#define PLOT_POOL_LIMIT 512

/* At most this many heads (or layers) in one picture. */
#define PLOT_MAX_HEADS 1024

/* The words of --what: a map of a results, rollout or flow file (the
 * first nine), a grid of a census of heads (entropy, distance and the last
 * five); the word names the dataset read. */
typedef enum plot_what {
    PLOT_WHAT_DEFAULT = -1,       /* no --what: by what the file holds     */
    PLOT_WEIGHTS, PLOT_SCORES, PLOT_NORMS, PLOT_MEAN, PLOT_ENTROPY, PLOT_DISTANCE,
    PLOT_VALUE_NORM, PLOT_ROLLOUT, PLOT_FLOW,
    PLOT_FIRST, PLOT_PREVIOUS, PLOT_SELF, PLOT_DUPLICATE, PLOT_INDUCTION,
    PLOT_WHAT_COUNT
} plot_what;

/* The axes a source map's rows and columns can be. */
typedef enum plot_axis { PLOT_QUERY, PLOT_KEY, PLOT_HEAD, PLOT_LAYER, PLOT_AXIS_COUNT } plot_axis;

/* One row of the axis table: its words, and what labels it. */
typedef struct plot_axis_spec {
    const char *name, *plural;    /* "query", "queries": the axis titles, the foot */
    const char *labels;           /* the string dataset labelling it (query_token),
                                     or NULL: indices                      */
    const char *option;           /* the option that zooms it ("--queries"), or NULL */
} plot_axis_spec;

const plot_axis_spec *plot_axis_of(plot_axis axis);

/* How a dataset's axes, after the batch axis, make panels. */
typedef enum plot_panels {
    PLOT_PER_HEAD,                /* (H, n, m): a panel per head           */
    PLOT_PER_LAYER,               /* (L, n, n): a panel per layer          */
    PLOT_ONE_MAP,                 /* (n, m): one panel                     */
    PLOT_HEADS_BY_QUERIES,        /* (H, n): one panel, a row per head     */
    PLOT_HEADS_BY_KEYS,           /* (H, m): the same, by keys             */
    PLOT_GRID,                    /* (L, H), no batch axis: a panel per dataset */
    PLOT_PANELS_COUNT
} plot_panels;

/* Which axis of the dataset, before the rows, picks what. */
typedef enum plot_lead {
    PLOT_LEAD_NONE,               /* none: the dataset is (rows, cols)     */
    PLOT_LEAD_PANEL,              /* each index a panel: (panels, rows, cols) */
    PLOT_LEAD_ROW                 /* each index a row: (rows, cols)        */
} plot_lead;

/* One row of the panel table. */
typedef struct plot_panels_spec {
    bool batch;                   /* a leading batch axis may be there     */
    plot_lead lead;
    plot_axis lead_axis;          /* what the lead axis is (heads, layers);
                                     PLOT_HEAD, unused, without one       */
    plot_axis rows, cols;         /* a panel's rows and columns            */
    const char *shapes;           /* the shapes taken, for messages        */
    const char *is;               /* what its panels are and which options
                                     apply, for an option refused         */
} plot_panels_spec;

const plot_panels_spec *plot_panels_of(plot_panels panels);

/* The rank of a dataset laid out as `panels`, with its batch axis. */
size_t plot_panels_rank(const plot_panels_spec *spec);

/* One row of a --what table: a dataset and how the picture shows it. */
typedef struct plot_what_spec {
    const char *name;             /* --what's word, and the dataset read   */
    plot_panels panels;
    cli_from from;
    const char *title;            /* the figure's title; a grid's panel title */
    const char *bar;              /* the colour bar's title                */
    const char *made_by;          /* how a file comes to hold it           */
} plot_what_spec;

/* The row of the map table (results and rollout files) or of the grid
 * table (a census of heads) for `what`; NULL when it has none. */
const plot_what_spec *plot_map_of(plot_what what);
const plot_what_spec *plot_grid_of(plot_what what);

/* The root attribute and value that mark a census of attnrun heads, and
 * its title. */
#define PLOT_ANALYSIS_ATTRIBUTE "attnrun_analysis"
#define PLOT_CENSUS_ANALYSIS "heads"
#define PLOT_CENSUS_TITLE "heads census"

typedef enum plot_format { PLOT_PNG, PLOT_SVG, PLOT_PDF } plot_format;

/* Indices first..last, both included (an item of --heads, --queries). */
typedef cli_range plot_range;

/* What to draw, from the command line. */
typedef struct plot_request {
    const char *input;            /* the results file                     */
    const char *group;            /* the group holding the results: "/"   */
    size_t item;                  /* batch item                           */
    const plot_range *heads;      /* (head_ranges); NULL: every head      */
    size_t head_ranges;
    const plot_range *queries;    /* the queries drawn; NULL: all         */
    const plot_range *keys;       /* the keys drawn; NULL: all            */
    plot_what what;               /* PLOT_WHAT_DEFAULT: by the file       */
    cli_scale scale;
} plot_request;

/* One picture's data, as plot_read leaves it for plot_draw. */
typedef struct plot_data {
    const char *input, *group;    /* for the title (the request's)        */
    const char *title;            /* what the picture shows: "weights"    */
    const char *bar_title;        /* the shared colour bar's title        */
    plot_axis row_axis, col_axis; /* what a panel's rows and columns are  */
    cli_scale scale;
    bool batched;                 /* the maps have a batch axis           */
    size_t item;
    size_t panels;
    char **panel_titles;          /* (panels) "head 3", the layer's group  */
    bool bar_per_panel;           /* each panel its own bar (a census),
                                     else one bar for all                  */
    cli_bar *bars;               /* (panels) or (1), as bar_per_panel     */
    size_t rows, cols;            /* a source map, zoomed                 */
    size_t row_first, col_first;  /* its first row and column in the dataset */
    size_t pool_rows, pool_cols;  /* max-pooling factors along each axis  */
    size_t out_rows, out_cols;    /* ceil(rows / pool_rows), ceil(cols / pool_cols) */
    float *values;                /* (panels, out_rows, out_cols)         */
    unsigned specials;            /* CLI_NEG_INF | CLI_POS_INF | CLI_NAN drawn */
    size_t row_length, col_length;    /* the dataset's rows and columns:
                                         more than rows, cols when zoomed */
    char **row_labels;            /* (row_length) the labels of the dataset's
                                     rows, or NULL: their indices          */
    char **col_labels;            /* (col_length) the same of its columns */
} plot_data;

/*
 * Reads what `rq` asks for.  ATTN_EINPUT when the file, group or dataset
 * is missing or unreadable, or holds something else than a float map of
 * the expected rank, when --item, --heads, --queries or --keys lie outside
 * it (the message names what is there), or when the picture would exceed
 * plot_size's limits; ATTN_EUSAGE when an option does not apply to what
 * the file holds (--heads to a rollout, --keys to entropy, any selection
 * to a census) or --color log meets a negative value; ATTN_ENOMEM; ATTN_EIO
 * for a failed read.  On failure *data holds nothing to free.
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
