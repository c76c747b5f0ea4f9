/*
 * out_clear.c - room made, in a group attnrun did not make (--in-place), for
 * the results of this run: only what attnrun wrote is ever replaced, and
 * only with force (h5/h5.h).
 */
#include "h5/out.h"

#include "h5/close.h"

#include <hdf5.h>
#include <hdf5_hl.h>

#include <stdio.h>
#include <string.h>

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
    int status = rank < 0 ? h5out_failure(out, err, "open the old result", name) : ATTN_OK;
    for (int axis = 0; axis < rank && status == ATTN_OK; axis++) {
        attached_scales found = {.count = 0};
        if (H5DSget_num_scales(dataset, (unsigned)axis) > 0)
            H5DSiterate_scales(dataset, (unsigned)axis, NULL, keep_scale, &found);
        for (size_t i = 0; i < found.count; i++) {
            if (status == ATTN_OK && H5DSdetach_scale(dataset, found.ids[i], (unsigned)axis) < 0)
                status = h5out_failure(out, err, "detach the axes of the old result", name);
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
        status = h5out_failure(out, err, "remove the old result", name);
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
        return h5out_failure(out, err, "remove the old axis scale", label);
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
        return h5out_failure(out, err, "remove attribute", name);
    return ATTN_OK;
}

