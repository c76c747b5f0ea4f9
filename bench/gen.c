/* gen.c - attnbench-gen: writes the input file of one benchmark workload.
 *
 *     attnbench-gen gpt2 build/bench/work/gpt2.h5
 *     attnbench-gen --list
 *
 * The file holds, at its root, X (B, n, D), W_Q (D, H*d_k) = (D, D),
 * W_K, W_V (D, G*d_k), W_O (D, D) and, for workloads with biases, b_Q, b_K,
 * b_V, b_O (D): all contiguous float32 little-endian, the layout attnrun
 * reads by default. Values come from splitmix64 seeded by the workload's
 * name (or its row's seed), so the same command always writes the same bytes:
 *     X ~ U(-1, 1)    weights ~ U(-1, 1) / sqrt(D)    biases ~ U(-0.1, 0.1)
 * The weights' 1/sqrt(D) keeps Q, K, V near unit scale, so the softmax sees
 * the spread of scores a trained model gives rather than saturating.
 * A repeat_kv row draws W_K and W_V as (D, G*d_k), exactly as its seed's
 * workload does, and stores each K/V head's d_k columns once per query head
 * of its group, (D, H*d_k), as HF's repeat_kv: the same attention as plain
 * multi-head attention. A row with an input of another workload writes
 * that workload's file.
 *
 * The file is written under OUT.tmp and renamed onto OUT at the end: the
 * runner regenerates an input only when it is missing, so an interrupted
 * run must never leave a file it would take as complete.
 *
 * Exit status: 0 done, 1 HDF5 or file error, 2 usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "workloads.h"

#define PROG "attnbench-gen"

/* Values per H5Dwrite: 4 MiB of float32 keeps memory small for any B. */
#define GEN_BLOCK_VALUES ((hsize_t)1 << 20)

/* splitmix64 (Steele, Lea, Flood 2014): tiny, fast, and good enough that
 * the benchmark's inputs look like noise to every kernel. */
struct rng {
    uint64_t state;
};

static uint64_t rng_next(struct rng *rng)
{
    uint64_t z = (rng->state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi): the top 24 bits are exactly representable in a float. */
static float rng_uniform(struct rng *rng, float lo, float hi)
{
    float unit = (float)(rng_next(rng) >> 40) * 0x1p-24f;
    return lo + (hi - lo) * unit;
}

/* FNV-1a of the workload name: each workload gets its own fixed stream. */
static uint64_t seed_for(const char *name)
{
    uint64_t h = UINT64_C(0xCBF29CE484222325);
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * UINT64_C(0x100000001B3);
    return h;
}

/* HDF5's innermost error description, for one-line messages. */
static herr_t keep_innermost(unsigned n, const H5E_error2_t *entry, void *data)
{
    if (n == 0 && entry->desc)
        snprintf(data, 256, "%s", entry->desc);
    return 0;
}

static const char *h5_reason(char reason[256])
{
    snprintf(reason, 256, "HDF5 error");
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_innermost, reason);
    return reason;
}

static int h5_fail(const char *path, const char *what)
{
    char reason[256];
    fprintf(stderr, PROG ": %s: %s: %s\n", path, what, h5_reason(reason));
    return -1;
}

/* Writes dataset `name` of shape dims[0..rank-1], filled from rng with
 * U(lo, hi), in blocks of whole rows of dims[0]. With repeat > 1 (rank 2),
 * each row draws dims[1] / repeat values and stores every run of `group` of
 * them `repeat` times in a row. Returns 0 or -1 (reported). */
static int write_uniform(hid_t file, const char *path, const char *name, int rank,
                         const hsize_t dims[], hsize_t group, hsize_t repeat,
                         struct rng *rng, float lo, float hi)
{
    int status = -1;
    hid_t space = H5I_INVALID_HID, dset = H5I_INVALID_HID, mem = H5I_INVALID_HID;
    hid_t dcpl = H5I_INVALID_HID;
    float *block = NULL;
    hsize_t row = 1;
    for (int i = 1; i < rank; i++)
        row *= dims[i];
    hsize_t rows_per_block = row >= GEN_BLOCK_VALUES ? 1 : GEN_BLOCK_VALUES / row;
    if (rows_per_block > dims[0])
        rows_per_block = dims[0];

    space = H5Screate_simple(rank, dims, NULL);
    if (space < 0) {
        h5_fail(path, "cannot make a dataspace");
        goto out;
    }
    /* No modification times: the same workload gives the same bytes. */
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (dcpl < 0 || H5Pset_obj_track_times(dcpl, 0) < 0) {
        h5_fail(path, "cannot make a dataset property list");
        goto out;
    }
    dset = H5Dcreate2(file, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (dset < 0) {
        h5_fail(path, name);
        goto out;
    }
    block = malloc((size_t)(rows_per_block * row) * sizeof *block);
    if (!block) {
        fprintf(stderr, PROG ": %s: out of memory for %s\n", path, name);
        goto out;
    }
    hsize_t start[3] = {0, 0, 0}, count[3];
    for (int i = 0; i < rank; i++)
        count[i] = dims[i];
    for (hsize_t r0 = 0; r0 < dims[0]; r0 += count[0]) {
        count[0] = dims[0] - r0 < rows_per_block ? dims[0] - r0 : rows_per_block;
        start[0] = r0;
        hsize_t values = count[0] * row;
        if (repeat <= 1) {
            for (hsize_t i = 0; i < values; i++)
                block[i] = rng_uniform(rng, lo, hi);
        } else {
            for (hsize_t at = 0; at < values; at += group * repeat) {
                for (hsize_t i = 0; i < group; i++)
                    block[at + i] = rng_uniform(rng, lo, hi);
                for (hsize_t r = 1; r < repeat; r++)
                    memcpy(block + at + r * group, block + at, (size_t)group * sizeof *block);
            }
        }
        mem = H5Screate_simple(1, &values, NULL);
        if (mem < 0
            || H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL) < 0
            || H5Dwrite(dset, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, block) < 0) {
            h5_fail(path, name);
            goto out;
        }
        H5Sclose(mem);
        mem = H5I_INVALID_HID;
    }
    status = 0;
out:
    free(block);
    if (mem >= 0)
        H5Sclose(mem);
    if (dset >= 0 && H5Dclose(dset) < 0 && status == 0)
        status = h5_fail(path, name);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    return status;
}

/* Writes every dataset of workload w into the open file, in a fixed order so
 * that the stream of random numbers always lands in the same places. */
static int write_workload(hid_t file, const char *path, const struct bench_workload *w)
{
    static const char *const weights[] = {"W_Q", "W_K", "W_V", "W_O"};
    static const char *const biases[] = {"b_Q", "b_K", "b_V", "b_O"};
    struct rng rng = {seed_for(w->seed ? w->seed : w->name)};
    const hsize_t D = (hsize_t)w->d_model, d_k = D / (hsize_t)w->heads;
    const hsize_t G = (hsize_t)bench_kv_heads(w), H = (hsize_t)w->heads;
    const hsize_t repeat = w->repeat_kv ? H / G : 1;
    const hsize_t x_dims[3] = {(hsize_t)w->batch, (hsize_t)w->seq, D};
    const hsize_t q_dims[2] = {D, D};
    const hsize_t kv_dims[2] = {D, G * d_k * repeat};
    const hsize_t b_dims[1] = {D};
    const float w_bound = 1.0f / sqrtf((float)w->d_model);

    if (write_uniform(file, path, "X", 3, x_dims, 1, 1, &rng, -1.0f, 1.0f) != 0)
        return -1;
    for (int i = 0; i < 4; i++) {
        int kv = i == 1 || i == 2;
        if (write_uniform(file, path, weights[i], 2, kv ? kv_dims : q_dims, d_k,
                          kv ? repeat : 1, &rng, -w_bound, w_bound) != 0)
            return -1;
    }
    for (int i = 0; w->biases && i < 4; i++)
        if (write_uniform(file, path, biases[i], 1, b_dims, 1, 1, &rng, -0.1f, 0.1f) != 0)
            return -1;
    return 0;
}

/* Writes workload w to path via path.tmp. Returns 0 or -1 (reported). */
static int generate(const struct bench_workload *w, const char *path)
{
    char temp[4096];
    if (snprintf(temp, sizeof temp, "%s.tmp", path) >= (int)sizeof temp) {
        fprintf(stderr, PROG ": %s: path too long\n", path);
        return -1;
    }
    /* The root group without modification times either. */
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    if (fcpl < 0 || H5Pset_obj_track_times(fcpl, 0) < 0) {
        if (fcpl >= 0)
            H5Pclose(fcpl);
        return h5_fail(temp, "cannot make a file property list");
    }
    hid_t file = H5Fcreate(temp, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    H5Pclose(fcpl);
    if (file < 0)
        return h5_fail(temp, "cannot create the file");
    int status = write_workload(file, temp, w);
    if (H5Fclose(file) < 0 && status == 0)
        status = h5_fail(temp, "cannot close the file");
    if (status == 0 && rename(temp, path) != 0) {
        fprintf(stderr, PROG ": %s: cannot rename to %s: %s\n", temp, path, strerror(errno));
        status = -1;
    }
    if (status != 0)
        remove(temp);
    return status;
}

static void print_list(void)
{
    int width = 6;
    for (size_t i = 0; i < BENCH_N_WORKLOADS; i++)
        if ((int)strlen(bench_workloads[i].name) > width)
            width = (int)strlen(bench_workloads[i].name);
    printf("%-*s %6s %6s %5s %3s  %s\n", width, "name", "B", "n", "D", "H", "options");
    for (size_t i = 0; i < BENCH_N_WORKLOADS; i++) {
        const struct bench_workload *w = &bench_workloads[i];
        printf("%-*s %6ld %6ld %5ld %3ld  --heads %ld%s%s%s", width, w->name, w->batch, w->seq,
               w->d_model, w->heads, w->heads, w->causal ? " --causal" : "",
               w->save ? " --save " : "", w->save ? w->save : "");
        if (bench_kv_heads_arg(w))
            printf(" --kv-heads %ld", bench_kv_heads_arg(w));
        for (int j = 0; j < BENCH_MAX_ARGS && w->args[j]; j++)
            printf(" %s", w->args[j]);
        printf("%s", w->biases ? "  (input has biases)" : "");
        if (w->repeat_kv)
            printf("  (W_K, W_V: %ld K/V heads repeated to %ld)", bench_kv_heads(w), w->heads);
        if (w->seed)
            printf("  (values of %s)", w->seed);
        if (w->input)
            printf("  (reads %s's input)", w->input);
        printf("\n");
    }
}

#define USAGE "usage: " PROG " WORKLOAD OUT.h5 | " PROG " --list"

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        print_list();
        return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
    }
    if (argc != 3) {
        fprintf(stderr, USAGE "\n");
        return 2;
    }
    const struct bench_workload *w = bench_find_workload(argv[1]);
    if (!w) {
        fprintf(stderr, PROG ": unknown workload '%s' (see --list)\n", argv[1]);
        return 2;
    }
    w = bench_input_of(w);   /* a row reading another's input writes that file */
    /* Errors are reported as one line from the innermost HDF5 message. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return generate(w, argv[2]) == 0 ? 0 : 1;
}
