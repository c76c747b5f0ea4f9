/*
 * in_safety.c - what an input may make attnrun do, checked before HDF5
 * does it: the links on the way to a dataset followed one at a time, and
 * where a dataset's values live (other files, plugins, storage the file
 * cannot hold) (h5/h5.h).
 */
#define _GNU_SOURCE     /* O_NOCTTY, struct stat's st_mtim */
#include "h5/in.h"

#include "core/core.h"
#include "h5/close.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Soft links followed on the way to one object, in all (HDF5's own
 * default limit, H5Pset_nlinks). */
#define MAX_SOFT_LINKS 16

/* The longest soft-link target followed. */
#define MAX_LINK_TARGET ((size_t)1 << 16)

/* The next name of path[*at ...] ("" and "." skipped): its start and
 * length, *at moved past it.  false at the end. */
bool h5in_next_part(const char *path, size_t *at, const char **part, size_t *len)
{
    for (;;) {
        while (path[*at] == '/')
            (*at)++;
        if (path[*at] == '\0')
            return false;
        *part = path + *at;
        *len = strcspn(*part, "/");
        *at += *len;
        if (!(*len == 1 && (*part)[0] == '.'))
            return true;
    }
}

/* An external link's file and object, for messages (into buf). */
static void describe_external(hid_t group, const char *link, size_t size, char *buf, size_t len)
{
    char *value = size <= MAX_LINK_TARGET ? attn_malloc(size) : NULL;
    const char *file = "?", *object = "?";
    unsigned flags;
    if (value == NULL || H5Lget_val(group, link, value, size, H5P_DEFAULT) < 0 ||
        H5Lunpack_elink_val(value, size, &flags, &file, &object) < 0)
        H5Eclear2(H5E_DEFAULT);
    snprintf(buf, len, "%s in file %s", object, file);
    free(value);
}

/* A link on the way to `name` that HDF5 cannot read: a damaged file. */
static int damaged(const attn_h5in *in, const char *name, const char *link, attn_error *err)
{
    char detail[256];
    return attn_fail(err, ATTN_EINPUT, "%s: cannot follow %.200s on the way to %.200s (a damaged "
                     "file): %s", in->path, link, name, attn_h5_error_detail(detail, sizeof detail));
}

/*
 * Opens the object `name` names ("/a/b/X" or "a/b/X", from the root),
 * following every link on the way itself, once, left to right: a hard link
 * as it is; a soft link by its target (from the root when absolute, else
 * from the group holding the link), at most MAX_SOFT_LINKS in all, like
 * the kernel's ELOOP; an external link (another file) only when allowed;
 * a user-defined link never.  Any length of path works.
 * Returns ATTN_OK with *object open, 1 when the name leads nowhere (no
 * message), or ATTN_EINPUT / ATTN_ENOMEM with a message -- also for a
 * soft link on the way that leads nowhere.
 */
int h5in_resolve(attn_h5in *in, const char *name, hid_t *object, attn_error *err)
{
    char *path = attn_strdup(name), *target = NULL;
    const char *part;
    size_t at = 0, len, links = 0;
    hid_t here = H5Gopen2(in->file, "/", H5P_DEFAULT);
    int status = ATTN_OK;
    *object = H5I_INVALID_HID;
    if (path == NULL || here < 0) {
        status = attn_fail(err, path == NULL ? ATTN_ENOMEM : ATTN_EINPUT,
                           "%s: cannot look up %s", in->path, name);
        goto out;
    }
    if (!h5in_next_part(path, &at, &part, &len)) {
        status = 1;                           /* "" or "/": not a dataset */
        goto out;
    }
    do {
        char link[len + 1];
        H5L_info_t info;
        memcpy(link, part, len);
        link[len] = '\0';
        if (H5Iget_type(here) == H5I_GROUP) {
            char group[256];
            snprintf(group, sizeof group, "/%.*s", (int)(part - path < 250 ? part - path : 250),
                     path);
            if ((status = h5in_check_names(in, here, group, err)) != ATTN_OK)
                goto out;
        }
        htri_t there = H5Iget_type(here) == H5I_GROUP ? H5Lexists(here, link, H5P_DEFAULT) : 0;
        if (there == 0 && links > 0) {        /* a soft link led nowhere */
            status = attn_fail(err, ATTN_EINPUT, "%s: %.200s leads through a soft link to "
                               "%.200s, which does not exist", in->path, name, path);
            goto out;
        }
        if (there == 0) {
            status = 1;                       /* no such link, or not a group */
            goto out;
        }
        if (there < 0 || H5Lget_info(here, link, &info, H5P_DEFAULT) < 0) {
            status = damaged(in, name, link, err);
            goto out;
        }
        if (info.type == H5L_TYPE_SOFT) {
            size_t size = info.u.val_size, rest = strlen(path + at);
            if (++links > MAX_SOFT_LINKS) {
                status = attn_fail(err, ATTN_EINPUT, "%s: %s: more than %d soft links on the way "
                                   "(a loop?); not followed", in->path, name, MAX_SOFT_LINKS);
                goto out;
            }
            if (size == 0 || size > MAX_LINK_TARGET ||
                (target = attn_malloc(size + 1 + rest + 1)) == NULL ||
                H5Lget_val(here, link, target, size, H5P_DEFAULT) < 0) {
                status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the soft link %s (on the "
                                   "way to %s)", in->path, link, name);
                goto out;
            }
            target[size] = '\0';
            size = strlen(target);
            memcpy(target + size, path + at, rest + 1);   /* target, then the rest */
            if (target[0] == '/') {
                H5Gclose(here);
                if ((here = H5Gopen2(in->file, "/", H5P_DEFAULT)) < 0) {
                    status = 1;
                    goto out;
                }
            }
            free(path);
            path = target;
            target = NULL;
            at = 0;
            continue;
        }
        if (info.type == H5L_TYPE_EXTERNAL && !in->allow_external) {
            char where[512];
            describe_external(here, link, info.u.val_size, where, sizeof where);
            status = attn_fail_hint(err, ATTN_EINPUT, ATTN_HINT_EXTERNAL,
                                    "%s: %s is an external link to %s; not followed", in->path,
                                    name, where);
            goto out;
        }
        if (info.type != H5L_TYPE_HARD && info.type != H5L_TYPE_EXTERNAL) {
            status = attn_fail(err, ATTN_EINPUT, "%s: %s is a user-defined link; not followed",
                               in->path, name);
            goto out;
        }
        hid_t next = H5Oopen(here, link, H5P_DEFAULT);
        if (next < 0) {
            status = damaged(in, name, link, err);
            goto out;
        }
        H5Oclose(here);
        here = next;
    } while (h5in_next_part(path, &at, &part, &len));
    *object = here;
    here = H5I_INVALID_HID;
out:
    h5_close(here);
    free(path);
    free(target);
    if (status != ATTN_OK)
        H5Eclear2(H5E_DEFAULT);
    return status;
}

/*
 * The open dataset `name`, resolved once (resolve) and kept for the reads
 * that follow.  Returns ATTN_OK, 1 when absent (no message), or
 * ATTN_EINPUT / ATTN_ENOMEM.
 */
int h5in_dataset_of(attn_h5in *in, const char *name, hid_t *dataset, attn_error *err)
{
    for (const open_dataset *d = in->datasets; d != NULL; d = d->next)
        if (strcmp(d->name, name) == 0) {
            *dataset = d->id;
            return ATTN_OK;
        }
    hid_t object;
    int status = h5in_resolve(in, name, &object, err);
    if (status != ATTN_OK)
        return status;
    if (H5Iget_type(object) != H5I_DATASET) {
        H5Oclose(object);
        return attn_fail(err, ATTN_EINPUT, "%s: %s is not a dataset", in->path, name);
    }
    size_t len = strlen(name);
    open_dataset *d = attn_malloc(sizeof *d + len + 1);
    if (d == NULL) {
        H5Dclose(object);
        return attn_fail(err, ATTN_ENOMEM, "%s: out of memory", in->path);
    }
    d->next = in->datasets;
    d->id = object;
    d->heap_checked = false;
    memcpy(d->name, name, len + 1);
    in->datasets = d;
    *dataset = object;
    return ATTN_OK;
}

/* Element sizes attnrun reads: half, single and double floats; integers
 * (masks) of 1 to 8 bytes.  A damaged type can claim gigabytes per value. */
bool h5in_type_size_ok(H5T_class_t cls, size_t size)
{
    if (cls == H5T_FLOAT)
        return size == 2 || size == 4 || size == 8;
    return size == 1 || size == 2 || size == 4 || size == 8;
}

/* Filters HDF5 has built in; anything else would need a plugin. */
static bool filter_built_in(H5Z_filter_t id)
{
    return id == H5Z_FILTER_DEFLATE || id == H5Z_FILTER_SHUFFLE || id == H5Z_FILTER_FLETCHER32 ||
           id == H5Z_FILTER_SZIP || id == H5Z_FILTER_NBIT || id == H5Z_FILTER_SCALEOFFSET;
}

/*
 * Where a dataset's values live, checked before any is read: no virtual
 * dataset or external raw storage unless allowed; no filter that needs a
 * plugin unless plugins are allowed; and the storage must be plausible --
 * no more than the file holds, and every value written (an unwritten part
 * would read as fill values: a damaged or unfinished file, or a huge
 * declared shape with nothing behind it).
 */
int h5in_check_storage(attn_h5in *in, const char *name, hid_t dset, hid_t space,
                         size_t elem_size, attn_error *err)
{
    hid_t dcpl = H5Dget_create_plist(dset);
    int status = ATTN_OK;
    if (dcpl < 0)
        return attn_fail(err, ATTN_EINPUT, "%s: cannot read the storage of %s", in->path, name);
    H5D_layout_t layout = H5Pget_layout(dcpl);
    int externals = H5Pget_external_count(dcpl);
    int filters = H5Pget_nfilters(dcpl);
    if (layout == H5D_VIRTUAL && !in->allow_external) {
        status = attn_fail_hint(err, ATTN_EINPUT, ATTN_HINT_EXTERNAL,
                                "%s: %s is a virtual dataset, its values come from other files; "
                                "not followed", in->path, name);
        goto out;
    }
    if (externals > 0 && !in->allow_external) {
        char file[256] = "?";
        off_t offset;
        hsize_t size;
        if (H5Pget_external(dcpl, 0, sizeof file, file, &offset, &size) < 0)
            H5Eclear2(H5E_DEFAULT);
        file[sizeof file - 1] = '\0';
        status = attn_fail_hint(err, ATTN_EINPUT, ATTN_HINT_EXTERNAL,
                                "%s: %s keeps its values in external file %s; not followed",
                                in->path, name, file);
        goto out;
    }
    if (layout < 0 || externals < 0 || filters < 0) {
        status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the storage of %s", in->path, name);
        goto out;
    }
    for (int i = 0; i < filters; i++) {
        unsigned flags, config;
        size_t values = 0;
        char filter_name[64] = "";
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &values, NULL,
                                         sizeof filter_name, filter_name, &config);
        if (id < 0) {
            status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the filters of %s", in->path, name);
            goto out;
        }
        if (!filter_built_in(id) && !h5_plugins_allowed()) {
            status = attn_fail_hint(err, ATTN_EINPUT, ATTN_HINT_PLUGINS,
                                    "%s: %s needs filter %d (%s), which HDF5 would load as a "
                                    "plugin; plugins are off", in->path, name, (int)id,
                                    filter_name[0] ? filter_name : "unnamed");
            goto out;
        }
    }
    if (layout == H5D_VIRTUAL || externals > 0)
        goto out;                                 /* allowed: not in this file */

    hssize_t count = H5Sget_simple_extent_npoints(space);
    size_t logical;
    hsize_t stored = H5Dget_storage_size(dset), file_size = 0;
    hid_t file = H5Iget_file_id(dset);      /* the dataset's own file: an
                                               external link leads elsewhere */
    if (file < 0 || H5Fget_filesize(file, &file_size) < 0)
        file_size = (hsize_t)in->opened.st_size;
    h5_close(file);
    if (count < 0 || !attn_size_mul(&logical, (size_t)count, elem_size)) {
        status = attn_fail(err, ATTN_EINPUT, "%s: %s is too large to address", in->path, name);
        goto out;
    }
    if (stored > file_size) {
        status = attn_fail(err, ATTN_EINPUT,
                           "%s: %s claims %llu bytes of storage in a file of %llu bytes (damaged file)",
                           in->path, name, (unsigned long long)stored, (unsigned long long)file_size);
        goto out;
    }
    /* Contiguous: every byte stored.  Chunked: every chunk of the extent
     * (bytes would not do: padded edge chunks can cover a missing one). */
    bool complete = layout == H5D_CHUNKED || stored >= logical;
    if (layout == H5D_CHUNKED && logical > 0) {
        hsize_t dims[H5S_MAX_RANK], chunk[H5S_MAX_RANK], allocated = 0, expected = 1;
        int rank = H5Sget_simple_extent_dims(space, dims, NULL);
        if (rank < 0 || H5Pget_chunk(dcpl, rank, chunk) != rank ||
            H5Dget_num_chunks(dset, space, &allocated) < 0) {
            status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the chunks of %s", in->path, name);
            goto out;
        }
        hsize_t last = 1;             /* chunks along the last axis */
        for (int i = 0; i < rank; i++) {
            last = chunk[i] ? (dims[i] + chunk[i] - 1) / chunk[i] : 0;
            expected *= last;
        }
        /* a results file's map: each row of tiles holds one, its diagonal */
        if (in->tiled_maps && last > 0)
            expected /= last;
        complete = allocated >= expected;
    }
    if (!complete)
        status = attn_fail(err, ATTN_EINPUT,
                           "%s: %s stores %llu bytes for %zu bytes of values; %s never "
                           "written (a damaged or unfinished file)",
                           in->path, name, (unsigned long long)stored, logical,
                           in->tiled_maps ? "whole rows of it were" : "the rest was");
out:
    H5Pclose(dcpl);
    if (status != ATTN_OK)
        H5Eclear2(H5E_DEFAULT);
    return status;
}

/* An element type, named for messages: its class, and h5py's bool (an
 * enum of FALSE = 0 and TRUE = 1) as what it is. */
const char *h5in_type_name(hid_t type)
{
    H5T_class_t cls = H5Tget_class(type);
    if (cls == H5T_ENUM && H5Tget_nmembers(type) == 2) {
        char *a = H5Tget_member_name(type, 0), *b = H5Tget_member_name(type, 1);
        bool boolean = a != NULL && b != NULL && strcmp(a, "FALSE") == 0 &&
                       strcmp(b, "TRUE") == 0;
        H5free_memory(a);
        H5free_memory(b);
        if (boolean)
            return "boolean (h5py stores bool as an HDF5 enum)";
    }
    return h5in_class_name(cls);
}

/* Element classes, named for messages. */
const char *h5in_class_name(H5T_class_t cls)
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

