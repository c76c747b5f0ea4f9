/*
 * test_h5.c - unit tests for attn_h5 (attn_h5in reading, attn_h5out
 * writing), in a temporary directory per test.
 *
 * Input files are written here with the HDF5 C API directly, and outputs of
 * attn_h5out are checked with it too, so that neither side of the library
 * is trusted to check the other.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>             /* mallopt (glibc) */
#include <sys/file.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>
#include <hdf5_hl.h>

#include "attn_results.h"
#include "h5/h5.h"
#include "h5/in.h"              /* attn_h5in.file */
#include "h5/out.h"             /* SCALE_BLOCK */
#include "test_support.h"
#include "test_hdf5.h"

/* Each test's fixture: a temporary directory holding plain files only. */
static int setup(void **state)
{
    return test_h5_setup(state, sizeof(test_dir), "test_h5");
}

static int teardown(void **state)
{
    return test_dir_teardown(state);
}

/* ---- writing inputs with the HDF5 API ---------------------------------- */

/* X64 (4, 3) float64 holding 10 r + c + 0.25, except X64[3][2] = 0.1 */
static double x64_value(size_t r, size_t c)
{
    return r == 3 && c == 2 ? 0.1 : 10.0 * (double)r + (double)c + 0.25;
}

/*
 * The input file:
 *   /X64      (4, 3) float64
 *   /a/b/X    (2, 2) float32 = 1.5 2.5 / 3.5 4.5
 *   /ints     (3,)   int32
 *   /mask     (2, 3) int32 = 0 5 -1 / 1 0 0
 *   /mask8    (3,)   int8 = 0 -128 1
 *   /mask64   (2,)   uint64 = 2^40, 0   (the nonzero has no low bytes set)
 *   /bool     (3,)   enum over int8 {FALSE, TRUE} = TRUE FALSE TRUE
 *   /group    a group, not a dataset
 */
static void make_input_file(const char *path)
{
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(file >= 0);

    double x64[4][3];
    for (size_t r = 0; r < 4; r++)
        for (size_t c = 0; c < 3; c++)
            x64[r][c] = x64_value(r, c);
    test_h5_put(file, "/X64", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 2, (hsize_t[]){4, 3}, x64);

    const float nested[4] = {1.5f, 2.5f, 3.5f, 4.5f};
    test_h5_put(file, "/a/b/X", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, (hsize_t[]){2, 2}, nested);

    const int32_t ints[3] = {1, 2, 3};
    test_h5_put(file, "/ints", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, (hsize_t[]){3}, ints);

    const int32_t mask[6] = {0, 5, -1, 1, 0, 0};
    test_h5_put(file, "/mask", H5T_STD_I32LE, H5T_NATIVE_INT32, 2, (hsize_t[]){2, 3}, mask);

    const int8_t mask8[3] = {0, -128, 1};
    test_h5_put(file, "/mask8", H5T_STD_I8LE, H5T_NATIVE_INT8, 1, (hsize_t[]){3}, mask8);

    const uint64_t mask64[2] = {(uint64_t)1 << 40, 0};
    test_h5_put(file, "/mask64", H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, (hsize_t[]){2}, mask64);

    hid_t boolean = H5Tenum_create(H5T_NATIVE_INT8);
    int8_t no = 0, yes = 1;
    assert_true(H5Tenum_insert(boolean, "FALSE", &no) >= 0);
    assert_true(H5Tenum_insert(boolean, "TRUE", &yes) >= 0);
    const int8_t flags[3] = {1, 0, 1};
    test_h5_put(file, "/bool", boolean, boolean, 1, (hsize_t[]){3}, flags);
    H5Tclose(boolean);

    hid_t group = H5Gcreate2(file, "/group", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(group >= 0);
    H5Gclose(group);
    assert_true(H5Fclose(file) >= 0);
}

static attn_h5in *open_input(test_dir *f)
{
    attn_h5in *in = NULL;
    attn_error err = {0};
    const char *path = test_path(f, "in.h5");
    make_input_file(path);
    int status = attn_h5in_open(path, &in, &err);
    if (status != ATTN_OK)
        fail_msg("attn_h5in_open: %d %s", status, err.msg);
    assert_non_null(in);
    return in;
}

/* ---- attn_h5out then attn_h5in ------------------------------------------ */

/* weights (4, 2, 3) float32: 100 b + 10 h + k + 0.5 */
static float weights_value(size_t b, size_t h, size_t k)
{
    return 100.0f * (float)b + 10.0f * (float)h + (float)k + 0.5f;
}

/* output (4, 5) float64: b - d / 3 */
static double output_value(size_t b, size_t d)
{
    return (double)b - (double)d / 3.0;
}

/* Writes /runs/first/{weights, output} with attn_h5out, rows in two calls. */
static void write_outputs(const char *path)
{
    attn_h5out *out = NULL;
    attn_error err = {0};
    int status = attn_h5out_create(path, "dest.h5", "/runs/first", &out, &err);
    if (status != ATTN_OK)
        fail_msg("attn_h5out_create: %d %s", status, err.msg);

    const size_t w_dims[3] = {4, 2, 3}, w_chunk[3] = {2, 2, 3};
    const char *const w_labels[3] = {"batch", "head", "key"};
    attn_dataset_spec w_spec = {.name = "weights", .precision = ATTN_F32, .rank = 3,
                                .dims = w_dims, .chunk = w_chunk, .labels = w_labels,
                                .description = "test weights", .compress = 0};
    const size_t o_dims[2] = {4, 5}, o_chunk[2] = {1, 5};
    const char *const o_labels[2] = {"batch", "d_model"};
    attn_dataset_spec o_spec = {.name = "output", .precision = ATTN_F64, .rank = 2,
                                .dims = o_dims, .chunk = o_chunk, .labels = o_labels,
                                .description = "test output", .compress = 4};
    int w_handle = -1, o_handle = -1;
    assert_int_equal(attn_h5out_add_dataset(out, &w_spec, &w_handle, &err), ATTN_OK);
    assert_int_equal(attn_h5out_add_dataset(out, &o_spec, &o_handle, &err), ATTN_OK);
    assert_int_not_equal(w_handle, o_handle);

    float weights[4][2][3];
    double output[4][5];
    for (size_t b = 0; b < 4; b++) {
        for (size_t h = 0; h < 2; h++)
            for (size_t k = 0; k < 3; k++)
                weights[b][h][k] = weights_value(b, h, k);
        for (size_t d = 0; d < 5; d++)
            output[b][d] = output_value(b, d);
    }
    /* rows 0..0 and 1..3 of weights, rows 0..1 and 2..3 of output */
    assert_int_equal(attn_h5out_write(out, w_handle, 0, 1, weights[0], &err), ATTN_OK);
    assert_int_equal(attn_h5out_write(out, w_handle, 1, 3, weights[1], &err), ATTN_OK);
    assert_int_equal(attn_h5out_write(out, o_handle, 0, 2, output[0], &err), ATTN_OK);
    assert_int_equal(attn_h5out_write(out, o_handle, 2, 2, output[2], &err), ATTN_OK);

    assert_int_equal(attn_h5out_attr_string(out, "command", "attnrun in.h5 -o out.h5", &err), ATTN_OK);
    assert_int_equal(attn_h5out_attr_double(out, "scale", 0.125, &err), ATTN_OK);
    assert_int_equal(attn_h5out_attr_int(out, "heads", 2, &err), ATTN_OK);
    assert_int_equal(attn_h5out_attr_int(out, "offset", -7000000000LL, &err), ATTN_OK);
    status = attn_h5out_close(out, &err);
    if (status != ATTN_OK)
        fail_msg("attn_h5out_close: %d %s", status, err.msg);
}

/* out.h5 of the test's directory, holding write_outputs' results. */
static const char *written_outputs(void **state)
{
    const char *path = test_path(*state, "out.h5");
    write_outputs(path);
    return path;
}

/* Describes the required float dataset `name` of in, asserting that it is
 * present, of shape dims (rank). */
static attn_tensor_info describe_float(attn_h5in *in, const char *name, size_t rank,
                                       const size_t *dims)
{
    attn_error err = {0};
    attn_tensor_info info = {.name = name};
    if (attn_h5in_describe(in, ATTN_DATA_FLOAT, true, &info, &err) != ATTN_OK)
        fail_msg("%s: %s", name, err.msg);
    assert_true(info.present);
    assert_int_equal(info.rank, rank);
    for (size_t a = 0; a < rank; a++)
        assert_int_equal(info.dims[a], dims[a]);
    return info;
}

static void test_round_trip_read_back_with_h5in(void **state)
{
    const char *path = written_outputs(state);
    attn_h5in *in = NULL;
    attn_error err = {0};
    assert_int_equal(attn_h5in_open(path, &in, &err), ATTN_OK);
    attn_tensor_info w = describe_float(in, "/runs/first/weights", 3, (size_t[]){4, 2, 3});
    /* no leading slash */
    attn_tensor_info o = describe_float(in, "runs/first/output", 2, (size_t[]){4, 5});

    /* weights rows 1..3 as float and as double: crosses both writes */
    float w32[3][2][3];
    double w64[3][2][3];
    assert_int_equal(attn_h5in_read_floats(in, w.name, ATTN_F32, 1, 3, w32, &err), ATTN_OK);
    assert_int_equal(attn_h5in_read_floats(in, w.name, ATTN_F64, 1, 3, w64, &err), ATTN_OK);
    for (size_t b = 0; b < 3; b++)
        for (size_t h = 0; h < 2; h++)
            for (size_t k = 0; k < 3; k++) {
                assert_true(w32[b][h][k] == weights_value(b + 1, h, k));
                assert_true(w64[b][h][k] == (double)weights_value(b + 1, h, k));
            }

    /* output rows 0..3 exactly as written (float64 on disk) */
    double o64[4][5];
    assert_int_equal(attn_h5in_read_floats(in, o.name, ATTN_F64, 0, 4, o64, &err), ATTN_OK);
    for (size_t b = 0; b < 4; b++)
        for (size_t d = 0; d < 5; d++)
            assert_true(o64[b][d] == output_value(b, d));
    attn_h5in_close(in);
}

/* Reads the scalar attribute `name` of `object` into value (mem_type). */
static void read_attribute(hid_t object, const char *name, hid_t mem_type, void *value)
{
    hid_t attr = H5Aopen(object, name, H5P_DEFAULT);
    assert_true(attr >= 0);
    assert_true(H5Aread(attr, mem_type, value) >= 0);
    H5Aclose(attr);
}

static void assert_string_attribute(hid_t object, const char *name, const char *expected)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    assert_true(H5Tset_size(type, H5T_VARIABLE) >= 0);
    char *value = NULL;
    read_attribute(object, name, type, &value);
    assert_non_null(value);
    assert_string_equal(value, expected);
    H5free_memory(value);
    H5Tclose(type);
}

/* A lookup in a file HDF5 no longer has open (its id closed under the
 * reader) fails as the input's failure, not as memory that ran out. */
static void test_lookup_without_the_file_is_the_inputs_failure(void **state)
{
    const char *path = written_outputs(state);
    attn_h5in *in = NULL;
    attn_error err = {0};
    assert_int_equal(attn_h5in_open(path, &in, &err), ATTN_OK);
    assert_true(H5Fclose(in->file) >= 0);
    attn_tensor_info w = {.name = "/runs/first/weights"};
    assert_int_equal(attn_h5in_describe(in, ATTN_DATA_FLOAT, true, &w, &err), ATTN_EINPUT);
    assert_non_null(strstr(err.msg, "cannot look up /runs/first/weights"));
    in->file = H5I_INVALID_HID;
    attn_h5in_close(in);
}

static void test_round_trip_types_labels_chunks_attributes(void **state)
{
    const char *path = written_outputs(state);

    hid_t file = test_h5_open(path, H5F_ACC_RDONLY);
    hid_t group = H5Gopen2(file, "/runs/first", H5P_DEFAULT);
    assert_true(group >= 0);

    /* element types: IEEE little-endian float32 and float64 */
    hid_t w = H5Dopen2(group, "weights", H5P_DEFAULT), o = H5Dopen2(group, "output", H5P_DEFAULT);
    assert_true(w >= 0 && o >= 0);
    hid_t w_type = H5Dget_type(w), o_type = H5Dget_type(o);
    assert_true(H5Tequal(w_type, H5T_IEEE_F32LE) > 0);
    assert_true(H5Tequal(o_type, H5T_IEEE_F64LE) > 0);
    H5Tclose(w_type);
    H5Tclose(o_type);

    /* chunks as given */
    hid_t dcpl = H5Dget_create_plist(w);
    hsize_t chunk[3] = {0};
    assert_int_equal(H5Pget_chunk(dcpl, 3, chunk), 3);
    assert_int_equal(chunk[0], 2);
    assert_int_equal(chunk[1], 2);
    assert_int_equal(chunk[2], 3);
    H5Pclose(dcpl);

    /* axis labels, and the shared dimension scale "batch" holding 0..3 */
    const char *labels[3] = {"batch", "head", "key"};
    for (unsigned axis = 0; axis < 3; axis++) {
        char label[32] = "";
        assert_true(H5DSget_label(w, axis, label, sizeof label) > 0);
        assert_string_equal(label, labels[axis]);
        assert_int_equal(H5DSget_num_scales(w, axis), 1);
    }
    char label[32] = "";
    assert_true(H5DSget_label(o, 1, label, sizeof label) > 0);
    assert_string_equal(label, "d_model");
    hid_t batch = H5Dopen2(group, "batch", H5P_DEFAULT);
    assert_true(batch >= 0);
    assert_true(H5DSis_scale(batch) > 0);
    assert_true(H5DSis_attached(w, batch, 0) > 0);
    assert_true(H5DSis_attached(o, batch, 0) > 0);
    long long indices[4] = {-1, -1, -1, -1};
    assert_true(H5Dread(batch, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, indices) >= 0);
    for (long long i = 0; i < 4; i++)
        assert_int_equal(indices[i], i);
    H5Dclose(batch);

    /* descriptions and group attributes */
    assert_string_attribute(w, "description", "test weights");
    assert_string_attribute(group, "command", "attnrun in.h5 -o out.h5");
    double scale = 0;
    long long heads = 0, offset = 0;
    read_attribute(group, "scale", H5T_NATIVE_DOUBLE, &scale);
    read_attribute(group, "heads", H5T_NATIVE_LLONG, &heads);
    read_attribute(group, "offset", H5T_NATIVE_LLONG, &offset);
    assert_true(scale == 0.125);
    assert_int_equal(heads, 2);
    assert_true(offset == -7000000000LL);

    H5Dclose(w);
    H5Dclose(o);
    H5Gclose(group);
    H5Fclose(file);
}

/* Opening the --in-place copy marks HDF5's parse of it (a crash there is
 * the file's, status 3) and unmarks it before returning, so that a crash
 * afterwards is attnrun's own (status 1); creating an output marks
 * nothing. */
static void test_out_open_marks_the_parse_only_while_opening(void **state)
{
    const char *path = written_outputs(state);

    attn_h5out *out = NULL;
    attn_error err = {0};
    assert_false(attn_parsing_file());
    assert_int_equal(attn_h5out_open(path, "dest.h5", "/runs/first", &out, &err), ATTN_OK);
    assert_false(attn_parsing_file());
    assert_int_equal(attn_h5out_close(out, &err), ATTN_OK);
    attn_parsing_enter();               /* inside a parse, it stays one */
    assert_int_equal(attn_h5out_open(path, "dest.h5", "/runs/first", &out, &err), ATTN_OK);
    assert_true(attn_parsing_file());
    attn_parsing_leave();
    assert_false(attn_parsing_file());
    assert_int_equal(attn_h5out_close(out, &err), ATTN_OK);
}

/* --force: the results attnrun wrote give way; with their scales
 * detached; without force nothing does. */
static void test_out_clear_result_only_with_force(void **state)
{
    const char *path = written_outputs(state);

    attn_h5out *out = NULL;
    attn_error err = {0};
    assert_int_equal(attn_h5out_open(path, "dest.h5", "/runs/first", &out, &err), ATTN_OK);
    assert_int_equal(attn_h5out_clear_result(out, "nothing", false, &err), ATTN_OK);
    assert_int_equal(attn_h5out_clear_result(out, "weights", false, &err), ATTN_EUSAGE);
    assert_non_null(strstr(err.msg, "'weights'"));
    assert_int_equal(err.hint, ATTN_HINT_REPLACE);          /* replacing it would do */
    assert_null(strstr(err.msg, "--"));                      /* named by the caller */
    assert_int_equal(attn_h5out_clear_result(out, "weights", true, &err), ATTN_OK);
    /* batch is still attached to output: shared at its length, refused at
     * another even with force */
    assert_int_equal(attn_h5out_clear_axis(out, "batch", 4, true, &err), ATTN_OK);
    assert_int_equal(attn_h5out_clear_axis(out, "batch", 5, true, &err), ATTN_EUSAGE);
    assert_non_null(strstr(err.msg, "'batch'"));
    /* head was attached to weights only: free to replace with force */
    assert_int_equal(attn_h5out_clear_axis(out, "head", 3, false, &err), ATTN_EUSAGE);
    assert_int_equal(attn_h5out_clear_axis(out, "head", 3, true, &err), ATTN_OK);
    assert_int_equal(attn_h5out_close(out, &err), ATTN_OK);

    hid_t file = test_h5_open(path, H5F_ACC_RDONLY);
    assert_int_equal(H5Lexists(file, "/runs/first/weights", H5P_DEFAULT), 0);
    assert_int_equal(H5Lexists(file, "/runs/first/head", H5P_DEFAULT), 0);
    assert_true(H5Lexists(file, "/runs/first/output", H5P_DEFAULT) > 0);
    assert_true(H5Lexists(file, "/runs/first/batch", H5P_DEFAULT) > 0);
    hid_t batch = H5Dopen2(file, "/runs/first/batch", H5P_DEFAULT);
    hid_t output = H5Dopen2(file, "/runs/first/output", H5P_DEFAULT);
    assert_true(H5DSis_attached(output, batch, 0) > 0);
    H5Dclose(output);
    H5Dclose(batch);
    H5Fclose(file);
}

/* What attnrun did not write is never replaced, force or not; attributes
 * and links are separate names. */
static void test_out_clear_never_touches_a_user_object(void **state)
{
    const char *path = written_outputs(state);
    hid_t file = test_h5_open(path, H5F_ACC_RDWR);
    hsize_t three = 3;
    hid_t space = H5Screate_simple(1, &three, NULL);
    const char *const user[] = {"/runs/first/mine", "/runs/first/query", "/runs/first/precision"};
    for (size_t i = 0; i < 3; i++) {
        hid_t d = H5Dcreate2(file, user[i], H5T_NATIVE_INT, space, H5P_DEFAULT, H5P_DEFAULT,
                             H5P_DEFAULT);
        assert_true(d >= 0);
        H5Dclose(d);
    }
    H5Sclose(space);
    H5Fclose(file);

    attn_h5out *out = NULL;
    attn_error err = {0};
    assert_int_equal(attn_h5out_open(path, "dest.h5", "/runs/first", &out, &err), ATTN_OK);
    assert_int_equal(attn_h5out_clear_result(out, "mine", true, &err), ATTN_EUSAGE);
    assert_non_null(strstr(err.msg, "'mine'"));
    assert_non_null(strstr(err.msg, "did not write"));
    assert_int_equal(err.hint, ATTN_HINT_OTHER_GROUP);
    assert_int_equal(attn_h5out_clear_axis(out, "query", 3, true, &err), ATTN_EUSAGE);
    assert_non_null(strstr(err.msg, "'query'"));
    /* a dataset named precision is no attribute precision */
    assert_int_equal(attn_h5out_clear_attribute(out, "precision", false, &err), ATTN_OK);
    /* the group's attributes are not attnrun's provenance (no
     * attnrun_version): refused even with force */
    assert_int_equal(attn_h5out_clear_attribute(out, "scale", false, &err), ATTN_EUSAGE);
    assert_int_equal(attn_h5out_clear_attribute(out, "scale", true, &err), ATTN_EUSAGE);
    assert_non_null(strstr(err.msg, "'scale'"));
    assert_int_equal(attn_h5out_close(out, &err), ATTN_OK);

    file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    for (size_t i = 0; i < 3; i++)
        assert_true(H5Lexists(file, user[i], H5P_DEFAULT) > 0);
    assert_true(H5Aexists_by_name(file, "/runs/first", "scale", H5P_DEFAULT) > 0);
    H5Fclose(file);
}

static void test_out_group_through_a_dataset_is_usage_error(void **state)
{
    const char *path = written_outputs(state);

    /* /runs/first/weights is a dataset: no group can live under it */
    attn_h5out *out = *state;   /* must be reset to NULL */
    attn_error err = {0};
    assert_int_equal(attn_h5out_open(path, "dest.h5", "/runs/first/weights/sub", &out, &err),
                     ATTN_EUSAGE);
    assert_null(out);
    assert_non_null(strstr(err.msg, "dest.h5"));           /* the label, */
    assert_null(strstr(err.msg, "out.h5"));                /* not the path */
    assert_non_null(strstr(err.msg, "/runs/first/weights"));

    /* and a new file's group under an existing group is created */
    assert_int_equal(attn_h5out_open(path, "dest.h5", "/runs/second/deeper", &out, &err), ATTN_OK);
    assert_int_equal(attn_h5out_close(out, &err), ATTN_OK);
    hid_t file = test_h5_open(path, H5F_ACC_RDONLY);
    assert_true(H5Lexists(file, "/runs/second/deeper", H5P_DEFAULT) > 0);
    assert_true(H5Lexists(file, "/runs/first/weights", H5P_DEFAULT) > 0);
    H5Fclose(file);
}

/* ---- attn_h5in ------------------------------------------------------------ */

static void test_read_float64_dataset_as_f32_and_f64(void **state)
{
    attn_h5in *in = open_input(*state);
    attn_error err = {0};
    describe_float(in, "/X64", 2, (size_t[]){4, 3});

    /* rows 2..3 */
    float x32[2][3];
    double x64[2][3];
    assert_int_equal(attn_h5in_read_floats(in, "/X64", ATTN_F32, 2, 2, x32, &err), ATTN_OK);
    assert_int_equal(attn_h5in_read_floats(in, "/X64", ATTN_F64, 2, 2, x64, &err), ATTN_OK);
    for (size_t r = 0; r < 2; r++)
        for (size_t c = 0; c < 3; c++) {
            assert_true(x64[r][c] == x64_value(r + 2, c));
            /* converted by rounding to nearest: (float)0.1 exactly */
            assert_true(x32[r][c] == (float)x64_value(r + 2, c));
        }
    assert_true(x32[1][2] == 0.1f);
    attn_h5in_close(in);
}

/* One value by its index, as the file holds it: every element of /X64
 * (4, 3), and /a/b/X (2, 2) float32 at [1, 0]; an index past the end is
 * an error. */
static void test_read_value_at_each_index(void **state)
{
    attn_h5in *in = open_input(*state);
    attn_error err = {0};
    double value;
    for (size_t r = 0; r < 4; r++)
        for (size_t c = 0; c < 3; c++) {
            value = -1.0;
            assert_int_equal(attn_h5in_read_value(in, "/X64", (size_t[]){r, c}, 2, &value, &err),
                             ATTN_OK);
            assert_true(value == x64_value(r, c));
        }
    assert_int_equal(attn_h5in_read_value(in, "/a/b/X", (size_t[]){1, 0}, 2, &value, &err),
                     ATTN_OK);
    assert_true(value == 3.5);
    assert_true(attn_h5in_read_value(in, "/X64", (size_t[]){4, 0}, 2, &value, &err) < 0);
    assert_non_null(strstr(err.msg, "X64"));
    attn_h5in_close(in);
}

static void test_read_floats_out_of_range_is_an_error(void **state)
{
    attn_h5in *in = open_input(*state);
    attn_error err = {0};
    double rows[4][3];
    int status = attn_h5in_read_floats(in, "/X64", ATTN_F64, 2, 3, rows, &err);   /* 2..4 of 4 */
    assert_true(status < 0);
    assert_non_null(strstr(err.msg, "X64"));
    attn_h5in_close(in);
}

/* One attn_h5in_describe of the input file and what it must give. */
typedef struct describe_case {
    const char *name;
    attn_data_kind kind;
    bool required;
    bool stale;             /* the info says present, rank 9, beforehand */
    int status;
    bool present;           /* afterwards */
    size_t rank;            /* when present */
    const char *message;    /* in the error, or NULL */
} describe_case;

static const describe_case describe_cases[] = {
    /* an integer dataset is no float, required or optional */
    {"/ints", ATTN_DATA_FLOAT, true, false, ATTN_EINPUT, false, 0, "/ints"},
    {"/ints", ATTN_DATA_FLOAT, false, false, ATTN_EINPUT, false, 0, NULL},
    /* and the other way round: a float dataset is no mask */
    {"/X64", ATTN_DATA_MASK, true, false, ATTN_EINPUT, false, 0, "/X64"},
    /* integer and boolean masks are fine */
    {"/mask", ATTN_DATA_MASK, true, false, ATTN_OK, true, 2, NULL},
    {"/bool", ATTN_DATA_MASK, true, false, ATTN_OK, true, 1, NULL},
    /* a missing optional dataset, or one in a missing group, is absent */
    {"/b_Q", ATTN_DATA_FLOAT, false, true, ATTN_OK, false, 0, NULL},
    {"/a/zzz/X", ATTN_DATA_FLOAT, false, true, ATTN_OK, false, 0, NULL},
    /* a missing required one, or a group, is an error */
    {"/b_Q", ATTN_DATA_FLOAT, true, false, ATTN_EINPUT, false, 0, "/b_Q"},
    {"/group", ATTN_DATA_FLOAT, true, false, ATTN_EINPUT, false, 0, "/group"},
};

static void test_describe_checks_kind_and_presence(void **state)
{
    attn_h5in *in = open_input(*state);
    for (size_t i = 0; i < COUNT(describe_cases); i++) {
        const describe_case *c = &describe_cases[i];
        attn_error err = {0};
        attn_tensor_info info = {.name = c->name, .present = c->stale, .rank = c->stale ? 9 : 0};
        int status = attn_h5in_describe(in, c->kind, c->required, &info, &err);
        if (status != c->status || info.present != c->present)
            fail_msg("case %zu (%s): status %d, present %d (message: '%s')", i, c->name, status,
                     info.present, err.msg);
        if (c->present)
            assert_int_equal(info.rank, c->rank);
        if (c->message != NULL && strstr(err.msg, c->message) == NULL)
            fail_msg("case %zu: message '%s' does not name %s", i, err.msg, c->message);
    }
    attn_h5in_close(in);
}

static void test_nested_path(void **state)
{
    attn_h5in *in = open_input(*state);
    describe_float(in, "/a/b/X", 2, (size_t[]){2, 2});
    double values[2][2];
    attn_error err = {0};
    assert_int_equal(attn_h5in_read_floats(in, "/a/b/X", ATTN_F64, 0, 2, values, &err), ATTN_OK);
    assert_true(values[0][0] == 1.5 && values[0][1] == 2.5);
    assert_true(values[1][0] == 3.5 && values[1][1] == 4.5);
    float row[2];
    assert_int_equal(attn_h5in_read_floats(in, "a/b/X", ATTN_F32, 1, 1, row, &err), ATTN_OK);
    assert_true(row[0] == 3.5f && row[1] == 4.5f);
    attn_h5in_close(in);
}

/* Rows of a mask dataset of the input file and the keep flags they give. */
static const struct {
    const char *name;
    size_t first, rows, count;
    unsigned char keep[6];
} mask_cases[] = {
    {"/mask", 0, 2, 6, {0, 1, 1, 1, 0, 0}},     /* int32 0 5 -1 / 1 0 0 */
    {"/mask", 1, 1, 3, {1, 0, 0}},              /* its row 1 alone */
    {"/mask8", 0, 3, 3, {0, 1, 1}},             /* int8 0, -128, 1 */
    {"/mask64", 0, 2, 2, {1, 0}},               /* uint64 2^40, 0: no narrowing to 0 */
    {"/bool", 0, 3, 3, {1, 0, 1}},              /* enum TRUE FALSE TRUE */
};

static void test_read_masks_of_every_integer_width_and_bool(void **state)
{
    attn_h5in *in = open_input(*state);
    attn_error err = {0};
    unsigned char keep[6];
    for (size_t i = 0; i < COUNT(mask_cases); i++) {
        memset(keep, 0xee, sizeof keep);
        int status = attn_h5in_read_mask(in, mask_cases[i].name, mask_cases[i].first,
                                         mask_cases[i].rows, keep, &err);
        if (status != ATTN_OK)
            fail_msg("%s: %d %s", mask_cases[i].name, status, err.msg);
        assert_memory_equal(keep, mask_cases[i].keep, mask_cases[i].count);
    }
    /* a float dataset is no mask */
    assert_int_equal(attn_h5in_read_mask(in, "/X64", 0, 1, keep, &err), ATTN_EINPUT);
    attn_h5in_close(in);
}

/* The listing for messages (attn_h5in_list_objects): every group and
 * dataset by hard links, with its class and shape; a soft link and an
 * external link lead to nothing listed. */
static void test_list_objects_by_hard_links_only(void **state)
{
    test_dir *f = *state;
    const char *path = test_path(f, "in.h5");
    make_input_file(path);
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(file >= 0);
    assert_true(H5Lcreate_soft("/a", file, "soft", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    assert_true(H5Lcreate_external("elsewhere.h5", "/", file, "ext", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    assert_true(H5Fclose(file) >= 0);
    attn_h5in *in = NULL;
    attn_error err = {0};
    attn_h5in_list list;
    assert_int_equal(attn_h5in_open(path, &in, &err), ATTN_OK);
    /* glibc fills what malloc returns with 0xa5 bytes while the list is
     * made: a free of an entry past the count (64 made room for 10) frees
     * a pointer of 0xa5 bytes and aborts, where fresh zeroed pages would
     * hide it */
    mallopt(M_PERTURB, 0x5a);
    assert_int_equal(attn_h5in_list_objects(in, &list, &err), ATTN_OK);
    mallopt(M_PERTURB, 0);
    static const char *const expected[] = {"/X64", "/a", "/a/b", "/a/b/X", "/bool", "/group",
                                           "/ints", "/mask", "/mask64", "/mask8"};
    assert_int_equal(list.count, COUNT(expected));
    assert_false(list.cut);
    for (size_t i = 0; i < list.count; i++)
        assert_string_equal(list.objects[i].path, expected[i]);   /* depth first, by name */
    const attn_h5in_object *x64 = &list.objects[0], *a = &list.objects[1];
    assert_true(x64->floating && !x64->integer && !x64->group && !x64->ours);
    assert_int_equal(x64->rank, 2);
    assert_true(x64->dims[0] == 4 && x64->dims[1] == 3);
    assert_true(a->group);
    assert_true(list.objects[4].integer && !list.objects[4].floating);    /* the enum */
    assert_true(list.objects[6].integer);
    attn_h5in_list_free(&list);
    assert_int_equal(list.count, 0);
    attn_h5in_close(in);
}

static void test_open_missing_file(void **state)
{
    test_dir *f = *state;
    attn_h5in *in = (attn_h5in *)f;   /* must be reset to NULL */
    attn_error err = {0};
    const char *path = test_path(f, "missing.h5");
    assert_int_equal(attn_h5in_open(path, &in, &err), ATTN_EINPUT);
    assert_null(in);
    assert_non_null(strstr(err.msg, "missing.h5"));
}

/* attn_results_add_labels takes string datasets of rank 1 or 2 (its
 * header): rank 0 and 3 are refused, nothing added; 1 and 2 are taken. */
static void test_results_labels_of_rank_1_or_2_only(void **state)
{
    test_dir *f = *state;
    attn_error err = {0};
    attn_results_out *out = NULL;
    assert_int_equal(attn_results_create(test_path(f, "labels.h5"), "labels.h5", &out, &err), ATTN_OK);
    static const size_t dims[3] = {2, 3, 4};
    static const char *const axes[3] = {"batch", "query", "extra"};
    int handle = -1;
    for (size_t rank = 0; rank <= 3; rank += 3) {
        memset(&err, 0, sizeof err);
        assert_int_not_equal(attn_results_add_labels(out, "bad", rank, dims, axes, "no", &handle, &err),
                             ATTN_OK);
        assert_non_null(strstr(err.msg, "string dataset bad of rank"));
    }
    assert_int_equal(attn_results_add_labels(out, "one", 1, dims + 1, axes + 1, "rank 1", &handle, &err),
                     ATTN_OK);
    assert_int_equal(attn_results_add_labels(out, "two", 2, dims, axes, "rank 2", &handle, &err), ATTN_OK);
    assert_int_equal(attn_results_finish(out, &err), ATTN_OK);
}

static void test_open_text_file(void **state)
{
    test_dir *f = *state;
    attn_h5in *in = NULL;
    attn_error err = {0};
    const char *path = test_path(f, "notes.txt");
    static const char text[] = "this is not an HDF5 file\n";
    test_write_file(path, text, strlen(text));
    assert_int_equal(attn_h5in_open(path, &in, &err), ATTN_EINPUT);
    assert_null(in);
    assert_non_null(strstr(err.msg, "notes.txt"));

    /* and a directory */
    assert_int_equal(attn_h5in_open(f->dir, &in, &err), ATTN_EINPUT);
    assert_null(in);
}

/* A dimension scale longer than the block of indices it is written in
 * (SCALE_BLOCK, lib/h5/out.h): 0, 1, ... to the end, across the blocks. */
static void test_long_axis_scale_holds_every_index(void **state)
{
    test_dir *f = *state;
    const char *path = test_path(f, "long.h5");
    attn_h5out *out = NULL;
    attn_error err = {0};
    assert_int_equal(attn_h5out_create(path, "long.h5", "/", &out, &err), ATTN_OK);
    const size_t length = 2 * SCALE_BLOCK + 5;
    const size_t dims[2] = {length, 1}, chunk[2] = {4096, 1};
    const char *const labels[2] = {"batch", "d_model"};
    const attn_dataset_spec spec = {.name = "output", .precision = ATTN_F32, .rank = 2,
                                    .dims = dims, .chunk = chunk, .labels = labels,
                                    .description = "long", .compress = 0};
    int handle = -1;
    assert_int_equal(attn_h5out_add_dataset(out, &spec, &handle, &err), ATTN_OK);
    assert_int_equal(attn_h5out_close(out, &err), ATTN_OK);
    long long *indices = malloc(length * sizeof *indices);
    assert_non_null(indices);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), batch = H5Dopen2(file, "batch", H5P_DEFAULT);
    assert_true(batch >= 0);
    assert_true(H5Dread(batch, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, indices) >= 0);
    H5Dclose(batch);
    H5Fclose(file);
    for (size_t i = 0; i < length; i++)
        if (indices[i] != (long long)i)
            fail_msg("batch[%zu] = %lld", i, indices[i]);
    free(indices);
}

/* HDF5_USE_FILE_LOCKING read as HDF5 reads it: exactly FALSE or 0 turn the
 * locks off, exactly BEST_EFFORT keeps them but lets a file system without
 * locks pass; anything else, or nothing, locks. */
static void test_locking_setting_read_as_hdf5_reads_it(void **state)
{
    (void)state;
    static const struct {
        const char *value;          /* NULL: unset */
        bool disabled, best_effort;
    } cases[] = {
        {NULL, false, false},   {"FALSE", true, false},  {"0", true, false},
        {"BEST_EFFORT", false, true}, {"TRUE", false, false}, {"1", false, false},
        {"false", false, false}, {"GALSE", false, false}, {"FALSE ", false, false},
        {"", false, false},     {"BEST_EFFORTS", false, false},
    };
    const char *was = getenv("HDF5_USE_FILE_LOCKING");
    char *saved = was != NULL ? strdup(was) : NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].value == NULL)
            unsetenv("HDF5_USE_FILE_LOCKING");
        else
            setenv("HDF5_USE_FILE_LOCKING", cases[i].value, 1);
        bool best_effort = !cases[i].best_effort;
        const bool disabled = attn_h5_locking_disabled(&best_effort);
        if (disabled != cases[i].disabled || best_effort != cases[i].best_effort)
            fail_msg("HDF5_USE_FILE_LOCKING=%s: disabled %d, best effort %d",
                     cases[i].value ? cases[i].value : "(unset)", disabled, best_effort);
    }
    if (saved != NULL)
        setenv("HDF5_USE_FILE_LOCKING", saved, 1);
    else
        unsetenv("HDF5_USE_FILE_LOCKING");
    free(saved);
}

/* The input's lock held through another open file (as an HDF5 writer
 * holds it): without `wait` the open is refused at once, ATTN_EIO, "locked
 * by another program", nothing opened; once it is let go, the same open
 * succeeds.  Skipped when HDF5_USE_FILE_LOCKING turns the locks off. */
static void test_open_refuses_a_file_locked_by_another(void **state)
{
    test_dir *f = *state;
    bool best_effort;
    if (attn_h5_locking_disabled(&best_effort))
        skip();
    const char *path = test_path(f, "held.h5");
    make_input_file(path);
    const int holder = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(holder >= 0);
    assert_int_equal(flock(holder, LOCK_EX), 0);
    const attn_h5in_options opt = {.lock = ATTN_LOCK_SHARED};
    attn_h5in *in = NULL;
    attn_error err = {0};
    const int status = attn_h5in_open_with(path, &opt, &in, &err);
    close(holder);
    if (status != ATTN_EIO || in != NULL || strstr(err.msg, "held.h5: locked by another program") == NULL)
        fail_msg("status %d, input %p, '%s'", status, (void *)in, err.msg);
    assert_int_equal(attn_h5in_open_with(path, &opt, &in, &err), ATTN_OK);
    attn_h5in_close(in);
}

/* Element sizes attnrun does not read (in_safety.c: floats of 2, 4 or 8
 * bytes, integers of 1 to 8): refused by describe with the sizes each
 * class takes, "PATH: dataset D has N-byte CLASS elements; SIZES expected". */
static void test_describe_refuses_unsupported_element_sizes(void **state)
{
    test_dir *f = *state;
    const char *path = test_path(f, "sizes.h5");
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(file >= 0);
    hsize_t dims[1] = {3};
    hid_t space = H5Screate_simple(1, dims, NULL);
    /* a 16-byte float (a long double's layout, spelled out) */
    hid_t wide = H5Tcopy(H5T_IEEE_F64LE);
    assert_true(H5Tset_size(wide, 16) >= 0);
    /* a 3-byte integer */
    hid_t odd = H5Tcopy(H5T_STD_I32LE);
    assert_true(H5Tset_precision(odd, 24) >= 0);
    assert_true(H5Tset_size(odd, 3) >= 0);
    hid_t d1 = H5Dcreate2(file, "/wide", wide, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t d2 = H5Dcreate2(file, "/odd", odd, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(d1 >= 0 && d2 >= 0);
    H5Dclose(d1);
    H5Dclose(d2);
    H5Tclose(wide);
    H5Tclose(odd);
    H5Sclose(space);
    H5Fclose(file);

    attn_h5in *in = NULL;
    attn_error err = {0};
    assert_int_equal(attn_h5in_open(path, &in, &err), ATTN_OK);
    attn_tensor_info info = {.name = "/wide"};
    assert_int_equal(attn_h5in_describe(in, ATTN_DATA_FLOAT, true, &info, &err), ATTN_EINPUT);
    if (strstr(err.msg, ": dataset /wide has 16-byte floating-point elements; "
                        "2, 4 or 8 bytes expected") == NULL)
        fail_msg("float: '%s'", err.msg);
    assert_false(info.present);
    attn_tensor_info mask = {.name = "/odd"};
    assert_int_equal(attn_h5in_describe(in, ATTN_DATA_MASK, true, &mask, &err), ATTN_EINPUT);
    if (strstr(err.msg, ": dataset /odd has 3-byte integer elements; 1 to 8 bytes expected") == NULL)
        fail_msg("integer: '%s'", err.msg);
    assert_false(mask.present);
    attn_h5in_close(in);
}

/* Reading rows of a group, never described: the lookup's own refusal
 * ("is not a dataset", ATTN_EINPUT) comes back, nothing is read. */
static void test_read_floats_of_a_group_is_refused(void **state)
{
    attn_h5in *in = open_input(*state);
    attn_error err = {0};
    double rows[4] = {0};
    assert_int_equal(attn_h5in_read_floats(in, "/group", ATTN_F64, 0, 1, rows, &err), ATTN_EINPUT);
    if (strstr(err.msg, "/group is not a dataset") == NULL)
        fail_msg("'%s'", err.msg);
    attn_h5in_close(in);
}

/* The innermost non-empty description on HDF5's error stack, found here. */
static herr_t innermost(unsigned depth, const H5E_error2_t *e, void *data)
{
    char *buf = data;
    (void)depth;
    if (buf[0] == '\0' && e->desc != NULL && e->desc[0] != '\0')
        snprintf(buf, 256, "%s", e->desc);
    return 0;
}

/* attn_h5_error_detail (h5.h): the most specific message on the stack,
 * whatever the caller's buffer held before. */
static void test_error_detail_is_the_innermost_description(void **state)
{
    test_dir *f = *state;
    hid_t file = H5Fcreate(test_path(f, "e.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(file >= 0);
    assert_true(H5Dopen2(file, "/absent", H5P_DEFAULT) < 0);
    char want[256] = "";
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, want);
    assert_true(want[0] != '\0');
    char buf[256];
    memset(buf, 'x', sizeof buf);     /* a caller's stale buffer */
    assert_ptr_equal(attn_h5_error_detail(buf, sizeof buf), buf);
    assert_string_equal(buf, want);
    /* an empty stack: the fallback */
    H5Eclear2(H5E_DEFAULT);
    memset(buf, 'x', sizeof buf);
    assert_string_equal(attn_h5_error_detail(buf, sizeof buf), "HDF5 gave no reason");
    H5Fclose(file);
}

/* An output group reached through a soft or an external link is refused
 * (out_open.c): "PATH: group G: PREFIX is a soft link, not a group of this
 * file; not followed", ATTN_EUSAGE, with the link's kind in words. */
static void test_out_group_through_a_link_names_its_kind(void **state)
{
    test_dir *f = *state;
    const char *path = test_path(f, "links.h5");
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(file >= 0);
    hid_t g = H5Gcreate2(file, "/real", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(g >= 0);
    H5Gclose(g);
    assert_true(H5Lcreate_soft("/real", file, "/soft", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    assert_true(H5Lcreate_external("other.h5", "/x", file, "/ext", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    H5Fclose(file);

    static const struct {
        const char *group, *words;
    } cases[] = {
        {"/soft/runs", ": group /soft/runs: /soft is a soft link, not a group of this file; not followed"},
        {"/ext", ": group /ext: /ext is an external link, not a group of this file; not followed"},
    };
    for (size_t i = 0; i < COUNT(cases); i++) {
        attn_h5out *out = NULL;
        attn_error err = {0};
        int status = attn_h5out_open(path, "links.h5", cases[i].group, &out, &err);
        if (status != ATTN_EUSAGE || strstr(err.msg, cases[i].words) == NULL)
            fail_msg("%s: status %d, '%s'", cases[i].group, status, err.msg);
        assert_null(out);
    }
}

/* Rows past a dataset's end: the write fails (ATTN_EIO, "cannot write
 * /NAME: REASON"), never reported done. */
static void test_out_write_past_the_end_is_an_error(void **state)
{
    test_dir *f = *state;
    attn_h5out *out = NULL;
    attn_error err = {0};
    assert_int_equal(attn_h5out_create(test_path(f, "short.h5"), "short.h5", "/", &out, &err), ATTN_OK);
    const size_t dims[2] = {4, 5}, chunk[2] = {1, 5};
    const char *const labels[2] = {"batch", "d_model"};
    attn_dataset_spec spec = {.name = "output", .precision = ATTN_F64, .rank = 2, .dims = dims,
                              .chunk = chunk, .labels = labels, .description = "short",
                              .compress = 0};
    int handle = -1;
    const size_t wide_dims[5] = {1, 1, 1, 1, 1};
    attn_dataset_spec wide = spec;      /* rank 5: refused, and said so */
    wide.rank = 5;
    wide.dims = wide.chunk = wide_dims;
    assert_int_equal(attn_h5out_add_dataset(out, &wide, &handle, &err), ATTN_EIO);
    assert_non_null(strstr(err.msg, "short.h5: dataset output of rank 5"));
    assert_int_equal(attn_h5out_add_dataset(out, &spec, &handle, &err), ATTN_OK);
    double rows[2][5] = {{0}};
    int status = attn_h5out_write(out, handle, 3, 2, rows, &err);    /* rows 3..4 of 4 */
    if (status != ATTN_EIO || strstr(err.msg, "short.h5: cannot write /output: ") == NULL)
        fail_msg("status %d, '%s'", status, err.msg);
    attn_h5out_close(out, &err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        test_with_fixture(test_round_trip_read_back_with_h5in),
        test_with_fixture(test_round_trip_types_labels_chunks_attributes),
        test_with_fixture(test_out_open_marks_the_parse_only_while_opening),
        test_with_fixture(test_out_clear_result_only_with_force),
        test_with_fixture(test_out_clear_never_touches_a_user_object),
        test_with_fixture(test_out_group_through_a_dataset_is_usage_error),
        test_with_fixture(test_read_float64_dataset_as_f32_and_f64),
        test_with_fixture(test_read_value_at_each_index),
        test_with_fixture(test_read_floats_out_of_range_is_an_error),
        test_with_fixture(test_describe_checks_kind_and_presence),
        test_with_fixture(test_nested_path),
        test_with_fixture(test_read_masks_of_every_integer_width_and_bool),
        test_with_fixture(test_list_objects_by_hard_links_only),
        test_with_fixture(test_open_missing_file),
        test_with_fixture(test_results_labels_of_rank_1_or_2_only),
        test_with_fixture(test_open_text_file),
        test_with_fixture(test_describe_refuses_unsupported_element_sizes),
        test_with_fixture(test_read_floats_of_a_group_is_refused),
        test_with_fixture(test_error_detail_is_the_innermost_description),
        test_with_fixture(test_out_group_through_a_link_names_its_kind),
        test_with_fixture(test_out_write_past_the_end_is_an_error),
        test_with_fixture(test_long_axis_scale_holds_every_index),
        cmocka_unit_test(test_locking_setting_read_as_hdf5_reads_it),
        test_with_fixture(test_lookup_without_the_file_is_the_inputs_failure),
        test_with_fixture(test_open_refuses_a_file_locked_by_another),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
