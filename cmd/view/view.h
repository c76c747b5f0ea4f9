/*
 * view.h - `attnrun view`: one self-contained HTML page that shows a
 * results file -- every layer and head of a few items, their census,
 * and the rollout when given -- in any browser, offline.  Four phases,
 * one file each:
 *
 *     view.c       the command line: options, messages, exit codes, the
 *                  page written to a temporary file renamed into place
 *     plan.c       what the page holds: the layers and their census
 *                  (cli/census.h, as attnrun heads counts it), the items,
 *                  the rollout file, and the level every map is embedded
 *                  at so that the page fits --max-size
 *     maps.c       one map read a block of rows at a time and pooled into
 *                  its embedded level and its thumbnail, as base64
 *     page.c       the page written: the template, its style and script
 *                  (page/, embedded into the binary at build time,
 *                  assets.c), the maps, and the rest as JSON
 *
 *     view_request rq = {.input = "results.h5", .max_size = VIEW_MAX_SIZE};
 *     view_plan plan;
 *     view_plan_make(&rq, &plan, &err);     // checks; nothing written yet
 *     view_write_page(&plan, file, &err);   // the maps, one at a time
 *     view_plan_free(&plan);
 *
 * Levels: level 0 is a map at full resolution, (n, m) float32; level k
 * pools blocks of 2^k x 2^k cells (the last ones of a row or column
 * smaller) into two (ceil(n / 2^k), ceil(m / 2^k)): each block's max, and
 * each block's mean.  A map's thumbnail is the max of its coarsest level of at most
 * VIEW_THUMB_SIDE cells a side.  docs/view.md states the page's format.
 *
 * Legend: B items, I items shown, L layers, H heads, n queries, m keys.
 */
#ifndef ATTN_CMD_VIEW_H
#define ATTN_CMD_VIEW_H

#include "attn_common.h"
#include "attn_results.h"
#include "cli/cli.h"
#include "cli/json.h"
#include "cli/census.h"
#include "cli/colours.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The default --max-size: the page's bytes, at most. */
#define VIEW_MAX_SIZE ((size_t)64 << 20)

/* Items shown when --items does not say: the first ones, at most. */
#define VIEW_DEFAULT_ITEMS 16

/* A thumbnail's side, in cells, at most. */
#define VIEW_THUMB_SIDE 64

/* Where every map's colour bars start: at 0, as attnrun plot's bars of
 * weights and of a rollout. */
#define VIEW_BAR_FROM CLI_FROM_ZERO

/* A token longer than this (bytes) is cut, at a character's end, and
 * marked with an ellipsis. */
#define VIEW_TOKEN_BYTES 120

/* What to show, from the command line. */
typedef struct view_request {
    const char *input;            /* RESULTS.h5                            */
    char **groups;                /* (group_count) --groups; NULL: all     */
    size_t group_count;
    const cli_range *items;       /* (item_ranges) --items; NULL: the first */
    size_t item_ranges;
    size_t max_size;              /* the page's bytes, at most             */
    const char *rollout;          /* --rollout FILE, or NULL               */
} view_request;

/* The rollout file of --rollout: (B, L, n, n) maps, one per layer. */
typedef struct view_rollout {
    attn_results *results;        /* its root, open while the page is written */
    size_t layers;                /* L of the rollout                      */
    char **groups;                /* (layers) its layer_group, or NULL     */
} view_rollout;

/* One map's embedding: its level and its thumbnail's. */
typedef struct view_level {
    unsigned detail;              /* the level embedded                    */
    unsigned thumb;               /* the thumbnail's: == detail when the
                                     detail is small enough itself       */
} view_level;

/* What the page holds, from view_plan_make. */
typedef struct view_plan {
    const view_request *rq;
    census_table census;          /* the layers, H, every head's scores    */
    size_t *items;                /* (item_count) the items shown, in order */
    size_t item_count;
    size_t batch;                 /* B                                     */
    view_rollout rollout;         /* .results NULL without --rollout       */
    unsigned level;               /* the level of the maps' detail: the
                                     finest that fits --max-size           */
    size_t fixed_bytes;           /* the page less its maps                */
    size_t bytes;                 /* the page, at most                     */
    size_t maps;                  /* heads' maps and rollout maps embedded */
    char *meta;                   /* (meta_length) the page's JSON, all but
                                     the maps' own entries                */
    size_t meta_length;
    json_writer meta_writer;      /* the JSON's writer where meta stops    */
} view_plan;

/* The map's levels when the page's detail is `level`. */
view_level view_level_of(size_t n, size_t m, unsigned level);

/*
 * Finds the layers and counts their census (census_find_layers,
 * census_count), picks the items, opens and checks the rollout file, and
 * chooses the level.  ATTN_EINPUT for what the files cannot give (the
 * message names what is there), ATTN_EUSAGE when --items names items the
 * file lacks or no level fits --max-size (the message says the size it
 * needs), ATTN_ENOMEM, ATTN_EIO.  On failure *plan holds nothing to free.
 */
int view_plan_make(const view_request *rq, view_plan *plan, attn_error *err);

void view_plan_free(view_plan *plan);

/* Where one map's values come from: a float dataset of rank 2 to 4, its
 * leading indices fixed, its last two axes the map's rows and columns. */
typedef struct view_source {
    attn_results *results;
    const char *dataset;          /* "weights", "rollout"                  */
    size_t lead[2];               /* (leads) the indices before the map    */
    size_t leads;
    size_t rows, cols;            /* n, m                                  */
} view_source;

/* What one map held, for its colour bars. */
typedef struct view_map_stats {
    cli_values values;           /* its finite values' range              */
    unsigned specials;            /* CLI_NEG_INF | CLI_POS_INF | CLI_NAN */
} view_map_stats;

/*
 * Writes the map as the page's elements: its level (`level.detail`) as
 * base64 little-endian float32 in a <script type="application/
 * octet-stream" id="m<id>"> element (the values, or a pooled level's
 * maxes), a pooled level's means in one id="a<id>", and, when
 * level.thumb is coarser, its thumbnail in one id="t<id>".  Reads a block of whole rows at a time.
 * ATTN_OK with *stats filled, ATTN_EINPUT for a read that fails,
 * ATTN_ENOMEM; the write's errors are left in `out` (ferror).
 */
int view_write_map(const view_source *src, view_level level, size_t id, FILE *out,
                   view_map_stats *stats, attn_error *err);

/* The bytes view_write_map writes for an (n, m) map at `level`. */
size_t view_map_bytes(size_t n, size_t m, view_level level);

/* The JSON of the page (the "meta" element) that the plan fixes: the
 * file, the layers, the items and their tokens, the census, the colour
 * map.  Left open after "maps":[ for page.c. */
int view_meta(view_plan *plan, attn_error *err);

/* The page's bytes other than the maps and their entries: the template,
 * its style and script. */
size_t view_template_bytes(void);

/* The bytes of one map's entry in the JSON, at most. */
#define VIEW_MAP_ENTRY_BYTES 400

/* Writes the page to `out`.  ATTN_OK, ATTN_EINPUT, ATTN_ENOMEM, ATTN_EIO
 * (a failed write). */
int view_write_page(const view_plan *plan, FILE *out, attn_error *err);

/* The page's parts, embedded at build time (assets.c): the template
 * (page/view.html), its style and script, each NUL-terminated, and the
 * CSP hashes of the style and script ("sha256-..."). */
typedef enum view_asset { VIEW_HTML, VIEW_CSS, VIEW_JS, VIEW_ASSET_COUNT } view_asset;
const char *view_asset_text(view_asset asset, size_t *length);
const char *view_asset_hash(view_asset asset);

/* `attnrun view ...`: argv[0] is "view".  Returns the exit status. */
int view_main(int argc, char **argv);

#endif
