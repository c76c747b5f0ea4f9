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
 *             a slot is ROW_LABEL_W + panel (+ PANEL_BAR_W with a bar per
 *             panel) wide and HEAD_TITLE_H + panel + COL_LABEL_H tall, GAP
 *             between slots
 *   picture   width  = MARGIN + grid + BAR_COLUMN_W + MARGIN
 *             height = MARGIN + TITLE_H + max(grid, MIN_CONTENT_H) + FOOT_H + MARGIN
 *   panel p   (row-major in the grid, r = p / grid_cols, c = p % grid_cols) at
 *             x = MARGIN + c (slot_w + GAP) + ROW_LABEL_W,
 *             y = MARGIN + TITLE_H + r (slot_h + GAP) + HEAD_TITLE_H
 *   bar       BAR_W x BAR_H at x = MARGIN + grid_w + BAR_OFFSET,
 *             y = MARGIN + TITLE_H + HEAD_TITLE_H; its pixel row j (0 on top)
 *             has the colour of t = (BAR_H - 1 - j) / (BAR_H - 1); a tick at
 *             the row round((BAR_H - 1) (1 - t)) of each labelled position
 *   or a bar  per panel (a census), the same at x = panel x + panel_w +
 *             PANEL_BAR_OFFSET, y = panel y
 *   legend    a SWATCH square per special value drawn (-inf, +inf, NaN, in
 *             that order) at x = the shared bar's, y = bar + BAR_H +
 *             LEGEND_OFFSET + i LEGEND_STEP; with a bar per panel, y = the
 *             shared bar's y + i LEGEND_STEP
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
    PANEL_BAR_W = 96,            /* a panel's own bar: its column            */
    PANEL_BAR_OFFSET = 12,       /* ... from the panel to the bar            */
    TICK_LABEL_GAP = 14,         /* least distance of a decade's label to an end's */
    MAX_SIDE = 32767             /* cairo's largest image                    */
};

#define MAX_PIXELS ((size_t)1 << 26)

typedef cli_rgb rgb;

static const rgb background = {0xFF, 0xFF, 0xFF};

/* A labelled position of a colour bar. */
typedef struct tick {
    double t;                     /* 0 bottom .. 1 top                    */
    double value;
    bool decade;                  /* a power of ten (log): labelled as one */
} tick;

/* At most this many ticks on a bar: two ends and the CLI_LOG_DECADES + 1
 * decades a log bar spans at most. */
#define MAX_TICKS (CLI_LOG_DECADES + 3)

/* The ticks of a bar: top, middle and bottom (linear); top, the quarters
 * of the bar and bottom (sqrt), each labelled with the value there; the
 * ends and every power of ten between (log).  Returns their count. */
static size_t bar_ticks(cli_scale scale, const cli_bar *bar, tick *ticks)
{
    static const double linear[] = {1, 0.5, 0}, quarters[] = {1, 0.75, 0.5, 0.25, 0};
    size_t count = 0;
    if (scale != CLI_LOG) {
        const double *at = scale == CLI_SQRT ? quarters : linear;
        size_t n = scale == CLI_SQRT ? 5 : 3;
        for (size_t i = 0; i < n; i++) {
            double u = scale == CLI_SQRT ? at[i] * at[i] : at[i];
            ticks[count++] = (tick){at[i], bar->lo + u * (bar->hi - bar->lo), false};
        }
        return count;
    }
    double top = log10(bar->hi), bottom = log10(bar->lo);
    ticks[count++] = (tick){1, bar->hi, false};
    for (double k = floor(top); k >= ceil(bottom) && count < MAX_TICKS - 1; k--)
        ticks[count++] = (tick){(k - bottom) / (top - bottom), pow(10, k), true};
    ticks[count++] = (tick){0, bar->lo, false};
    return count;
}

/* The pixel row of the bar (0 on top) at position t. */
static long bar_row(double t)
{
    return lround((BAR_H - 1) * (1 - t));
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
    L->slot_w = ROW_LABEL_W + L->panel_w + (d->bar_per_panel ? PANEL_BAR_W : 0);
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

/* The label of the dataset's row (rows: true) or column i. */
static void axis_label(const plot_data *d, bool rows, size_t i, char *out, size_t size)
{
    char *const *labels = rows ? d->row_labels : d->col_labels;
    if (labels != NULL)
        snprintf(out, size, "%s", labels[i]);
    else
        snprintf(out, size, "%zu", i);
}

/* The first multiple of step from first on: where labels start, so that a
 * zoom shows the same indices as the whole map. */
static size_t first_label(size_t first, size_t step)
{
    return first % step == 0 ? first : first + (step - first % step);
}

/* Row labels left of the panel at (x, y), column labels under it (turned
 * a quarter, reading upwards), each with a tick; every step-th index of
 * the dataset when they would not fit. */
static void draw_axes(cairo_t *cr, const plot_data *d, const layout *L, double x, double y)
{
    char label[512];
    set_font(cr, 10, false);
    cairo_set_line_width(cr, 1);
    double row_pitch = d->row_labels != NULL ? TOKEN_PITCH : INDEX_PITCH;
    double col_pitch = d->col_labels != NULL ? TOKEN_PITCH : INDEX_PITCH;
    size_t step = label_step((double)L->cell_h / (double)d->pool_rows, row_pitch);
    size_t end = d->row_first + d->rows;
    for (size_t i = first_label(d->row_first, step); i < end; i += step) {
        double yc = y + ((double)((i - d->row_first) / d->pool_rows) + 0.5) * (double)L->cell_h;
        cairo_move_to(cr, x - 4, yc);
        cairo_line_to(cr, x, yc);
        cairo_stroke(cr);
        axis_label(d, true, i, label, sizeof label);
        show_text(cr, label, x - 6, yc, 1, ROW_LABEL_W - AXIS_TITLE - 6);
        if (step > SIZE_MAX - i)
            break;
    }
    step = label_step((double)L->cell_w / (double)d->pool_cols, col_pitch);
    end = d->col_first + d->cols;
    double bottom = y + (double)L->panel_h;
    for (size_t j = first_label(d->col_first, step); j < end; j += step) {
        double xc = x + ((double)((j - d->col_first) / d->pool_cols) + 0.5) * (double)L->cell_w;
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
    show_text(cr, plot_axis_of(d->col_axis)->name, x + (double)L->panel_w / 2,
              bottom + COL_LABEL_H - AXIS_TITLE / 2.0, 0.5, (double)L->panel_w + ROW_LABEL_W);
    cairo_save(cr);
    cairo_translate(cr, x - ROW_LABEL_W + AXIS_TITLE / 2.0, y + (double)L->panel_h / 2);
    cairo_rotate(cr, -M_PI / 2);
    show_text(cr, plot_axis_of(d->row_axis)->name, 0, 0, 0.5, (double)L->panel_h + COL_LABEL_H);
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
    const cli_bar *bar;            /* its colour bar's range */
    const float *values;            /* (out_rows, out_cols) */
} panel_pixels;

static rgb map_pixel(const void *context, size_t row, size_t col)
{
    const panel_pixels *p = context;
    return cli_colour_of(p->values[row * p->d->out_cols + col], p->d->scale, p->bar);
}

static rgb bar_pixel(const void *context, size_t row, size_t col)
{
    (void)context;
    (void)col;
    return cli_colour_at((double)(BAR_H - 1 - row) / (BAR_H - 1));
}

static void frame(cairo_t *cr, double x, double y, double w, double h)
{
    cairo_set_source_rgb(cr, 0.45, 0.45, 0.45);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, x - 0.5, y - 0.5, w + 1, h + 1);
    cairo_stroke(cr);
}

/* A tick's label: a power of ten as 0.001 ... 1000 or 1e-6, else 4 digits. */
static void tick_label(const tick *t, char *out, size_t size)
{
    double k = round(log10(t->value));
    if (t->decade && (k < -3 || k > 3))
        snprintf(out, size, "1e%d", (int)k);
    else if (t->decade)
        snprintf(out, size, "%g", t->value);
    else
        snprintf(out, size, "%.4g", t->value);
}

/* A colour bar of `range` at (x, y), its ticks and their labels within
 * text_w to its right.  A decade's label too near an end's is left out
 * (its tick too when on the same row). */
static int draw_bar(cairo_t *cr, const plot_data *d, const cli_bar *range, double x, double y,
                    double text_w)
{
    tick ticks[MAX_TICKS];
    char number[64];
    int status = paint_image(cr, BAR_H, 1, bar_pixel, NULL, x, y, BAR_W, 1);
    if (status != ATTN_OK)
        return status;
    frame(cr, x, y, BAR_W, BAR_H);
    set_font(cr, 10, false);
    size_t count = bar_ticks(d->scale, range, ticks);
    long top = bar_row(1), bottom = bar_row(0);
    for (size_t i = 0; i < count; i++) {
        long row = bar_row(ticks[i].t);
        if (ticks[i].decade && (row == top || row == bottom))
            continue;
        double ty = y + 0.5 + (double)row;
        cairo_move_to(cr, x + BAR_W, ty);
        cairo_line_to(cr, x + BAR_W + 4, ty);
        cairo_stroke(cr);
        if (ticks[i].decade && (labs(row - top) < TICK_LABEL_GAP || labs(row - bottom) < TICK_LABEL_GAP))
            continue;
        tick_label(&ticks[i], number, sizeof number);
        show_text(cr, number, x + BAR_W + 6, ty, 0, text_w);
    }
    return ATTN_OK;
}

/* A bold title at (x, y), left-aligned, in the largest size from `size`
 * down to 8 that fits max_width (cut with an ellipsis below that). */
static void show_fitted_title(cairo_t *cr, const char *text, double x, double y, double size,
                              double max_width)
{
    char clean[512];
    cairo_text_extents_t e;
    clean_text(text, clean, sizeof clean);
    for (;; size -= 0.5) {
        set_font(cr, size, true);
        cairo_text_extents(cr, clean, &e);
        if (e.x_advance <= max_width || size <= 8)
            break;
    }
    show_text(cr, clean, x, y, 0, max_width);
}

/* The shared colour bar, titled with the quantity and its scale. */
static int draw_shared_bar(cairo_t *cr, const plot_data *d, const layout *L)
{
    double x = MARGIN + (double)L->grid_w + BAR_OFFSET, y = MARGIN + TITLE_H + HEAD_TITLE_H;
    char title[256];
    const char *note = cli_scale_note(d->scale);
    snprintf(title, sizeof title, "%s%s%s%s", d->bar_title, *note ? " (" : "", note,
             *note ? ")" : "");
    show_fitted_title(cr, title, x, y - HEAD_TITLE_H / 2.0, 11, BAR_COLUMN_W - BAR_OFFSET);
    return draw_bar(cr, d, &d->bars[0], x, y, BAR_COLUMN_W - BAR_OFFSET - BAR_W - 6);
}

/* The legend of the special values drawn, in the bar column: under the
 * shared bar, or at its top when each panel has its own. */
static void draw_legend(cairo_t *cr, const plot_data *d, const layout *L)
{
    double x = MARGIN + (double)L->grid_w + BAR_OFFSET, y = MARGIN + TITLE_H + HEAD_TITLE_H;
    double ly = d->bar_per_panel ? y : y + BAR_H + LEGEND_OFFSET;
    size_t count;
    const cli_special_spec *specials = cli_specials(&count);
    for (size_t i = 0; i < count; i++) {
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
}

static int draw_panel(cairo_t *cr, const plot_data *d, const layout *L, size_t p)
{
    size_t r = p / L->grid_cols, c = p % L->grid_cols;
    double x = MARGIN + (double)(c * (L->slot_w + GAP)) + ROW_LABEL_W;
    double y = MARGIN + TITLE_H + (double)(r * (L->slot_h + GAP)) + HEAD_TITLE_H;
    const cli_bar *bar = &d->bars[d->bar_per_panel ? p : 0];
    set_font(cr, 12, true);
    show_text(cr, d->panel_titles[p], x + (double)L->panel_w / 2, y - HEAD_TITLE_H / 2.0, 0.5,
              d->bar_per_panel ? (double)L->panel_w : (double)L->slot_w);
    panel_pixels pp = {d, bar, d->values + p * d->out_rows * d->out_cols};
    int status = paint_image(cr, d->out_rows, d->out_cols, map_pixel, &pp, x, y, L->cell_w,
                             L->cell_h);
    if (status != ATTN_OK)
        return status;
    frame(cr, x, y, (double)L->panel_w, (double)L->panel_h);
    draw_axes(cr, d, L, x, y);
    if (!d->bar_per_panel)
        return ATTN_OK;
    double bx = x + (double)L->panel_w + PANEL_BAR_OFFSET;
    if (*cli_scale_note(d->scale) != '\0') {
        set_font(cr, 10, false);
        show_text(cr, cli_scale_note(d->scale), bx, y - HEAD_TITLE_H / 2.0, 0,
                  PANEL_BAR_W - PANEL_BAR_OFFSET);
    }
    return draw_bar(cr, d, bar, bx, y, PANEL_BAR_W - PANEL_BAR_OFFSET - BAR_W - 6);
}

/* "queries", or "queries 100-163 of 200" when zoomed: an axis for the foot. */
static void axis_words(plot_axis axis, size_t first, size_t count, size_t length, char *out,
                       size_t size)
{
    const char *plural = plot_axis_of(axis)->plural;
    if (count == length)
        snprintf(out, size, "%s", plural);
    else
        snprintf(out, size, "%s %zu-%zu of %zu", plural, first, first + count - 1, length);
}

/* The title on top and the two lines at the foot: axes (and the zoom),
 * pooling. */
static void draw_words(cairo_t *cr, const plot_data *d, const layout *L)
{
    char text[1024], rows[128], cols[128];
    double width = (double)(L->width - 2 * MARGIN);
    if (d->batched)
        snprintf(text, sizeof text, "%s of %s, group %s, item %zu", d->title, d->input, d->group,
                 d->item);
    else
        snprintf(text, sizeof text, "%s of %s, group %s", d->title, d->input, d->group);
    set_font(cr, 14, true);
    show_text(cr, text, MARGIN, MARGIN + TITLE_H / 2.0, 0, width);
    double foot = (double)(L->height - MARGIN - FOOT_H);
    set_font(cr, 11, false);
    axis_words(d->row_axis, d->row_first, d->rows, d->row_length, rows, sizeof rows);
    axis_words(d->col_axis, d->col_first, d->cols, d->col_length, cols, sizeof cols);
    snprintf(text, sizeof text, "rows: %s (top down), columns: %s (left to right)", rows, cols);
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
    int status = d->bar_per_panel ? ATTN_OK : draw_shared_bar(cr, d, L);
    draw_legend(cr, d, L);
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
