/* hints.c - the library's hints as the command line words them (cli.h). */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

/* What the library's hint (the setting that would resolve a failure) is
 * on the command line, appended to its message. */
static const char *const hint_text[ATTN_HINT_COUNT] = {
    [ATTN_HINT_NONE] = "",
    [ATTN_HINT_REPLACE] = "; use --force to replace it",
    [ATTN_HINT_LOW_SPACE] = "; use --force to try anyway",
    [ATTN_HINT_IN_PLACE] = "; use --in-place to add results to it",
    [ATTN_HINT_OTHER_GROUP] = "; choose another --group",
    [ATTN_HINT_WAIT] = "; use --wait to wait for it",
    [ATTN_HINT_EXTERNAL] = "; use --allow-external if you trust the files it names",
    [ATTN_HINT_PLUGINS] = "; use --allow-plugins to load them",
    [ATTN_HINT_NONFINITE] = "; use --allow-nonfinite to accept it",
    [ATTN_HINT_PRECISION] = "; use --precision f64",
    [ATTN_HINT_THREADS] = "; use fewer --threads",
    [ATTN_HINT_MEMORY] = "; use a smaller --memory",
    [ATTN_HINT_HEADS] = " (--heads)",
    [ATTN_HINT_ROPE] = "; use --rope THETA",
    [ATTN_HINT_FUSED_AND_SEPARATE] = " (--wqkv with --wq, --wk, --wv, --bq, --bk or --bv)",
    [ATTN_HINT_FUSED_BIAS] = " (--bqkv without --wqkv or a preset that fuses them)",
    [ATTN_HINT_QKV_HEADS] = " (--qkv-split heads)",
    [ATTN_HINT_MASK_INVERT] = " (--mask-invert without --mask)",
    [ATTN_HINT_ATTN_MASK] = "; for a causal one use --causal, else --attn-bias (0 keeps, -inf hides)",
    /* with the hint's argument: the input's key, then the value */
    [ATTN_HINT_NAME] = "; pass --%s %s",
    [ATTN_HINT_WEIGHTS_GROUP] = "; pass --weights-group %s",
    [ATTN_HINT_LAYOUT] = "; use --layout %s",
    [ATTN_HINT_AS_BIAS] = "; pass it as --attn-bias %s instead of --mask",
};

/* Hints whose text takes the input's key before the value. */
static bool takes_name(attn_hint hint)
{
    return hint == ATTN_HINT_NAME;
}

const char *cli_hint(attn_hint hint)
{
    return hint > ATTN_HINT_NONE && hint < ATTN_HINT_COUNT && hint_text[hint] != NULL
               ? hint_text[hint] : "";
}

const char *cli_hint_of(const attn_error *err)
{
    static char text[sizeof err->hint_arg + sizeof err->hint_name + 128];
    const char *format = cli_hint(err->hint);
    if (strstr(format, "%s") == NULL)
        return format;
    if (err->hint_arg[0] == '\0' || (takes_name(err->hint) && err->hint_name[0] == '\0'))
        return "";                     /* a hint that lost its value says nothing */
    if (takes_name(err->hint))
        snprintf(text, sizeof text, format, err->hint_name, err->hint_arg);
    else
        snprintf(text, sizeof text, format, err->hint_arg);
    return text;
}
