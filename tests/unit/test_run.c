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

enum { B = 3, N = 4, D = 4, H = 2, DK = 2, DV = 2 };

#define REFERENCE_TOLERANCE 1e-5   /* float32 pipeline against a double loop */


/* A per-test temporary directory holding in.h5 and whatever a run leaves. */
typedef struct run_fixture {
    char dir[128];
    char input[256];     /* dir/in.h5 */
    char output[256];    /* dir/out.h5 */
    char path[256];      /* scratch for fixture_path */
    attn_atomic transaction;
} run_fixture;

static const char *fixture_path(run_fixture *f, const char *name)
{
    snprintf(f->path, sizeof f->path, "%s/%s", f->dir, name);
    return f->path;
}

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

/* A float32 dataset `name` of shape dims (rank). */
static void put_floats(hid_t file, const char *name, int rank, const hsize_t *dims,
                       const float *values)
{
    hid_t space = H5Screate_simple(rank, dims, NULL);
    assert_true(space >= 0);
    hid_t dset = H5Dcreate2(file, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                            H5P_DEFAULT);
    assert_true(dset >= 0);
    assert_true(H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0);
    H5Dclose(dset);
    H5Sclose(space);
}

/* Writes the input file of the legend at path, with values v. */
static void write_input(const char *path, const input_values *v)
{
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(file >= 0);
    put_floats(file, "/X", 3, (hsize_t[]){B, N, D}, &v->x[0][0][0]);
    put_floats(file, "/W_Q", 2, (hsize_t[]){D, H * DK}, &v->w_q[0][0]);
    put_floats(file, "/W_K", 2, (hsize_t[]){D, H * DK}, &v->w_k[0][0]);
    put_floats(file, "/W_V", 2, (hsize_t[]){D, H * DV}, &v->w_v[0][0]);
    put_floats(file, "/W_O", 2, (hsize_t[]){H * DV, D}, &v->w_o[0][0]);
    put_floats(file, "/b_Q", 1, (hsize_t[]){H * DK}, v->b_q);
    put_floats(file, "/b_K", 1, (hsize_t[]){H * DK}, v->b_k);
    put_floats(file, "/b_V", 1, (hsize_t[]){H * DV}, v->b_v);
    put_floats(file, "/b_O", 1, (hsize_t[]){D}, v->b_o);
    assert_true(H5Fclose(file) >= 0);
}

static int setup(void **state)
{
    run_fixture *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -1;
    if (test_make_dir(f->dir, sizeof f->dir, "test_run") != 0) {
        free(f);
        return -1;
    }
    snprintf(f->input, sizeof f->input, "%s/in.h5", f->dir);
    snprintf(f->output, sizeof f->output, "%s/out.h5", f->dir);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);   /* failures are expected here */
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    run_fixture *f = *state;
    int result = test_remove_dir(f->dir);
    free(f);
    return result;
}

/* Writes the default input into the fixture's in.h5. */
static void write_default_input(run_fixture *f)
{
    input_values v;
    input_values_fill(&v);
    write_input(f->input, &v);
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

/* attn_run that must succeed. */
static void run_ok(const attn_run_options *opt, attn_run_report *report)
{
    attn_error err = {0};
    int status = attn_run(opt, report, &err);
    if (status != ATTN_OK)
        fail_msg("attn_run: %d %s", status, err.msg);
}

/* ---- the reference --------------------------------------------------------- */

/* Everything the pipeline computes, in double. */
typedef struct reference {
    double scores[B][H][N][N];
    double weights[B][H][N][N];
    double heads[B][H][N][DV];
    double output[B][N][D];
} reference;

/* Q_i = X W_Q^(i) + b_Q^(i) ... output = concat(heads) W_O + b_O, straight
 * from the definitions, for every item and head. */
static void reference_forward(const input_values *v, reference *r)
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

/* Asserts that dataset `name` of file is float32 LE of shape dims (rank) and
 * reads it into values (count elements of mem_type). */
static void read_dataset(hid_t file, const char *name, int rank, const hsize_t *dims,
                         hid_t mem_type, void *values)
{
    hid_t dset = H5Dopen2(file, name, H5P_DEFAULT);
    if (dset < 0)
        fail_msg("no dataset %s", name);
    hid_t type = H5Dget_type(dset);
    assert_true(H5Tequal(type, H5T_IEEE_F32LE) > 0);
    H5Tclose(type);
    hid_t space = H5Dget_space(dset);
    hsize_t found[8] = {0};
    assert_int_equal(H5Sget_simple_extent_ndims(space), rank);
    assert_int_equal(H5Sget_simple_extent_dims(space, found, NULL), rank);
    for (int a = 0; a < rank; a++)
        if (found[a] != dims[a])
            fail_msg("%s: axis %d is %llu, expected %llu", name, a, (unsigned long long)found[a],
                     (unsigned long long)dims[a]);
    H5Sclose(space);
    assert_true(H5Dread(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0);
    H5Dclose(dset);
}

/* The four default outputs of a file, as stored (float) or widened. */
typedef struct outputs_f32 {
    float scores[B][H][N][N];
    float weights[B][H][N][N];
    float heads[B][H][N][DV];
    float output[B][N][D];
} outputs_f32;

/* Reads scores, weights, heads and output of group (e.g. "/" or "/res"). */
static void read_outputs(const char *path, const char *group, outputs_f32 *o)
{
    char name[128];
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0)
        fail_msg("cannot open %s", path);
    const char *sep = strcmp(group, "/") == 0 ? "" : "/";
    snprintf(name, sizeof name, "%s%sscores", group, sep);
    read_dataset(file, name, 4, (hsize_t[]){B, H, N, N}, H5T_NATIVE_FLOAT, o->scores);
    snprintf(name, sizeof name, "%s%sweights", group, sep);
    read_dataset(file, name, 4, (hsize_t[]){B, H, N, N}, H5T_NATIVE_FLOAT, o->weights);
    snprintf(name, sizeof name, "%s%sheads", group, sep);
    read_dataset(file, name, 4, (hsize_t[]){B, H, N, DV}, H5T_NATIVE_FLOAT, o->heads);
    snprintf(name, sizeof name, "%s%soutput", group, sep);
    read_dataset(file, name, 3, (hsize_t[]){B, N, D}, H5T_NATIVE_FLOAT, o->output);
    assert_true(H5Fclose(file) >= 0);
}

/* ---- files in the scratch directory -------------------------------------- */

/* Entries of dir other than . and ..; *temps counts those carrying
 * ATTN_TEMP_MARKER. */
static size_t count_entries(const char *path, size_t *temps)
{
    size_t count = test_count_entries(path, ATTN_TEMP_MARKER, temps);
    assert_true(count != (size_t)-1);
    return count;
}

/* The directory holds exactly `expected` entries and no temporary. */
static void assert_entries(const char *dir, size_t expected)
{
    size_t temps;
    size_t count = count_entries(dir, &temps);
    assert_int_equal(temps, 0);
    assert_int_equal(count, expected);
}

static bool file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* The bytes of a file (malloc'd) and their count. */
static unsigned char *read_bytes(const char *path, size_t *len)
{
    FILE *file = fopen(path, "rb");
    assert_non_null(file);
    assert_int_equal(fseek(file, 0, SEEK_END), 0);
    long size = ftell(file);
    assert_true(size >= 0);
    rewind(file);
    unsigned char *data = malloc((size_t)size + 1);
    assert_non_null(data);
    assert_int_equal(fread(data, 1, (size_t)size, file), (size_t)size);
    fclose(file);
    *len = (size_t)size;
    return data;
}

static void assert_same_bytes(const unsigned char *before, size_t before_len, const char *path)
{
    size_t len;
    unsigned char *now = read_bytes(path, &len);
    assert_int_equal(len, before_len);
    assert_memory_equal(now, before, len);
    free(now);
}

/* ---- successful runs ------------------------------------------------------ */

static void test_run_writes_outputs_equal_to_reference(void **state)
{
    run_fixture *f = *state;
    input_values v;
    input_values_fill(&v);
    write_input(f->input, &v);
    attn_run_options opt = default_options(f);
    attn_run_report report;
    run_ok(&opt, &report);

    assert_true(file_exists(f->output));
    assert_entries(f->dir, 2);                  /* in.h5, out.h5; no temporary */
    assert_string_equal(f->transaction.temp_path, "");

    static reference r;
    static outputs_f32 o;
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
    static outputs_f32 results[3];
    for (size_t s = 0; s < 3; s++) {
        char name[32];
        snprintf(name, sizeof name, "out%zu.h5", slices[s]);
        const char *path = fixture_path(f, name);
        attn_run_options opt = default_options(f);
        opt.output = path;
        opt.slice_items = slices[s];
        attn_run_report report;
        run_ok(&opt, &report);
        assert_int_equal(report.slice_items, expected_items[s]);
        read_outputs(path, "/", &results[s]);
    }
    assert_entries(f->dir, 4);
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
    assert_entries(f->dir, 1);

    /* total_bytes follows --save */
    opt.save = (1u << ATTN_OUT_OUTPUT) | (1u << ATTN_OUT_Q);
    run_ok(&opt, &report);
    assert_int_equal(report.total_bytes, expected[ATTN_OUT_OUTPUT] + expected[ATTN_OUT_Q]);
    assert_entries(f->dir, 1);
}

/* ---- refusals ----------------------------------------------------------- */

static void test_existing_output_refused_without_force_replaced_with_force(void **state)
{
    run_fixture *f = *state;
    write_default_input(f);
    FILE *old = fopen(f->output, "w");
    assert_non_null(old);
    fputs("an older result\n", old);
    assert_int_equal(fclose(old), 0);
    size_t old_len;
    unsigned char *old_bytes = read_bytes(f->output, &old_len);

    attn_run_options opt = default_options(f);
    attn_run_report report;
    attn_error err = {0};
    assert_int_equal(attn_run(&opt, &report, &err), ATTN_EUSAGE);
    assert_non_null(strstr(err.msg, "out.h5"));
    assert_same_bytes(old_bytes, old_len, f->output);
    assert_entries(f->dir, 2);
    free(old_bytes);

    opt.force = true;
    run_ok(&opt, &report);
    assert_entries(f->dir, 2);
    static outputs_f32 o;
    read_outputs(f->output, "/", &o);          /* now an HDF5 file with the results */
}

static void test_output_equal_to_input_is_usage_error(void **state)
{
    run_fixture *f = *state;
    write_default_input(f);
    size_t in_len;
    unsigned char *in_bytes = read_bytes(f->input, &in_len);

    attn_run_options opt = default_options(f);
    opt.output = f->input;
    opt.force = true;                           /* not even with --force */
    attn_run_report report;
    attn_error err = {0};
    assert_int_equal(attn_run(&opt, &report, &err), ATTN_EUSAGE);

    /* another spelling of the same path */
    opt.output = fixture_path(f, "./in.h5");
    assert_int_equal(attn_run(&opt, &report, &err), ATTN_EUSAGE);

    assert_same_bytes(in_bytes, in_len, f->input);
    assert_entries(f->dir, 1);
    free(in_bytes);
}

static void test_cancel_already_set_gives_eintr_and_no_files(void **state)
{
    run_fixture *f = *state;
    write_default_input(f);
    volatile sig_atomic_t cancel = 1;
    attn_run_options opt = default_options(f);
    opt.cancel = &cancel;
    attn_run_report report;
    attn_error err = {0};
    assert_int_equal(attn_run(&opt, &report, &err), ATTN_EINTR);
    assert_non_null(strstr(err.msg, "interrupted"));
    assert_false(file_exists(f->output));
    assert_entries(f->dir, 1);
    assert_string_equal(f->transaction.temp_path, "");
}

static void test_missing_dataset_gives_einput_and_no_files(void **state)
{
    run_fixture *f = *state;
    write_default_input(f);
    attn_run_options opt = default_options(f);
    opt.names[ATTN_IN_WQ] = "nope";
    attn_run_report report;
    attn_error err = {0};
    assert_int_equal(attn_run(&opt, &report, &err), ATTN_EINPUT);
    assert_non_null(strstr(err.msg, "nope"));
    assert_false(file_exists(f->output));
    assert_entries(f->dir, 1);
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
    attn_run_report report;
    attn_error err = {0};
    assert_int_equal(attn_run(&opt, &report, &err), ATTN_EINPUT);
    assert_non_null(strstr(err.msg, "dataset X "));
    assert_non_null(strstr(err.msg, "[1, 2, 3]"));
    assert_entries(f->dir, 1);

    /* the index is in X, not in the slice that held it */
    opt.slice_items = 1;
    memset(&err, 0, sizeof err);
    assert_int_equal(attn_run(&opt, &report, &err), ATTN_EINPUT);
    assert_non_null(strstr(err.msg, "[1, 2, 3]"));
    assert_entries(f->dir, 1);
}

static void test_allow_nonfinite_runs_with_nan_in_x(void **state)
{
    run_fixture *f = *state;
    write_input_with_nan(f);
    attn_run_options opt = default_options(f);
    opt.allow_nonfinite = true;
    attn_run_report report;
    run_ok(&opt, &report);
    assert_entries(f->dir, 2);

    static outputs_f32 o;
    read_outputs(f->output, "/", &o);
    /* item 1 holds the NaN and its results are NaN; items 0 and 2 are finite */
    assert_true(isnan(o.output[1][2][0]));
    for (size_t b = 0; b < B; b += 2)
        for (size_t i = 0; i < N; i++)
            for (size_t d = 0; d < D; d++)
                assert_true(isfinite(o.output[b][i][d]));
}

/* ---- in place ------------------------------------------------------------ */

static void test_in_place_adds_results_under_group_and_keeps_inputs(void **state)
{
    run_fixture *f = *state;
    input_values v;
    input_values_fill(&v);
    write_input(f->input, &v);
    attn_run_options opt = default_options(f);
    opt.output = NULL;
    opt.in_place = true;
    opt.group = "/res";
    attn_run_report report;
    run_ok(&opt, &report);
    assert_entries(f->dir, 1);                  /* in.h5 replaced, no temporary */

    static reference r;
    static outputs_f32 o;
    reference_forward(&v, &r);
    read_outputs(f->input, "/res", &o);
    for (size_t i = 0; i < B * N * D; i++)
        assert_near((&o.output[0][0][0])[i], (&r.output[0][0][0])[i], REFERENCE_TOLERANCE);

    /* the original datasets are still there, with their values */
    hid_t file = H5Fopen(f->input, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(file >= 0);
    assert_int_equal(H5Lexists(file, "/output", H5P_DEFAULT), 0);   /* not at the root */
    static input_values back;
    read_dataset(file, "/X", 3, (hsize_t[]){B, N, D}, H5T_NATIVE_FLOAT, back.x);
    read_dataset(file, "/W_Q", 2, (hsize_t[]){D, H * DK}, H5T_NATIVE_FLOAT, back.w_q);
    read_dataset(file, "/W_O", 2, (hsize_t[]){H * DV, D}, H5T_NATIVE_FLOAT, back.w_o);
    read_dataset(file, "/b_O", 1, (hsize_t[]){D}, H5T_NATIVE_FLOAT, back.b_o);
    assert_true(H5Fclose(file) >= 0);
    assert_memory_equal(back.x, v.x, sizeof v.x);
    assert_memory_equal(back.w_q, v.w_q, sizeof v.w_q);
    assert_memory_equal(back.w_o, v.w_o, sizeof v.w_o);
    assert_memory_equal(back.b_o, v.b_o, sizeof v.b_o);
}

static void test_second_in_place_without_force_leaves_file_unchanged(void **state)
{
    run_fixture *f = *state;
    write_default_input(f);
    attn_run_options opt = default_options(f);
    opt.output = NULL;
    opt.in_place = true;
    opt.group = "/res";
    attn_run_report report;
    run_ok(&opt, &report);

    size_t len;
    unsigned char *bytes = read_bytes(f->input, &len);
    attn_error err = {0};
    assert_int_equal(attn_run(&opt, &report, &err), ATTN_EUSAGE);
    assert_non_null(strstr(err.msg, "/res"));
    assert_same_bytes(bytes, len, f->input);
    assert_entries(f->dir, 1);
    free(bytes);

    /* with force the names are replaced */
    opt.force = true;
    run_ok(&opt, &report);
    assert_entries(f->dir, 1);
    static outputs_f32 o;
    read_outputs(f->input, "/res", &o);
}

/* ---- progress ------------------------------------------------------------ */

/* What the progress callback saw. */
typedef struct progress_log {
    size_t calls;
    size_t done[8];      /* of the first 8 calls */
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

static void test_progress_reaches_total_in_increasing_steps(void **state)
{
    run_fixture *f = *state;
    write_default_input(f);
    progress_log log = {.increasing = true, .same_total = true};
    attn_run_options opt = default_options(f);
    opt.slice_items = 1;
    opt.progress = record_progress;
    opt.progress_context = &log;
    attn_run_report report;
    run_ok(&opt, &report);
    assert_int_equal(log.calls, B);             /* one call per slice of one item */
    assert_true(log.increasing);
    assert_true(log.same_total);
    assert_int_equal(log.total, B * N);         /* in query rows */
    assert_int_equal(log.last_done, B * N);
    for (size_t i = 0; i < B; i++)
        assert_int_equal(log.done[i], (i + 1) * N);

    /* slices of 2: done = 2 n, then 3 n */
    progress_log pairs = {.increasing = true, .same_total = true};
    opt.slice_items = 2;
    opt.progress_context = &pairs;
    opt.force = true;
    run_ok(&opt, &report);
    assert_int_equal(pairs.calls, 2);
    assert_int_equal(pairs.done[0], 2 * N);
    assert_int_equal(pairs.done[1], 3 * N);
    assert_true(pairs.increasing);
    assert_int_equal(pairs.total, B * N);
    assert_int_equal(pairs.last_done, B * N);
}

/* One item of LONG_N queries whose maps exceed the step: the rows come in
 * blocks, and progress is reported after each block. */
enum { LONG_N = 600 };

static void test_progress_reports_each_block_of_rows(void **state)
{
    run_fixture *f = *state;
    static float x[LONG_N * D];
    input_values v;
    input_values_fill(&v);
    for (size_t i = 0; i < LONG_N * D; i++)
        x[i] = pattern(i, 37, 23);
    hid_t file = H5Fcreate(f->input, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(file >= 0);
    put_floats(file, "/X", 3, (hsize_t[]){1, LONG_N, D}, x);
    put_floats(file, "/W_Q", 2, (hsize_t[]){D, H * DK}, &v.w_q[0][0]);
    put_floats(file, "/W_K", 2, (hsize_t[]){D, H * DK}, &v.w_k[0][0]);
    put_floats(file, "/W_V", 2, (hsize_t[]){D, H * DV}, &v.w_v[0][0]);
    put_floats(file, "/W_O", 2, (hsize_t[]){H * DV, D}, &v.w_o[0][0]);
    assert_true(H5Fclose(file) >= 0);

    attn_run_report report;
    progress_log log = {.increasing = true, .same_total = true, .report = &report};
    attn_run_options opt = default_options(f);
    opt.save = 1u << ATTN_OUT_WEIGHTS;
    opt.memory_budget = (size_t)1 << 20;
    opt.progress = record_progress;
    opt.progress_context = &log;
    run_ok(&opt, &report);
    const size_t rows = report.slice_rows, blocks = (LONG_N + rows - 1) / rows;
    assert_true(rows < LONG_N);                 /* else this test shows nothing */
    assert_in_range(blocks, 2, 8);
    assert_int_equal(log.planned_n, LONG_N);    /* the plan was there at the first call */
    assert_int_equal(log.planned_rows, rows);
    assert_int_equal(log.calls, blocks);
    assert_true(log.increasing);
    assert_true(log.same_total);
    assert_int_equal(log.total, LONG_N);
    for (size_t b = 0; b < blocks; b++)
        assert_int_equal(log.done[b], (b + 1) * rows < LONG_N ? (b + 1) * rows : LONG_N);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_run_writes_outputs_equal_to_reference, setup, teardown),
        cmocka_unit_test_setup_teardown(test_results_do_not_depend_on_slice_items, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dry_run_fills_report_and_creates_no_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_existing_output_refused_without_force_replaced_with_force, setup, teardown),
        cmocka_unit_test_setup_teardown(test_output_equal_to_input_is_usage_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_already_set_gives_eintr_and_no_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_dataset_gives_einput_and_no_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nan_in_x_gives_einput_with_its_index, setup, teardown),
        cmocka_unit_test_setup_teardown(test_allow_nonfinite_runs_with_nan_in_x, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_place_adds_results_under_group_and_keeps_inputs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_in_place_without_force_leaves_file_unchanged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_progress_reaches_total_in_increasing_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_progress_reports_each_block_of_rows, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
