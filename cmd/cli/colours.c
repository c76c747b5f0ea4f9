/* colours.c - the colour map, scales and bars of colours.h. */
#include "cli/colours.h"

#include <math.h>

/*
 * The colour map: viridis (van der Walt and Smith, matplotlib), as nine
 * control points at t = 0, 1/8, ..., 1 -- the published colours of R's
 * viridisLite::viridis(9) -- interpolated linearly in sRGB.
 */
static const cli_rgb viridis[9] = {
    {0x44, 0x01, 0x54}, {0x47, 0x2D, 0x7B}, {0x3B, 0x52, 0x8B}, {0x2C, 0x72, 0x8E}, {0x21, 0x90, 0x8C},
    {0x27, 0xAD, 0x81}, {0x5D, 0xC8, 0x63}, {0xAA, 0xDC, 0x32}, {0xFD, 0xE7, 0x25},
};

/* Values outside the scale, each its own colour, none of them in viridis;
 * in the order of the legend and of the CLI_* bits. */
static const cli_special_spec specials[] = {
    {CLI_NEG_INF, {0xCC, 0xCC, 0xCC}, "\xE2\x88\x92inf (masked)"},   /* light grey */
    {CLI_POS_INF, {0xE4, 0x1A, 0x1C}, "+inf"},                       /* red        */
    {CLI_NAN, {0xFF, 0x00, 0xFF}, "NaN"},                            /* magenta    */
};

/* The colour scales of --color: the word, and what a bar's title adds. */
static const struct scale_spec {
    const char *name;
    const char *note;
} scales[CLI_SCALE_COUNT] = {
    [CLI_LINEAR] = {"linear", ""},
    [CLI_SQRT] = {"sqrt", "sqrt scale"},
    [CLI_LOG] = {"log", "log scale"},
};

const char *cli_scale_name(int scale)
{
    return scales[scale].name;
}

const char *cli_scale_note(cli_scale scale)
{
    return scales[scale].note;
}

const cli_rgb *cli_colour_stops(size_t *count)
{
    *count = sizeof viridis / sizeof viridis[0];
    return viridis;
}

const cli_special_spec *cli_specials(size_t *count)
{
    *count = sizeof specials / sizeof specials[0];
    return specials;
}

cli_rgb cli_colour_at(double t)
{
    t = t > 0 ? (t < 1 ? t : 1) : 0;          /* NaN (an empty range) too: 0 */
    double x = t * 8;
    int i = x >= 8 ? 7 : (int)x;
    double u = x - i;
    const cli_rgb *a = &viridis[i], *b = &viridis[i + 1];
    cli_rgb c = {(unsigned char)lround(a->r + u * (b->r - a->r)),
                 (unsigned char)lround(a->g + u * (b->g - a->g)),
                 (unsigned char)lround(a->b + u * (b->b - a->b))};
    return c;
}

double cli_scale_position(cli_scale scale, const cli_bar *bar, double v)
{
    double t = (v - bar->lo) / (bar->hi - bar->lo);
    switch (scale) {
    case CLI_SQRT:
        return t > 0 ? sqrt(t) : 0;
    case CLI_LOG:
        return v > bar->lo ? (log10(v) - log10(bar->lo)) / (log10(bar->hi) - log10(bar->lo)) : 0;
    case CLI_LINEAR:
    case CLI_SCALE_COUNT:
    default:
        return t;
    }
}

cli_rgb cli_colour_of(float v, cli_scale scale, const cli_bar *bar)
{
    unsigned bit = cli_special(v);
    for (size_t i = 0; bit != 0 && i < sizeof specials / sizeof specials[0]; i++)
        if (specials[i].bit == bit)
            return specials[i].colour;
    return cli_colour_at(cli_scale_position(scale, bar, v));
}

/* A bar's linear range: from 0, from the smallest value, or 0..1 widened
 * to the values outside; one wide at least. */
static cli_bar linear_range(cli_from from, const cli_values *range)
{
    cli_bar bar;
    bar.lo = from == CLI_FROM_MIN ? (range->any ? range->lo : 0)
           : from == CLI_FROM_UNIT && range->any ? fmin(0, range->lo) : 0;
    bar.hi = range->any ? range->hi : bar.lo;
    if (from == CLI_FROM_UNIT)
        bar.hi = fmax(1, bar.hi);
    /* An empty range gets a width that large values still see: lo + 1
     * would be lo itself beyond 2^53. */
    if (!(bar.hi > bar.lo))
        bar.hi = bar.lo + fmax(1.0, fabs(bar.lo) * 0x1p-20);
    return bar;
}

/* A bar's log range: from the smallest positive value, but at most
 * CLI_LOG_DECADES below the top, to the top; a decade below the top when
 * only one positive value is there, 1e-6..1 when none is. */
static cli_bar log_range(cli_from from, const cli_values *range)
{
    cli_bar bar = {1e-6, 1};
    if (!range->any_positive)
        return bar;
    bar.hi = from == CLI_FROM_UNIT ? fmax(1, range->hi) : range->hi;
    bar.lo = fmax(range->positive, bar.hi * pow(10, -CLI_LOG_DECADES));
    if (!(bar.lo < bar.hi))
        bar.lo = bar.hi / 10;
    return bar;
}

cli_bar cli_bar_of(cli_scale scale, cli_from from, const cli_values *values)
{
    return scale == CLI_LOG ? log_range(from, values) : linear_range(from, values);
}
