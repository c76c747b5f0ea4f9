/*
 * preflight.c - what is checked before any work: the options, the
 * memory the plan needs, and the free space for the outputs.
 *
 * Legend: see run_state.h.
 */
#define _GNU_SOURCE     /* fallocate */
#include "run/run_state.h"

#include "core/guard.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Every buffer the run will allocate, roughly (for attn_guard_memory): the
 * parameters as read and repacked, the fused projection, the slices (with
 * their packed chunks), the packing threads' buffers and a shared --kv.
 */
size_t run_planned_bytes(const run_state *st)
{
    const attn_dims *d = &st->report->layout.dims;
    const size_t elem = attn_precision_size(st->opt->precision);
    size_t total = 0, part;
    for (int i = ATTN_IN_WQ; i < ATTN_IN_COUNT; i++)
        if (st->info[i].present && attn_size_product(&part, st->info[i].dims, st->info[i].rank))
            total += 2 * part * elem;
    total += d->d_model * ((d->heads + attn_kv_heads(d)) * d->d_k + attn_kv_heads(d) * d->d_v) * elem;
    if (run_slice_memory_bytes(st, &part))
        total += part;
    /* the packed chunks of two steps (the plan's figure for one) */
    total += 2 * st->report->slice_items *
             (st->sizes.staging + st->sizes.rows * st->sizes.staging_per_row);
    total += (size_t)attn_threads() * attn_store_scratch_bytes(ATTN_CHUNK_BYTES + ATTN_CHUNK_BYTES / 8);
    if (st->report->layout.kv_shared)
        total += d->m * d->d_model * elem;
    return total;
}

/*
 * Refuses a plan that cannot fit: the outputs (the --dry-run total) and,
 * for --in-place, the copy of IN, against the free space of the file
 * system the output goes to (IN's real one for --in-place).  --force
 * skips the check; so do compressed outputs, which take less than the
 * plan says, by how much is not known before writing.
 */
int run_check_free_space(run_state *st, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    struct stat in;
    if (opt->force || opt->compress > 0)
        return ATTN_OK;
    double need = (double)st->report->total_bytes;
    if (opt->in_place && fstat(attn_h5in_descriptor(st->in), &in) == 0)
        need += (double)in.st_size;
    return attn_guard_free_space(opt->in_place ? opt->input : opt->output, need,
                                 opt->in_place ? "the copy of the input and the outputs"
                                               : "the outputs", err);
}

int run_reserve_space(const run_state *st, const char *path, attn_error *err)
{
    const attn_run_options *opt = st->opt;
    const char *name = opt->in_place ? opt->input : opt->output;
    struct stat now;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &now) != 0) {
        int saved = errno;
        if (fd >= 0)
            close(fd);
        return attn_fail(err, ATTN_EIO, "%s: cannot reserve room for the outputs: %s", name,
                         strerror(saved));
    }
    /* the outputs uncompressed, and room for HDF5's own growth */
    const size_t total = st->report->total_bytes;
    const size_t slack = ((size_t)1 << 20) + total / 64;
    const off_t want = (off_t)now.st_size + (off_t)(total + slack);
    int status = ATTN_OK;
    if (want > now.st_size && fallocate(fd, 0, 0, want) != 0 &&
        errno != EOPNOTSUPP && errno != ENOSYS) {    /* a file system that cannot: no reserve */
        const int failure = errno;
        char text[32];
        status = attn_fail(err, ATTN_EIO, "%s: cannot reserve %s for the outputs: %s", name,
                           attn_format_bytes(text, sizeof text, (double)(want - now.st_size)),
                           strerror(failure));
    }
    close(fd);
    return status;
}

/* "/" or "/a/b": absolute, no empty, "." or ".." parts, no trailing "/". */
static bool group_path_valid(const char *group)
{
    if (group == NULL || group[0] != '/')
        return false;
    if (group[1] == '\0')
        return true;
    for (const char *part = group + 1;;) {
        size_t len = strcspn(part, "/");
        if (len == 0 || (len == 1 && part[0] == '.') || (len == 2 && strncmp(part, "..", 2) == 0))
            return false;
        if (part[len] == '\0')
            return true;
        part += len + 1;
    }
}

/* OUT must name a file attnrun can create and seek in. */
static int check_output_name(const char *output, attn_error *err)
{
    struct stat st;
    size_t len = strlen(output);
    if (len == 0)
        return attn_fail(err, ATTN_EUSAGE, "output '': expected a file name");
    if (strcmp(output, "-") == 0)
        return attn_fail(err, ATTN_EUSAGE, "output '-': HDF5 output needs a file it can seek "
                         "in, not standard output; give a file name");
    if (output[len - 1] == '/' || (stat(output, &st) == 0 && S_ISDIR(st.st_mode)))
        return attn_fail(err, ATTN_EUSAGE, "output %s: names a directory; expected a file name",
                         output);
    return ATTN_OK;
}

int run_check_options(const attn_run_options *opt, attn_error *err)
{
    bool writes = !opt->dry_run;
    if (opt->input == NULL ||
        (writes && ((!opt->in_place && opt->output == NULL) || opt->transaction == NULL)))
        return attn_fail(err, ATTN_EUSAGE,
                         "an input and an output (or an in-place update) are required");
    if (!opt->in_place && opt->output != NULL && attn_same_file(opt->input, opt->output))
        return attn_fail_hint(err, ATTN_EUSAGE, ATTN_HINT_IN_PLACE, "%s: the output is the input",
                              opt->output);
    if (opt->compress < 0 || opt->compress > 9)
        return attn_fail(err, ATTN_EUSAGE, "compression level %d: expected 0 to 9", opt->compress);
    if (!group_path_valid(opt->group))
        return attn_fail(err, ATTN_EUSAGE,
                         "group '%s': expected / or an absolute path of names such as /results/run1",
                         opt->group ? opt->group : "");
    if (opt->save == 0)
        return attn_fail(err, ATTN_EUSAGE, "no output chosen to save");
    int status = run_check_variant(opt, err);
    if (status != ATTN_OK)
        return status;
    const attn_rope *rope = &opt->variant.rope;
    if (rope->theta == 0 && (rope->dim != 0 || rope->style != ATTN_ROPE_DEFAULT))
        return attn_fail_hint(err, ATTN_EUSAGE, ATTN_HINT_ROPE,
                              "a RoPE dimension or style needs RoPE's base theta");
    const char *const *names = opt->names;
    if (names[ATTN_IN_WQKV] != NULL &&
        (names[ATTN_IN_WQ] || names[ATTN_IN_WK] || names[ATTN_IN_WV] || names[ATTN_IN_BQ] ||
         names[ATTN_IN_BK] || names[ATTN_IN_BV]))
        return attn_fail_hint(err, ATTN_EUSAGE, ATTN_HINT_FUSED_AND_SEPARATE,
                              "fused Q|K|V weights name the Q, K and V weights together: "
                              "separate Q, K or V weights or biases do not go with them");
    if (opt->mask_invert && opt->names[ATTN_IN_MASK] == NULL)
        return attn_fail_hint(err, ATTN_EUSAGE, ATTN_HINT_MASK_INVERT,
                              "inverting the mask needs a mask dataset");
    const double scale = opt->variant.scale;
    if (scale != 0 && opt->precision == ATTN_F32 && (isinf((float)scale) || (float)scale == 0))
        return attn_fail_hint(err, ATTN_EUSAGE, ATTN_HINT_PRECISION,
                              "scale %g does not fit float32 (%g to %g), the computation's type",
                              scale, (double)FLT_TRUE_MIN, (double)FLT_MAX);
    if (opt->threads > attn_thread_limit())
        return attn_fail(err, ATTN_EUSAGE, "%d threads: at most %d here (%d per core)",
                         opt->threads, attn_thread_limit(), ATTN_THREADS_PER_CORE);
    return writes && !opt->in_place ? check_output_name(opt->output, err) : ATTN_OK;
}

