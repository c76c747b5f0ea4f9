/*
 * json.h - a small writer of JSON (RFC 8259) text on a stdio stream, on
 * one line: objects and arrays nested, their commas and the escaping of
 * strings done here.  Only cmd/ uses it.
 *
 *     json_writer w;
 *     json_start(&w, stdout);
 *     json_object_begin(&w, NULL);          // the top level: no key
 *     json_string(&w, "name", "in \"a\".h5");
 *     json_array_begin(&w, "shape");
 *     json_size(&w, NULL, 4);               // in an array: no key
 *     json_array_end(&w);
 *     json_object_end(&w);
 *     json_finish(&w);                      // the newline
 *
 * Each call inside an object takes the member's key; inside an array (and
 * at the top level) the key is NULL.  Strings are written as UTF-8: '"',
 * '\' and the control characters escaped, bytes that are not UTF-8
 * replaced by U+FFFD.  Numbers round-trip: integers as integers, doubles
 * in the fewest digits that read back as the same double; a NaN or an
 * infinity, which JSON cannot hold, is written as null.  Write errors
 * are left in the stream (ferror) for the caller.
 */
#ifndef ATTN_CMD_JSON_H
#define ATTN_CMD_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

typedef struct json_writer {
    FILE *out;
    size_t depth;                     /* containers open                 */
    bool has_members[JSON_MAX_DEPTH]; /* per container: a comma is due   */
    bool markup_safe;                 /* '<', '>' and '&' escaped too, so
                                         that the text can sit inside an
                                         HTML <script> element (json_start
                                         clears it)                      */
} json_writer;

void json_start(json_writer *w, FILE *out);
void json_finish(json_writer *w);

void json_object_begin(json_writer *w, const char *key);
void json_object_end(json_writer *w);
void json_array_begin(json_writer *w, const char *key);
void json_array_end(json_writer *w);

/* value NULL writes null. */
void json_string(json_writer *w, const char *key, const char *value);
void json_size(json_writer *w, const char *key, size_t value);
void json_real(json_writer *w, const char *key, double value);
void json_bool(json_writer *w, const char *key, bool value);
void json_null(json_writer *w, const char *key);

#endif
