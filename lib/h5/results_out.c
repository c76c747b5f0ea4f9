/*
 * results_out.c - an analysis of results written to a new file
 * (attn_results.h): the public face of the output writer (out_*.c) for
 * the commands that read results and write what they find, such as
 * attnrun rollout and attnrun heads.
 *
 * Shapes are what the file holds; a block is (count[0], ...) of one
 * dataset, row-major in the caller's buffer.
 */
#include "attn_results.h"

#include "core/core.h"
#include "h5/h5.h"

#include <stdlib.h>

struct attn_results_out {
    attn_h5out *out;
};

int attn_results_create(const char *path, const char *label, attn_results_out **out,
                        attn_error *err)
{
    attn_results_out *o = attn_calloc(1, sizeof *o);
    if (o == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    int status = attn_h5out_create(path, label, "/", &o->out, err);
    if (status != ATTN_OK) {
        free(o);
        return status;
    }
    *out = o;
    return ATTN_OK;
}

int attn_results_add(attn_results_out *out, const char *name, size_t rank, const size_t *dims,
                     const char *const *axes, attn_precision precision, attn_store store,
                     const char *description, int *handle, attn_error *err)
{
    size_t chunk[4];
    if (rank < 1 || rank > 4 || (store != ATTN_STORE_DEFAULT && store != ATTN_STORE_F32 &&
                                 store != ATTN_STORE_F64))
        return attn_fail(err, ATTN_EIO, "%s: cannot store a dataset of rank %zu that way", name,
                         rank);
    /* One row of the last two axes: a reader of one map reads one chunk. */
    for (size_t i = 0; i < rank; i++)
        chunk[i] = i + 2 >= rank && dims[i] > 0 ? dims[i] : 1;
    const attn_dataset_spec spec = {
        .name = name,
        .precision = precision,
        .store = store,
        .has_fill = true,
        .fill = 0,
        .rank = rank,
        .dims = dims,
        .chunk = chunk,
        .labels = axes,
        .description = description,
        .compress = 1,
    };
    return attn_h5out_add_dataset(out->out, &spec, handle, err);
}

int attn_results_write(attn_results_out *out, int handle, const size_t *first,
                       const size_t *count, const void *values, attn_error *err)
{
    return attn_h5out_write_block(out->out, handle, first, count, values, err);
}

int attn_results_add_labels(attn_results_out *out, const char *name, size_t rank,
                            const size_t *dims, const char *const *axes, const char *description,
                            int *handle, attn_error *err)
{
    return attn_h5out_add_strings(out->out, name, rank, dims, axes, description, handle, err);
}

int attn_results_write_labels(attn_results_out *out, int handle, const size_t *first,
                              const size_t *count, const char *const *labels, attn_error *err)
{
    return attn_h5out_write_strings(out->out, handle, first, count, labels, err);
}

int attn_results_attribute(attn_results_out *out, int handle, const char *name,
                           const char *value, attn_error *err)
{
    if (handle < 0)
        return attn_h5out_attr_string(out->out, name, value, err);
    return attn_h5out_dataset_attr_string(out->out, handle, name, value, err);
}

int attn_results_attribute_number(attn_results_out *out, const char *name, double value,
                                  attn_error *err)
{
    return attn_h5out_attr_double(out->out, name, value, err);
}

int attn_results_finish(attn_results_out *out, attn_error *err)
{
    int status = attn_h5out_close(out->out, err);
    free(out);
    return status;
}
