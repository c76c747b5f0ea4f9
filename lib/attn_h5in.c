/* attn_h5in.c - reading input datasets from an HDF5 file (attn_h5.h). */
/*
 * Shapes are what the file holds; a "row" is one index along axis 0, so a
 * batch slice of X (B, n, D) is rows [first, first + c): (c, n, D).
 */
#include "attn_h5.h"

#include <hdf5.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

struct attn_h5in {
    hid_t file;
    char *path;
    off_t file_size;            /* bytes on disk: no dataset stores more  */
    bool allow_external;        /* follow external links, external raw
                                   storage and virtual datasets          */
};

volatile sig_atomic_t attn_h5_reading;

/* Dynamic filter plugins: off unless attn_h5_allow_plugins. */
static bool plugins_allowed;

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
    /* No code is loaded because a file names a filter: HDF5_PLUGIN_PATH
     * would otherwise let any input pull a shared library in. */
    H5PLset_loading_state(plugins_allowed ? H5PL_ALL_PLUGIN : 0);
}

void attn_h5_allow_plugins(bool allow)
{
    plugins_allowed = allow;
    H5PLset_loading_state(allow ? H5PL_ALL_PLUGIN : 0);
}

void attn_h5in_allow_external(attn_h5in *in, bool allow)
{
    in->allow_external = allow;
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

static int h5in_open(const char *path, attn_h5in **out, attn_error *err)
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

    attn_h5in *in = attn_calloc(1, sizeof *in);
    if (in != NULL)
        in->file_size = st.st_size;
    if (in == NULL || (in->path = attn_strdup(path)) == NULL) {
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
    attn_h5_reading++;
    H5Fclose(in->file);
    attn_h5_reading--;
    free(in->path);
    free(in);
}

/* Soft links followed within one name: HDF5's own limit is 16. */
#define MAX_SOFT_DEPTH 8

/*
 * Checks every link along name ("/a/b/X" or "a/b/X", relative to the root)
 * before HDF5 follows it: each must exist; an external link (another
 * file) is refused unless allowed; a soft link must lead, by the same
 * rules, to an object that exists.  Returns ATTN_OK, ATTN_EINPUT with a
 * message, or 1 when the name is simply absent (no message).
 */
static int check_links(attn_h5in *in, const char *name, int depth, attn_error *err)
{
    char prefix[4096], target[4096];
    size_t len = strlen(name);
    if (len == 0 || len >= sizeof prefix || strcmp(name, "/") == 0)
        return 1;
    for (size_t i = 1; i <= len; i++) {
        if (name[i] != '/' && name[i] != '\0')
            continue;
        memcpy(prefix, name, i);
        prefix[i] = '\0';
        H5L_info_t link;
        if (H5Lexists(in->file, prefix, H5P_DEFAULT) <= 0 ||
            H5Lget_info(in->file, prefix, &link, H5P_DEFAULT) < 0) {
            H5Eclear2(H5E_DEFAULT);
            return 1;
        }
        if (link.type == H5L_TYPE_HARD)
            continue;
        if (link.type == H5L_TYPE_EXTERNAL) {
            const char *file = "?", *object = "?";
            unsigned flags;
            if (link.u.val_size > sizeof target ||
                H5Lget_val(in->file, prefix, target, sizeof target, H5P_DEFAULT) < 0 ||
                H5Lunpack_elink_val(target, link.u.val_size, &flags, &file, &object) < 0)
                H5Eclear2(H5E_DEFAULT);
            if (in->allow_external)
                continue;
            return attn_fail(err, ATTN_EINPUT,
                             "%s: %s is an external link to %s in file %s; not followed "
                             "(use --allow-external if you trust that file)",
                             in->path, prefix, object, file);
        }
        if (link.type != H5L_TYPE_SOFT)
            return attn_fail(err, ATTN_EINPUT, "%s: %s is a user-defined link; not followed",
                             in->path, prefix);
        /* A soft link: its target path, checked the same way. */
        if (link.u.val_size == 0 || link.u.val_size > sizeof target ||
            H5Lget_val(in->file, prefix, target, sizeof target, H5P_DEFAULT) < 0) {
            H5Eclear2(H5E_DEFAULT);
            return attn_fail(err, ATTN_EINPUT, "%s: cannot read the soft link %s", in->path, prefix);
        }
        target[sizeof target - 1] = '\0';
        if (depth >= MAX_SOFT_DEPTH)
            return attn_fail(err, ATTN_EINPUT, "%s: %s: more than %d soft links in a row",
                             in->path, prefix, MAX_SOFT_DEPTH);
        char resolved[sizeof prefix + sizeof target];
        if (target[0] == '/') {
            snprintf(resolved, sizeof resolved, "%s", target);
        } else {                                 /* relative to the link's group */
            const char *slash = strrchr(prefix, '/');
            int parent = slash != NULL ? (int)(slash - prefix) : 0;
            snprintf(resolved, sizeof resolved, "%.*s/%s", parent, prefix, target);
        }
        int status = check_links(in, resolved, depth + 1, err);
        if (status == 1)
            return attn_fail(err, ATTN_EINPUT, "%s: %s is a soft link to %s, which does not exist",
                             in->path, prefix, target);
        if (status != ATTN_OK)
            return status;
    }
    return ATTN_OK;
}

/* Element sizes attnrun reads: half, single and double floats; integers
 * (masks) of 1 to 8 bytes.  A damaged type can claim gigabytes per value. */
static bool type_size_ok(H5T_class_t cls, size_t size)
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
static int check_storage(attn_h5in *in, const char *name, hid_t dset, hid_t space,
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
        status = attn_fail(err, ATTN_EINPUT,
                           "%s: %s is a virtual dataset, its values come from other files; "
                           "not followed (use --allow-external if you trust them)", in->path, name);
        goto out;
    }
    if (externals > 0 && !in->allow_external) {
        char file[256] = "?";
        off_t offset;
        hsize_t size;
        if (H5Pget_external(dcpl, 0, sizeof file, file, &offset, &size) < 0)
            H5Eclear2(H5E_DEFAULT);
        file[sizeof file - 1] = '\0';
        status = attn_fail(err, ATTN_EINPUT,
                           "%s: %s keeps its values in external file %s; not followed "
                           "(use --allow-external if you trust it)", in->path, name, file);
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
        if (!filter_built_in(id) && !plugins_allowed) {
            status = attn_fail(err, ATTN_EINPUT,
                               "%s: %s needs filter %d (%s), which HDF5 would load as a plugin; "
                               "plugins are off (use --allow-plugins to load them)",
                               in->path, name, (int)id, filter_name[0] ? filter_name : "unnamed");
            goto out;
        }
    }
    if (layout == H5D_VIRTUAL || externals > 0)
        goto out;                                 /* allowed: not in this file */

    hssize_t count = H5Sget_simple_extent_npoints(space);
    size_t logical;
    hsize_t stored = H5Dget_storage_size(dset);
    if (count < 0 || !attn_size_mul(&logical, (size_t)count, elem_size)) {
        status = attn_fail(err, ATTN_EINPUT, "%s: %s is too large to address", in->path, name);
        goto out;
    }
    if (stored > (hsize_t)in->file_size) {
        status = attn_fail(err, ATTN_EINPUT,
                           "%s: %s claims %llu bytes of storage in a file of %lld bytes (damaged file)",
                           in->path, name, (unsigned long long)stored, (long long)in->file_size);
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
        for (int i = 0; i < rank; i++)
            expected *= chunk[i] ? (dims[i] + chunk[i] - 1) / chunk[i] : 0;
        complete = allocated >= expected;
    }
    if (!complete)
        status = attn_fail(err, ATTN_EINPUT,
                           "%s: %s stores %llu bytes for %zu bytes of values; the rest was never "
                           "written (a damaged or unfinished file)",
                           in->path, name, (unsigned long long)stored, logical);
out:
    H5Pclose(dcpl);
    if (status != ATTN_OK)
        H5Eclear2(H5E_DEFAULT);
    return status;
}

/* Element classes, named for messages. */
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

static int h5in_describe(attn_h5in *in, attn_data_kind kind, bool required,
                         attn_tensor_info *info, attn_error *err)
{
    hid_t dset = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    hsize_t dims[H5S_MAX_RANK];
    char detail[256];
    int status = ATTN_OK;

    info->present = false;
    info->rank = 0;
    int links = check_links(in, info->name, 0, err);
    if (links == 1) {
        if (required)
            return attn_fail(err, ATTN_EINPUT, "%s: no dataset %s", in->path, info->name);
        return ATTN_OK;
    }
    if (links != ATTN_OK)
        return links;
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
    size_t elem_size = H5Tget_size(type);
    if (!type_size_ok(cls, elem_size)) {
        status = attn_fail(err, ATTN_EINPUT, "%s: dataset %s has %zu-byte %s elements; %s expected",
                           in->path, info->name, elem_size, class_name(cls),
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
    if ((status = check_storage(in, info->name, dset, space, elem_size, err)) != ATTN_OK)
        goto out;
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

static int h5in_read_floats(attn_h5in *in, const char *name, attn_precision precision,
                            size_t first, size_t count, void *buf, attn_error *err)
{
    hid_t mem_type = precision == ATTN_F64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
    return read_rows(in, name, mem_type, first, count, buf, err);
}

static int h5in_read_mask(attn_h5in *in, const char *name, size_t first, size_t count,
                          unsigned char *keep, attn_error *err)
{
    attn_tensor_info info = {.name = name};
    hid_t dset = H5I_INVALID_HID, file_type = H5I_INVALID_HID, mem_type = H5I_INVALID_HID;
    unsigned char *raw = NULL;
    size_t elements, elem_size, bytes;
    int status = h5in_describe(in, ATTN_DATA_MASK, true, &info, err);
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
    if (mem_type >= 0)
        H5Tclose(mem_type);
    if (file_type >= 0)
        H5Tclose(file_type);
    if (dset >= 0)
        H5Dclose(dset);
    return status;
}

static int h5in_read_value(attn_h5in *in, const char *name, const size_t *index, size_t rank,
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

/* The public entry points: the same, with attn_h5_reading raised while
 * HDF5 parses the input (see attn_h5.h). */
int attn_h5in_open(const char *path, attn_h5in **out, attn_error *err)
{
    attn_h5_reading++;
    int status = h5in_open(path, out, err);
    attn_h5_reading--;
    return status;
}

int attn_h5in_describe(attn_h5in *in, attn_data_kind kind, bool required,
                       attn_tensor_info *info, attn_error *err)
{
    attn_h5_reading++;
    int status = h5in_describe(in, kind, required, info, err);
    attn_h5_reading--;
    return status;
}

int attn_h5in_read_floats(attn_h5in *in, const char *name, attn_precision precision,
                          size_t first, size_t count, void *buf, attn_error *err)
{
    attn_h5_reading++;
    int status = h5in_read_floats(in, name, precision, first, count, buf, err);
    attn_h5_reading--;
    return status;
}

int attn_h5in_read_mask(attn_h5in *in, const char *name, size_t first, size_t count,
                        unsigned char *keep, attn_error *err)
{
    attn_h5_reading++;
    int status = h5in_read_mask(in, name, first, count, keep, err);
    attn_h5_reading--;
    return status;
}

int attn_h5in_read_value(attn_h5in *in, const char *name, const size_t *index, size_t rank,
                         double *value, attn_error *err)
{
    attn_h5_reading++;
    int status = h5in_read_value(in, name, index, rank, value, err);
    attn_h5_reading--;
    return status;
}
