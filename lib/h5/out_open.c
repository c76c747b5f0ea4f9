/*
 * out_open.c - an output opened for writing: a new file, the --in-place
 * copy of the input, or the file every rank of an MPI job shares; its
 * group made; then flushed and closed (h5/h5.h).
 */
#define _GNU_SOURCE     /* sync_file_range */
#include "h5/out.h"

#include "core/core.h"
#include "h5/close.h"

#include <hdf5.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int h5out_failure(attn_h5out *out, attn_error *err, const char *what, const char *name)
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
        return h5out_failure(out, err, "open group", group);
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
    int status = out->file < 0 ? h5out_failure(out, err, create ? "create" : "open",
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
    int status = result < 0 ? h5out_failure(out, err, "finish writing", "the output") : ATTN_OK;
    free(out->path);
    free(out);
    return status;
}

