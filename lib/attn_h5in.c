/* attn_h5in.c - reading input datasets from an HDF5 file (attn_h5.h). */
/*
 * Shapes are what the file holds; a "row" is one index along axis 0, so a
 * batch slice of X (B, n, D) is rows [first, first + c): (c, n, D).
 */
#include "attn_h5.h"

#include <hdf5.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

struct attn_h5in {
    hid_t file;
    char *path;
};

/* What attn_h5_error_detail collects while walking HDF5's error stack. */
typedef struct error_detail {
    char *buf;
    size_t len;
    bool system;        /* buf holds the system's words: stop looking */
} error_detail;

/* Walked from the innermost error outwards: keeps the system's message
 * ("No space left on device") when one is there, else the innermost
 * non-empty description. */
static herr_t keep_detail(unsigned depth, const H5E_error2_t *e, void *data)
{
    error_detail *d = data;
    const char *marker = "error message = '";
    (void)depth;
    if (d->system || e->desc == NULL || e->desc[0] == '\0')
        return 0;
    const char *sys = strstr(e->desc, marker);
    if (sys != NULL) {
        sys += strlen(marker);
        snprintf(d->buf, d->len, "%.*s", (int)strcspn(sys, "'"), sys);
        d->system = true;
    } else if (d->buf[0] == '\0') {
        snprintf(d->buf, d->len, "%s", e->desc);
    }
    return 0;
}

void attn_h5_prepare(void)
{
    /* Before HDF5 initialises: no exit-time clean-up.  After an output
     * file failed to flush (disk full), HDF5 1.10 keeps it half-closed and
     * its atexit handler crashes closing it again; the process is ending
     * anyway, and the operating system reclaims the memory. */
    static bool prepared;
    if (prepared)
        return;
    prepared = true;
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);   /* errors come back as values */
}

char *attn_h5_error_detail(char *buf, size_t len)
{
    error_detail detail = {.buf = buf, .len = len};
    if (len == 0)
        return buf;
    buf[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_detail, &detail);
    if (buf[0] == '\0')
        snprintf(buf, len, "HDF5 gave no reason");
    return buf;
}

int attn_h5in_open(const char *path, attn_h5in **out, attn_error *err)
{
    struct stat st;
    char detail[256];
    attn_h5_prepare();
    *out = NULL;
    if (stat(path, &st) != 0)
        return attn_fail(err, ATTN_EINPUT, "%s: cannot read input: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return attn_fail(err, ATTN_EINPUT, "%s: input is a directory, not an HDF5 file", path);
    int probe = open(path, O_RDONLY | O_CLOEXEC);
    if (probe < 0)
        return attn_fail(err, ATTN_EINPUT, "%s: cannot read input: %s", path, strerror(errno));
    close(probe);
    if (H5Fis_hdf5(path) <= 0)
        return attn_fail(err, ATTN_EINPUT, "%s: not an HDF5 file", path);

    attn_h5in *in = calloc(1, sizeof *in);
    if (in == NULL || (in->path = strdup(path)) == NULL) {
        free(in);
        return attn_fail(err, ATTN_ENOMEM, "%s: out of memory", path);
    }
    in->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (in->file < 0) {
        int status = attn_fail(err, ATTN_EINPUT, "%s: cannot open HDF5 file: %s", path,
                               attn_h5_error_detail(detail, sizeof detail));
        free(in->path);
        free(in);
        return status;
    }
    *out = in;
    return ATTN_OK;
}

void attn_h5in_close(attn_h5in *in)
{
    if (in == NULL)
        return;
    H5Fclose(in->file);
    free(in->path);
    free(in);
}

/* Whether every link along name ("/a/b/X" or "a/b/X") exists. */
static bool path_exists(hid_t file, const char *name)
{
    char prefix[4096];
    size_t len = strlen(name);
    if (len == 0 || len >= sizeof prefix || strcmp(name, "/") == 0)
        return false;
    for (size_t i = 1; i <= len; i++) {
        if (name[i] != '/' && name[i] != '\0')
            continue;
        memcpy(prefix, name, i);
        prefix[i] = '\0';
        if (H5Lexists(file, prefix, H5P_DEFAULT) <= 0)
            return false;
    }
    return true;
}

static const char *class_name(H5T_class_t cls)
{
    switch (cls) {
    case H5T_INTEGER:   return "integer";
    case H5T_FLOAT:     return "floating-point";
    case H5T_STRING:    return "string";
    case H5T_COMPOUND:  return "compound";
    case H5T_ENUM:      return "enum";
    case H5T_BITFIELD:  return "bitfield";
    case H5T_OPAQUE:    return "opaque";
    case H5T_REFERENCE: return "reference";
    case H5T_VLEN:      return "variable-length";
    case H5T_ARRAY:     return "array";
    default:            return "unknown";
    }
}

int attn_h5in_describe(attn_h5in *in, attn_data_kind kind, bool required,
                       attn_tensor_info *info, attn_error *err)
{
    hid_t dset = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    hsize_t dims[H5S_MAX_RANK];
    char detail[256];
    int status = ATTN_OK;

    info->present = false;
    info->rank = 0;
    if (!path_exists(in->file, info->name)) {
        if (required)
            return attn_fail(err, ATTN_EINPUT, "%s: no dataset %s", in->path, info->name);
        return ATTN_OK;
    }
    dset = H5Dopen2(in->file, info->name, H5P_DEFAULT);
    if (dset < 0) {
        status = attn_fail(err, ATTN_EINPUT, "%s: %s is not a readable dataset: %s", in->path,
                           info->name, attn_h5_error_detail(detail, sizeof detail));
        goto out;
    }
    type = H5Dget_type(dset);
    space = H5Dget_space(dset);
    if (type < 0 || space < 0) {
        status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the type or shape of %s",
                           in->path, info->name);
        goto out;
    }
    H5T_class_t cls = H5Tget_class(type);
    bool type_ok = kind == ATTN_DATA_FLOAT ? cls == H5T_FLOAT
                                           : (cls == H5T_INTEGER || cls == H5T_ENUM);
    if (!type_ok) {
        status = attn_fail(err, ATTN_EINPUT, "%s: dataset %s has %s elements; %s expected",
                           in->path, info->name, class_name(cls),
                           kind == ATTN_DATA_FLOAT ? "floating-point" : "integer or boolean");
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
    info->rank = (size_t)rank;
    for (int i = 0; i < rank; i++)
        info->dims[i] = (size_t)dims[i];
    info->present = true;
out:
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    if (dset >= 0)
        H5Dclose(dset);
    return status;
}

/* Reads rows [first, first + count) of name with memory type mem_type. */
static int read_rows(attn_h5in *in, const char *name, hid_t mem_type, size_t first,
                     size_t count, void *buf, attn_error *err)
{
    hid_t dset = H5I_INVALID_HID, file_space = H5I_INVALID_HID, mem_space = H5I_INVALID_HID;
    hsize_t dims[H5S_MAX_RANK], start[H5S_MAX_RANK] = {0};
    char detail[256];
    int status = ATTN_OK;

    if ((dset = H5Dopen2(in->file, name, H5P_DEFAULT)) < 0 ||
        (file_space = H5Dget_space(dset)) < 0)
        goto fail;
    int rank = H5Sget_simple_extent_dims(file_space, dims, NULL);
    if (rank < 0)
        goto fail;
    if (rank > 0) {
        start[0] = first;
        dims[0] = count;
        if (H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, dims, NULL) < 0)
            goto fail;
    }
    if ((mem_space = rank > 0 ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR)) < 0 ||
        H5Dread(dset, mem_type, mem_space, file_space, H5P_DEFAULT, buf) < 0)
        goto fail;
    goto out;
fail:
    status = attn_fail(err, ATTN_EIO, "%s: cannot read %s rows %zu..%zu: %s", in->path, name,
                       first, first + count, attn_h5_error_detail(detail, sizeof detail));
out:
    if (mem_space >= 0)
        H5Sclose(mem_space);
    if (file_space >= 0)
        H5Sclose(file_space);
    if (dset >= 0)
        H5Dclose(dset);
    return status;
}

int attn_h5in_read_floats(attn_h5in *in, const char *name, attn_precision precision,
                          size_t first, size_t count, void *buf, attn_error *err)
{
    hid_t mem_type = precision == ATTN_F64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
    return read_rows(in, name, mem_type, first, count, buf, err);
}

int attn_h5in_read_mask(attn_h5in *in, const char *name, size_t first, size_t count,
                        unsigned char *keep, attn_error *err)
{
    attn_tensor_info info = {.name = name};
    hid_t dset = H5I_INVALID_HID, file_type = H5I_INVALID_HID, mem_type = H5I_INVALID_HID;
    unsigned char *raw = NULL;
    size_t elements, elem_size, bytes;
    int status = attn_h5in_describe(in, ATTN_DATA_MASK, true, &info, err);
    if (status != ATTN_OK)
        return status;
    /* Read in the file's own integer width, then test each value for 0:
     * no narrowing can turn a nonzero into a zero. */
    if ((dset = H5Dopen2(in->file, name, H5P_DEFAULT)) < 0 ||
        (file_type = H5Dget_type(dset)) < 0 ||
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
    if ((raw = malloc(bytes ? bytes : 1)) == NULL) {
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
    if (mem_type >= 0)
        H5Tclose(mem_type);
    if (file_type >= 0)
        H5Tclose(file_type);
    if (dset >= 0)
        H5Dclose(dset);
    return status;
}

int attn_h5in_read_value(attn_h5in *in, const char *name, const size_t *index, size_t rank,
                         double *value, attn_error *err)
{
    hid_t dset = H5I_INVALID_HID, file_space = H5I_INVALID_HID, mem_space = H5I_INVALID_HID;
    hsize_t point[ATTN_MAX_RANK], one = 1;
    char detail[256];
    int status = ATTN_OK;
    for (size_t i = 0; i < rank && i < ATTN_MAX_RANK; i++)
        point[i] = index[i];
    if ((dset = H5Dopen2(in->file, name, H5P_DEFAULT)) < 0 ||
        (file_space = H5Dget_space(dset)) < 0 ||
        (rank > 0 && H5Sselect_elements(file_space, H5S_SELECT_SET, 1, point) < 0) ||
        (mem_space = H5Screate_simple(1, &one, NULL)) < 0 ||
        H5Dread(dset, H5T_NATIVE_DOUBLE, mem_space, file_space, H5P_DEFAULT, value) < 0)
        status = attn_fail(err, ATTN_EIO, "%s: cannot read one value of %s: %s", in->path, name,
                           attn_h5_error_detail(detail, sizeof detail));
    if (mem_space >= 0)
        H5Sclose(mem_space);
    if (file_space >= 0)
        H5Sclose(file_space);
    if (dset >= 0)
        H5Dclose(dset);
    return status;
}
