/*
 * out_write.c - the outputs written: datasets with their chunks, filters,
 * fill and dimension scales, blocks and chunks of values, strings, and
 * attributes (h5/h5.h).
 */
#include "h5/out.h"

#include "h5/close.h"

#include "attn_atomic.h"

#include <hdf5.h>
#include <hdf5_hl.h>

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

/* Writes 0, 1, ... length-1 into the 1-D int64 dataset `scale`, a block at a time. */
static herr_t write_indices(hid_t scale, hsize_t length)
{
    long long *block = attn_malloc(SCALE_BLOCK * sizeof *block);
    herr_t result = block == NULL ? -1 : 0;
    hid_t file_space = H5Dget_space(scale);
    for (hsize_t first = 0; result >= 0 && first < length; first += SCALE_BLOCK) {
        hsize_t count = length - first < SCALE_BLOCK ? length - first : SCALE_BLOCK;
        for (hsize_t i = 0; i < count; i++)
            block[i] = (long long)(first + i);
        hid_t mem_space = H5Screate_simple(1, &count, NULL);
        result = H5Sselect_hyperslab(file_space, H5S_SELECT_SET, &first, NULL, &count, NULL);
        if (result >= 0)
            result = H5Dwrite(scale, H5T_NATIVE_LLONG, mem_space, file_space, H5P_DEFAULT, block);
        H5Sclose(mem_space);
    }
    H5Sclose(file_space);
    free(block);
    return result;
}

static herr_t put_string(hid_t object, const char *name, const char *value);

/* The dimension scale called `label`, of `length`: one of attnrun's
 * already in the group (left there by attn_h5out_clear_axis), or made on
 * first use. */
static int scale_for(attn_h5out *out, const char *label, hsize_t length, hid_t *id,
                     attn_error *err)
{
    for (size_t i = 0; i < out->scale_count; i++) {
        if (strcmp(out->scales[i].name, label) != 0)
            continue;
        if (out->scales[i].length != length)
            return attn_fail(err, ATTN_EIO, "%s: axis %s has two lengths", out->path, label);
        *id = out->scales[i].id;
        return ATTN_OK;
    }
    if (out->scale_count == MAX_SCALES || strlen(label) >= sizeof out->scales[0].name)
        return attn_fail(err, ATTN_EIO, "%s: too many axes", out->path);
    hid_t scale;
    if (H5Lexists(out->group, label, H5P_DEFAULT) > 0) {
        if ((scale = H5Dopen2(out->group, label, H5P_DEFAULT)) < 0)
            return h5out_failure(out, err, "open the dimension scale", label);
    } else {
        hid_t space = H5Screate_simple(1, &length, NULL);
        scale = H5Dcreate2(out->group, label, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT,
                           H5P_DEFAULT);
        H5Sclose(space);
        char description[96];
        snprintf(description, sizeof description,
                 "index 0, 1, ... along the %s axis (dimension scale)", label);
        if (scale < 0 || write_indices(scale, length) < 0 || H5DSset_scale(scale, label) < 0 ||
            put_string(scale, "description", description) < 0 ||
            put_string(scale, ATTN_ROLE_ATTRIBUTE, "axis") < 0) {
            h5_close(scale);
            return h5out_failure(out, err, "write the dimension scale", label);
        }
    }
    scale_dataset *s = &out->scales[out->scale_count++];
    snprintf(s->name, sizeof s->name, "%s", label);
    s->id = scale;
    s->length = length;
    *id = scale;
    return ATTN_OK;
}

/* A scalar attribute of `type` on `object`, replacing none. */
static herr_t put_attribute(hid_t object, const char *name, hid_t file_type, hid_t mem_type,
                           const void *value)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(object, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t result = attr < 0 ? -1 : H5Awrite(attr, mem_type, value);
    h5_close(attr);
    H5Sclose(space);
    return result;
}

/* Variable-length UTF-8 strings (C strings in memory, h5py's str): a new
 * type the caller closes. */
static hid_t utf8_string_type(void)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    if (type >= 0 && (H5Tset_size(type, H5T_VARIABLE) < 0 || H5Tset_cset(type, H5T_CSET_UTF8) < 0)) {
        H5Tclose(type);
        return H5I_INVALID_HID;
    }
    return type;
}

/* A UTF-8 variable-length string attribute, which h5py reads as str. */
static herr_t put_string(hid_t object, const char *name, const char *value)
{
    hid_t type = utf8_string_type();
    herr_t result = type < 0 ? -1 : put_attribute(object, name, type, type, &value);
    h5_close(type);
    return result;
}

/* The file type of a stored type (a new id the caller closes):
 * binary16 and bfloat16 are IEEE-style floats of 16 bits, sign at bit 15,
 * with 5 exponent and 10 mantissa bits (bias 15) or 8 and 7 (bias 127). */
static hid_t file_type_of(attn_store store)
{
    const struct { size_t epos, esize, msize, ebias; } half[] = {
        [ATTN_STORE_F16] = {10, 5, 10, 15}, [ATTN_STORE_BF16] = {7, 8, 7, 127},
    };
    if (store == ATTN_STORE_F32 || store == ATTN_STORE_F64 || store == ATTN_STORE_I32)
        return H5Tcopy(store == ATTN_STORE_F64 ? H5T_IEEE_F64LE
                       : store == ATTN_STORE_I32 ? H5T_STD_I32LE : H5T_IEEE_F32LE);
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    if (t < 0)
        return t;
    if (H5Tset_fields(t, 15, half[store].epos, half[store].esize, 0, half[store].msize) < 0 ||
        H5Tset_offset(t, 0) < 0 || H5Tset_precision(t, 16) < 0 || H5Tset_size(t, 2) < 0 ||
        H5Tset_ebias(t, half[store].ebias) < 0) {
        H5Tclose(t);
        return H5I_INVALID_HID;
    }
    return t;
}

/* The dataset creation properties: chunks, filters, and a fill value
 * for datasets whose chunks may stay unwritten (else no fill writes). */
static hid_t creation_properties(const attn_dataset_spec *spec)
{
    hsize_t chunk[4];
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    for (size_t i = 0; i < spec->rank; i++)
        chunk[i] = spec->chunk[i];
    const double fill = spec->fill;
    if (dcpl < 0 || H5Pset_chunk(dcpl, (int)spec->rank, chunk) < 0 ||
        H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_INCR) < 0 ||
        (spec->has_fill && H5Pset_fill_value(dcpl, H5T_NATIVE_DOUBLE, &fill) < 0) ||
        H5Pset_fill_time(dcpl, spec->has_fill && !spec->whole ? H5D_FILL_TIME_IFSET
                                                              : H5D_FILL_TIME_NEVER) < 0 ||
        (spec->compress > 0 && (H5Pset_shuffle(dcpl) < 0 ||
                                H5Pset_deflate(dcpl, (unsigned)spec->compress) < 0))) {
        h5_close(dcpl);
        return H5I_INVALID_HID;
    }
    return dcpl;
}

/* Labels every axis of d and attaches the dimension scale of its label. */
static int attach_axes(attn_h5out *out, const output_dataset *d, const char *const *labels,
                       const char *name, attn_error *err)
{
    for (size_t axis = 0; axis < d->rank; axis++) {
        hid_t scale = H5I_INVALID_HID;
        int status = scale_for(out, labels[axis], d->dims[axis], &scale, err);
        if (status != ATTN_OK)
            return status;
        if (H5DSattach_scale(d->id, scale, (unsigned)axis) < 0 ||
            H5DSset_label(d->id, (unsigned)axis, labels[axis]) < 0)
            return h5out_failure(out, err, "label the axes of", name);
    }
    return ATTN_OK;
}

int attn_h5out_add_dataset(attn_h5out *out, const attn_dataset_spec *spec, int *handle,
                           attn_error *err)
{
    output_dataset *d = &out->datasets[out->dataset_count];
    hid_t dcpl = H5I_INVALID_HID, dapl = H5I_INVALID_HID, space = H5I_INVALID_HID;
    int status = ATTN_OK;
    if (spec->rank > 4)
        return attn_fail(err, ATTN_EIO, "%s: dataset %s of rank %zu (at most 4)", out->path,
                         spec->name, spec->rank);
    if (out->dataset_count == ATTN_H5OUT_MAX_DATASETS)
        return attn_fail(err, ATTN_EIO, "%s: too many output datasets", out->path);
    d->rank = spec->rank;
    d->precision = spec->precision;
    snprintf(d->name, sizeof d->name, "%s", spec->name);
    for (size_t i = 0; i < spec->rank; i++)
        d->dims[i] = spec->dims[i];
    const attn_store store = attn_store_for(spec->store, spec->precision);
    /* HDF5 1.10 loses a chunk written past the cache into a dataset that is
     * one chunk in the newer file format (its "single chunk" index): the
     * chunk's address is never stored, and it reads back as zeros.  Files
     * made with libver v110 or latest, written by --in-place, get that
     * format.  Through the cache the address is stored, so such a dataset
     * is written with H5Dwrite and gets a cache that holds its one chunk. */
    size_t chunk_bytes = attn_store_size(store), cache = 0;
    d->one_chunk = true;
    for (size_t i = 0; i < spec->rank; i++) {
        chunk_bytes *= spec->chunk[i];
        d->one_chunk = d->one_chunk && spec->chunk[i] >= spec->dims[i];
    }
    if (d->one_chunk)
        cache = chunk_bytes;
    if ((d->file_type = file_type_of(store)) < 0 ||
        (dcpl = creation_properties(spec)) < 0 ||
        (dapl = H5Pcreate(H5P_DATASET_ACCESS)) < 0 ||
        H5Pset_chunk_cache(dapl, CHUNK_CACHE_SLOTS, cache, 1.0) < 0 ||
        (space = H5Screate_simple((int)spec->rank, d->dims, NULL)) < 0 ||
        (d->id = H5Dcreate2(out->group, spec->name, d->file_type, space, H5P_DEFAULT, dcpl, dapl)) < 0) {
        h5_close(d->file_type);
        status = h5out_failure(out, err, "create dataset", spec->name);
        goto out;
    }
    out->dataset_count++;
    if (H5Iget_name(d->id, d->name, sizeof d->name) <= 0)
        snprintf(d->name, sizeof d->name, "%s", spec->name);
    if (put_string(d->id, "description", spec->description) < 0 ||
        put_string(d->id, ATTN_ROLE_ATTRIBUTE, "result") < 0) {
        status = h5out_failure(out, err, "describe dataset", spec->name);
        goto out;
    }
    if ((status = attach_axes(out, d, spec->labels, spec->name, err)) != ATTN_OK)
        goto out;
    *handle = (int)(out->dataset_count - 1);
out:
    h5_close(space, dapl, dcpl);
    return status;
}

int attn_h5out_add_strings(attn_h5out *out, const char *name, size_t rank, const size_t *dims,
                           const char *const *labels, const char *description, int *handle,
                           attn_error *err)
{
    output_dataset *d = &out->datasets[out->dataset_count];
    hid_t space = H5I_INVALID_HID;
    int status = ATTN_OK;
    if (rank < 1 || rank > 2)
        return attn_fail(err, ATTN_EIO, "%s: string dataset %s of rank %zu (1 or 2)", out->path,
                         name, rank);
    if (out->dataset_count == ATTN_H5OUT_MAX_DATASETS)
        return attn_fail(err, ATTN_EIO, "%s: too many output datasets", out->path);
    memset(d, 0, sizeof *d);
    d->rank = rank;
    d->one_chunk = true;                  /* not chunked: written through HDF5 */
    snprintf(d->name, sizeof d->name, "%s", name);
    for (size_t i = 0; i < rank; i++)
        d->dims[i] = dims[i];
    /* Contiguous: a variable-length string is a reference into the file's
     * heap, which compression would not shrink. */
    if ((d->file_type = utf8_string_type()) < 0 ||
        (space = H5Screate_simple((int)rank, d->dims, NULL)) < 0 ||
        (d->id = H5Dcreate2(out->group, name, d->file_type, space, H5P_DEFAULT, H5P_DEFAULT,
                            H5P_DEFAULT)) < 0) {
        h5_close(d->file_type);
        status = h5out_failure(out, err, "create dataset", name);
        goto out;
    }
    out->dataset_count++;
    if (H5Iget_name(d->id, d->name, sizeof d->name) <= 0)
        snprintf(d->name, sizeof d->name, "%s", name);
    if (put_string(d->id, "description", description) < 0 ||
        put_string(d->id, ATTN_ROLE_ATTRIBUTE, "result") < 0) {
        status = h5out_failure(out, err, "describe dataset", name);
        goto out;
    }
    if ((status = attach_axes(out, d, labels, name, err)) != ATTN_OK)
        goto out;
    *handle = (int)(out->dataset_count - 1);
out:
    h5_close(space);
    return status;
}

int attn_h5out_find_dataset(attn_h5out *out, const char *name, int *handle, attn_error *err)
{
    output_dataset *d = &out->datasets[out->dataset_count];
    hid_t space = H5I_INVALID_HID;
    int rank;
    if (out->dataset_count == ATTN_H5OUT_MAX_DATASETS)
        return attn_fail(err, ATTN_EIO, "%s: too many output datasets", out->path);
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    if ((d->id = H5Dopen2(out->group, name, H5P_DEFAULT)) < 0)
        return h5out_failure(out, err, "open dataset", name);
    if ((d->file_type = H5Dget_type(d->id)) < 0 || (space = H5Dget_space(d->id)) < 0 ||
        (rank = H5Sget_simple_extent_ndims(space)) < 1 || rank > 4 ||
        H5Sget_simple_extent_dims(space, d->dims, NULL) < 0) {
        h5_close(space, d->file_type);
        H5Dclose(d->id);
        return h5out_failure(out, err, "open dataset", name);
    }
    H5Sclose(space);
    d->rank = (size_t)rank;
    *handle = (int)out->dataset_count++;
    return ATTN_OK;
}

bool attn_h5out_raw_chunks(const attn_h5out *out, int handle)
{
    assert(handle >= 0 && (size_t)handle < out->dataset_count);
    return !out->datasets[handle].one_chunk;
}

int attn_h5out_write_chunk(attn_h5out *out, int handle, const size_t *offset, const void *data,
                           size_t bytes, attn_error *err)
{
    assert(handle >= 0 && (size_t)handle < out->dataset_count);
    const output_dataset *d = &out->datasets[handle];
    hsize_t at[4] = {0};
    for (size_t i = 0; i < d->rank; i++)
        at[i] = offset[i];
    herr_t result = d->one_chunk
                        ? H5Dwrite(d->id, d->file_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data)
                        : H5Dwrite_chunk(d->id, H5P_DEFAULT, 0, at, bytes, data);
    return result < 0 ? h5out_failure(out, err, "write", d->name) : ATTN_OK;
}

/* Writes buf, elements of mem_type (count[0], ...), at first[] of d,
 * transferred as xfer says; count NULL: nothing (a collective transfer
 * that this rank takes part in).  On a failure before the transfer it
 * still takes part, with nothing, so that no rank waits for it there. */
static int write_region(attn_h5out *out, const output_dataset *d, hid_t mem_type,
                        const size_t *first, const size_t *count, const void *buf, hid_t xfer,
                        attn_error *err)
{
    hsize_t start[4] = {0}, dims[4] = {0};
    hid_t file_space = H5Dget_space(d->id), mem_space = H5I_INVALID_HID;
    herr_t result = file_space < 0 ? -1 : 0;
    for (size_t i = 0; count != NULL && i < d->rank; i++) {
        start[i] = first[i];
        dims[i] = count[i];
    }
    if (result >= 0 && count != NULL)
        result = H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, dims, NULL);
    mem_space = count != NULL ? H5Screate_simple((int)d->rank, dims, NULL) : H5Scopy(file_space);
    if (mem_space < 0)
        result = -1;
    if ((count == NULL || result < 0) && file_space >= 0 && mem_space >= 0 &&
        (H5Sselect_none(file_space) < 0 || H5Sselect_none(mem_space) < 0))
        result = -1;
    if (file_space >= 0 && mem_space >= 0 &&
        H5Dwrite(d->id, mem_type, mem_space, file_space, xfer, buf) < 0)
        result = -1;
    /* the message before H5Sclose, which clears HDF5's error stack */
    int status = result < 0 ? h5out_failure(out, err, "write", d->name) : ATTN_OK;
    h5_close(mem_space, file_space);
    return status;
}

/* Whether the file system of path's directory has no room left. */
static bool device_full(const char *path)
{
    char dir[PATH_MAX], base[PATH_MAX];
    struct statvfs fs;
    attn_split_path(path, dir, base);
    return statvfs(dir, &fs) == 0 && fs.f_bavail == 0;
}

int attn_h5out_write_shared(attn_h5out *out, int handle, const size_t *first,
                            const size_t *count, const void *buf, attn_error *err)
{
    assert(handle >= 0 && (size_t)handle < out->dataset_count && out->shared_xfer >= 0);
    const output_dataset *d = &out->datasets[handle];
    int status = write_region(out, d, d->file_type, first, count, buf, out->shared_xfer, err);
    if (status != ATTN_OK && device_full(out->path))     /* MPI-IO does not say */
        status = attn_fail(err, ATTN_EIO, "%s: cannot write %s: No space left on device",
                           out->path, d->name);
    return status;
}

int attn_h5out_write_block(attn_h5out *out, int handle, const size_t *first,
                           const size_t *count, const void *buf, attn_error *err)
{
    assert(handle >= 0 && (size_t)handle < out->dataset_count);
    const output_dataset *d = &out->datasets[handle];
    hid_t mem_type = d->precision == ATTN_F64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
    return write_region(out, d, mem_type, first, count, buf, H5P_DEFAULT, err);
}

int attn_h5out_write_strings(attn_h5out *out, int handle, const size_t *first,
                             const size_t *count, const char *const *strings, attn_error *err)
{
    assert(handle >= 0 && (size_t)handle < out->dataset_count);
    const output_dataset *d = &out->datasets[handle];
    return write_region(out, d, d->file_type, first, count, strings, H5P_DEFAULT, err);
}

int attn_h5out_dataset_attr_string(attn_h5out *out, int handle, const char *name,
                                   const char *value, attn_error *err)
{
    assert(handle >= 0 && (size_t)handle < out->dataset_count);
    const output_dataset *d = &out->datasets[handle];
    if (put_string(d->id, name, value) < 0)
        return h5out_failure(out, err, "write attribute", name);
    return ATTN_OK;
}

int attn_h5out_write(attn_h5out *out, int handle, size_t first, size_t count, const void *buf,
                     attn_error *err)
{
    assert(handle >= 0 && (size_t)handle < out->dataset_count);
    const output_dataset *d = &out->datasets[handle];
    size_t start[4] = {first, 0, 0, 0}, dims[4];
    for (size_t i = 0; i < d->rank; i++)
        dims[i] = (size_t)d->dims[i];
    dims[0] = count;
    return attn_h5out_write_block(out, handle, start, dims, buf, err);
}

int attn_h5out_attr_string(attn_h5out *out, const char *name, const char *value, attn_error *err)
{
    if (put_string(out->group, name, value) < 0)
        return h5out_failure(out, err, "write attribute", name);
    return ATTN_OK;
}

int attn_h5out_attr_double(attn_h5out *out, const char *name, double value, attn_error *err)
{
    if (put_attribute(out->group, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value) < 0)
        return h5out_failure(out, err, "write attribute", name);
    return ATTN_OK;
}

int attn_h5out_attr_int(attn_h5out *out, const char *name, long long value, attn_error *err)
{
    if (put_attribute(out->group, name, H5T_STD_I64LE, H5T_NATIVE_LLONG, &value) < 0)
        return h5out_failure(out, err, "write attribute", name);
    return ATTN_OK;
}

