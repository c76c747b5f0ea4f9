/*
 * assets.c - the page's template, style and script (page/), embedded into
 * the binary at build time by the assembler's .incbin, each followed by a
 * NUL, and the hashes of the style and script that the page's
 * Content-Security-Policy allows (VIEW_CSS_SHA256, VIEW_JS_SHA256: the
 * Makefile computes them from the same files, scripts/page-hashes.sh).
 */
#include "view/view.h"

/* Embeds `file` (from the top of the tree, where make runs) as the bytes
 * from `name` to `name`_end, then a NUL. */
#define EMBED(name, file)                                                                     \
    __asm__(".section .rodata\n"                                                              \
            ".balign 16\n"                                                                    \
            ".globl " #name "\n"                                                              \
            ".hidden " #name "\n" #name ":\n"                                                 \
            ".incbin \"" file "\"\n"                                                          \
            ".globl " #name "_end\n"                                                          \
            ".hidden " #name "_end\n" #name "_end:\n"                                         \
            ".byte 0\n"                                                                       \
            ".previous\n")

EMBED(view_page_html, "cmd/view/page/view.html");
EMBED(view_page_css, "cmd/view/page/view.css");
EMBED(view_page_js, "cmd/view/page/view.js");

extern const char view_page_html[], view_page_html_end[];
extern const char view_page_css[], view_page_css_end[];
extern const char view_page_js[], view_page_js_end[];

static const struct {
    const char *start, *end;
    const char *hash;
} assets[VIEW_ASSET_COUNT] = {
    [VIEW_HTML] = {view_page_html, view_page_html_end, ""},
    [VIEW_CSS] = {view_page_css, view_page_css_end, VIEW_CSS_SHA256},
    [VIEW_JS] = {view_page_js, view_page_js_end, VIEW_JS_SHA256},
};

const char *view_asset_text(view_asset asset, size_t *length)
{
    *length = (size_t)(assets[asset].end - assets[asset].start);
    return assets[asset].start;
}

const char *view_asset_hash(view_asset asset)
{
    return assets[asset].hash;
}
