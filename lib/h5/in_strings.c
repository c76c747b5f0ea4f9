/*
 * in_strings.c - the strings of an input (tokens): a dataset or an
 * attribute of strings described and read in blocks, variable-length ones
 * into an arena freed whole whatever HDF5 did (h5/h5.h).
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
#include <stdint.h>

/* HDF5 1.12 renamed the call that frees variable-length data read. */
#if H5_VERSION_GE(1, 12, 0)
#define reclaim_variable H5Treclaim
#else
#define reclaim_variable H5Dvlen_reclaim
#endif

/* An array of strings: a dataset (kept open in in->datasets) or an
 * attribute (open until close_strings). */
typedef struct string_array {
    hid_t dataset;
    hid_t attribute;
} string_array;

static void close_strings(string_array *a)
{
    h5_close(a->attribute);
    a->attribute = H5I_INVALID_HID;
}

/*
 * Opens the strings of the dataset `name`, or of the attribute `attribute`
 * of the object `name` (the root group for "" or "/"), the object found as
 * resolve finds it.  Messages call them `what`.
 */
static int open_strings(attn_h5in *in, const char *name, const char *attribute, const char *what,
                        string_array *a, attn_error *err)
{
    char detail[256];
    const char *part;
    size_t at = 0, len;
    hid_t holder = H5I_INVALID_HID;
    int status = ATTN_OK;
    a->dataset = a->attribute = H5I_INVALID_HID;
    if (attribute == NULL) {
        status = h5in_dataset_of(in, name, &a->dataset, err);
        return status == 1 ? attn_fail(err, ATTN_EINPUT, "%s: %s does not exist", in->path, what)
                           : status;
    }
    if (!h5in_next_part(name, &at, &part, &len))
        holder = H5Oopen(in->file, "/", H5P_DEFAULT);
    else if ((status = h5in_resolve(in, name, &holder, err)) == 1)
        return attn_fail(err, ATTN_EINPUT, "%s: %s does not exist: there is no object %s",
                         in->path, what, name);
    if (status != ATTN_OK)
        return status;
    htri_t there = holder < 0 ? -1 : H5Aexists(holder, attribute);
    if (there > 0)
        a->attribute = H5Aopen(holder, attribute, H5P_DEFAULT);
    h5_close(holder);
    if (there == 0)
        status = attn_fail(err, ATTN_EINPUT, "%s: %s does not exist", in->path, what);
    else if (a->attribute < 0)
        status = attn_fail(err, ATTN_EINPUT, "%s: cannot open %s: %s", in->path, what,
                           attn_h5_error_detail(detail, sizeof detail));
    if (status != ATTN_OK)
        H5Eclear2(H5E_DEFAULT);
    return status;
}

static int h5in_describe_strings(attn_h5in *in, const char *name, const char *attribute,
                                 const char *what, size_t max_fixed, attn_tensor_info *info,
                                 size_t *fixed, attn_error *err)
{
    string_array a;
    hid_t type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    hsize_t dims[H5S_MAX_RANK];
    info->present = false;
    info->rank = 0;
    *fixed = 0;
    int status = open_strings(in, name, attribute, what, &a, err);
    if (status != ATTN_OK)
        return status;
    bool attr = a.attribute >= 0;
    type = attr ? H5Aget_type(a.attribute) : H5Dget_type(a.dataset);
    space = attr ? H5Aget_space(a.attribute) : H5Dget_space(a.dataset);
    H5T_class_t cls = type < 0 ? H5T_NO_CLASS : H5Tget_class(type);
    htri_t variable = cls == H5T_STRING ? H5Tis_variable_str(type) : 0;
    size_t size = type < 0 ? 0 : H5Tget_size(type);
    int rank = space < 0 ? -1 : H5Sget_simple_extent_dims(space, dims, NULL);
    if (type < 0 || space < 0 || variable < 0) {
        status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the type or shape of %s", in->path,
                           what);
    } else if (cls != H5T_STRING) {
        status = attn_fail(err, ATTN_EINPUT, "%s: %s has %s elements; strings expected%s",
                           in->path, what, h5in_type_name(type),
                           cls == H5T_INTEGER ? " (token ids: store the decoded tokens, in h5py "
                                                "f[name] = np.array(tokens, dtype=h5py."
                                                "string_dtype()))" : "");
    } else if (!variable && (size == 0 || size > max_fixed)) {
        status = attn_fail(err, ATTN_EINPUT, "%s: %s has fixed-length strings of %zu bytes; at "
                           "most %zu bytes per string", in->path, what, size, max_fixed);
    } else if (H5Sget_simple_extent_type(space) == H5S_NULL || rank < 0 || rank > ATTN_MAX_RANK) {
        status = attn_fail(err, ATTN_EINPUT, "%s: %s holds no readable data space", in->path, what);
    } else if (!attr) {
        status = h5in_check_storage(in, name, a.dataset, space, size, err);
    }
    if (status == ATTN_OK) {
        info->rank = (size_t)rank;
        for (int i = 0; i < rank; i++)
            info->dims[i] = (size_t)dims[i];
        info->present = true;
        *fixed = variable ? 0 : size;
    }
    h5_close(space, type);
    close_strings(&a);
    if (status != ATTN_OK)
        H5Eclear2(H5E_DEFAULT);
    return status;
}

/*
 * The variable-length strings HDF5 allocates while it reads a dataset:
 * each remembers the size HDF5 asked for (the bytes the file holds, NULs
 * included, plus the NUL it appends), and all of them are freed together
 * whatever the read did -- a read that fails halfway leaves some in HDF5's
 * own buffers, where nothing else could free them.
 */
typedef struct vlen_block {
    struct vlen_block *next;
    size_t size;
} vlen_block;

typedef struct vlen_arena {
    vlen_block *blocks;
    bool failed;                  /* an allocation failed */
} vlen_arena;

static void *vlen_allocate(size_t size, void *info)
{
    vlen_arena *arena = info;
    vlen_block *block = size <= SIZE_MAX - sizeof *block ? attn_calloc(1, sizeof *block + size)
                                                         : NULL;
    if (block == NULL) {
        arena->failed = true;
        return NULL;
    }
    block->size = size;
    block->next = arena->blocks;
    arena->blocks = block;
    return block + 1;
}

static void vlen_keep(void *memory, void *info)
{
    (void)memory;                 /* freed with the arena */
    (void)info;
}

static void vlen_free_arena(vlen_arena *arena)
{
    for (vlen_block *b = arena->blocks, *next; b != NULL; b = next) {
        next = b->next;
        free(b);
    }
    arena->blocks = NULL;
}

/* The bytes of a string of the arena, its NUL not counted. */
static size_t vlen_length(const char *string)
{
    const vlen_block *block = (const vlen_block *)(const void *)string - 1;
    return block->size > 0 ? block->size - 1 : 0;
}

/* One string of a raw buffer read: where it starts and its bytes. */
typedef struct raw_strings {
    const char *buf;
    size_t size;                  /* bytes of a fixed-length string; 0: pointers */
    bool space_padded;
    bool arena;                   /* variable-length strings of a vlen_arena */
} raw_strings;

static const char *raw_string(const raw_strings *raw, size_t index, size_t *length)
{
    if (raw->size == 0) {
        const char *s = ((char *const *)(const void *)raw->buf)[index];
        *length = s == NULL ? 0 : raw->arena ? vlen_length(s) : strlen(s);
        return s != NULL ? s : "";
    }
    const char *s = raw->buf + index * raw->size;
    size_t n = raw->size;
    while (n > 0 && s[n - 1] == (raw->space_padded ? ' ' : '\0'))
        n--;
    *length = n;
    return s;
}

/* Copies the strings at index[0 .. count) of raw into *out. */
static int pack_strings(const attn_h5in *in, const raw_strings *raw, const size_t *index,
                        size_t count, attn_strings *out, attn_error *err)
{
    size_t total = 0, length;
    out->count = count;
    out->strings = attn_calloc(count, sizeof *out->strings);
    out->lengths = attn_calloc(count, sizeof *out->lengths);
    if (out->strings == NULL || out->lengths == NULL)
        return attn_fail(err, ATTN_ENOMEM, "%s: out of memory reading %zu strings", in->path, count);
    for (size_t i = 0; i < count; i++) {
        raw_string(raw, index[i], &out->lengths[i]);
        if (!attn_size_add(&total, total, out->lengths[i]) || !attn_size_add(&total, total, 1))
            return attn_fail(err, ATTN_EINPUT, "%s: the strings are too long to address", in->path);
    }
    if ((out->text = attn_malloc(total)) == NULL)
        return attn_fail(err, ATTN_ENOMEM, "%s: out of memory reading %zu bytes of strings",
                         in->path, total);
    char *at = out->text;
    for (size_t i = 0; i < count; i++) {
        const char *s = raw_string(raw, index[i], &length);
        memcpy(at, s, length);
        at[length] = '\0';
        out->strings[i] = at;
        at += length + 1;
    }
    return ATTN_OK;
}

void attn_strings_free(attn_strings *strings)
{
    free(strings->strings);
    free(strings->lengths);
    free(strings->text);
    memset(strings, 0, sizeof *strings);
}

/* The memory type strings are read as: the file's own for fixed-length
 * ones (no conversion), C strings of the file's character set otherwise. */
static hid_t string_memory_type(hid_t file_type, bool variable)
{
    if (!variable)
        return H5Tcopy(file_type);
    hid_t type = H5Tcopy(H5T_C_S1);
    if (type >= 0 && (H5Tset_size(type, H5T_VARIABLE) < 0 ||
                      H5Tset_cset(type, H5Tget_cset(file_type)) < 0)) {
        H5Tclose(type);
        return H5I_INVALID_HID;
    }
    return type;
}

/*
 * Reads the block first[], count[] of the dataset a->dataset into buf
 * (its elements of mem_type, row-major), the variable-length strings into
 * arena.
 */
static herr_t read_string_block(hid_t dataset, hid_t mem_type, bool variable, int rank,
                                const size_t *first, const size_t *count, void *buf,
                                vlen_arena *arena)
{
    hsize_t start[2], dims[2];
    hid_t file_space = H5Dget_space(dataset), mem_space = H5I_INVALID_HID;
    hid_t transfer = H5Pcreate(H5P_DATASET_XFER);
    herr_t result = file_space < 0 || transfer < 0 ? -1 : 0;
    for (int i = 0; i < rank; i++) {
        start[i] = first[i];
        dims[i] = count[i];
    }
    if (result >= 0 && variable)
        result = H5Pset_vlen_mem_manager(transfer, vlen_allocate, arena, vlen_keep, arena);
    if (result >= 0)
        result = H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, dims, NULL);
    if (result >= 0 && (mem_space = H5Screate_simple(rank, dims, NULL)) < 0)
        result = -1;
    if (result >= 0)
        result = H5Dread(dataset, mem_type, mem_space, file_space, transfer, buf);
    h5_close(mem_space, file_space, transfer);
    return result;
}

/* ---- variable-length strings checked in the global heap ----------------- */

/*
 * HDF5 1.10 trusts the global heap a variable-length string lives in: a
 * damaged collection whose object claims more bytes than the string's
 * descriptor (or than the collection holds) makes H5HG_read copy past
 * its buffers and corrupt the process's heap (no error, no signal that
 * can be trusted).  So before HDF5 reads any, each descriptor of the
 * dataset -- its length, the collection's address and the object's index
 * (the file format's "global heap ID") -- is read raw and checked against
 * its collection: within the file, "GCOL", every object inside it, and
 * the object the length the descriptor says.
 */

/* One collection read whole (the last one, kept for the next descriptor). */
typedef struct heap_collection {
    uint64_t address;
    unsigned char *bytes;       /* (size) */
    size_t size;
} heap_collection;

/* Reads the collection at `address` into c, checking its header:
 * ATTN_OK, ATTN_EINPUT (no collection there) or ATTN_ENOMEM. */
static int load_collection(int fd, uint64_t address, size_t sizeof_size, uint64_t file_size,
                           heap_collection *c)
{
    unsigned char head[8 + 16];
    if (c->bytes != NULL && c->address == address)
        return ATTN_OK;
    free(c->bytes);
    c->bytes = NULL;
    const size_t header = 8 + sizeof_size;
    if (address >= file_size || file_size - address < header ||
        pread(fd, head, header, (off_t)address) != (ssize_t)header ||
        memcmp(head, "GCOL", 4) != 0 || head[4] != 1)
        return ATTN_EINPUT;
    uint64_t size = h5in_le_number(head + 8, sizeof_size);
    if (size < header || size > file_size - address || size > SIZE_MAX)
        return ATTN_EINPUT;
    if ((c->bytes = attn_malloc((size_t)size)) == NULL)
        return ATTN_ENOMEM;
    if (pread(fd, c->bytes, (size_t)size, (off_t)address) != (ssize_t)size)
        return ATTN_EINPUT;
    c->address = address;
    c->size = (size_t)size;
    return ATTN_OK;
}

/* Whether object `index` of collection c holds exactly `length` bytes,
 * every object before it lying inside the collection. */
static bool object_fits(const heap_collection *c, size_t sizeof_size, uint64_t index,
                        uint64_t length)
{
    const size_t object_header = 8 + sizeof_size;
    size_t at = 8 + sizeof_size;
    while (at + object_header <= c->size) {
        uint64_t id = h5in_le_number(c->bytes + at, 2);
        uint64_t size = h5in_le_number(c->bytes + at + 8, sizeof_size);
        if (id == 0)                        /* free space: the rest */
            return false;
        if (size > c->size - at - object_header)
            return false;
        if (id == index)
            return size == length;
        at += object_header + (size_t)((size + 7) & ~(uint64_t)7);
    }
    return false;
}

/* The raw descriptors of a variable-length string dataset, stored
 * contiguous or in unfiltered chunks: checked one by one. */
static int check_heap(attn_h5in *in, hid_t dataset, const char *name, attn_error *err)
{
    hid_t dcpl = H5Dget_create_plist(dataset), fcpl = H5Fget_create_plist(in->file);
    hid_t space = H5Dget_space(dataset);
    size_t sizeof_addr = 0, sizeof_size = 0;
    heap_collection c = {0, NULL, 0};
    unsigned char *raw = NULL;
    int status = ATTN_OK;
    const H5D_layout_t layout = dcpl < 0 ? H5D_LAYOUT_ERROR : H5Pget_layout(dcpl);
    const int filters = dcpl < 0 ? -1 : H5Pget_nfilters(dcpl);
    const hssize_t points = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    if (fcpl < 0 || H5Pget_sizes(fcpl, &sizeof_addr, &sizeof_size) < 0 || sizeof_addr > 8 ||
        sizeof_size > 8 || points < 0) {
        status = attn_fail(err, ATTN_EINPUT, "%s: cannot read how %s is stored", in->path, name);
        goto out;
    }
    if (layout != H5D_CONTIGUOUS && !(layout == H5D_CHUNKED && filters == 0)) {
        status = attn_fail(err, ATTN_EINPUT, "%s: %s keeps variable-length strings %s, which "
                           "attnrun cannot check before HDF5 reads them; store them contiguous "
                           "(h5repack can)", in->path, name,
                           layout == H5D_COMPACT ? "in its header (compact)" : "in filtered chunks");
        goto out;
    }
    const size_t each = 4 + sizeof_addr + 4;            /* length, collection, index */
    size_t bytes = 0;
    if (!attn_size_mul(&bytes, (size_t)points, each) || (raw = attn_malloc(bytes + 1)) == NULL) {
        status = attn_fail(err, ATTN_ENOMEM, "%s: out of memory checking %s", in->path, name);
        goto out;
    }
    /* where the descriptors are: one run at the dataset's offset, or the
     * chunks in storage order (their elements' places do not matter) */
    size_t got = 0;
    if (layout == H5D_CONTIGUOUS) {
        haddr_t offset = H5Dget_offset(dataset);
        if (offset != HADDR_UNDEF && bytes > 0 &&
            pread(in->fd, raw, bytes, (off_t)offset) == (ssize_t)bytes)
            got = bytes;
        else if (offset == HADDR_UNDEF && H5Dget_storage_size(dataset) == 0)
            got = bytes = 0;                /* never written: nothing in the heap */
    } else {
        hsize_t chunks = 0;
        if (H5Dget_num_chunks(dataset, space, &chunks) >= 0)
            for (hsize_t i = 0; i < chunks; i++) {
                hsize_t size = 0, coords[H5S_MAX_RANK];
                unsigned mask;
                haddr_t at;
                if (H5Dget_chunk_info(dataset, space, i, coords, &mask, &at, &size) < 0 ||
                    size % each != 0 || size > bytes - got ||
                    pread(in->fd, raw + got, (size_t)size, (off_t)at) != (ssize_t)size)
                    break;
                got += (size_t)size;
            }
        bytes = got;                            /* unwritten chunks hold no strings */
    }
    if (got != bytes) {
        status = attn_fail(err, ATTN_EINPUT, "%s: cannot read the strings of %s as stored (a "
                           "damaged file)", in->path, name);
        goto out;
    }
    for (size_t at = 0; at < bytes && status == ATTN_OK; at += each) {
        uint64_t length = h5in_le_number(raw + at, 4);
        uint64_t address = h5in_le_number(raw + at + 4, sizeof_addr);
        uint64_t index = h5in_le_number(raw + at + 4 + sizeof_addr, 4);
        if (length == 0)
            continue;                            /* an empty string reads no heap */
        int loaded = load_collection(in->fd, address, sizeof_size, (uint64_t)in->opened.st_size,
                                     &c);
        if (loaded == ATTN_ENOMEM)
            status = attn_fail(err, ATTN_ENOMEM, "%s: out of memory checking %s", in->path, name);
        else if (loaded != ATTN_OK || !object_fits(&c, sizeof_size, index, length))
            status = attn_fail(err, ATTN_EINPUT, "%s: string %zu of %s is damaged (its place in "
                               "the file's global heap does not hold it); not read", in->path,
                               at / each, name);
    }
out:
    free(raw);
    free(c.bytes);
    h5_close(space, fcpl, dcpl);
    H5Eclear2(H5E_DEFAULT);
    return status;
}

/* check_heap once per dataset opened. */
static int check_heap_once(attn_h5in *in, const char *name, hid_t dataset, attn_error *err)
{
    open_dataset *d = in->datasets;
    while (d != NULL && d->id != dataset)
        d = d->next;
    if (d != NULL && d->heap_checked)
        return ATTN_OK;
    int status = check_heap(in, dataset, name, err);
    if (status == ATTN_OK && d != NULL)
        d->heap_checked = true;
    return status;
}

/* Where each string wanted lies in what was read (index, (wanted)): the
 * whole array for an attribute, the block itself for a dataset. */
static void string_positions(bool whole, int rank, const hsize_t *dims, const size_t *first,
                             const size_t *count, size_t wanted, size_t *index)
{
    const size_t columns = rank == 2 ? count[1] : count[0];
    for (size_t i = 0; i < wanted; i++)
        index[i] = !whole ? i
                 : rank == 1 ? first[0] + i
                             : (first[0] + i / columns) * (size_t)dims[1] + first[1] + i % columns;
}

static int h5in_read_strings(attn_h5in *in, const char *name, const char *attribute,
                             const size_t *first, const size_t *count, attn_strings *out,
                             attn_error *err)
{
    string_array a;
    hid_t type = H5I_INVALID_HID, mem_type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    hsize_t dims[2] = {1, 1};
    vlen_arena arena = {NULL, false};
    raw_strings raw = {NULL, 0, false, false};
    char detail[256];
    char *buf = NULL;             /* (read) strings as HDF5 reads them: fixed-length
                                     ones, or pointers to variable-length ones */
    size_t *index = NULL;         /* (wanted): where each wanted one is in buf */
    size_t wanted = 1, stored = 1, read;
    herr_t result = -1;
    memset(out, 0, sizeof *out);
    int status = open_strings(in, name, attribute, name, &a, err);
    if (status != ATTN_OK)
        return status;
    const bool attr = a.attribute >= 0;
    type = attr ? H5Aget_type(a.attribute) : H5Dget_type(a.dataset);
    space = attr ? H5Aget_space(a.attribute) : H5Dget_space(a.dataset);
    int rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    htri_t variable = type < 0 ? -1 : H5Tis_variable_str(type);
    if (rank < 1 || rank > 2 || variable < 0 || H5Sget_simple_extent_dims(space, dims, NULL) < 0 ||
        (mem_type = string_memory_type(type, variable > 0)) < 0) {
        status = attn_fail(err, ATTN_EIO, "%s: cannot read the strings of %s: %s", in->path, name,
                           attn_h5_error_detail(detail, sizeof detail));
        goto out;
    }
    raw.size = variable ? 0 : H5Tget_size(type);
    raw.space_padded = H5Tget_strpad(type) == H5T_STR_SPACEPAD;
    raw.arena = !attr;
    for (int i = 0; i < rank; i++)
        if (!attn_size_mul(&wanted, wanted, count[i]) || !attn_size_mul(&stored, stored, (size_t)dims[i])) {
            status = attn_fail(err, ATTN_EINPUT, "%s: %s holds too many strings to address",
                               in->path, name);
            goto out;
        }
    read = attr ? stored : wanted;
    if ((index = attn_calloc(wanted, sizeof *index)) == NULL ||
        (buf = attn_calloc(read, variable ? sizeof(char *) : raw.size)) == NULL) {
        status = attn_fail(err, ATTN_ENOMEM, "%s: out of memory reading %zu strings of %s",
                           in->path, read, name);
        goto out;
    }
    string_positions(attr, rank, dims, first, count, wanted, index);
    if (!attr && variable > 0 && (status = check_heap_once(in, name, a.dataset, err)) != ATTN_OK)
        goto out;
    result = attr ? H5Aread(a.attribute, mem_type, buf)
                  : read_string_block(a.dataset, mem_type, variable > 0, rank, first, count, buf,
                                      &arena);
    if (result < 0) {
        status = arena.failed ? attn_fail(err, ATTN_ENOMEM, "%s: out of memory reading %s",
                                          in->path, name)
                              : attn_fail(err, ATTN_EIO, "%s: cannot read %s: %s", in->path, name,
                                          attn_h5_error_detail(detail, sizeof detail));
        goto out;
    }
    raw.buf = buf;
    status = pack_strings(in, &raw, index, wanted, out, err);
out:
    if (attr && variable > 0 && result >= 0)      /* HDF5's own allocations */
        reclaim_variable(mem_type, space, H5P_DEFAULT, buf);
    vlen_free_arena(&arena);
    free(index);
    free(buf);
    if (status != ATTN_OK)
        attn_strings_free(out);
    h5_close(mem_type, space, type);
    close_strings(&a);
    if (status != ATTN_OK)
        H5Eclear2(H5E_DEFAULT);
    return h5in_after_read(in, status, err);
}


int attn_h5in_describe_strings(attn_h5in *in, const char *name, const char *attribute,
                               const char *what, size_t max_fixed, attn_tensor_info *info,
                               size_t *fixed, attn_error *err)
{
    attn_parsing_enter();
    return h5in_parsed(h5in_describe_strings(in, name, attribute, what, max_fixed, info, fixed, err));
}

int attn_h5in_read_strings(attn_h5in *in, const char *name, const char *attribute,
                           const size_t *first, const size_t *count, attn_strings *strings,
                           attn_error *err)
{
    attn_parsing_enter();
    return h5in_parsed(h5in_read_strings(in, name, attribute, first, count, strings, err));
}
