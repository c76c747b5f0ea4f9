/*
 * draw.c - the picture (plot.h): layout, colour map and drawing, with
 * cairo, one code path for PNG, SVG and PDF (only the surface differs).
 *
 * Layout, in pixels (PNG) or points (SVG, PDF); docs/pictures.md,
 * "Layout", states the same formulas, and tests/ref/plot_check.py
 * recomputes them:
 *
 *   cell      cell_w = max(1, 256 / out_cols), cell_h = max(1, 256 / out_rows)
 *             (whole pixels, so every cell is a block of equal pixels)
 *   panel     cell_w * out_cols wide, cell_h * out_rows tall
 *   grid      grid_cols = ceil(sqrt(panels)), grid_rows = ceil(panels / grid_cols);
 *             a slot is ROW_LABEL_W + panel wide and
 *             HEAD_TITLE_H + panel + COL_LABEL_H tall, GAP between slots
 *   picture   width  = MARGIN + grid + BAR_COLUMN_W + MARGIN
 *             height = MARGIN + TITLE_H + max(grid, MIN_CONTENT_H) + FOOT_H + MARGIN
 *   panel p   (row-major in the grid, r = p / grid_cols, c = p % grid_cols) at
 *             x = MARGIN + c (slot_w + GAP) + ROW_LABEL_W,
 *             y = MARGIN + TITLE_H + r (slot_h + GAP) + HEAD_TITLE_H
 *   bar       BAR_W x BAR_H at x = MARGIN + grid_w + BAR_OFFSET,
 *             y = MARGIN + TITLE_H + HEAD_TITLE_H; its pixel row j (0 on top)
 *             has the colour of t = (BAR_H - 1 - j) / (BAR_H - 1)
 *   legend    a SWATCH square per special value drawn (-inf, +inf, NaN, in
 *             that order) at x = the bar's, y = bar + BAR_H + LEGEND_OFFSET
 *             + i LEGEND_STEP
 */
#define _GNU_SOURCE
#include "plot/plot.h"

#include <cairo.h>
#include <cairo-pdf.h>
#include <cairo-svg.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum {
    MARGIN = 16, TITLE_H = 28, HEAD_TITLE_H = 20, ROW_LABEL_W = 80, COL_LABEL_H = 80, GAP = 16,
    BAR_COLUMN_W = 150, BAR_OFFSET = 24, BAR_W = 16, BAR_H = 160, LEGEND_OFFSET = 24,
    LEGEND_STEP = 18, SWATCH = 12, FOOT_H = 36, MIN_CONTENT_H = 260, PANEL_TARGET = 256,
    TOKEN_PITCH = 12,            /* least distance between two token labels  */
    INDEX_PITCH = 30,            /* ... between two index labels             */
    AXIS_TITLE = 20,             /* of the label gutters, for the axis names */
    MAX_SIDE = 32767             /* cairo's largest image                    */
};

#define MAX_PIXELS ((size_t)1 << 26)

/* An sRGB colour, 0..255 a channel. */
typedef struct rgb {
    unsigned char r, g, b;
} rgb;

/*
 * The colour map: viridis (van der Walt and Smith, matplotlib), as nine
 * control points at t = 0, 1/8, ..., 1 -- the published colours of R's
 * viridisLite::viridis(9) -- interpolated linearly in sRGB.
 */
static const rgb viridis[9] = {
    {0x44, 0x01, 0x54}, {0x47, 0x2D, 0x7B}, {0x3B, 0x52, 0x8B}, {0x2C, 0x72, 0x8E}, {0x21, 0x90, 0x8C},
    {0x27, 0xAD, 0x81}, {0x5D, 0xC8, 0x63}, {0xAA, 0xDC, 0x32}, {0xFD, 0xE7, 0x25},
};

/* Values outside the scale, each its own colour, none of them in viridis;
 * in the order of the legend and of the PLOT_* bits. */
static const struct special {
    unsigned bit;
    rgb colour;
    const char *name;
} specials[] = {
    {PLOT_NEG_INF, {0xCC, 0xCC, 0xCC}, "\xE2\x88\x92inf (masked)"},   /* light grey */
    {PLOT_POS_INF, {0xE4, 0x1A, 0x1C}, "+inf"},                       /* red        */
    {PLOT_NAN, {0xFF, 0x00, 0xFF}, "NaN"},                            /* magenta    */
};

static const rgb background = {0xFF, 0xFF, 0xFF};

/* The colour map at t in [0, 1]. */
static rgb colour_at(double t)
{
    t = t > 0 ? (t < 1 ? t : 1) : 0;          /* NaN (an empty range) too: 0 */
    double x = t * 8;
    int i = x >= 8 ? 7 : (int)x;
    double u = x - i;
    const rgb *a = &viridis[i], *b = &viridis[i + 1];
    rgb c = {(unsigned char)lround(a->r + u * (b->r - a->r)),
             (unsigned char)lround(a->g + u * (b->g - a->g)),
             (unsigned char)lround(a->b + u * (b->b - a->b))};
    return c;
}

/* A value's colour: the map at (v - lo) / (hi - lo), clamped, or its special colour. */
static rgb colour_of(float v, double lo, double hi)
{
    unsigned bit = plot_special(v);
    for (size_t i = 0; bit != 0 && i < sizeof specials / sizeof specials[0]; i++)
        if (specials[i].bit == bit)
            return specials[i].colour;
    return colour_at(((double)v - lo) / (hi - lo));
}

bool plot_format_of(const char *path, plot_format *format)
{
    static const struct {
        const char *extension;
        plot_format format;
    } extensions[] = {{".png", PLOT_PNG}, {".svg", PLOT_SVG}, {".pdf", PLOT_PDF}};
    size_t len = strlen(path);
    for (size_t i = 0; i < sizeof extensions / sizeof extensions[0]; i++)
        if (len > 4 && path[len - 5] != '/' && strcasecmp(path + len - 4, extensions[i].extension) == 0) {
            *format = extensions[i].format;
            return true;
        }
    return false;
}

/* Where everything goes (see the top of this file). */
typedef struct layout {
    size_t cell_w, cell_h;        /* pixels of one pooled cell            */
    size_t panel_w, panel_h;
    size_t grid_cols, grid_rows;
    size_t slot_w, slot_h;
    size_t grid_w, grid_h;
    size_t width, height;
} layout;

/* false when a size overflows or exceeds one picture's limits. */
static bool layout_of(const plot_data *d, layout *L)
{
    L->cell_w = d->out_cols >= PANEL_TARGET ? 1 : PANEL_TARGET / d->out_cols;
    L->cell_h = d->out_rows >= PANEL_TARGET ? 1 : PANEL_TARGET / d->out_rows;
    L->panel_w = L->cell_w * d->out_cols;           /* at most PLOT_POOL_LIMIT or 256 */
    L->panel_h = L->cell_h * d->out_rows;
    L->grid_cols = 1;
    while (L->grid_cols * L->grid_cols < d->panels)
        L->grid_cols++;
    L->grid_rows = (d->panels + L->grid_cols - 1) / L->grid_cols;
    L->slot_w = ROW_LABEL_W + L->panel_w;
    L->slot_h = HEAD_TITLE_H + L->panel_h + COL_LABEL_H;
    /* panels <= PLOT_MAX_HEADS: none of these products overflows */
    L->grid_w = L->grid_cols * L->slot_w + (L->grid_cols - 1) * GAP;
    L->grid_h = L->grid_rows * L->slot_h + (L->grid_rows - 1) * GAP;
    L->width = MARGIN + L->grid_w + BAR_COLUMN_W + MARGIN;
    L->height = MARGIN + TITLE_H + (L->grid_h > MIN_CONTENT_H ? L->grid_h : MIN_CONTENT_H) +
                FOOT_H + MARGIN;
    return L->width <= MAX_SIDE && L->height <= MAX_SIDE && L->width * L->height <= MAX_PIXELS;
}

bool plot_size(const plot_data *data, size_t *width, size_t *height)
{
    layout L;
    bool fits = layout_of(data, &L);
    *width = L.width;
    *height = L.height;
    return fits;
}

/* ------------------------------------------------------------------ text */

/* Bytes of the valid UTF-8 character at s, or 0 when it is not one. */
static size_t utf8_char(const unsigned char *s)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;           /* the second byte's range */
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return len;
}

/* text as cairo may show it, into out (size): valid UTF-8 kept, control
 * characters as \n, \t, \r or \xHH, invalid bytes as \xHH; cut at a
 * character when out is full. */
static void clean_text(const char *text, char *out, size_t size)
{
    size_t at = 0;
    for (const unsigned char *s = (const unsigned char *)text; *s != '\0';) {
        char piece[8];
        size_t len = utf8_char(s);
        if (len == 1 && (*s < 0x20 || *s == 0x7F)) {
            const char *named = *s == '\n' ? "\\n" : *s == '\t' ? "\\t" : *s == '\r' ? "\\r" : NULL;
            if (named != NULL)
                snprintf(piece, sizeof piece, "%s", named);
            else
                snprintf(piece, sizeof piece, "\\x%02X", *s);
            len = 1;
        } else if (len == 0) {
            snprintf(piece, sizeof piece, "\\x%02X", *s);
            len = 1;
        } else {
            memcpy(piece, s, len);
            piece[len] = '\0';
        }
        size_t plen = strlen(piece);
        if (at + plen + 1 > size)
            break;
        memcpy(out + at, piece, plen);
        at += plen;
        s += len;
    }
    out[at] = '\0';
}

/* text, cleaned, cut to at most max_width with an ellipsis when needed. */
static void fit_text(cairo_t *cr, const char *text, double max_width, char *out, size_t size)
{
    cairo_text_extents_t e;
    clean_text(text, out, size);
    cairo_text_extents(cr, out, &e);
    if (e.x_advance <= max_width)
        return;
    size_t len = strlen(out);
    while (len > 0) {
        do
            len--;
        while (len > 0 && ((unsigned char)out[len] & 0xC0) == 0x80);
        if (len + 4 > size)
            continue;
        memcpy(out + len, "\xE2\x80\xA6", 4);              /* ... */
        cairo_text_extents(cr, out, &e);
        if (e.x_advance <= max_width)
            return;
    }
    out[0] = '\0';
}

static void set_font(cairo_t *cr, double size, bool bold)
{
    cairo_select_font_face(cr, "sans", CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
    cairo_set_source_rgb(cr, 0.12, 0.12, 0.12);
}

/* Shows text with its left end (align 0), centre (0.5) or right end (1)
 * at x, vertically centred on y, within max_width. */
static void show_text(cairo_t *cr, const char *text, double x, double y, double align,
                      double max_width)
{
    char fitted[512];
    cairo_text_extents_t e;
    cairo_font_extents_t f;
    fit_text(cr, text, max_width, fitted, sizeof fitted);
    cairo_text_extents(cr, fitted, &e);
    cairo_font_extents(cr, &f);
    cairo_move_to(cr, x - align * e.x_advance, y + (f.ascent - f.descent) / 2);
    cairo_show_text(cr, fitted);
}

/* ---------------------------------------------------------------- axes */

/* The smallest of 1, 2, 5, 10, 20, 50, ... that puts labels at least
 * `pitch` apart when one index is `pixels` long. */
static size_t label_step(double pixels, double pitch)
{
    static const size_t mantissa[] = {1, 2, 5};
    for (size_t scale = 1;; scale *= 10)
        for (size_t i = 0; i < 3; i++)
            if ((double)(mantissa[i] * scale) * pixels >= pitch || scale > SIZE_MAX / 100)
                return mantissa[i] * scale;
}

/* The label of source row (rows: true) or column i. */
static void axis_label(const plot_data *d, bool rows, size_t i, char *out, size_t size)
{
    char *const *tokens = rows ? d->row_labels : d->col_labels;
    if (tokens != NULL)
        snprintf(out, size, "%s", tokens[i]);
    else if (rows && d->what == PLOT_ENTROPY)
        snprintf(out, size, "head %zu", d->heads[i]);
    else
        snprintf(out, size, "%zu", i);
}

/* Row labels left of the panel at (x, y), column labels under it (turned
 * a quarter, reading upwards), each with a tick; every step-th when they
 * would not fit. */
static void draw_axes(cairo_t *cr, const plot_data *d, const layout *L, double x, double y)
{
    char label[512];
    set_font(cr, 10, false);
    cairo_set_line_width(cr, 1);
    double row_pitch = d->row_labels != NULL ? TOKEN_PITCH : INDEX_PITCH;
    double col_pitch = d->col_labels != NULL ? TOKEN_PITCH : INDEX_PITCH;
    if (d->what == PLOT_ENTROPY)
        row_pitch = TOKEN_PITCH;                    /* "head h": each row if it fits */
    size_t step = label_step((double)L->cell_h / (double)d->pool_rows, row_pitch);
    for (size_t i = 0; i < d->rows; i += step) {
        double yc = y + ((double)(i / d->pool_rows) + 0.5) * (double)L->cell_h;
        cairo_move_to(cr, x - 4, yc);
        cairo_line_to(cr, x, yc);
        cairo_stroke(cr);
        axis_label(d, true, i, label, sizeof label);
        show_text(cr, label, x - 6, yc, 1, ROW_LABEL_W - AXIS_TITLE - 6);
        if (step > SIZE_MAX - i)
            break;
    }
    step = label_step((double)L->cell_w / (double)d->pool_cols, col_pitch);
    double bottom = y + (double)L->panel_h;
    for (size_t j = 0; j < d->cols; j += step) {
        double xc = x + ((double)(j / d->pool_cols) + 0.5) * (double)L->cell_w;
        cairo_move_to(cr, xc, bottom);
        cairo_line_to(cr, xc, bottom + 4);
        cairo_stroke(cr);
        axis_label(d, false, j, label, sizeof label);
        cairo_save(cr);
        cairo_translate(cr, xc, bottom + 6);
        cairo_rotate(cr, -M_PI / 2);
        show_text(cr, label, 0, 0, 1, COL_LABEL_H - AXIS_TITLE - 6);
        cairo_restore(cr);
        if (step > SIZE_MAX - j)
            break;
    }
    set_font(cr, 11, false);
    show_text(cr, plot_what_of(d->what)->col_axis, x + (double)L->panel_w / 2,
              bottom + COL_LABEL_H - AXIS_TITLE / 2.0, 0.5, (double)L->panel_w + ROW_LABEL_W);
    cairo_save(cr);
    cairo_translate(cr, x - ROW_LABEL_W + AXIS_TITLE / 2.0, y + (double)L->panel_h / 2);
    cairo_rotate(cr, -M_PI / 2);
    show_text(cr, plot_what_of(d->what)->row_axis, 0, 0, 0.5, (double)L->panel_h + COL_LABEL_H);
    cairo_restore(cr);
}

/* ---------------------------------------------------------------- maps */

/* An image of (rows, cols) values, each set by fill(row, col). */
typedef rgb (*pixel_fn)(const void *context, size_t row, size_t col);

/*
 * Paints an image of (rows, cols) values at (x, y), each value a block of
 * sx by sy equal pixels.  The blocks are made here, not by scaling, so
 * that a viewer that smooths images (SVG has no way to say otherwise)
 * shows them as they are at their size; the filter is nearest neighbour
 * for the others (PDF's /Interpolate false).
 */
static int paint_image(cairo_t *cr, size_t rows, size_t cols, pixel_fn fill, const void *context,
                       double x, double y, size_t sx, size_t sy)
{
    /* the layout keeps rows * sy and cols * sx within a panel's pixels */
    cairo_surface_t *image = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)(cols * sx),
                                                        (int)(rows * sy));
    if (cairo_surface_status(image) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(image);
        return ATTN_ENOMEM;
    }
    cairo_surface_flush(image);
    unsigned char *pixels = cairo_image_surface_get_data(image);
    size_t stride = (size_t)cairo_image_surface_get_stride(image);
    for (size_t r = 0; r < rows; r++) {
        unsigned char *first = pixels + r * sy * stride;
        uint32_t *row = (uint32_t *)(void *)first;     /* (cols * sx) 0x00RRGGBB */
        for (size_t c = 0; c < cols; c++) {
            rgb px = fill(context, r, c);
            uint32_t word = (uint32_t)px.r << 16 | (uint32_t)px.g << 8 | px.b;
            for (size_t i = 0; i < sx; i++)
                row[c * sx + i] = word;
        }
        for (size_t i = 1; i < sy; i++)
            memcpy(first + i * stride, first, cols * sx * sizeof *row);
    }
    cairo_surface_mark_dirty(image);
    cairo_set_source_surface(cr, image, x, y);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_rectangle(cr, x, y, (double)(cols * sx), (double)(rows * sy));
    cairo_fill(cr);
    cairo_surface_destroy(image);
    return ATTN_OK;
}

/* One panel's pooled map, for paint_image. */
typedef struct panel_pixels {
    const plot_data *d;
    const float *values;            /* (out_rows, out_cols) */
} panel_pixels;

static rgb map_pixel(const void *context, size_t row, size_t col)
{
    const panel_pixels *p = context;
    return colour_of(p->values[row * p->d->out_cols + col], p->d->lo, p->d->hi);
}

static rgb bar_pixel(const void *context, size_t row, size_t col)
{
    (void)context;
    (void)col;
    return colour_at((double)(BAR_H - 1 - row) / (BAR_H - 1));
}

static void frame(cairo_t *cr, double x, double y, double w, double h)
{
    cairo_set_source_rgb(cr, 0.45, 0.45, 0.45);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, x - 0.5, y - 0.5, w + 1, h + 1);
    cairo_stroke(cr);
}

static int draw_panel(cairo_t *cr, const plot_data *d, const layout *L, size_t p)
{
    size_t r = p / L->grid_cols, c = p % L->grid_cols;
    double x = MARGIN + (double)(c * (L->slot_w + GAP)) + ROW_LABEL_W;
    double y = MARGIN + TITLE_H + (double)(r * (L->slot_h + GAP)) + HEAD_TITLE_H;
    char title[64];
    if (d->what == PLOT_ENTROPY)
        snprintf(title, sizeof title, "%s", plot_what_of(d->what)->title);
    else
        snprintf(title, sizeof title, "head %zu", d->heads[p]);
    set_font(cr, 12, true);
    show_text(cr, title, x + (double)L->panel_w / 2, y - HEAD_TITLE_H / 2.0, 0.5,
              (double)L->slot_w);
    panel_pixels pp = {d, d->values + p * d->out_rows * d->out_cols};
    int status = paint_image(cr, d->out_rows, d->out_cols, map_pixel, &pp, x, y, L->cell_w,
                             L->cell_h);
    if (status != ATTN_OK)
        return status;
    frame(cr, x, y, (double)L->panel_w, (double)L->panel_h);
    draw_axes(cr, d, L, x, y);
    return ATTN_OK;
}

/* The colour bar with its range, and the legend of the special values. */
static int draw_bar(cairo_t *cr, const plot_data *d, const layout *L)
{
    double x = MARGIN + (double)L->grid_w + BAR_OFFSET, y = MARGIN + TITLE_H + HEAD_TITLE_H;
    double text_x = x + BAR_W + 6, text_w = BAR_COLUMN_W - BAR_OFFSET - BAR_W - 6;
    char number[64];
    set_font(cr, 11, true);
    show_text(cr, plot_what_of(d->what)->title, x, y - HEAD_TITLE_H / 2.0, 0, BAR_COLUMN_W - BAR_OFFSET);
    int status = paint_image(cr, BAR_H, 1, bar_pixel, NULL, x, y, BAR_W, 1);
    if (status != ATTN_OK)
        return status;
    frame(cr, x, y, BAR_W, BAR_H);
    set_font(cr, 10, false);
    const double at[] = {d->hi, (d->lo + d->hi) / 2, d->lo};
    for (size_t i = 0; i < 3; i++) {
        double ty = y + 0.5 + (double)(BAR_H - 1) * (double)i / 2;
        cairo_move_to(cr, x + BAR_W, ty);
        cairo_line_to(cr, x + BAR_W + 4, ty);
        cairo_stroke(cr);
        snprintf(number, sizeof number, "%.4g", at[i]);
        show_text(cr, number, text_x, ty, 0, text_w);
    }
    double ly = y + BAR_H + LEGEND_OFFSET;
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        if (!(d->specials & specials[i].bit))
            continue;
        const rgb *c = &specials[i].colour;
        cairo_set_source_rgb(cr, c->r / 255.0, c->g / 255.0, c->b / 255.0);
        cairo_rectangle(cr, x, ly, SWATCH, SWATCH);
        cairo_fill(cr);
        frame(cr, x, ly, SWATCH, SWATCH);
        set_font(cr, 10, false);
        show_text(cr, specials[i].name, x + SWATCH + 6, ly + SWATCH / 2.0, 0,
                  BAR_COLUMN_W - BAR_OFFSET - SWATCH - 6);
        ly += LEGEND_STEP;
    }
    return ATTN_OK;
}

/* The title on top and the two lines at the foot: axes, pooling. */
static void draw_words(cairo_t *cr, const plot_data *d, const layout *L)
{
    char text[1024];
    double width = (double)(L->width - 2 * MARGIN);
    if (d->batched)
        snprintf(text, sizeof text, "%s of %s, group %s, item %zu", plot_what_of(d->what)->title, d->input,
                 d->group, d->item);
    else
        snprintf(text, sizeof text, "%s of %s, group %s", plot_what_of(d->what)->title, d->input, d->group);
    set_font(cr, 14, true);
    show_text(cr, text, MARGIN, MARGIN + TITLE_H / 2.0, 0, width);
    double foot = (double)(L->height - MARGIN - FOOT_H);
    set_font(cr, 11, false);
    snprintf(text, sizeof text, "rows: %s (top down), columns: %s (left to right)",
             plot_what_of(d->what)->rows, plot_what_of(d->what)->cols);
    show_text(cr, text, MARGIN, foot + FOOT_H / 4.0, 0, width);
    if (d->pool_rows > 1 || d->pool_cols > 1) {
        snprintf(text, sizeof text, "max-pooled %zu\xC3\x97%zu: each cell is the largest of "
                 "%zu\xC3\x97%zu values", d->pool_rows, d->pool_cols, d->pool_rows, d->pool_cols);
        show_text(cr, text, MARGIN, foot + 3 * FOOT_H / 4.0, 0, width);
    }
}

static int draw_figure(cairo_t *cr, const plot_data *d, const layout *L)
{
    cairo_set_source_rgb(cr, background.r / 255.0, background.g / 255.0, background.b / 255.0);
    cairo_paint(cr);
    draw_words(cr, d, L);
    int status = draw_bar(cr, d, L);
    for (size_t p = 0; p < d->panels && status == ATTN_OK; p++)
        status = draw_panel(cr, d, L, p);
    return status;
}

/* -------------------------------------------------------------- output */

/* Where cairo's bytes go. */
typedef struct sink {
    FILE *file;
    int failure;            /* errno of a failed write, or 0 */
} sink;

static cairo_status_t write_bytes(void *closure, const unsigned char *bytes, unsigned int length)
{
    sink *s = closure;
    if (fwrite(bytes, 1, length, s->file) != length) {
        s->failure = errno != 0 ? errno : EIO;
        return CAIRO_STATUS_WRITE_ERROR;
    }
    return CAIRO_STATUS_SUCCESS;
}

static cairo_surface_t *png_surface(sink *s, double width, double height)
{
    (void)s;
    return cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)width, (int)height);
}

static cairo_surface_t *svg_surface(sink *s, double width, double height)
{
    return cairo_svg_surface_create_for_stream(write_bytes, s, width, height);
}

static cairo_surface_t *pdf_surface(sink *s, double width, double height)
{
    return cairo_pdf_surface_create_for_stream(write_bytes, s, width, height);
}

/* Each format's surface; a PNG is written from its image at the end. */
static cairo_surface_t *(*const surfaces[])(sink *, double, double) = {
    [PLOT_PNG] = png_surface, [PLOT_SVG] = svg_surface, [PLOT_PDF] = pdf_surface,
};

static int cairo_failure(cairo_status_t status, const sink *s, attn_error *err)
{
    if (status == CAIRO_STATUS_NO_MEMORY)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    if (s->failure != 0)
        return attn_fail(err, ATTN_EIO, "cannot write the picture: %s", strerror(s->failure));
    return attn_fail(err, ATTN_EIO, "cairo cannot draw the picture: %s",
                     cairo_status_to_string(status));
}

int plot_draw(const plot_data *data, plot_format format, FILE *out, attn_error *err)
{
    layout L;
    sink s = {out, 0};
    if (!layout_of(data, &L))
        return attn_fail(err, ATTN_EINPUT, "the picture would be too large");
    cairo_surface_t *surface = surfaces[format](&s, (double)L.width, (double)L.height);
    cairo_t *cr = cairo_create(surface);
    int status = draw_figure(cr, data, &L);
    cairo_status_t cs = cairo_status(cr);
    cairo_destroy(cr);
    if (status == ATTN_OK && cs == CAIRO_STATUS_SUCCESS && format == PLOT_PNG)
        cs = cairo_surface_write_to_png_stream(surface, write_bytes, &s);
    cairo_surface_finish(surface);
    if (cs == CAIRO_STATUS_SUCCESS)
        cs = cairo_surface_status(surface);
    cairo_surface_destroy(surface);
    cairo_debug_reset_static_data();       /* the font caches: nothing is left allocated */
    if (status == ATTN_ENOMEM)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    if (cs != CAIRO_STATUS_SUCCESS)
        return cairo_failure(cs, &s, err);
    return status;
}
