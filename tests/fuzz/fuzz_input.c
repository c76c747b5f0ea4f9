/*
 * tests/fuzz/fuzz_input.c - libFuzzer target over attnrun's input path:
 * file bytes -> open -> validate -> plan, and for small plans the whole
 * run (reads, checks, math, writing to a temporary output).
 *
 * Input: one byte of options, then the bytes of an HDF5 file.
 *   bit 0-1  --heads 0 (from 3-D weights), 1, 2 or 4
 *   bit 2    --causal
 *   bit 3    --kv KV
 *   bit 4    --mask M
 *   bit 5    --save output (the online softmax) instead of the default
 *   bit 6    --precision f64
 *   bit 7    --allow-nonfinite
 *
 *   make fuzz FUZZ_SECONDS=600       (corpus in build/fuzz/corpus, seeded
 *                                     from fixtures/*.h5)
 *
 * A crash, a sanitizer report or a hang is a finding; every clean return
 * of attn_run, whatever its status, is a pass.  Findings go to
 * tests/corpus/fuzz/ and tests/cli/test_bad.sh runs attnrun on each.
 */
#include "attn_run.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Runs larger than this are planned, not computed: keeps each input fast. */
#define RUN_LIMIT ((size_t)1 << 20)

static char input_path[64], output_path[64];

/* Writes the file bytes to a private temporary path; 0 on success. */
static int write_input(const uint8_t *bytes, size_t size)
{
    if (input_path[0] == '\0') {
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(input_path, sizeof input_path, "%s/attnfuzz-%ld.h5", dir, (long)getpid());
        snprintf(output_path, sizeof output_path, "%s/attnfuzz-%ld.out.h5", dir, (long)getpid());
    }
    FILE *f = fopen(input_path, "wb");
    if (f == NULL)
        return -1;
    size_t written = fwrite(bytes, 1, size, f);
    return fclose(f) == 0 && written == size ? 0 : -1;
}

static attn_run_options options_from(uint8_t bits)
{
    static const size_t heads[4] = {0, 1, 2, 4};
    attn_run_options opt = attn_run_defaults();
    opt.input = input_path;
    opt.heads = heads[bits & 3u];
    opt.variant.causal = (bits >> 2) & 1u;
    opt.names[ATTN_IN_KV] = (bits >> 3) & 1u ? "KV" : NULL;
    opt.names[ATTN_IN_MASK] = (bits >> 4) & 1u ? "M" : NULL;
    opt.save = (bits >> 5) & 1u ? 1u << ATTN_OUT_OUTPUT : ATTN_SAVE_DEFAULT;
    opt.precision = (bits >> 6) & 1u ? ATTN_F64 : ATTN_F32;
    opt.allow_nonfinite = (bits >> 7) & 1u;
    opt.threads = 1;
    return opt;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || write_input(data + 1, size - 1) != 0)
        return 0;
    attn_run_options opt = options_from(data[0]);
    attn_run_report report;
    attn_error err;

    opt.dry_run = true;                          /* open, validate, plan */
    int status = attn_run(&opt, &report, &err);
    if (status == ATTN_OK && report.total_bytes + report.slice_bytes <= RUN_LIMIT) {
        attn_atomic tx;
        opt.dry_run = false;                     /* and the whole run */
        opt.output = output_path;
        opt.force = true;
        opt.transaction = &tx;
        (void)attn_run(&opt, &report, &err);
        unlink(output_path);
    }
    unlink(input_path);
    return 0;
}
