/*
 * in_read.c - the numbers of an input: a dataset described (present,
 * rank, shape, element type), its rows read as floats, keep flags or
 * integers, and one value as the file holds it (h5/h5.h).
 */
#include "h5/in.h"

#include "core/core.h"
#include "h5/close.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int h5in_describe(attn_h5in *in, attn_data_kind kind, bool required, attn_tensor_info *info,
                  attn_error *err)
{
    hid_t dset = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    hsize_t dims[H5S_MAX_RANK];
    int status = ATTN_OK;

    info->present = false;
    info->rank = 0;
    int found = h5in_dataset_of(in, info->name, &dset, err);
    if (found == 1) {
        if (required)
            return attn_fail(err, ATTN_EINPUT, "%s: no dataset %s", in->path, info->name);
        return ATTN_OK;
    }
    if (found != ATTN_OK)
        return found;
    type = H5Dget_type(dset);
    space = H5Dget_space(dset);
    if (type < 0 || space < 0) {
        status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the type or shape of %s",
                           in->path, info->name);
        goto out;
    }
    H5T_class_t cls = H5Tget_class(type);
    bool type_ok = kind == ATTN_DATA_FLOAT ? cls == H5T_FLOAT
                 : kind == ATTN_DATA_INTEGER ? cls == H5T_INTEGER
                                             : (cls == H5T_INTEGER || cls == H5T_ENUM);
    if (!type_ok) {
        status = attn_fail(err, ATTN_EINPUT, "%s: dataset %s has %s elements; %s expected",
                           in->path, info->name, h5in_type_name(type),
                           kind == ATTN_DATA_FLOAT ? "floating-point"
                           : kind == ATTN_DATA_INTEGER ? "integer" : "integer or boolean");
        goto out;
    }
    size_t elem_size = H5Tget_size(type);
    if (!h5in_type_size_ok(cls, elem_size)) {
        status = attn_fail(err, ATTN_EINPUT, "%s: dataset %s has %zu-byte %s elements; %s expected",
                           in->path, info->name, elem_size, h5in_class_name(cls),
                           cls == H5T_FLOAT ? "2, 4 or 8 bytes" : "1 to 8 bytes");
        goto out;
    }
    if (H5Sget_simple_extent_type(space) != H5S_SIMPLE && H5Sget_simple_extent_type(space) != H5S_SCALAR) {
        status = attn_fail(err, ATTN_EINPUT, "%s: dataset %s holds no data space", in->path, info->name);
        goto out;
    }
    int rank = H5Sget_simple_extent_dims(space, dims, NULL);
    if (rank < 0 || rank > ATTN_MAX_RANK) {
        status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the shape of %s", in->path, info->name);
        goto out;
    }
    if ((status = h5in_check_storage(in, info->name, dset, space, elem_size, err)) != ATTN_OK)
        goto out;
    info->rank = (size_t)rank;
    for (int i = 0; i < rank; i++)
        info->dims[i] = (size_t)dims[i];
    info->present = true;
out:
    h5_close(space, type);
    if (status != ATTN_OK)
        H5Eclear2(H5E_DEFAULT);
    return status;
}

/* The open dataset `name`, or ATTN_EINPUT saying it is absent. */
static int required_dataset(attn_h5in *in, const char *name, hid_t *dset, attn_error *err)
{
    int status = h5in_dataset_of(in, name, dset, err);
    if (status == 1)
        return attn_fail(err, ATTN_EINPUT, "%s: no dataset %s", in->path, name);
    return status;
}

/* Reads the block [first[i], first[i] + count[i]) of each axis i of name
 * (first, count NULL: the whole dataset) with memory type mem_type into
 * buf: (count[0], count[1], ...) values of mem_type. */
static int read_box(attn_h5in *in, const char *name, hid_t mem_type, const hsize_t *first,
                    const hsize_t *count, void *buf, attn_error *err)
{
    hid_t dset, file_space = H5I_INVALID_HID, mem_space = H5I_INVALID_HID;
    hsize_t dims[H5S_MAX_RANK];
    char detail[256];
    int status = required_dataset(in, name, &dset, err);
    if (status != ATTN_OK)
        return status;
    if ((file_space = H5Dget_space(dset)) < 0)
        goto fail;
    int rank = H5Sget_simple_extent_dims(file_space, dims, NULL);
    if (rank < 0)
        goto fail;
    if (rank > 0 && first != NULL) {
        memcpy(dims, count, (size_t)rank * sizeof dims[0]);
        if (H5Sselect_hyperslab(file_space, H5S_SELECT_SET, first, NULL, dims, NULL) < 0)
            goto fail;
    }
    if ((mem_space = rank > 0 ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR)) < 0 ||
        H5Dread(dset, mem_type, mem_space, file_space, H5P_DEFAULT, buf) < 0)
        goto fail;
    goto out;
fail:
    /* a results file's damage is the input's; the run's reads keep EIO */
    status = attn_fail(err, in->tiled_maps && !h5_system_error(detail, sizeof detail) ? ATTN_EINPUT
                                                                                     : ATTN_EIO,
                       "%s: cannot read %s rows %llu..%llu: %s", in->path, name,
                       first != NULL ? (unsigned long long)first[0] : 0ULL,
                       first != NULL ? (unsigned long long)(first[0] + count[0]) : 0ULL,
                       attn_h5_error_detail(detail, sizeof detail));
    H5Eclear2(H5E_DEFAULT);
out:
    h5_close(mem_space, file_space);
    return h5in_after_read(in, status, err);
}

/* Rows [first, first + count) along axis 0 and, with axis > 0, [from,
 * from + length) along that axis only, as read_box reads them. */
static int read_slab(attn_h5in *in, const char *name, hid_t mem_type, size_t first,
                     size_t count, size_t axis, size_t from, size_t length, void *buf,
                     attn_error *err)
{
    hid_t dset, space;
    hsize_t start[H5S_MAX_RANK] = {0}, extent[H5S_MAX_RANK];
    int status = required_dataset(in, name, &dset, err);
    if (status != ATTN_OK)
        return status;
    space = H5Dget_space(dset);
    int rank = space < 0 ? -1 : H5Sget_simple_extent_dims(space, extent, NULL);
    h5_close(space);
    if (rank <= 0)
        return read_box(in, name, mem_type, NULL, NULL, buf, err);
    start[0] = first;
    extent[0] = count;
    if (axis > 0 && axis < (size_t)rank) {
        start[axis] = from;
        extent[axis] = length;
    }
    return read_box(in, name, mem_type, start, extent, buf, err);
}

static int read_rows(attn_h5in *in, const char *name, hid_t mem_type, size_t first,
                     size_t count, void *buf, attn_error *err)
{
    return read_slab(in, name, mem_type, first, count, 0, 0, 0, buf, err);
}

static int h5in_read_floats(attn_h5in *in, const char *name, attn_precision precision,
                            size_t first, size_t count, void *buf, attn_error *err)
{
    hid_t mem_type = precision == ATTN_F64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
    return read_rows(in, name, mem_type, first, count, buf, err);
}

static int h5in_read_float_block(attn_h5in *in, const char *name, attn_precision precision,
                                  size_t first, size_t count, size_t axis, size_t from,
                                  size_t length, void *buf, attn_error *err)
{
    hid_t mem_type = precision == ATTN_F64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
    return read_slab(in, name, mem_type, first, count, axis, from, length, buf, err);
}

static int h5in_read_float_box(attn_h5in *in, const char *name, attn_precision precision,
                               const size_t *first, const size_t *count, void *buf,
                               attn_error *err)
{
    hid_t dset, space, mem_type = precision == ATTN_F64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
    hsize_t start[H5S_MAX_RANK], extent[H5S_MAX_RANK];
    int status = required_dataset(in, name, &dset, err);
    if (status != ATTN_OK)
        return status;
    space = H5Dget_space(dset);
    int rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    h5_close(space);
    for (int i = 0; i < rank && i < H5S_MAX_RANK; i++) {
        start[i] = first[i];
        extent[i] = count[i];
    }
    return read_box(in, name, mem_type, rank > 0 ? start : NULL, rank > 0 ? extent : NULL, buf,
                    err);
}

static int h5in_read_mask(attn_h5in *in, const char *name, size_t first, size_t count,
                          unsigned char *keep, attn_error *err)
{
    attn_tensor_info info = {.name = name};
    hid_t dset, file_type = H5I_INVALID_HID, mem_type = H5I_INVALID_HID;
    unsigned char *raw = NULL;    /* (elements) of elem_size bytes: the mask
                                     as the file stores it                 */
    size_t elements, elem_size, bytes;
    int status = h5in_describe(in, ATTN_DATA_MASK, true, &info, err);
    if (status == ATTN_OK)
        status = h5in_dataset_of(in, name, &dset, err);   /* opened by describe */
    if (status != ATTN_OK)
        return status;
    /* Read in the file's own integer width, then test each value for 0:
     * no narrowing can turn a nonzero into a zero. */
    if ((file_type = H5Dget_type(dset)) < 0 ||
        (mem_type = H5Tget_native_type(file_type, H5T_DIR_ASCEND)) < 0 ||
        (elem_size = H5Tget_size(mem_type)) == 0) {
        status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the type of mask %s", in->path, name);
        goto out;
    }
    info.dims[0] = count;
    if (!attn_size_product(&elements, info.dims, info.rank) ||
        !attn_size_mul(&bytes, elements, elem_size)) {
        status = attn_fail(err, ATTN_EINPUT, "%s: mask %s is too large", in->path, name);
        goto out;
    }
    if ((raw = attn_malloc(bytes)) == NULL) {
        status = attn_fail(err, ATTN_ENOMEM, "%s: out of memory reading mask %s (%zu bytes)",
                           in->path, name, bytes);
        goto out;
    }
    if ((status = read_rows(in, name, mem_type, first, count, raw, err)) != ATTN_OK)
        goto out;
    for (size_t i = 0; i < elements; i++) {
        unsigned char any = 0;
        for (size_t j = 0; j < elem_size; j++)
            any |= raw[i * elem_size + j];
        keep[i] = any != 0;
    }
out:
    free(raw);
    h5_close(mem_type, file_type);
    return status;
}

static int h5in_read_integers(attn_h5in *in, const char *name, size_t first, size_t count,
                              int64_t *values, attn_error *err)
{
    attn_tensor_info info = {.name = name};
    int status = h5in_describe(in, ATTN_DATA_INTEGER, true, &info, err);
    if (status == ATTN_OK)
        status = read_rows(in, name, H5T_NATIVE_INT64, first, count, values, err);
    return status;
}

static int h5in_read_value(attn_h5in *in, const char *name, const size_t *index, size_t rank,
                           double *value, attn_error *err)
{
    hid_t dset, file_space = H5I_INVALID_HID, mem_space = H5I_INVALID_HID;
    hsize_t point[ATTN_MAX_RANK], one = 1;
    char detail[256];
    int status = required_dataset(in, name, &dset, err);
    if (status != ATTN_OK)
        return status;
    for (size_t i = 0; i < rank && i < ATTN_MAX_RANK; i++)
        point[i] = index[i];
    if ((file_space = H5Dget_space(dset)) < 0 ||
        (rank > 0 && H5Sselect_elements(file_space, H5S_SELECT_SET, 1, point) < 0) ||
        (mem_space = H5Screate_simple(1, &one, NULL)) < 0 ||
        H5Dread(dset, H5T_NATIVE_DOUBLE, mem_space, file_space, H5P_DEFAULT, value) < 0)
        status = attn_fail(err, ATTN_EIO, "%s: cannot read one value of %s: %s", in->path, name,
                           attn_h5_error_detail(detail, sizeof detail));
    h5_close(mem_space, file_space);
    return h5in_after_read(in, status, err);
}


int attn_h5in_describe(attn_h5in *in, attn_data_kind kind, bool required,
                       attn_tensor_info *info, attn_error *err)
{
    attn_parsing_enter();
    return h5in_parsed(h5in_describe(in, kind, required, info, err));
}

int attn_h5in_read_floats(attn_h5in *in, const char *name, attn_precision precision,
                          size_t first, size_t count, void *buf, attn_error *err)
{
    attn_parsing_enter();
    return h5in_parsed(h5in_read_floats(in, name, precision, first, count, buf, err));
}

int attn_h5in_read_float_block(attn_h5in *in, const char *name, attn_precision precision,
                               size_t first, size_t count, size_t axis, size_t from,
                               size_t length, void *buf, attn_error *err)
{
    attn_parsing_enter();
    return h5in_parsed(h5in_read_float_block(in, name, precision, first, count, axis, from,
                                             length, buf, err));
}

int attn_h5in_read_float_box(attn_h5in *in, const char *name, attn_precision precision,
                             const size_t *first, const size_t *count, void *buf,
                             attn_error *err)
{
    attn_parsing_enter();
    return h5in_parsed(h5in_read_float_box(in, name, precision, first, count, buf, err));
}

int attn_h5in_read_mask(attn_h5in *in, const char *name, size_t first, size_t count,
                        unsigned char *keep, attn_error *err)
{
    attn_parsing_enter();
    return h5in_parsed(h5in_read_mask(in, name, first, count, keep, err));
}

int attn_h5in_read_integers(attn_h5in *in, const char *name, size_t first, size_t count,
                            int64_t *values, attn_error *err)
{
    attn_parsing_enter();
    return h5in_parsed(h5in_read_integers(in, name, first, count, values, err));
}

int attn_h5in_read_value(attn_h5in *in, const char *name, const size_t *index, size_t rank,
                         double *value, attn_error *err)
{
    attn_parsing_enter();
    return h5in_parsed(h5in_read_value(in, name, index, rank, value, err));
}
