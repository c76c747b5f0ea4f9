/* attn_h5out.c - writing output datasets, labels and attributes (attn_h5.h). */
/*
 * Shapes are what the file holds; a "row" is one index along axis 0, so a
 * batch slice of X (B, n, D) is rows [first, first + c): (c, n, D).
 */
#define _GNU_SOURCE     /* sync_file_range */
#include "h5/h5.h"

#include "core/core.h"
#include "h5/close.h"

#include "attn_atomic.h"

#include <hdf5.h>
#include <hdf5_hl.h>

#include <assert.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#define MAX_DATASETS 16
#define MAX_SCALES 16
#define SCALE_BLOCK 65536               /* indices written per call       */
/* The pipeline packs chunks itself (attn_store.h) and writes each one
 * whole with H5Dwrite_chunk, so datasets need no chunk cache, except one
 * of a single chunk (see attn_h5out_add_dataset). */
#define CHUNK_CACHE_SLOTS 12421         /* a prime */

typedef struct output_dataset {
    hid_t id;
    attn_precision precision;
    hid_t file_type;              /* owned: the stored type (a copy)    */
    bool one_chunk;               /* written through HDF5, not raw      */
    size_t rank;
    hsize_t dims[4];              /* (rank): the dataset's whole shape */
    char name[256];               /* its path, for messages (H5Iget_name
                                     after a failure would clear the
                                     error stack being reported)         */
} output_dataset;

typedef struct scale_dataset {
    char name[32];
    hid_t id;
    hsize_t length;
} scale_dataset;

struct attn_h5out {
    hid_t file;
    hid_t group;
    char *path;                   /* as named in messages */
    const char *group_name;       /* the caller's, for messages */
    bool provenance;              /* the group held attnrun's provenance
                                     when it was opened               */
    hid_t shared_xfer;            /* opened by every rank (attn_h5out_open_shared):
                                     the collective transfer; else invalid */
    output_dataset datasets[MAX_DATASETS];
    size_t dataset_count;
    scale_dataset scales[MAX_SCALES];
    size_t scale_count;
};

static int h5_failure(attn_h5out *out, attn_error *err, const char *what, const char *name)
{
    char detail[256];
    return attn_fail(err, ATTN_EIO, "%s: cannot %s %s: %s", out->path, what, name,
                     attn_h5_error_detail(detail, sizeof detail));
}

/*
 * Opens `group` in out->file, creating it and its parents when missing,
 * one name at a time from the root, so a path of any length is checked
 * whole.  Every existing group on the way must be reached by a hard link:
 * with --in-place the file is a copy of an input attnrun did not make, and
 * a soft or external link there could lead the writes into another object
 * or another file.
 */
static int open_group(attn_h5out *out, const char *group, attn_error *err)
{
    hid_t here = H5Gopen2(out->file, "/", H5P_DEFAULT);
    int status = ATTN_OK;
    for (const char *part = group; here >= 0;) {
        part += strspn(part, "/");
        size_t len = strcspn(part, "/");
        if (len == 0)
            break;
        char name[len + 1];
        H5L_info_t link;
        hid_t next;
        memcpy(name, part, len);
        name[len] = '\0';
        int prefix = (int)(part + len - group);
        if (H5Lexists(here, name, H5P_DEFAULT) <= 0) {
            next = H5Gcreate2(here, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        } else if (H5Lget_info(here, name, &link, H5P_DEFAULT) < 0 || link.type != H5L_TYPE_HARD) {
            status = attn_fail(err, ATTN_EUSAGE,
                               "%s: group %.*s: %.*s is a%s link, not a group of this file; "
                               "not followed", out->path, 200, group, prefix > 400 ? 400 : prefix,
                               group, link.type == H5L_TYPE_EXTERNAL ? "n external"
                               : link.type == H5L_TYPE_SOFT ? " soft" : " special");
            break;
        } else if ((next = H5Oopen(here, name, H5P_DEFAULT)) >= 0 && H5Iget_type(next) != H5I_GROUP) {
            H5Oclose(next);
            status = attn_fail(err, ATTN_EUSAGE, "%s: group %.*s: %.*s exists and is not a group",
                               out->path, 200, group, prefix > 400 ? 400 : prefix, group);
            break;
        }
        H5Oclose(here);
        here = next;
        part += len;
    }
    if (status != ATTN_OK) {
        H5Oclose(here);
        return status;
    }
    out->group = here;
    if (out->group < 0)
        return h5_failure(out, err, "open group", group);
    return ATTN_OK;
}

/* How start opens the file. */
typedef enum open_mode { CREATE, OPEN, OPEN_SHARED } open_mode;

/* The file access of a file every rank opens: MPI-IO over the job, its
 * metadata read by one rank and shared, and written collectively. */
static hid_t shared_access(void)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
#ifdef ATTN_MPI
    if (fapl >= 0 && (H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL) < 0 ||
                      H5Pset_all_coll_metadata_ops(fapl, true) < 0 ||
                      H5Pset_coll_metadata_write(fapl, true) < 0)) {
        H5Pclose(fapl);
        fapl = H5I_INVALID_HID;
    }
#else
    h5_close(fapl);
    fapl = H5I_INVALID_HID;
#endif
    return fapl;
}

/* The collective raw-data transfer of a shared file. */
static hid_t shared_transfer(void)
{
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
#ifdef ATTN_MPI
    if (dxpl >= 0 && H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE) < 0) {
        H5Pclose(dxpl);
        dxpl = H5I_INVALID_HID;
    }
#else
    h5_close(dxpl);
    dxpl = H5I_INVALID_HID;
#endif
    return dxpl;
}

static int start(const char *path, const char *label, const char *group, open_mode mode,
                 attn_h5out **result, attn_error *err)
{
    const bool create = mode == CREATE;
    attn_h5out *out = attn_calloc(1, sizeof *out);
    attn_h5_prepare();
    *result = NULL;
    if (out == NULL || (out->path = attn_strdup(label)) == NULL) {
        free(out);
        return attn_fail(err, ATTN_ENOMEM, "%s: out of memory", path);
    }
    out->group = H5I_INVALID_HID;
    out->shared_xfer = H5I_INVALID_HID;
    out->group_name = group;
    /* With --in-place HDF5 parses a copy of the input: its crash is the
     * input's (see attn_parsing_file). */
    hid_t fapl = H5P_DEFAULT;
    if (mode == OPEN_SHARED && ((fapl = shared_access()) < 0 ||
                                (out->shared_xfer = shared_transfer()) < 0)) {
        h5_close(fapl);
        out->file = H5I_INVALID_HID;
        attn_h5out_close(out, NULL);
        return attn_fail(err, ATTN_EIO, "%s: cannot set up MPI-IO (a build without MPI)", label);
    }
    if (mode == OPEN)
        attn_parsing_enter();
    out->file = create ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)
                       : H5Fopen(path, H5F_ACC_RDWR, fapl);
    if (fapl != H5P_DEFAULT)
        H5Pclose(fapl);
    int status = out->file < 0 ? h5_failure(out, err, create ? "create" : "open",
                                            "the HDF5 file for writing")
                               : open_group(out, group, err);
    if (mode == OPEN)
        attn_parsing_leave();
    if (status == ATTN_OK)
        out->provenance = H5Aexists(out->group, "attnrun_version") > 0;
    if (status != ATTN_OK) {
        attn_h5out_close(out, NULL);
        return status;
    }
    *result = out;
    return ATTN_OK;
}

int attn_h5out_create(const char *path, const char *label, const char *group, attn_h5out **out,
                      attn_error *err)
{
    return start(path, label, group, CREATE, out, err);
}

int attn_h5out_open(const char *path, const char *label, const char *group, attn_h5out **out,
                    attn_error *err)
{
    return start(path, label, group, OPEN, out, err);
}

int attn_h5out_open_shared(const char *path, const char *label, const char *group,
                           attn_h5out **out, attn_error *err)
{
    return start(path, label, group, OPEN_SHARED, out, err);
}

/* Whether the object `name` of the group carries ATTN_ROLE_ATTRIBUTE
 * with the value `role`: attnrun wrote it. */
static bool written_by_attnrun(const attn_h5out *out, const char *name, const char *role)
{
    char value[16] = "";
    bool match = false;
    hid_t attr = H5Aopen_by_name(out->group, name, ATTN_ROLE_ATTRIBUTE, H5P_DEFAULT, H5P_DEFAULT);
    hid_t type = attr >= 0 ? H5Aget_type(attr) : H5I_INVALID_HID;
    if (type >= 0 && H5Tget_class(type) == H5T_STRING && H5Tis_variable_str(type) > 0) {
        char *text = NULL;
        hid_t mem = H5Tget_native_type(type, H5T_DIR_DEFAULT);   /* its character set too */
        if (mem >= 0 && H5Aread(attr, mem, &text) >= 0 && text != NULL) {
            snprintf(value, sizeof value, "%s", text);
            H5free_memory(text);
        }
        h5_close(mem);
        match = strcmp(value, role) == 0;
    }
    h5_close(type, attr);
    H5Eclear2(H5E_DEFAULT);
    return match;
}

/* A name in the way: refused without force, or when attnrun did not
 * write it. */
static int clash(const attn_h5out *out, const char *what, const char *name, bool force,
                 attn_error *err)
{
    if (!force)
        return attn_fail_hint(err, ATTN_EUSAGE, ATTN_HINT_REPLACE,
                              "%s: group %s already has %s '%s'", out->path, out->group_name,
                              what, name);
    return attn_fail_hint(err, ATTN_EUSAGE, ATTN_HINT_OTHER_GROUP, "%s: group %s has %s '%s' that "
                          "attnrun did not write; only attnrun's own results are replaced",
                          out->path, out->group_name, what, name);
}

/* Scales attached to one axis of a dataset, kept open (see detach_scales). */
typedef struct attached_scales {
    hid_t ids[16];
    size_t count;
} attached_scales;

static herr_t keep_scale(hid_t dataset, unsigned axis, hid_t scale, void *data)
{
    attached_scales *found = data;
    (void)dataset;
    (void)axis;
    if (found->count == sizeof found->ids / sizeof found->ids[0] || H5Iinc_ref(scale) < 0)
        return 1;                               /* enough: stop */
    found->ids[found->count++] = scale;
    return 0;
}

/* Detaches every dimension scale from the dataset `name`, so that no scale
 * keeps a reference to it once it is gone. */
static int detach_scales(attn_h5out *out, const char *name, attn_error *err)
{
    hid_t dataset = H5Dopen2(out->group, name, H5P_DEFAULT);
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : H5I_INVALID_HID;
    int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    int status = rank < 0 ? h5_failure(out, err, "open the old result", name) : ATTN_OK;
    for (int axis = 0; axis < rank && status == ATTN_OK; axis++) {
        attached_scales found = {.count = 0};
        if (H5DSget_num_scales(dataset, (unsigned)axis) > 0)
            H5DSiterate_scales(dataset, (unsigned)axis, NULL, keep_scale, &found);
        for (size_t i = 0; i < found.count; i++) {
            if (status == ATTN_OK && H5DSdetach_scale(dataset, found.ids[i], (unsigned)axis) < 0)
                status = h5_failure(out, err, "detach the axes of the old result", name);
            H5Dclose(found.ids[i]);
        }
    }
    h5_close(space, dataset);
    return status;
}

/* Datasets attached to the dimension scale `label` (its REFERENCE_LIST),
 * or -1 when that cannot be read. */
static hssize_t scale_users(const attn_h5out *out, const char *label)
{
    hssize_t users = 0;
    if (H5Aexists_by_name(out->group, label, "REFERENCE_LIST", H5P_DEFAULT) <= 0)
        return H5Eclear2(H5E_DEFAULT) >= 0 ? 0 : -1;
    hid_t attr = H5Aopen_by_name(out->group, label, "REFERENCE_LIST", H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = attr >= 0 ? H5Aget_space(attr) : H5I_INVALID_HID;
    users = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    h5_close(space, attr);
    return users;
}

int attn_h5out_clear_result(attn_h5out *out, const char *name, bool force, attn_error *err)
{
    if (H5Lexists(out->group, name, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ATTN_OK;
    }
    if (!force || !written_by_attnrun(out, name, "result"))
        return clash(out, "an object named", name, force, err);
    if (scale_users(out, name) != 0)            /* made a scale since */
        return attn_fail_hint(err, ATTN_EUSAGE, ATTN_HINT_OTHER_GROUP, "%s: group %s: '%s' is used "
                              "as a dimension scale by other datasets", out->path,
                              out->group_name, name);
    int status = detach_scales(out, name, err);
    if (status == ATTN_OK && H5Ldelete(out->group, name, H5P_DEFAULT) < 0)
        status = h5_failure(out, err, "remove the old result", name);
    return status;
}

/* The length of the 1-D dataset `label`, or -1. */
static long long axis_length(const attn_h5out *out, const char *label)
{
    long long length = -1;
    hid_t scale = H5Dopen2(out->group, label, H5P_DEFAULT);
    hid_t space = scale >= 0 ? H5Dget_space(scale) : H5I_INVALID_HID;
    hsize_t dims[1];
    if (space >= 0 && H5Sget_simple_extent_ndims(space) == 1 &&
        H5Sget_simple_extent_dims(space, dims, NULL) == 1)
        length = (long long)dims[0];
    h5_close(space, scale);
    H5Eclear2(H5E_DEFAULT);
    return length;
}

int attn_h5out_clear_axis(attn_h5out *out, const char *label, size_t length, bool force,
                          attn_error *err)
{
    if (H5Lexists(out->group, label, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ATTN_OK;
    }
    if (!written_by_attnrun(out, label, "axis"))
        return clash(out, "an object named", label, true, err);
    long long old = axis_length(out, label);
    if (old == (long long)length)
        return ATTN_OK;                          /* the same axis: shared */
    hssize_t users = scale_users(out, label);
    if (users != 0)
        return attn_fail_hint(err, ATTN_EUSAGE, ATTN_HINT_OTHER_GROUP,
                              "%s: group %s: the axis scale '%s' (length %lld) is still attached "
                              "to other datasets, and this run's '%s' has length %zu", out->path,
                              out->group_name, label, old, label, length);
    if (!force)
        return clash(out, "an axis scale", label, false, err);
    if (H5Ldelete(out->group, label, H5P_DEFAULT) < 0)
        return h5_failure(out, err, "remove the old axis scale", label);
    return ATTN_OK;
}

int attn_h5out_clear_attribute(attn_h5out *out, const char *name, bool force, attn_error *err)
{
    if (H5Aexists(out->group, name) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ATTN_OK;
    }
    if (!force || !out->provenance)
        return clash(out, "an attribute", name, force, err);
    if (H5Adelete(out->group, name) < 0)
        return h5_failure(out, err, "remove attribute", name);
    return ATTN_OK;
}

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
            return h5_failure(out, err, "open the dimension scale", label);
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
            return h5_failure(out, err, "write the dimension scale", label);
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
        hid_t scale;
        int status = scale_for(out, labels[axis], d->dims[axis], &scale, err);
        if (status != ATTN_OK)
            return status;
        if (H5DSattach_scale(d->id, scale, (unsigned)axis) < 0 ||
            H5DSset_label(d->id, (unsigned)axis, labels[axis]) < 0)
            return h5_failure(out, err, "label the axes of", name);
    }
    return ATTN_OK;
}

int attn_h5out_add_dataset(attn_h5out *out, const attn_dataset_spec *spec, int *handle,
                           attn_error *err)
{
    output_dataset *d = &out->datasets[out->dataset_count];
    hid_t dcpl = H5I_INVALID_HID, dapl = H5I_INVALID_HID, space = H5I_INVALID_HID;
    int status = ATTN_OK;
    if (out->dataset_count == MAX_DATASETS || spec->rank > 4)
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
        status = h5_failure(out, err, "create dataset", spec->name);
        goto out;
    }
    out->dataset_count++;
    if (H5Iget_name(d->id, d->name, sizeof d->name) <= 0)
        snprintf(d->name, sizeof d->name, "%s", spec->name);
    if (put_string(d->id, "description", spec->description) < 0 ||
        put_string(d->id, ATTN_ROLE_ATTRIBUTE, "result") < 0) {
        status = h5_failure(out, err, "describe dataset", spec->name);
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
    if (out->dataset_count == MAX_DATASETS || rank < 1 || rank > 2)
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
        status = h5_failure(out, err, "create dataset", name);
        goto out;
    }
    out->dataset_count++;
    if (H5Iget_name(d->id, d->name, sizeof d->name) <= 0)
        snprintf(d->name, sizeof d->name, "%s", name);
    if (put_string(d->id, "description", description) < 0 ||
        put_string(d->id, ATTN_ROLE_ATTRIBUTE, "result") < 0) {
        status = h5_failure(out, err, "describe dataset", name);
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
    if (out->dataset_count == MAX_DATASETS)
        return attn_fail(err, ATTN_EIO, "%s: too many output datasets", out->path);
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    if ((d->id = H5Dopen2(out->group, name, H5P_DEFAULT)) < 0)
        return h5_failure(out, err, "open dataset", name);
    if ((d->file_type = H5Dget_type(d->id)) < 0 || (space = H5Dget_space(d->id)) < 0 ||
        (rank = H5Sget_simple_extent_ndims(space)) < 1 || rank > 4 ||
        H5Sget_simple_extent_dims(space, d->dims, NULL) < 0) {
        h5_close(space, d->file_type);
        H5Dclose(d->id);
        return h5_failure(out, err, "open dataset", name);
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
    return result < 0 ? h5_failure(out, err, "write", d->name) : ATTN_OK;
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
    int status = result < 0 ? h5_failure(out, err, "write", d->name) : ATTN_OK;
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
        return h5_failure(out, err, "write attribute", name);
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
        return h5_failure(out, err, "write attribute", name);
    return ATTN_OK;
}

int attn_h5out_attr_double(attn_h5out *out, const char *name, double value, attn_error *err)
{
    if (put_attribute(out->group, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value) < 0)
        return h5_failure(out, err, "write attribute", name);
    return ATTN_OK;
}

int attn_h5out_attr_int(attn_h5out *out, const char *name, long long value, attn_error *err)
{
    if (put_attribute(out->group, name, H5T_STD_I64LE, H5T_NATIVE_LLONG, &value) < 0)
        return h5_failure(out, err, "write attribute", name);
    return ATTN_OK;
}

void attn_h5out_start_writeback(attn_h5out *out)
{
    void *handle = NULL;
    /* A shared file: MPI-IO's own; and asking for its access properties
     * would duplicate its communicator, a collective call. */
    if (out != NULL && out->shared_xfer >= 0)
        return;
    hid_t fapl = out != NULL ? H5Fget_access_plist(out->file) : H5I_INVALID_HID;
    /* The handle is an int file descriptor for the default sec2 driver only. */
    bool sec2 = fapl >= 0 && H5Pget_driver(fapl) == H5FD_SEC2;
    h5_close(fapl);
    if (!sec2 || H5Fget_vfd_handle(out->file, H5P_DEFAULT, &handle) < 0 || handle == NULL) {
        H5Eclear2(H5E_DEFAULT);
        return;
    }
    /* Only a hint: errors surface at the final fsync. */
    (void)sync_file_range(*(int *)handle, 0, 0, SYNC_FILE_RANGE_WRITE);
}

int attn_h5out_close(attn_h5out *out, attn_error *err)
{
    herr_t result = 0;
    if (out == NULL)
        return ATTN_OK;
    for (size_t i = 0; i < out->dataset_count; i++) {
        if (H5Dclose(out->datasets[i].id) < 0)
            result = -1;
        H5Tclose(out->datasets[i].file_type);
    }
    for (size_t i = 0; i < out->scale_count; i++)
        if (H5Dclose(out->scales[i].id) < 0)
            result = -1;
    if (out->group >= 0 && H5Gclose(out->group) < 0)
        result = -1;
    h5_close(out->shared_xfer);
    if (out->file >= 0 && result >= 0 && H5Fflush(out->file, H5F_SCOPE_GLOBAL) < 0)
        result = -1;
    if (out->file >= 0 && H5Fclose(out->file) < 0)
        result = -1;
    int status = result < 0 ? h5_failure(out, err, "finish writing", "the output") : ATTN_OK;
    free(out->path);
    free(out);
    return status;
}
