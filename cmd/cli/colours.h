/*
 * colours.h - how a reader of results colours a value, as attnrun plot
 * draws it and attnrun view's page shows it: the colour map (viridis),
 * the colour scales of --color (linear, sqrt, log), a colour bar's range,
 * and the colours of -inf, +inf and NaN.  docs/pictures.md states them.
 *
 *     cli_values v = ...;                        // the values' range
 *     cli_bar bar = cli_bar_of(CLI_LOG, CLI_FROM_ZERO, &v);
 *     cli_rgb c = cli_colour_of(x, CLI_LOG, &bar);
 */
#ifndef ATTN_CMD_COLOURS_H
#define ATTN_CMD_COLOURS_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

/* An sRGB colour, 0..255 a channel. */
typedef struct cli_rgb {
    unsigned char r, g, b;
} cli_rgb;

/* The colour scales of --color: t of a value, from its bar's lo and hi. */
typedef enum cli_scale { CLI_LINEAR, CLI_SQRT, CLI_LOG, CLI_SCALE_COUNT } cli_scale;

/* --color's word for a scale (its CLI_CHOICE names), and what a bar's
 * title adds for it ("sqrt scale"; "" for linear). */
const char *cli_scale_name(int scale);
const char *cli_scale_note(cli_scale scale);

/* Where a colour scale starts. */
typedef enum cli_from {
    CLI_FROM_MIN,                 /* the smallest finite value to the largest */
    CLI_FROM_ZERO,                /* 0 to the largest                      */
    CLI_FROM_UNIT                 /* 0 to 1, widened to the values outside */
} cli_from;

/* A log colour scale spans at most this many decades below its top. */
#define CLI_LOG_DECADES 6

/* One colour bar's range, lo < hi (lo > 0 on a log scale). */
typedef struct cli_bar {
    double lo, hi;
} cli_bar;

/* The values a bar spans: their range, as read. */
typedef struct cli_values {
    double lo, hi;                /* the smallest and largest finite      */
    double positive;              /* the smallest above 0                 */
    bool any, any_positive;
} cli_values;

/* The bar of `scale` for values starting `from`: linear and sqrt from the
 * smallest value, from 0, or 0..1 widened to the values outside, one wide
 * at least; log from the smallest positive value but at most
 * CLI_LOG_DECADES below the top. */
cli_bar cli_bar_of(cli_scale scale, cli_from from, const cli_values *values);

/* The position t (0 bottom, 1 top, not clamped) of the finite value v on
 * a bar of `scale`: (v - lo) / (hi - lo), its square root (0 below lo), or
 * (log v - log lo) / (log hi - log lo) (0 at or below lo). */
double cli_scale_position(cli_scale scale, const cli_bar *bar, double v);

/* The colour map's control points, at t = 0, 1/(count - 1), ..., 1,
 * interpolated linearly in sRGB (viridis); *count set. */
const cli_rgb *cli_colour_stops(size_t *count);

/* The colour map at t, clamped to [0, 1] (NaN: 0). */
cli_rgb cli_colour_at(double t);

/* Which special values (bits of a mask). */
enum { CLI_NEG_INF = 1, CLI_POS_INF = 2, CLI_NAN = 4 };

/* The bit of a value outside every colour scale; 0 for a finite one. */
static inline unsigned cli_special(float v)
{
    return isnan(v) ? CLI_NAN : v == -INFINITY ? CLI_NEG_INF : v == INFINITY ? CLI_POS_INF : 0;
}

/* A special value's colour (none of viridis) and its name in a legend. */
typedef struct cli_special_spec {
    unsigned bit;
    cli_rgb colour;
    const char *name;
} cli_special_spec;

/* The special values, in the order of a legend and of their bits. */
const cli_special_spec *cli_specials(size_t *count);

/* A value's colour: the map at its position on the bar, clamped, or its
 * special colour. */
cli_rgb cli_colour_of(float v, cli_scale scale, const cli_bar *bar);

#endif
