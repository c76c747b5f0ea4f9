/*
 * expect.c - `--expect`: each output named compared with its reference
 * dataset in the input, block by block (expect.h).
 *
 * Legend: B batch, H heads, n queries, m keys, D d_model.
 */
#include "attnrun/expect.h"

#include "attn_ranks.h"
#include "cli/cli.h"
#include "cli/options.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Elements read at once from each side, at least one row. */
#define EXPECT_BLOCK 65536

int expect_parse(attnrun_expect *e, const char *list)
{
    const char *p = list;
    if (*p == '\0')
        return cli_usage_error("--expect '': expected OUTPUT=DATASET");
    while (*p != '\0') {
        size_t len = strcspn(p, ","), name_len = strcspn(p, "=,");
        if (name_len == len)
            return cli_usage_error("--expect '%.*s': expected OUTPUT=DATASET, such as "
                                   "weights=/reference/attn_weights", (int)len, p);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(name_len < 63 ? name_len : 63), p);
        int which = -1;
        for (int i = 0; i < ATTN_OUT_COUNT; i++)
            if (strcmp(name, attn_output_name((attn_output)i)) == 0)
                which = i;
        if (which < 0)
            return cli_usage_error("--expect %s: no output of that name (the names of "
                                   "--save)", name);
        if (name_len + 1 == len)
            return cli_usage_error("--expect %s=: expected a dataset of the input", name);
        if (e->count == EXPECT_MAX)
            return cli_usage_error("--expect: at most %d outputs", EXPECT_MAX);
        for (size_t i = 0; i < e->count; i++)
            if (e->pairs[i].which == (attn_output)which)
                return cli_usage_error("--expect names %s twice", name);
        expect_pair *pair = &e->pairs[e->count++];
        pair->which = (attn_output)which;
        if (len - name_len - 1 >= sizeof pair->reference)
            return cli_usage_error("--expect %s=...: a dataset name of at most %zu bytes", name,
                                   sizeof pair->reference - 1);
        memcpy(pair->reference, p + name_len + 1, len - name_len - 1);
        pair->reference[len - name_len - 1] = '\0';
        p += len + (p[len] == ',');
    }
    return EXIT_OK;
}

double expect_tolerance(const attnrun_expect *e, attn_precision run, const expect_diff *diff)
{
    if (e->tol > 0)
        return e->tol;
    return run == ATTN_F64 && !diff->float32 ? 1e-10 : 1e-5;
}

const char *expect_in_root(const char *name)
{
    while (*name == '/')
        name++;
    return name;
}

/* "weights differ", "output differs". */
bool plural(const char *name)
{
    return name[strlen(name) - 1] == 's';
}

static bool same_shape(const size_t *a, size_t rank_a, const size_t *b, size_t rank_b)
{
    return rank_a == rank_b && memcmp(a, b, rank_a * sizeof *a) == 0;
}

/* The axis of output `which` that counts heads, or SIZE_MAX. */
static size_t head_axis(const attn_run_report *report, attn_output which)
{
    size_t dims[4];
    const char *labels[4];
    size_t rank = attn_output_shape(&report->layout, which, dims, labels);
    for (size_t i = 0; i < rank; i++)
        if (strcmp(labels[i], "head") == 0)
            return i;
    return SIZE_MAX;
}

/* Whether the shapes differ in the head axis alone (a --heads to find). */
static bool heads_differ(const attn_run_report *report, attn_output which, const size_t *want,
                         const size_t *got, size_t rank)
{
    size_t axis = head_axis(report, which);
    if (axis == SIZE_MAX)
        return false;
    for (size_t i = 0; i < rank; i++)
        if (i != axis && want[i] != got[i])
            return false;
    return true;
}

/* The shape output `which` would have if X's batch and query axes were
 * the other way round: X stored (n, B, D). */
static size_t swapped_shape(const attn_run_report *report, attn_output which, size_t dims[4])
{
    attn_layout swapped = report->layout;
    const char *labels[4];
    swapped.dims.batch = report->layout.dims.n;
    swapped.dims.n = report->layout.dims.batch;
    if (!report->layout.cross)
        swapped.dims.m = swapped.dims.n;
    return attn_output_shape(&swapped, which, dims, labels);
}

/* One reference against its output's shape; EXIT_OK or the code, printed. */
static int check_one(attn_results *in, const expect_pair *pair, const attn_run_options *opt,
                     const attn_run_report *report)
{
    const char *name = attn_output_name(pair->which);
    attn_tensor_info ref = {.name = expect_in_root(pair->reference)};
    attn_error err;
    size_t want[4], swapped[4];
    const char *labels[4];
    char s1[256], s2[256];
    int status = attn_results_describe(in, &ref, &err);
    if (status != ATTN_OK)
        return cli_error(cli_exit_code(status), "--expect %s: %s", name, err.msg);
    if (!ref.present)
        return cli_error(EXIT_INPUT, "--expect %s: %s has no dataset %s", name, opt->input,
                         pair->reference);
    size_t rank = attn_output_shape(&report->layout, pair->which, want, labels);
    attn_format_shape(s1, sizeof s1, ref.dims, ref.rank);
    attn_format_shape(s2, sizeof s2, want, rank);
    if (same_shape(want, rank, ref.dims, ref.rank) ||
        (rank == ref.rank && heads_differ(report, pair->which, want, ref.dims, rank)))
        return EXIT_OK;
    size_t mean[4];
    size_t mean_rank = attn_output_shape(&report->layout, ATTN_OUT_MEAN, mean, labels);
    if (pair->which == ATTN_OUT_WEIGHTS && same_shape(mean, mean_rank, ref.dims, ref.rank))
        return cli_error(EXIT_INPUT, "--expect weights: %s is %s, the weights averaged over "
                         "the heads (torch's average_attn_weights=True); compare it with "
                         "--expect mean=%s", pair->reference, s1, pair->reference);
    if (report->layout.batched && rank >= 2) {
        size_t r = swapped_shape(report, pair->which, swapped);
        size_t flipped[4];
        memcpy(flipped, want, sizeof flipped);
        flipped[0] = want[1];
        flipped[1] = want[0];
        bool x_swapped = same_shape(swapped, r, ref.dims, ref.rank);
        bool ref_swapped = same_shape(flipped, rank, ref.dims, ref.rank);
        if (x_swapped || ref_swapped)
            return cli_error(EXIT_INPUT, "--expect %s: %s is %s but %s %s %s: %s looks "
                             "transposed, (n, B, ...) as torch keeps it with batch_first=False; "
                             "store %s as t.transpose(0, 1)", name, pair->reference, s1, name,
                             plural(name) ? "are" : "is", s2,
                             x_swapped && ref_swapped ? "X or the reference"
                             : x_swapped ? "X" : "the reference",
                             x_swapped && ref_swapped ? "the one that is" : "it");
    }
    return cli_error(EXIT_INPUT, "--expect %s: %s is %s but %s %s %s", name, pair->reference,
                     s1, name, plural(name) ? "are" : "is", s2);
}

/* Rank 0's exit code, on every rank. */
static int agree(int code)
{
    attn_ranks_broadcast(&code, sizeof code);
    return code;
}

int expect_check_shapes(const attnrun_expect *e, const attn_run_options *opt,
                        const attn_run_report *report)
{
    int code = EXIT_OK;
    if (attn_rank() == 0) {
        attn_results *in;
        attn_error err;
        int status = attn_results_open(opt->input, "/", &in, &err);
        if (status != ATTN_OK)
            code = cli_error(cli_exit_code(status), "--expect: %s", err.msg);
        for (size_t i = 0; i < e->count && code == EXIT_OK; i++)
            code = check_one(in, &e->pairs[i], opt, report);
        attn_results_close(in);
    }
    return agree(code);
}

/* Whether a and b are the same value as far as the comparison goes, and
 * |a - b| / max(1, |b|) (infinite when one side alone is not finite). */
static double excess(double a, double b)
{
    if (isnan(a) && isnan(b))
        return 0;
    if (!isfinite(a) || !isfinite(b))
        return a == b ? 0 : INFINITY;
    double d = fabs(a - b);
    return d / (fabs(b) > 1 ? fabs(b) : 1);
}

static void take(expect_diff *diff, const double *a, const double *b, size_t count,
                 const size_t *first, size_t rank, size_t last)
{
    for (size_t i = 0; i < count; i++) {
        if (isfinite(b[i]) && fabs(b[i]) > diff->largest)
            diff->largest = fabs(b[i]);
        if (diff->float32 && isfinite(b[i]) && (double)(float)b[i] != b[i])
            diff->float32 = false;
        if (diff->causal && b[i] != 0 && rank >= 2 && i % last > first[rank - 2] + i / last)
            diff->causal = false;
        double x = excess(a[i], b[i]);
        if (x == 0)
            continue;
        if (isinf(x))
            diff->nan = true;
        else {
            double d = fabs(a[i] - b[i]);
            diff->abs = d > diff->abs ? d : diff->abs;
        }
        if (x > diff->worst) {
            diff->worst = x;
            memcpy(diff->at, first, rank * sizeof *first);
            diff->at[rank - 1] += i % last;
            if (rank >= 2)
                diff->at[rank - 2] += i / last;
        }
    }
}

/* Whether a dataset can show a causal map: its last two axes square. */
static bool rank_causal(const attn_tensor_info *info)
{
    return info->rank >= 2 && info->dims[info->rank - 1] == info->dims[info->rank - 2] &&
           info->dims[info->rank - 1] > 1;
}

int expect_diff_of(attn_results *got, const char *name, attn_results *ref,
                   const char *reference, expect_diff *diff, attn_error *err)
{
    attn_tensor_info info = {.name = name};
    memset(diff, 0, sizeof *diff);
    diff->float32 = true;
    int status = attn_results_describe(got, &info, err);
    if (status != ATTN_OK)
        return status;
    diff->causal = rank_causal(&info);
    const size_t rank = info.rank, last = info.dims[rank - 1];
    const size_t rows = rank >= 2 ? info.dims[rank - 2] : 1;
    const size_t step = last >= EXPECT_BLOCK ? 1 : EXPECT_BLOCK / last;
    size_t planes = 1;
    for (size_t i = 0; i + 2 < rank; i++)
        planes *= info.dims[i];
    diff->rank = rank;
    double *a = malloc((step * last + (rank < 2)) * sizeof *a);
    double *b = malloc((step * last + (rank < 2)) * sizeof *b);
    if (a == NULL || b == NULL)
        status = attn_fail(err, ATTN_ENOMEM, "out of memory");
    for (size_t p = 0; p < planes && status == ATTN_OK; p++) {
        size_t first[4] = {0}, count[4] = {1, 1, 1, 1};
        for (size_t i = rank >= 2 ? rank - 2 : 0, q = p; i-- > 0; q /= info.dims[i])
            first[i] = q % info.dims[i];
        for (size_t r = 0; r < rows && status == ATTN_OK; r += step) {
            size_t k = rows - r < step ? rows - r : step;
            if (rank >= 2) {
                first[rank - 2] = r;
                count[rank - 2] = k;
            }
            count[rank - 1] = last;
            if ((status = attn_results_read_doubles(got, name, first, count, a, err)) ==
                    ATTN_OK &&
                (status = attn_results_read_doubles(ref, reference, first, count, b, err)) ==
                    ATTN_OK)
                take(diff, a, b, k * last, first, rank, last);
            if (rank < 2)
                break;
        }
    }
    free(a);
    free(b);
    diff->rel = diff->largest > 0 ? diff->abs / diff->largest : diff->abs > 0 ? INFINITY : 0;
    return status;
}

/* "[0, 3, 5, 2]" */
static const char *place(const expect_diff *d)
{
    static char text[128];
    size_t len = 0;
    for (size_t i = 0; i < d->rank; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%zu", i ? ", " : "[",
                                d->at[i]);
    snprintf(text + len, sizeof text - len, "]");
    return text;
}

/* Where the results of the run are: the output file, or the input
 * itself (--in-place). */
static const char *results_path(const attn_run_options *opt)
{
    return opt->output != NULL ? opt->output : opt->input;
}

/* One output against its reference: its line; EXIT_OK, EXIT_EXPECT or a
 * failure's code (printed). */
static int compare_one(const attnrun_expect *e, attn_results *got, attn_results *in,
                       const expect_pair *pair, const attn_run_options *opt,
                       const attn_run_report *report, bool quiet, char failure[128])
{
    const char *name = attn_output_name(pair->which), *reference = expect_in_root(pair->reference);
    attn_tensor_info a = {.name = name}, b = {.name = reference};
    attn_error err;
    int status = attn_results_describe(got, &a, &err);
    if (status == ATTN_OK)
        status = attn_results_describe(in, &b, &err);
    if (status != ATTN_OK)
        return cli_error(cli_exit_code(status), "--expect %s: %s", name, err.msg);
    if (!same_shape(a.dims, a.rank, b.dims, b.rank)) {       /* heads_differ */
        size_t axis = head_axis(report, pair->which);
        fprintf(stderr, "attnrun: expect: %s vs %s: %zu heads against its %zu\n", name,
                pair->reference, a.dims[axis], b.dims[axis]);
        snprintf(failure, 128, "%s %s %zu heads, the reference %zu", name,
                 plural(name) ? "have" : "has", a.dims[axis], b.dims[axis]);
        return EXIT_EXPECT;
    }
    expect_diff d;
    if ((status = expect_diff_of(got, name, in, reference, &d, &err)) != ATTN_OK)
        return cli_error(cli_exit_code(status), "--expect %s: %s", name, err.msg);
    const double tol = expect_tolerance(e, opt->precision, &d);
    const bool map = pair->which == ATTN_OUT_WEIGHTS || pair->which == ATTN_OUT_MEAN;
    if (map && d.causal && !report->config.variant.causal && !quiet)
        fprintf(stderr, "attnrun: warning: %s is causal (0 for every key after its query) but "
                "the run is not; use --causal\n", pair->reference);
    if (d.worst <= tol) {
        if (!quiet)
            fprintf(stderr, "attnrun: expect: %s vs %s: largest difference %.2g (relative "
                    "%.2g), within %.2g\n", name, pair->reference, d.abs, d.rel, tol);
        return EXIT_OK;
    }
    const char *verb = plural(name) ? "differ" : "differs";
    if (d.nan) {
        snprintf(failure, 128, "%s %s (NaN or infinity on one side only)", name, verb);
        fprintf(stderr, "attnrun: expect: %s vs %s: NaN or infinity on one side only (at %s), "
                "beyond %.2g\n", name, pair->reference, place(&d), tol);
    } else {
        snprintf(failure, 128, "%s %s by %.3g", name, verb, d.abs);
        fprintf(stderr, "attnrun: expect: %s vs %s: largest difference %.3g (relative %.2g), "
                "at %s beyond %.2g\n", name, pair->reference, d.abs, d.rel, place(&d), tol);
    }
    return EXIT_EXPECT;
}

int expect_compare(const attnrun_expect *e, const attn_run_options *opt,
                   const attn_run_report *report, bool quiet, char failure[128])
{
    int code = EXIT_OK;
    if (attn_rank() == 0) {
        attn_results *got = NULL, *in = NULL;
        attn_error err;
        int status = attn_results_open(results_path(opt), opt->group, &got, &err);
        if (status == ATTN_OK)
            status = attn_results_open(opt->input, "/", &in, &err);
        if (status != ATTN_OK)
            code = cli_error(cli_exit_code(status), "--expect: %s", err.msg);
        for (size_t i = 0; i < e->count && code != EXIT_RUNTIME && code != EXIT_INPUT; i++) {
            int one = compare_one(e, got, in, &e->pairs[i], opt, report, quiet,
                                  code == EXIT_OK ? failure : (char[128]){0});
            code = one != EXIT_OK && code == EXIT_OK ? one : code;
        }
        attn_results_close(got);
        attn_results_close(in);
    }
    return agree(code);
}
