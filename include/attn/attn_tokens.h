/*
 * attn_tokens.h - the token strings that label the query and key axes of
 * the results: where they come from, the rules every token passes, and
 * the names they take in the output group.
 *
 * A source is a dataset of strings ("tok", "/text/tok"), or a string-array
 * attribute of an object ("X@tokens"; "@tokens" for the root group):
 *
 *     attn_token_source source;
 *     if (attn_token_source_parse("X@tokens", &source, &err) != ATTN_OK) ...
 *     // source.object = "X", source.attribute = "tokens"
 *     attn_token_source_free(&source);
 *
 *     size_t at;
 *     attn_token_fault fault = attn_token_check("\xe6\x97\xa5", 3, &at);  // ATTN_TOKEN_OK
 *
 * A run reads, checks and copies them itself (lib/run/run_state.h:
 * run_check_tokens, run_clear_tokens, run_write_tokens).
 */
#ifndef ATTN_TOKENS_H
#define ATTN_TOKENS_H

#include "attn_common.h"

/* The most bytes one token may take, and all the tokens of one axis. */
#define ATTN_TOKEN_MAX_BYTES ((size_t)4096)
#define ATTN_TOKENS_MAX_BYTES ((size_t)1 << 30)

/* The output datasets: (n) or (B, n), and (m) or (B, m). */
#define ATTN_QUERY_TOKEN "query_token"
#define ATTN_KEY_TOKEN "key_token"

/* Where tokens come from. */
typedef struct attn_token_source {
    char *object;       /* the dataset, or the object holding the attribute
                           ("" for the root group); owns the memory    */
    char *attribute;    /* the attribute's name, or NULL for a dataset */
} attn_token_source;

/*
 * Splits text at its last '@': "NAME" is a dataset, "OBJECT@ATTRIBUTE" an
 * attribute ("@ATTRIBUTE": of the root group).  ATTN_EUSAGE for "" and a
 * name ending in '@'; ATTN_ENOMEM.  Free with attn_token_source_free.
 * With source NULL, only checks text (and allocates nothing).
 */
int attn_token_source_parse(const char *text, attn_token_source *source, attn_error *err);
void attn_token_source_free(attn_token_source *source);

/* What is wrong with one token. */
typedef enum attn_token_fault {
    ATTN_TOKEN_OK,
    ATTN_TOKEN_TOO_LONG,      /* more than ATTN_TOKEN_MAX_BYTES              */
    ATTN_TOKEN_NUL,           /* a NUL byte inside                           */
    ATTN_TOKEN_NOT_UTF8       /* not UTF-8                                   */
} attn_token_fault;

/*
 * Whether bytes[0, length) is UTF-8 as RFC 3629 defines it: no overlong
 * forms, no surrogates (U+D800 to U+DFFF), nothing above U+10FFFF, no
 * sequence cut short.  When not, *offset is the first byte that breaks it.
 */
bool attn_utf8_valid(const char *bytes, size_t length, size_t *offset);

/* The first fault of a token of `length` bytes, in the order of the enum;
 * *offset is the byte concerned (ATTN_TOKEN_MAX_BYTES when too long). */
attn_token_fault attn_token_check(const char *bytes, size_t length, size_t *offset);

#endif
