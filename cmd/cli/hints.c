/* hints.c - the library's hints as the command line words them (cli.h). */
#include "cli/cli.h"

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
};

const char *cli_hint(attn_hint hint)
{
    return hint > ATTN_HINT_NONE && hint < ATTN_HINT_COUNT && hint_text[hint] != NULL
               ? hint_text[hint] : "";
}
