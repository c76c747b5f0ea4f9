/*
 * test_run.c - unit tests for attn_run (the pipeline), each in its own
 * temporary directory.
 *
 * Legend: B batch, H heads, n queries, m keys (= n here), D d_model,
 *         dk = d_k, dv = d_v.  Every buffer is row-major.
 *
 * The input is written here with the HDF5 C API directly and every output is
 * read back with it, so attn_h5 is not trusted to check itself.  Expected
 * values come from reference_forward below, a plain loop-nest in double that
 * shares no code with lib/.
 *
 * The input file (in.h5):
 *   /X    (B, n, D) = (3, 4, 4) float32
 *   /W_Q, /W_K, /W_V  (D, H*dk) = (4, 4) float32, packed, H = 2, dk = dv = 2
 *   /W_O  (H*dv, D) = (4, 4) float32
 *   /b_Q, /b_K, /b_V, /b_O  (4) float32
 */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>

#include "attn_run.h"
#include "test_support.h"
#include "test_hdf5.h"

enum { B = 3, N = 4, D = 4, H = 2, DK = 2, DV = 2 };

#define REFERENCE_TOLERANCE 1e-5   /* float32 pipeline against a double loop */

/* A per-test temporary directory holding in.h5 and whatever a run leaves. */
typedef struct run_fixture {
    test_dir tmp;
    char input[256];     /* dir/in.h5 */
    char output[256];    /* dir/out.h5 */
    attn_atomic transaction;
} run_fixture;

/* ---- the input ----------------------------------------------------------- */

/* Values in [-0.5, 0.5) that repeat only after `period` steps. */
static float pattern(size_t i, size_t step, size_t period)
{
    return (float)((double)((i * step) % period) / (double)period - 0.5);
}

/* The input's values, as float32 (what the file stores). */
typedef struct input_values {
    float x[B][N][D];
    float w_q[D][H * DK], w_k[D][H * DK], w_v[D][H * DV], w_o[H * DV][D];
    float b_q[H * DK], b_k[H * DK], b_v[H * DV], b_o[D];
} input_values;

static void input_values_fill(input_values *v)
{
    for (size_t i = 0; i < B * N * D; i++)
        (&v->x[0][0][0])[i] = 2.0f * pattern(i, 37, 23);
    for (size_t i = 0; i < D * H * DK; i++) {
        (&v->w_q[0][0])[i] = pattern(i, 5, 17);
        (&v->w_k[0][0])[i] = pattern(i + 3, 7, 19);
        (&v->w_v[0][0])[i] = pattern(i + 1, 11, 13);
        (&v->w_o[0][0])[i] = pattern(i + 2, 3, 11);
    }
    for (size_t i = 0; i < 4; i++) {
        v->b_q[i] = 0.25f * pattern(i, 1, 4);
        v->b_k[i] = 0.125f * pattern(i, 3, 4);
        v->b_v[i] = 0.5f * pattern(i, 1, 5);
        v->b_o[i] = 0.75f * pattern(i, 2, 7);
    }
}

/* One float32 dataset of the input file. */
typedef struct input_dataset {
    const char *name;
    int rank;
    hsize_t dims[3];
    const float *values;
} input_dataset;

enum { INPUT_WEIGHTS = 5, INPUT_DATASETS = 9 };   /* X and W_*, then the b_* */

/* The datasets of the legend's input with values v, but X (items, n, D)
 * from x. */
static void input_datasets(const input_values *v, const float *x, hsize_t items, hsize_t n,
                           input_dataset sets[INPUT_DATASETS])
{
    const input_dataset all[INPUT_DATASETS] = {
        {"/X", 3, {items, n, D}, x},
        {"/W_Q", 2, {D, H * DK}, &v->w_q[0][0]},
        {"/W_K", 2, {D, H * DK}, &v->w_k[0][0]},
        {"/W_V", 2, {D, H * DV}, &v->w_v[0][0]},
        {"/W_O", 2, {H * DV, D}, &v->w_o[0][0]},
        {"/b_Q", 1, {H * DK}, v->b_q},
        {"/b_K", 1, {H * DK}, v->b_k},
        {"/b_V", 1, {H * DV}, v->b_v},
        {"/b_O", 1, {D}, v->b_o},
    };
    memcpy(sets, all, sizeof all);
}

/* Writes the first `count` of sets into a new file at path. */
static void write_datasets(const char *path, const input_dataset *sets, size_t count)
{
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(file >= 0);
    for (size_t i = 0; i < count; i++)
        test_h5_put(file, sets[i].name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, sets[i].rank,
                    sets[i].dims, sets[i].values);
    assert_true(H5Fclose(file) >= 0);
}

/* Writes the input file of the legend at path, with values v. */
static void write_input(const char *path, const input_values *v)
{
    input_dataset sets[INPUT_DATASETS];
    input_datasets(v, &v->x[0][0][0], B, N, sets);
    write_datasets(path, sets, INPUT_DATASETS);
}

static int setup(void **state)
{
    if (test_h5_setup(state, sizeof(run_fixture), "test_run") != 0)
        return -1;
    run_fixture *f = *state;
    snprintf(f->input, sizeof f->input, "%s/in.h5", f->tmp.dir);
    snprintf(f->output, sizeof f->output, "%s/out.h5", f->tmp.dir);
    return 0;
}

static int teardown(void **state)
{
    return test_dir_teardown(state);
}

/* Writes the default input into the fixture's in.h5; returns its values. */
static input_values write_default_input(run_fixture *f)
{
    input_values v;
    input_values_fill(&v);
    write_input(f->input, &v);
    return v;
}

/* Options for in.h5 -> out.h5 with --heads 2. */
static attn_run_options default_options(run_fixture *f)
{
    attn_run_options opt = attn_run_defaults();
    opt.input = f->input;
    opt.output = f->output;
    opt.heads = H;
    opt.transaction = &f->transaction;
    return opt;
}

/* attn_run that must succeed; report may be NULL. */
static void run_ok(const attn_run_options *opt, attn_run_report *report)
{
    attn_run_report unused;
    attn_error err = {0};
    int status = attn_run(opt, report != NULL ? report : &unused, &err);
    if (status != ATTN_OK)
        fail_msg("attn_run: %d %s", status, err.msg);
}

/* ---- the reference --------------------------------------------------------- */

/* The four default outputs in double: the reference's, or a file's
 * (float32, widened exactly). */
typedef struct outputs {
    double scores[B][H][N][N];
    double weights[B][H][N][N];
    double heads[B][H][N][DV];
    double output[B][N][D];
} outputs;

/* Q_i = X W_Q^(i) + b_Q^(i) ... output = concat(heads) W_O + b_O, straight
 * from the definitions, for every item and head. */
static void reference_forward(const input_values *v, outputs *r)
{
    const double scale = 1.0 / sqrt((double)DK);
    for (size_t b = 0; b < B; b++) {
        double q[N][H * DK], k[N][H * DK], val[N][H * DV];
        for (size_t i = 0; i < N; i++)
            for (size_t c = 0; c < H * DK; c++) {
                double sq = v->b_q[c], sk = v->b_k[c], sv = v->b_v[c];
                for (size_t d = 0; d < D; d++) {
                    sq += (double)v->x[b][i][d] * v->w_q[d][c];
                    sk += (double)v->x[b][i][d] * v->w_k[d][c];
                    sv += (double)v->x[b][i][d] * v->w_v[d][c];
                }
                q[i][c] = sq;
                k[i][c] = sk;
                val[i][c] = sv;
            }
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < N; i++) {
                double max = -INFINITY, sum = 0;
                for (size_t j = 0; j < N; j++) {
                    double s = 0;
                    for (size_t e = 0; e < DK; e++)
                        s += q[i][h * DK + e] * k[j][h * DK + e];
                    r->scores[b][h][i][j] = s * scale;
                    max = fmax(max, s * scale);
                }
                for (size_t j = 0; j < N; j++)
                    sum += exp(r->scores[b][h][i][j] - max);
                for (size_t j = 0; j < N; j++)
                    r->weights[b][h][i][j] = exp(r->scores[b][h][i][j] - max) / sum;
                for (size_t e = 0; e < DV; e++) {
                    double s = 0;
                    for (size_t j = 0; j < N; j++)
                        s += r->weights[b][h][i][j] * val[j][h * DV + e];
                    r->heads[b][h][i][e] = s;
                }
            }
        for (size_t i = 0; i < N; i++)
            for (size_t d = 0; d < D; d++) {
                double s = v->b_o[d];
                for (size_t h = 0; h < H; h++)
                    for (size_t e = 0; e < DV; e++)
                        s += r->heads[b][h][i][e] * v->w_o[h * DV + e][d];
                r->output[b][i][d] = s;
            }
    }
}

/* ---- reading results back with the HDF5 API ------------------------------ */

/* Reads the float32 scores, weights, heads and output of group (e.g. "/"
 * or "/res"), asserting their shapes. */
static void read_outputs(const char *path, const char *group, outputs *o)
{
    const struct {
        const char *name;
        int rank;
        hsize_t dims[4];
        double *values;
    } sets[] = {
        {"scores", 4, {B, H, N, N}, &o->scores[0][0][0][0]},
        {"weights", 4, {B, H, N, N}, &o->weights[0][0][0][0]},
        {"heads", 4, {B, H, N, DV}, &o->heads[0][0][0][0]},
        {"output", 3, {B, N, D}, &o->output[0][0][0]},
    };
    hid_t file = test_h5_open(path, H5F_ACC_RDONLY);
    const char *sep = strcmp(group, "/") == 0 ? "" : "/";
    for (size_t i = 0; i < COUNT(sets); i++) {
        char name[128];
        snprintf(name, sizeof name, "%s%s%s", group, sep, sets[i].name);
        test_h5_read(file, name, H5T_IEEE_F32LE, sets[i].rank, sets[i].dims, H5T_NATIVE_DOUBLE,
                     sets[i].values);
    }
    assert_true(H5Fclose(file) >= 0);
}

/* ---- files in the scratch directory -------------------------------------- */

/* The fixture's directory holds exactly `expected` entries and no temporary. */
static void assert_entries(const run_fixture *f, size_t expected)
{
    assert_dir_entries(f->tmp.dir, ATTN_TEMP_MARKER, expected, 0);
}

static bool file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* ---- successful runs ------------------------------------------------------ */

static void test_run_writes_outputs_equal_to_reference(void **state)
{
    run_fixture *f = *state;
    const input_values v = write_default_input(f);
    attn_run_options opt = default_options(f);
    attn_run_report report;
    run_ok(&opt, &report);

    assert_true(file_exists(f->output));
    assert_entries(f, 2);             /* in.h5, out.h5; no temporary */
    assert_string_equal(f->transaction.temp_path, "");

    static outputs r, o;
    reference_forward(&v, &r);
    read_outputs(f->output, "/", &o);

    /* one batch item and head in full... */
    const size_t b = 1, h = 1;
    for (size_t i = 0; i < N; i++) {
        double row_sum = 0;
        for (size_t j = 0; j < N; j++) {
            assert_near(o.scores[b][h][i][j], r.scores[b][h][i][j], REFERENCE_TOLERANCE);
            assert_near(o.weights[b][h][i][j], r.weights[b][h][i][j], REFERENCE_TOLERANCE);
            row_sum += o.weights[b][h][i][j];
        }
        assert_near(row_sum, 1.0, REFERENCE_TOLERANCE);
        for (size_t e = 0; e < DV; e++)
            assert_near(o.heads[b][h][i][e], r.heads[b][h][i][e], REFERENCE_TOLERANCE);
        for (size_t d = 0; d < D; d++)
            assert_near(o.output[b][i][d], r.output[b][i][d], REFERENCE_TOLERANCE);
    }
    /* ...and every other value too */
    for (size_t i = 0; i < B * H * N * N; i++) {
        assert_near((&o.scores[0][0][0][0])[i], (&r.scores[0][0][0][0])[i], REFERENCE_TOLERANCE);
        assert_near((&o.weights[0][0][0][0])[i], (&r.weights[0][0][0][0])[i], REFERENCE_TOLERANCE);
    }
    for (size_t i = 0; i < B * H * N * DV; i++)
        assert_near((&o.heads[0][0][0][0])[i], (&r.heads[0][0][0][0])[i], REFERENCE_TOLERANCE);
    for (size_t i = 0; i < B * N * D; i++)
        assert_near((&o.output[0][0][0])[i], (&r.output[0][0][0])[i], REFERENCE_TOLERANCE);

    /* the report of a real run is the plan it followed */
    assert_int_equal(report.layout.dims.batch, B);
    assert_int_equal(report.layout.dims.heads, H);
    assert_int_equal(report.slice_items, B);    /* the whole batch fits in 32 MiB */
}

static void test_results_do_not_depend_on_slice_items(void **state)
{
    run_fixture *f = *state;
    write_default_input(f);
    static const size_t slices[3] = {1, 2, 0};
    static const size_t expected_items[3] = {1, 2, B};
    static outputs results[3];
    for (size_t s = 0; s < 3; s++) {
        char name[32];
        snprintf(name, sizeof name, "out%zu.h5", slices[s]);
        const char *path = test_path(&f->tmp, name);
        attn_run_options opt = default_options(f);
        opt.output = path;
        opt.slice_items = slices[s];
        attn_run_report report;
        run_ok(&opt, &report);
        assert_int_equal(report.slice_items, expected_items[s]);
        read_outputs(path, "/", &results[s]);
    }
    assert_entries(f, 4);
    for (size_t s = 1; s < 3; s++) {
        assert_memory_equal(results[s].output, results[0].output, sizeof results[0].output);
        assert_memory_equal(results[s].heads, results[0].heads, sizeof results[0].heads);
        assert_memory_equal(results[s].weights, results[0].weights, sizeof results[0].weights);
        assert_memory_equal(results[s].scores, results[0].scores, sizeof results[0].scores);
    }
}

static void test_dry_run_fills_report_and_creates_no_file(void **state)
{
    run_fixture *f = *state;
    write_default_input(f);
    attn_run_options opt = default_options(f);
    opt.dry_run = true;
    opt.output = NULL;          /* a plan needs no output and no transaction */
    opt.transaction = NULL;
    attn_run_report report;
    run_ok(&opt, &report);

    const attn_dims *d = &report.layout.dims;
    assert_int_equal(d->batch, B);
    assert_int_equal(d->n, N);
    assert_int_equal(d->m, N);
    assert_int_equal(d->d_model, D);
    assert_int_equal(d->heads, H);
    assert_int_equal(d->d_k, DK);
    assert_int_equal(d->d_v, DV);
    assert_true(report.layout.batched);
    assert_false(report.layout.cross);
    assert_near(report.config.variant.scale, 1.0 / sqrt((double)DK), 1e-15);
    assert_true(report.flops > 0);
    assert_int_equal(report.save, ATTN_SAVE_DEFAULT);
    assert_int_equal(report.slice_items, B);
    assert_true(report.slice_bytes > 0);

    /* bytes = product of the output's shape * sizeof(float32) */
    const size_t expected[ATTN_OUT_COUNT] = {
        [ATTN_OUT_SCORES] = B * H * N * N * 4, [ATTN_OUT_WEIGHTS] = B * H * N * N * 4,
        [ATTN_OUT_HEADS] = B * H * N * DV * 4, [ATTN_OUT_OUTPUT] = B * N * D * 4,
        [ATTN_OUT_Q] = B * H * N * DK * 4,     [ATTN_OUT_K] = B * H * N * DK * 4,
        [ATTN_OUT_V] = B * H * N * DV * 4,
        [ATTN_OUT_ENTROPY] = B * H * N * 4,    [ATTN_OUT_ARGMAX] = B * H * N * 4,
        [ATTN_OUT_DISTANCE] = B * H * N * 4,   [ATTN_OUT_MEAN] = B * N * N * 4,
        [ATTN_OUT_RESULT] = B * N * H * D * 4,
        [ATTN_OUT_NORMS] = B * H * N * N * 4,  [ATTN_OUT_VALUE_NORM] = B * H * N * 4,
    };
    for (int i = 0; i < ATTN_OUT_COUNT; i++)
        assert_int_equal(report.output_bytes[i], expected[i]);
    assert_int_equal(report.total_bytes,
                     expected[ATTN_OUT_SCORES] + expected[ATTN_OUT_WEIGHTS] +
                         expected[ATTN_OUT_HEADS] + expected[ATTN_OUT_OUTPUT]);

    /* the inputs used and their shapes: X (B, n, D), the weights and biases */
    assert_true(report.inputs[ATTN_IN_X].present);
    assert_int_equal(report.inputs[ATTN_IN_X].rank, 3);
    assert_int_equal(report.inputs[ATTN_IN_X].dims[0], B);
    assert_int_equal(report.inputs[ATTN_IN_X].dims[1], N);
    assert_int_equal(report.inputs[ATTN_IN_X].dims[2], D);
    assert_true(report.inputs[ATTN_IN_WO].present);
    assert_int_equal(report.inputs[ATTN_IN_WO].dims[0], H * DV);
    assert_true(report.inputs[ATTN_IN_BQ].present);
    assert_false(report.inputs[ATTN_IN_KV].present);
    assert_false(report.inputs[ATTN_IN_MASK].present);
    for (int i = 0; i < ATTN_IN_COUNT; i++)
        assert_null(report.inputs[i].name);
    /* stored types: float32 everywhere but argmax (int32); chunks: a whole
     * (n, m) map fits a tile, so a chunk holds whole maps of every head
     * and item */
    for (int i = 0; i < ATTN_OUT_COUNT; i++)
        assert_int_equal(report.output_store[i], i == ATTN_OUT_ARGMAX ? ATTN_STORE_I32 : ATTN_STORE_F32);
    const size_t map_chunk[4] = {B, H, N, N};
    for (size_t axis = 0; axis < 4; axis++)
        assert_int_equal(report.output_chunk[ATTN_OUT_WEIGHTS][axis], map_chunk[axis]);

    /* nothing written: in.h5 alone, and no OUT */
    assert_false(file_exists(f->output));
    assert_entries(f, 1);

    /* total_bytes follows --save */
    opt.save = (1u << ATTN_OUT_OUTPUT) | (1u << ATTN_OUT_Q);
    run_ok(&opt, &report);
    assert_int_equal(report.total_bytes, expected[ATTN_OUT_OUTPUT] + expected[ATTN_OUT_Q]);
    assert_entries(f, 1);
}

/* ---- refusals ----------------------------------------------------------- */

/* attn_run that must fail with status; returns its error. */
static attn_error run_refused(const attn_run_options *opt, int status)
{
    attn_run_report report;
    attn_error err = {0};
    assert_int_equal(attn_run(opt, &report, &err), status);
    return err;
}

static void test_existing_output_refused_without_force_replaced_with_force(void **state)
{
    run_fixture *f = *state;
    static const char older[] = "an older result\n";
    write_default_input(f);
    test_write_file(f->output, older, strlen(older));

    attn_run_options opt = default_options(f);
    attn_error err = run_refused(&opt, ATTN_EUSAGE);
    assert_non_null(strstr(err.msg, "out.h5"));
    assert_file_bytes(f->output, older, strlen(older));
    assert_entries(f, 2);

    opt.force = true;
    run_ok(&opt, NULL);
    assert_entries(f, 2);
    static outputs o;
    read_outputs(f->output, "/", &o);          /* now an HDF5 file with the results */
}

static void test_output_equal_to_input_is_usage_error(void **state)
{
    run_fixture *f = *state;
    write_default_input(f);
    size_t in_len;
    unsigned char *in_bytes = test_read_file(f->input, &in_len);

    attn_run_options opt = default_options(f);
    opt.output = f->input;
    opt.force = true;                           /* not even with --force */
    run_refused(&opt, ATTN_EUSAGE);
    opt.output = test_path(&f->tmp, "./in.h5"); /* another spelling of the same path */
    run_refused(&opt, ATTN_EUSAGE);

    assert_file_bytes(f->input, in_bytes, in_len);
    assert_entries(f, 1);
    free(in_bytes);
}

static void test_cancel_already_set_gives_eintr_and_no_files(void **state)
{
    run_fixture *f = *state;
    volatile sig_atomic_t cancel = 1;
    write_default_input(f);
    attn_run_options opt = default_options(f);
    opt.cancel = &cancel;
    assert_non_null(strstr(run_refused(&opt, ATTN_EINTR).msg, "interrupted"));
    assert_false(file_exists(f->output));
    assert_entries(f, 1);
    assert_string_equal(f->transaction.temp_path, "");
}

static void test_missing_dataset_gives_einput_and_no_files(void **state)
{
    run_fixture *f = *state;
    write_default_input(f);
    attn_run_options opt = default_options(f);
    opt.names[ATTN_IN_WQ] = "nope";
    /* what an earlier run left in the caller's transaction: cleared at the
     * start, so that a signal handler finds no temporary to remove */
    memset(&f->transaction, 'x', sizeof f->transaction);
    f->transaction.temp_path[sizeof f->transaction.temp_path - 1] = '\0';
    assert_non_null(strstr(run_refused(&opt, ATTN_EINPUT).msg, "nope"));
    assert_false(file_exists(f->output));
    assert_entries(f, 1);
    assert_string_equal(f->transaction.temp_path, "");
    assert_int_equal(f->transaction.committing, 0);
}

/* The default input with X[1][2][3] = NaN. */
static void write_input_with_nan(run_fixture *f)
{
    input_values v;
    input_values_fill(&v);
    v.x[1][2][3] = NAN;
    write_input(f->input, &v);
}

static void test_nan_in_x_gives_einput_with_its_index(void **state)
{
    run_fixture *f = *state;
    write_input_with_nan(f);
    attn_run_options opt = default_options(f);
    attn_error err = run_refused(&opt, ATTN_EINPUT);
    assert_non_null(strstr(err.msg, "dataset X "));
    assert_non_null(strstr(err.msg, "[1, 2, 3]"));
    assert_entries(f, 1);

    /* the index is in X, not in the slice that held it */
    opt.slice_items = 1;
    assert_non_null(strstr(run_refused(&opt, ATTN_EINPUT).msg, "[1, 2, 3]"));
    assert_entries(f, 1);
}

static void test_allow_nonfinite_runs_with_nan_in_x(void **state)
{
    run_fixture *f = *state;
    write_input_with_nan(f);
    attn_run_options opt = default_options(f);
    opt.allow_nonfinite = true;
    run_ok(&opt, NULL);
    assert_entries(f, 2);

    static outputs o;
    read_outputs(f->output, "/", &o);
    /* item 1 holds the NaN and its results are NaN; items 0 and 2 are finite */
    assert_true(isnan(o.output[1][2][0]));
    for (size_t b = 0; b < B; b += 2)
        for (size_t i = 0; i < N; i++)
            for (size_t d = 0; d < D; d++)
                assert_true(isfinite(o.output[b][i][d]));
}

/* ---- in place ------------------------------------------------------------ */

/* Options that add the results to in.h5 under /res. */
static attn_run_options in_place_options(run_fixture *f)
{
    attn_run_options opt = default_options(f);
    opt.output = NULL;
    opt.in_place = true;
    opt.group = "/res";
    return opt;
}

static void test_in_place_adds_results_under_group_and_keeps_inputs(void **state)
{
    run_fixture *f = *state;
    const input_values v = write_default_input(f);
    attn_run_options opt = in_place_options(f);
    run_ok(&opt, NULL);
    assert_entries(f, 1);             /* in.h5 replaced, no temporary */

    static outputs r, o;
    reference_forward(&v, &r);
    read_outputs(f->input, "/res", &o);
    for (size_t i = 0; i < B * N * D; i++)
        assert_near((&o.output[0][0][0])[i], (&r.output[0][0][0])[i], REFERENCE_TOLERANCE);

    /* the original datasets are still there, with their values */
    hid_t file = test_h5_open(f->input, H5F_ACC_RDONLY);
    assert_int_equal(H5Lexists(file, "/output", H5P_DEFAULT), 0);   /* not at the root */
    input_dataset sets[INPUT_DATASETS];
    input_datasets(&v, &v.x[0][0][0], B, N, sets);
    for (size_t i = 0; i < INPUT_DATASETS; i++) {
        float back[B * N * D];                  /* X, the largest */
        test_h5_read(file, sets[i].name, H5T_IEEE_F32LE, sets[i].rank, sets[i].dims,
                     H5T_NATIVE_FLOAT, back);
        size_t count = 1;
        for (int a = 0; a < sets[i].rank; a++)
            count *= (size_t)sets[i].dims[a];
        assert_memory_equal(back, sets[i].values, count * sizeof(float));
    }
    assert_true(H5Fclose(file) >= 0);
}

static void test_second_in_place_without_force_leaves_file_unchanged(void **state)
{
    run_fixture *f = *state;
    write_default_input(f);
    attn_run_options opt = in_place_options(f);
    run_ok(&opt, NULL);

    size_t len;
    unsigned char *bytes = test_read_file(f->input, &len);
    assert_non_null(strstr(run_refused(&opt, ATTN_EUSAGE).msg, "/res"));
    assert_file_bytes(f->input, bytes, len);
    assert_entries(f, 1);
    free(bytes);

    /* with force the names are replaced */
    opt.force = true;
    run_ok(&opt, NULL);
    assert_entries(f, 1);
    static outputs o;
    read_outputs(f->input, "/res", &o);
}

/* ---- progress ------------------------------------------------------------ */

/* What the progress callback saw. */
typedef struct progress_log {
    size_t calls;
    size_t done[64];     /* of the first 64 calls */
    size_t last_done;
    size_t total;
    bool increasing;     /* every done above the one before */
    bool same_total;     /* every total equal to the first */
    const attn_run_report *report;  /* when set: its plan, read at the first call */
    size_t planned_n, planned_rows;
} progress_log;

static bool record_progress(size_t done, size_t total, void *context)
{
    progress_log *log = context;
    if (log->calls == 0)
        log->total = total;
    if (log->calls == 0 && log->report != NULL) {
        log->planned_n = log->report->layout.dims.n;
        log->planned_rows = log->report->slice_rows;
    }
    if (done <= log->last_done)
        log->increasing = false;
    if (total != log->total)
        log->same_total = false;
    if (log->calls < sizeof log->done / sizeof log->done[0])
        log->done[log->calls] = done;
    log->last_done = done;
    log->calls++;
    return true;
}

/* Runs opt with its progress recorded in log. */
static void run_logged(attn_run_options *opt, progress_log *log, attn_run_report *report)
{
    *log = (progress_log){.increasing = true, .same_total = true, .report = log->report};
    opt->progress = record_progress;
    opt->progress_context = log;
    run_ok(opt, report);
}

/* log saw at least `calls` calls (one after each step; more inside a
 * step that takes long, as under valgrind), each done above the one
 * before, of one total `total`, the last at the total. */
static void assert_progress(const progress_log *log, size_t calls, size_t total)
{
    assert_in_range(log->calls, calls, sizeof log->done / sizeof log->done[0]);
    assert_true(log->increasing);
    assert_true(log->same_total);
    assert_int_equal(log->total, total);
    assert_int_equal(log->last_done, total);
}

/* log reported done `done` (after a step). */
static void assert_reported(const progress_log *log, size_t done)
{
    for (size_t i = 0; i < log->calls && i < sizeof log->done / sizeof log->done[0]; i++)
        if (log->done[i] == done)
            return;
    fail_msg("no report of %zu", done);
}

/* The work of rows [0, rows) of an item of n queries and m keys, none
 * hidden, in the unit of the progress (attn_run_work): the (query, key)
 * pairs, 2 per row (q and the output projected), m (k and v). */
static size_t work_of_rows(size_t rows, size_t m)
{
    return rows * m + 2 * rows + (rows > 0 ? m : 0);
}

static void test_progress_reaches_total_in_increasing_steps(void **state)
{
    run_fixture *f = *state;
    write_default_input(f);
    progress_log log = {0};
    attn_run_options opt = default_options(f);
    attn_run_report report;
    const size_t item = work_of_rows(N, N);     /* N N pairs + 2 N + N */
    opt.slice_items = 1;
    run_logged(&opt, &log, &report);
    assert_progress(&log, B, B * item);         /* after each slice of one item */
    for (size_t i = 0; i < B; i++)
        assert_reported(&log, (i + 1) * item);
    for (size_t r = 0; r <= N; r++)             /* the library's unit is this one */
        assert_int_equal(attn_run_work(&report, 0, r), work_of_rows(r, N));
    /* past size_t, it saturates: 2 rows of 2^63 keys are 2^64 pairs, a
     * double that no size_t holds */
    attn_run_report huge = report;
    huge.config.dims.m = huge.layout.dims.m = (size_t)1 << 63;
    huge.config.variant.causal = false;
    huge.config.variant.window = 0;
    assert_int_equal(attn_run_work(&huge, 0, 2), SIZE_MAX);
    assert_int_equal(attn_run_work(&huge, 0, 0), 0);

    /* slices of 2: done = 2 items, then 3 */
    opt.slice_items = 2;
    opt.force = true;
    run_logged(&opt, &log, &report);
    assert_progress(&log, 2, B * item);
    assert_reported(&log, 2 * item);
    assert_reported(&log, 3 * item);

    /* causal: row q sees q + 1 keys */
    opt.variant.causal = true;
    run_logged(&opt, &log, &report);
    const size_t causal_item = N * (N + 1) / 2 + 2 * N + N;
    assert_progress(&log, 2, B * causal_item);
    assert_reported(&log, 2 * causal_item);
}

/* One item of LONG_N queries whose maps exceed the step: the rows come in
 * blocks, and progress is reported after each block. */
enum { LONG_N = 600 };

static void test_progress_reports_each_block_of_rows(void **state)
{
    run_fixture *f = *state;
    static float x[LONG_N * D];
    input_values v;
    input_dataset sets[INPUT_DATASETS];
    input_values_fill(&v);
    for (size_t i = 0; i < LONG_N * D; i++)
        x[i] = pattern(i, 37, 23);
    input_datasets(&v, x, 1, LONG_N, sets);
    write_datasets(f->input, sets, INPUT_WEIGHTS);      /* no biases */

    attn_run_report report;
    progress_log log = {.report = &report};
    attn_run_options opt = default_options(f);
    opt.save = 1u << ATTN_OUT_WEIGHTS;
    opt.memory_budget = (size_t)1 << 20;
    run_logged(&opt, &log, &report);
    const size_t rows = report.slice_rows, blocks = (LONG_N + rows - 1) / rows;
    assert_true(rows < LONG_N);                 /* else this test shows nothing */
    assert_in_range(blocks, 2, 8);
    assert_int_equal(log.planned_n, LONG_N);    /* the plan was there at the first call */
    assert_int_equal(log.planned_rows, rows);
    assert_progress(&log, blocks, work_of_rows(LONG_N, LONG_N));
    for (size_t b = 0; b < blocks; b++)
        assert_reported(&log, work_of_rows((b + 1) * rows < LONG_N ? (b + 1) * rows : LONG_N,
                                           LONG_N));
}

/* ---- the same bytes whatever the schedule -------------------------------- */

/* A batch of SCHEDULE_B items of SCHEDULE_N queries (m = n): n m is above
 * ATTN_MAP_TILE^2, so the maps are chunked in 256 x 256 tiles and a step
 * may hold a block of 256 of an item's 260 query rows (then 4). */
enum { SCHEDULE_B = 3, SCHEDULE_N = 260 };
#define SCHEDULE_SEED 20240611u

/* The next value of a 32-bit linear congruential generator (Numerical
 * Recipes' constants) in [-scale / 2, scale / 2): 24 bits, exact in float. */
static float lcg_value(uint32_t *state, float scale)
{
    *state = *state * 1664525u + 1013904223u;
    return scale * ((float)(*state >> 8) / 16777216.0f - 0.5f);
}

/* Writes in.h5: X (B, n, D) and the legend's weights and biases, all from
 * one generator started at seed, and a key mask /mask (B, n) uint8 that
 * hides key 0 of item 0 (with causal, its first query sees no key), every
 * third key of item 1 and the last 40 keys of item 2. */
static void write_schedule_input(run_fixture *f, uint32_t seed)
{
    static float x[SCHEDULE_B * SCHEDULE_N * D];
    static uint8_t mask[SCHEDULE_B][SCHEDULE_N];
    input_values v;
    uint32_t lcg = seed;
    for (size_t i = 0; i < COUNT(x); i++)
        x[i] = lcg_value(&lcg, 4.0f);
    const struct {
        float *values;
        size_t count;
        float scale;
    } parts[] = {
        {&v.w_q[0][0], D * H * DK, 2.0f}, {&v.w_k[0][0], D * H * DK, 2.0f},
        {&v.w_v[0][0], D * H * DV, 2.0f}, {&v.w_o[0][0], H * DV * D, 2.0f},
        {v.b_q, H * DK, 0.5f},            {v.b_k, H * DK, 0.5f},
        {v.b_v, H * DV, 0.5f},            {v.b_o, D, 0.5f},
    };
    for (size_t p = 0; p < COUNT(parts); p++)
        for (size_t i = 0; i < parts[p].count; i++)
            parts[p].values[i] = lcg_value(&lcg, parts[p].scale);
    for (size_t k = 0; k < SCHEDULE_N; k++) {
        mask[0][k] = k != 0;
        mask[1][k] = k % 3 != 1;
        mask[2][k] = k < SCHEDULE_N - 40;
    }

    input_dataset sets[INPUT_DATASETS];
    input_datasets(&v, x, SCHEDULE_B, SCHEDULE_N, sets);
    write_datasets(f->input, sets, INPUT_DATASETS);
    hid_t file = test_h5_open(f->input, H5F_ACC_RDWR);
    const hsize_t dims[2] = {SCHEDULE_B, SCHEDULE_N};
    test_h5_put(file, "/mask", H5T_STD_U8LE, H5T_NATIVE_UINT8, 2, dims, &mask[0][0]);
    assert_true(H5Fclose(file) >= 0);
}

/* One dataset of an output file, as stored. */
typedef struct stored_dataset {
    char name[64];
    hid_t type;              /* its stored type */
    int rank;
    hsize_t dims[4];
    size_t size;             /* bytes */
    unsigned char *bytes;    /* read in the stored type: no conversion */
} stored_dataset;

/* Every dataset at the root of a file, in the order of their names. */
typedef struct stored_file {
    size_t count;
    stored_dataset sets[16];
} stored_file;

static void read_stored(const char *path, stored_file *s)
{
    hid_t file = test_h5_open(path, H5F_ACC_RDONLY);
    H5G_info_t info;
    assert_true(H5Gget_info(file, &info) >= 0);
    s->count = 0;
    for (hsize_t i = 0; i < info.nlinks; i++) {
        char name[64];
        ssize_t len = H5Lget_name_by_idx(file, ".", H5_INDEX_NAME, H5_ITER_INC, i, name,
                                         sizeof name, H5P_DEFAULT);
        assert_true(len > 0 && (size_t)len < sizeof name);
        hid_t object = H5Oopen(file, name, H5P_DEFAULT);
        assert_true(object >= 0);
        if (H5Iget_type(object) == H5I_DATASET) {
            assert_true(s->count < COUNT(s->sets));
            stored_dataset *d = &s->sets[s->count++];
            snprintf(d->name, sizeof d->name, "%s", name);
            d->type = H5Dget_type(object);
            assert_true(d->type >= 0);
            hid_t space = H5Dget_space(object);
            d->rank = H5Sget_simple_extent_ndims(space);
            assert_in_range(d->rank, 0, 4);
            assert_int_equal(H5Sget_simple_extent_dims(space, d->dims, NULL), d->rank);
            d->size = (size_t)H5Sget_simple_extent_npoints(space) * H5Tget_size(d->type);
            H5Sclose(space);
            d->bytes = malloc(d->size + 1);
            assert_non_null(d->bytes);
            assert_true(H5Dread(object, d->type, H5S_ALL, H5S_ALL, H5P_DEFAULT, d->bytes) >= 0);
        }
        H5Oclose(object);
    }
    assert_true(H5Fclose(file) >= 0);
}

static void stored_free(stored_file *s)
{
    for (size_t i = 0; i < s->count; i++) {
        H5Tclose(s->sets[i].type);
        free(s->sets[i].bytes);
    }
    s->count = 0;
}

/* s holds a dataset called name. */
static bool stored_has(const stored_file *s, const char *name)
{
    for (size_t i = 0; i < s->count; i++)
        if (strcmp(s->sets[i].name, name) == 0)
            return true;
    return false;
}

/* got holds the datasets of first, of the same types and shapes, byte for
 * byte; a failure names the run (what), the dataset and the first byte
 * that differs. */
static void assert_same_stored(const stored_file *got, const stored_file *first, const char *what)
{
    if (got->count != first->count)
        fail_msg("%s: %zu datasets, the first run %zu", what, got->count, first->count);
    for (size_t i = 0; i < first->count; i++) {
        const stored_dataset *a = &got->sets[i], *b = &first->sets[i];
        if (strcmp(a->name, b->name) != 0)
            fail_msg("%s: dataset %s where the first run has %s", what, a->name, b->name);
        if (H5Tequal(a->type, b->type) <= 0 || a->rank != b->rank ||
            memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]) != 0 ||
            a->size != b->size)
            fail_msg("%s: %s: another type or shape than the first run's", what, a->name);
        if (memcmp(a->bytes, b->bytes, a->size) != 0)
            for (size_t k = 0; k < a->size; k++)
                if (a->bytes[k] != b->bytes[k])
                    fail_msg("%s: %s differs from the first run's at byte %zu of %zu", what,
                             a->name, k, a->size);
    }
}

/*
 * The results do not depend on how the work is scheduled: with causal and
 * a key mask, for each softmax (the full one when the maps are saved, the
 * online one when only heads and output are), every run of threads
 * {1, 2, 3} x steps {slices of 2 items (then 1), of 1 item, 1 item in
 * blocks of rows under a small --memory} stores every dataset byte for
 * byte as the path's first run.  (Blocks of rows come one item a step:
 * the plan cuts items in blocks only when not even one fits.)
 * The report and the progress show that each run took the softmax, the
 * threads and the steps asked.
 */
static void test_results_bit_identical_across_threads_slices_and_blocks(void **state)
{
    run_fixture *f = *state;
    write_schedule_input(f, SCHEDULE_SEED);
    static const struct {
        const char *name;
        size_t slice_items;   /* --batch-slice; 0: by memory */
        size_t memory;        /* --memory; 0: the default */
        size_t items;         /* items a slice, as planned */
        bool blocks;          /* rows in blocks (else whole items) */
    } schedules[] = {
        {"2 items a slice", 2, 0, 2, false},
        {"1 item a slice", 1, 0, 1, false},
        {"1 item a slice in blocks of rows", 0, (size_t)64 << 10, 1, true},
    };
    static const int threads[] = {1, 2, 3};
    static const struct {
        const char *name;
        unsigned save;
        bool online;
    } paths[] = {
        {"maps saved (full softmax)", ATTN_SAVE_DEFAULT, false},
        {"heads and output (online softmax)", (1u << ATTN_OUT_HEADS) | (1u << ATTN_OUT_OUTPUT),
         true},
    };

    for (size_t p = 0; p < COUNT(paths); p++) {
        stored_file first = {0}, got = {0};
        bool have_first = false;
        for (size_t t = 0; t < COUNT(threads); t++)
            for (size_t s = 0; s < COUNT(schedules); s++) {
                char what[160];
                snprintf(what, sizeof what, "%s, %d threads, %s", paths[p].name, threads[t],
                         schedules[s].name);
                attn_run_options opt = default_options(f);
                opt.force = true;
                opt.names[ATTN_IN_MASK] = "mask";
                opt.variant.causal = true;
                opt.save = paths[p].save;
                opt.threads = threads[t];
                opt.slice_items = schedules[s].slice_items;
                opt.memory_budget = schedules[s].memory;
                attn_run_report report;
                progress_log log = {0};
                run_logged(&opt, &log, &report);

                /* the run took the softmax, threads and steps asked */
                assert_true(report.inputs[ATTN_IN_MASK].present);
                assert_int_equal(report.online, paths[p].online);
                assert_int_equal(report.threads, threads[t]);
                assert_int_equal(report.slice_items, schedules[s].items);
                const size_t rows = report.slice_rows;
                const size_t item = attn_run_work(&report, 0, SCHEDULE_N);
                if (schedules[s].blocks) {
                    assert_true(rows >= report.least_rows && rows < SCHEDULE_N);
                    /* a step ended after the first block of each item */
                    for (size_t b = 0; b < SCHEDULE_B; b++)
                        assert_reported(&log, b * item + attn_run_work(&report, 0, rows));
                } else {
                    assert_int_equal(rows, SCHEDULE_N);
                    /* a step ended after each slice */
                    for (size_t b = schedules[s].items; b < SCHEDULE_B; b += schedules[s].items)
                        assert_reported(&log, b * item);
                }
                assert_reported(&log, SCHEDULE_B * item);

                read_stored(f->output, have_first ? &got : &first);
                if (!have_first) {
                    /* the outputs saved, and only those */
                    assert_true(stored_has(&first, "heads"));
                    assert_true(stored_has(&first, "output"));
                    assert_int_equal(stored_has(&first, "scores"), !paths[p].online);
                    assert_int_equal(stored_has(&first, "weights"), !paths[p].online);
                    have_first = true;
                } else {
                    assert_same_stored(&got, &first, what);
                    stored_free(&got);
                }
            }
        stored_free(&first);
    }
    assert_entries(f, 2);
}

/* attn_warning_name: the names docs/warnings.md gives each kind; "" for
 * what is no kind. */
static void test_warning_names_are_the_documented_ones(void **state)
{
    (void)state;
    assert_string_equal(attn_warning_name(ATTN_WARN_MASK_HIDES_ALL), "mask-hides-all");
    assert_string_equal(attn_warning_name(ATTN_WARN_ZERO_WEIGHTS), "zero-weights");
    assert_string_equal(attn_warning_name(ATTN_WARN_SCALE_RECIPROCAL), "scale-reciprocal");
    assert_string_equal(attn_warning_name(ATTN_WARN_COUNT), "");
    assert_string_equal(attn_warning_name((attn_warning_kind)-1), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warning_names_are_the_documented_ones),
        test_with_fixture(test_run_writes_outputs_equal_to_reference),
        test_with_fixture(test_results_do_not_depend_on_slice_items),
        test_with_fixture(test_dry_run_fills_report_and_creates_no_file),
        test_with_fixture(test_existing_output_refused_without_force_replaced_with_force),
        test_with_fixture(test_output_equal_to_input_is_usage_error),
        test_with_fixture(test_cancel_already_set_gives_eintr_and_no_files),
        test_with_fixture(test_missing_dataset_gives_einput_and_no_files),
        test_with_fixture(test_nan_in_x_gives_einput_with_its_index),
        test_with_fixture(test_allow_nonfinite_runs_with_nan_in_x),
        test_with_fixture(test_in_place_adds_results_under_group_and_keeps_inputs),
        test_with_fixture(test_second_in_place_without_force_leaves_file_unchanged),
        test_with_fixture(test_progress_reaches_total_in_increasing_steps),
        test_with_fixture(test_progress_reports_each_block_of_rows),
        test_with_fixture(test_results_bit_identical_across_threads_slices_and_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
