/*
 * json.c - the JSON writer of json.h.
 */
#include "cli/json.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>

void json_start(json_writer *w, FILE *out)
{
    w->out = out;
    w->depth = 0;
    w->has_members[0] = false;
    w->markup_safe = false;
}

void json_finish(json_writer *w)
{
    assert(w->depth == 0);
    fputc('\n', w->out);
}

/* The bytes of the UTF-8 sequence s starts with (1 to 4), or 0 when it
 * starts with none (RFC 3629: no overlong forms, surrogates or code
 * points above U+10FFFF).  s is NUL-terminated: a NUL is no continuation. */
static size_t utf8_length(const unsigned char *s)
{
    /* per lead byte: the length and the range of the second byte */
    static const struct { unsigned char first, last, length, low, high; } leads[] = {
        {0x01, 0x7F, 1, 0, 0},       {0xC2, 0xDF, 2, 0x80, 0xBF}, {0xE0, 0xE0, 3, 0xA0, 0xBF},
        {0xE1, 0xEC, 3, 0x80, 0xBF}, {0xED, 0xED, 3, 0x80, 0x9F}, {0xEE, 0xEF, 3, 0x80, 0xBF},
        {0xF0, 0xF0, 4, 0x90, 0xBF}, {0xF1, 0xF3, 4, 0x80, 0xBF}, {0xF4, 0xF4, 4, 0x80, 0x8F},
    };
    for (size_t i = 0; i < sizeof leads / sizeof leads[0]; i++) {
        if (s[0] < leads[i].first || s[0] > leads[i].last)
            continue;
        if (leads[i].length == 1)
            return 1;
        if (s[1] < leads[i].low || s[1] > leads[i].high)
            return 0;
        for (size_t k = 2; k < leads[i].length; k++)
            if (s[k] < 0x80 || s[k] > 0xBF)
                return 0;
        return leads[i].length;
    }
    return 0;
}

static void write_string(FILE *out, const char *text, bool markup_safe)
{
    static const char *const named[0x20] = {['\b'] = "\\b", ['\f'] = "\\f", ['\n'] = "\\n",
                                            ['\r'] = "\\r", ['\t'] = "\\t"};
    const unsigned char *s = (const unsigned char *)text;
    fputc('"', out);
    while (*s != '\0') {
        size_t length = utf8_length(s);
        if (*s == '"' || *s == '\\') {
            fputc('\\', out);
            fputc(*s, out);
        } else if (*s < 0x20 || (markup_safe && (*s == '<' || *s == '>' || *s == '&'))) {
            if (*s < 0x20 && named[*s] != NULL)
                fputs(named[*s], out);
            else
                fprintf(out, "\\u%04x", *s);
        } else if (length == 0) {
            fputs("\xEF\xBF\xBD", out);          /* U+FFFD for a stray byte */
            length = 1;
        } else {
            fwrite(s, 1, length, out);
        }
        s += length;
    }
    fputc('"', out);
}

/* The comma before a value, and its key inside an object. */
static void begin_value(json_writer *w, const char *key)
{
    if (w->has_members[w->depth])
        fputc(',', w->out);
    w->has_members[w->depth] = true;
    if (key != NULL) {
        write_string(w->out, key, w->markup_safe);
        fputc(':', w->out);
    }
}

static void open_container(json_writer *w, const char *key, char bracket)
{
    begin_value(w, key);
    fputc(bracket, w->out);
    assert(w->depth + 1 < JSON_MAX_DEPTH);
    w->has_members[++w->depth] = false;
}

static void close_container(json_writer *w, char bracket)
{
    assert(w->depth > 0);
    w->depth--;
    fputc(bracket, w->out);
}

void json_object_begin(json_writer *w, const char *key) { open_container(w, key, '{'); }
void json_object_end(json_writer *w) { close_container(w, '}'); }
void json_array_begin(json_writer *w, const char *key) { open_container(w, key, '['); }
void json_array_end(json_writer *w) { close_container(w, ']'); }

void json_string(json_writer *w, const char *key, const char *value)
{
    begin_value(w, key);
    if (value == NULL)
        fputs("null", w->out);
    else
        write_string(w->out, value, w->markup_safe);
}

void json_size(json_writer *w, const char *key, size_t value)
{
    begin_value(w, key);
    fprintf(w->out, "%zu", value);
}

void json_real(json_writer *w, const char *key, double value)
{
    begin_value(w, key);
    if (!isfinite(value)) {
        fputs("null", w->out);
        return;
    }
    /* a whole number below 2^53 in full; otherwise the fewest significant
     * digits that read back as value (17 always do) */
    char text[32];
    if (value == floor(value) && fabs(value) < 9007199254740992.0) {
        fprintf(w->out, "%.0f", value);
        return;
    }
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, value);
        if (strtod(text, NULL) == value)
            break;
    }
    fputs(text, w->out);
}

void json_bool(json_writer *w, const char *key, bool value)
{
    begin_value(w, key);
    fputs(value ? "true" : "false", w->out);
}

void json_null(json_writer *w, const char *key)
{
    begin_value(w, key);
    fputs("null", w->out);
}
