/*
 * hints.h - what a library hint (the setting that would resolve a
 * failure, attn_error.hint) is on attnrun's command line: the text
 * appended to the library's one-line message.
 *
 *     fprintf(stderr, "attnrun: %s%s\n", err.msg, cli_hint(err.hint));
 */
#ifndef ATTN_CMD_HINTS_H
#define ATTN_CMD_HINTS_H

#include "attn_common.h"

/* "; use --force to replace it", " (--heads)", ...; "" for none. */
const char *cli_hint(attn_hint hint);

#endif
