/*
 * index.c - the index of appended results (index.h): part names,
 * the index read and checked, rewritten, and one append committed.
 *
 * Legend: G the appended group path, g a part's generation.
 */
#define _GNU_SOURCE
#include "h5/index.h"

#include "h5/h5.h"

#include "h5/close.h"

#include <hdf5.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- part names ---------------------------------------------------------- */

/* Whether byte c of a group path (`first`: of its first name) is kept as
 * it is in a part name; "/" becomes "+" and every other byte "@XX". */
static bool kept_byte(unsigned char c, bool first)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || (c == '.' && !first);      /* no hidden files */
}

/* Bytes byte c takes in a part name: 1 kept or "/", 3 as @XX. */
static size_t escaped_width(unsigned char c, bool first)
{
    return kept_byte(c, first) || c == '/' ? 1 : 3;
}

/* FNV-1a, 64 bits: the hash of a long group path. */
static uint64_t path_hash(const char *text)
{
    uint64_t h = 14695981039346656037u;
    for (const unsigned char *c = (const unsigned char *)text; *c != '\0'; c++)
        h = (h ^ *c) * 1099511628211u;
    return h;
}

/* The name of G's parts without ".g.h5", into buf (at least
 * ATTN_INDEX_PREFIX_MAX + 1 bytes); false for a G that is not "/name...". */
static bool part_prefix(const char *group, char buf[ATTN_INDEX_PREFIX_MAX + 1])
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *name = (const unsigned char *)group + 1;
    size_t whole = 0, len = 0;
    if (group == NULL || group[0] != '/' || group[1] == '\0')
        return false;
    for (const unsigned char *c = name; *c != '\0'; c++)
        whole += escaped_width(*c, c == name);
    /* a long G keeps what fits before "~" and the 16 digits of its hash */
    const size_t room = whole <= ATTN_INDEX_PREFIX_MAX ? whole : ATTN_INDEX_PREFIX_MAX - 17;
    for (const unsigned char *c = name; *c != '\0' && len + escaped_width(*c, c == name) <= room;
         c++) {
        if (kept_byte(*c, c == name)) {
            buf[len++] = (char)*c;
        } else if (*c == '/') {
            buf[len++] = '+';
        } else {
            buf[len++] = '@';
            buf[len++] = hex[*c >> 4];
            buf[len++] = hex[*c & 15];
        }
    }
    if (whole > ATTN_INDEX_PREFIX_MAX)
        len += (size_t)snprintf(buf + len, ATTN_INDEX_PREFIX_MAX + 1 - len, "~%016llx",
                                (unsigned long long)path_hash(group));
    buf[len] = '\0';
    return true;
}

bool attn_index_part_name(const char *group, unsigned long generation, char *buf, size_t len)
{
    char prefix[ATTN_INDEX_PREFIX_MAX + 1];
    if (generation == 0 || !part_prefix(group, prefix))
        return false;
    int wrote = snprintf(buf, len, "%s.%lu.h5", prefix, generation);
    return wrote > 0 && (size_t)wrote < len;
}

unsigned long attn_index_part_generation(const char *group, const char *name)
{
    char prefix[ATTN_INDEX_PREFIX_MAX + 1];
    if (!part_prefix(group, prefix))
        return 0;
    size_t len = strlen(prefix);
    if (strncmp(name, prefix, len) != 0 || name[len] != '.')
        return 0;
    const char *digits = name + len + 1;
    size_t count = strspn(digits, "0123456789");
    if (count == 0 || count > 18 || digits[0] == '0' || strcmp(digits + count, ".h5") != 0)
        return 0;
    return strtoul(digits, NULL, 10);
}

/* ---- the index's contents ------------------------------------------------ */

/* One name of the index: an appended group, or an empty group. */
typedef struct index_entry {
    char *path;                 /* "/model/layer3"                           */
    char *target;               /* "results.h5.parts/model+layer3.1.h5";
                                   NULL for an empty group                  */
} index_entry;

typedef struct index_contents {
    bool exists;                /* the index file is there                   */
    index_entry *entries;       /* (count) in the order read, then G's       */
    size_t count, capacity;
} index_contents;

static void contents_free(index_contents *c)
{
    for (size_t i = 0; i < c->count; i++) {
        free(c->entries[i].path);
        free(c->entries[i].target);
    }
    free(c->entries);
    memset(c, 0, sizeof *c);
}

/* Appends an entry (copies of path and target); false when out of memory. */
static bool contents_add(index_contents *c, const char *path, const char *target)
{
    if (c->count == c->capacity) {
        size_t capacity = c->capacity == 0 ? 16 : 2 * c->capacity, bytes;
        if (!attn_size_mul(&bytes, capacity, sizeof *c->entries))
            return false;
        index_entry *grown = attn_malloc(bytes);
        if (grown == NULL)
            return false;
        if (c->count > 0)
            memcpy(grown, c->entries, c->count * sizeof *c->entries);
        free(c->entries);
        c->entries = grown;
        c->capacity = capacity;
    }
    index_entry *e = &c->entries[c->count];
    e->path = attn_strdup(path);
    e->target = target != NULL ? attn_strdup(target) : NULL;
    if (e->path == NULL || (target != NULL && e->target == NULL)) {
        free(e->path);
        free(e->target);
        return false;
    }
    c->count++;
    return true;
}

static void contents_remove(index_contents *c, size_t at)
{
    free(c->entries[at].path);
    free(c->entries[at].target);
    memmove(&c->entries[at], &c->entries[at + 1], (c->count - at - 1) * sizeof *c->entries);
    c->count--;
}

/* Points entry `at` at a new part (a copy of target); false when out of
 * memory, the entry unchanged. */
static bool contents_retarget(index_contents *c, size_t at, const char *target)
{
    char *copy = attn_strdup(target);
    if (copy == NULL)
        return false;
    free(c->entries[at].target);
    c->entries[at].target = copy;
    return true;
}

/* Whether `inner` lies strictly inside the group path `outer`. */
static bool path_inside(const char *inner, const char *outer)
{
    size_t len = strlen(outer);
    return strncmp(inner, outer, len) == 0 && inner[len] == '/';
}


/* The walk over the index's links (H5Literate's callback state). */
typedef struct index_walk {
    index_contents *contents;
    const char *index;          /* for messages                              */
    const char *prefix;         /* the group being listed: "" for the root   */
    const char *parts_name;     /* the index's parts directory, no path:
                                   NULL when reading, where any one parts
                                   directory beside the index will do (a
                                   renamed index still reads its parts)   */
    bool reading;               /* for a reader: what the index holds that
                                   attnrun does not write there is damage
                                   (ATTN_EINPUT), not a refused append     */
    int status;
    attn_error *err;
} index_walk;

static int walk_group(hid_t group, index_walk *walk);

/* Refuses an index holding `what` at path: a rewrite would lose it, and
 * a reader would be sent where attnrun never sends it. */
static int not_ours(index_walk *walk, const char *path, const char *what)
{
    walk->status = attn_fail(walk->err, walk->reading ? ATTN_EINPUT : ATTN_EUSAGE,
                             "%s: %s is %s, which attnrun does not write into a results index; "
                             "%s", walk->index, path, what,
                             walk->reading ? "the index is damaged or not attnrun's; not followed"
                                           : "the index is left as it is");
    return -1;
}

/* A part of the index HDF5 cannot read: the system's failure when
 * appending, a damaged index when reading. */
static int unreadable(index_walk *walk, const char *what, const char *path)
{
    char detail[256];
    walk->status = attn_fail(walk->err, walk->reading ? ATTN_EINPUT : ATTN_EIO,
                             "%s: cannot %s %s: %s", walk->index, what, path,
                             attn_h5_error_detail(detail, sizeof detail));
    return -1;
}

/* Whether the directory part of an external link's file ("DIR/NAME") is
 * one the walk accepts: this index's own parts directory when appending;
 * one name ending in ".parts" beside the index when reading, the same for
 * every link of the index. */
static bool parts_dir_ok(index_walk *walk, const char *file, size_t dir_len)
{
    static const size_t suffix = sizeof ATTN_INDEX_PARTS_SUFFIX - 1;
    if (walk->parts_name != NULL)
        return dir_len == strlen(walk->parts_name) && strncmp(file, walk->parts_name, dir_len) == 0;
    return dir_len > suffix && strncmp(file + dir_len - suffix, ATTN_INDEX_PARTS_SUFFIX, suffix) == 0 &&
           memchr(file, '/', dir_len) == NULL &&
           (walk->contents->count == 0 || walk->contents->entries[0].target == NULL ||
            strncmp(walk->contents->entries[0].target, file, dir_len + 1) == 0);
}

/*
 * Whether an external link at `path` is one attnrun writes: to the group
 * `path` (the same path) of a file "PARTS/NAME", PARTS the index's parts
 * directory (parts_dir_ok: when appending, the index's name and ".parts",
 * so that a copy of an index never lets --force remove another index's
 * part), NAME a part name of path.
 */
static bool link_is_ours(index_walk *walk, const char *path, const char *file,
                         const char *object)
{
    const char *slash = strchr(file, '/');
    if (strcmp(object, path) != 0 || slash == NULL || strchr(slash + 1, '/') != NULL)
        return false;
    return parts_dir_ok(walk, file, (size_t)(slash - file)) &&
           attn_index_part_generation(path, slash + 1) > 0;
}

/* An external link: one appended group, if attnrun made it. */
static int visit_external(hid_t group, const char *name, const char *path, size_t size,
                          index_walk *walk)
{
    const char *file = NULL, *object = NULL;
    unsigned flags;
    char *value = size <= PATH_MAX * 2 ? attn_malloc(size) : NULL;
    if (value == NULL && size > PATH_MAX * 2)
        return not_ours(walk, path, "an external link of a longer name than attnrun writes");
    if (value == NULL) {
        walk->status = attn_fail(walk->err, ATTN_ENOMEM, "%s: out of memory", walk->index);
        return -1;
    }
    if (H5Lget_val(group, name, value, size, H5P_DEFAULT) < 0 ||
        H5Lunpack_elink_val(value, size, &flags, &file, &object) < 0) {
        unreadable(walk, "read the link", path);
    } else if (!link_is_ours(walk, path, file, object)) {
        not_ours(walk, path, "an external link to another file or group (not into this "
                 "index's own parts directory: was the index copied or renamed?)");
    } else if (!contents_add(walk->contents, path, file)) {
        walk->status = attn_fail(walk->err, ATTN_ENOMEM, "%s: out of memory", walk->index);
    }
    free(value);
    return walk->status == ATTN_OK ? 0 : -1;
}

/* A hard link: a group of the index (no attributes, one link to it, which
 * also keeps the walk finite), listed in turn, or kept when empty. */
static int visit_group(hid_t parent, const char *name, const char *path, index_walk *walk)
{
    H5O_info_t info;
    H5G_info_t members;
    hid_t object = H5Oopen(parent, name, H5P_DEFAULT);
    if (object < 0 || H5Oget_info2(object, &info, H5O_INFO_BASIC | H5O_INFO_NUM_ATTRS) < 0) {
        unreadable(walk, "read", path);
    } else if (info.type != H5O_TYPE_GROUP) {
        not_ours(walk, path, info.type == H5O_TYPE_DATASET ? "a dataset" : "an object other than a group");
    } else if (info.num_attrs != 0) {
        not_ours(walk, path, "a group with attributes");
    } else if (info.rc != 1) {
        not_ours(walk, path, "a group with several hard links");
    } else if (H5Gget_info(object, &members) < 0) {
        unreadable(walk, "list", path);
    } else if (members.nlinks == 0) {
        if (!contents_add(walk->contents, path, NULL))
            walk->status = attn_fail(walk->err, ATTN_ENOMEM, "%s: out of memory", walk->index);
    } else {
        index_walk inner = *walk;
        inner.prefix = path;
        walk->status = walk_group(object, &inner);
    }
    h5_close(object);
    return walk->status == ATTN_OK ? 0 : -1;
}

static herr_t visit_link(hid_t group, const char *name, const H5L_info_t *link, void *data)
{
    index_walk *walk = data;
    size_t len = strlen(walk->prefix) + strlen(name) + 2;
    char *path = attn_malloc(len);
    int result = -1;
    if (path == NULL) {
        walk->status = attn_fail(walk->err, ATTN_ENOMEM, "%s: out of memory", walk->index);
        return -1;
    }
    snprintf(path, len, "%s/%s", walk->prefix, name);
    if (link->type == H5L_TYPE_EXTERNAL)
        result = visit_external(group, name, path, link->u.val_size, walk);
    else if (link->type == H5L_TYPE_HARD)
        result = visit_group(group, name, path, walk);
    else
        result = not_ours(walk, path, link->type == H5L_TYPE_SOFT ? "a soft link" : "a user-defined link");
    free(path);
    return result;
}

/* The order in which `group` lists its links: the order they were made
 * where the group tracks it (indexes of attnrun 1.6 and later), else by
 * name (older indexes, which are rewritten with the order tracked). */
static H5_index_t link_order(hid_t group)
{
    unsigned flags = 0;
    hid_t gcpl = H5Gget_create_plist(group);
    if (gcpl < 0 || H5Pget_link_creation_order(gcpl, &flags) < 0)
        flags = 0;
    h5_close(gcpl);
    H5Eclear2(H5E_DEFAULT);
    return flags & H5P_CRT_ORDER_INDEXED ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME;
}

/* Lists every link of `group` into walk->contents, in its link order. */
static int walk_group(hid_t group, index_walk *walk)
{
    if (H5Literate(group, link_order(group), H5_ITER_INC, NULL, visit_link, walk) < 0 &&
        walk->status == ATTN_OK)
        unreadable(walk, "list", walk->prefix[0] ? walk->prefix : "/");
    return walk->status;
}

/* Root attributes an index holds; anything else is someone else's. */
static herr_t check_root_attribute(hid_t root, const char *name, const H5A_info_t *info, void *data)
{
    (void)root;
    (void)info;
    bool *foreign = data;
    if (strcmp(name, ATTN_INDEX_ATTRIBUTE) != 0 && strcmp(name, "attnrun_version") != 0)
        *foreign = true;
    return 0;
}

/* The format number of an index's root (attnrun_index), or 0 without one. */
static long long index_format(hid_t root)
{
    long long format = 0;
    if (H5Aexists(root, ATTN_INDEX_ATTRIBUTE) <= 0)
        return 0;
    hid_t attr = H5Aopen(root, ATTN_INDEX_ATTRIBUTE, H5P_DEFAULT);
    hid_t type = attr >= 0 ? H5Aget_type(attr) : H5I_INVALID_HID;
    hid_t space = attr >= 0 ? H5Aget_space(attr) : H5I_INVALID_HID;
    if (type < 0 || space < 0 || H5Tget_class(type) != H5T_INTEGER ||
        H5Sget_simple_extent_type(space) != H5S_SCALAR ||
        H5Aread(attr, H5T_NATIVE_LLONG, &format) < 0)
        format = 0;
    h5_close(space, type, attr);
    return format;
}

/* The refusal of a file that is not an index, saying why and what to do. */
static int not_an_index(const char *index, const char *why, attn_error *err)
{
    return attn_fail(err, ATTN_EUSAGE,
                     "%s: exists and is not a results index attnrun made (%s); results are "
                     "appended to an index, never into a copy of another file: name a new file",
                     index, why);
}

/*
 * Reads the index whose root group is `root` into c: an index of this
 * format holding only what attnrun writes.  parts_name: the parts
 * directory its links must name, for an append (refusals ATTN_EUSAGE);
 * NULL for a reader (index_walk.parts_name; what attnrun does not write
 * there is damage, ATTN_EINPUT).
 */
static int contents_of(hid_t root, const char *index, const char *parts_name, index_contents *c,
                       attn_error *err)
{
    const bool reading = parts_name == NULL;
    const int refused = reading ? ATTN_EINPUT : ATTN_EUSAGE;
    bool foreign = false;
    long long format = index_format(root);
    if (format == 0)
        return reading ? attn_fail(err, ATTN_EINPUT, "%s: its " ATTN_INDEX_ATTRIBUTE " attribute "
                                   "is not the format number attnrun writes (one integer); the "
                                   "index is damaged", index)
                       : not_an_index(index, "no " ATTN_INDEX_ATTRIBUTE " attribute", err);
    if (format != ATTN_INDEX_FORMAT)
        return attn_fail(err, refused, "%s: a results index of format %lld, which this attnrun "
                         "(format %d) does not %s", index, format, ATTN_INDEX_FORMAT,
                         reading ? "read" : "write");
    if (H5Aiterate2(root, H5_INDEX_NAME, H5_ITER_INC, NULL, check_root_attribute, &foreign) < 0 ||
        foreign)
        return attn_fail(err, refused, "%s: holds root attributes attnrun does not write into a "
                         "results index; %s", index,
                         reading ? "the index is damaged or not attnrun's" : "it is not changed");
    index_walk walk = {.contents = c, .index = index, .prefix = "", .parts_name = parts_name,
                       .reading = reading, .err = err};
    return walk_group(root, &walk);
}

/*
 * Reads the index at `index` into c, for an append: missing is an empty
 * index; a file must be an index of this format holding only what
 * attnrun writes.
 */
static int contents_read(const char *index, index_contents *c, attn_error *err)
{
    char detail[256];
    struct stat st;
    hid_t file = H5I_INVALID_HID, root = H5I_INVALID_HID;
    memset(c, 0, sizeof *c);
    attn_h5_prepare();                 /* before HDF5 first runs (h5/h5.h) */
    if (stat(index, &st) != 0)
        return errno == ENOENT ? ATTN_OK
                               : attn_fail(err, ATTN_EIO, "%s: cannot read: %s", index, strerror(errno));
    c->exists = true;
    if (!S_ISREG(st.st_mode))
        return attn_fail(err, ATTN_EUSAGE, "%s: exists and is not a regular file", index);
    if (access(index, R_OK) != 0)
        return attn_fail(err, ATTN_EIO, "%s: cannot read: %s", index, strerror(errno));
    int is = h5_is_hdf5(index, "the index", err);    /* EMFILE: the system's failure */
    if (is < 0)
        return is;
    if (is == 0)
        return not_an_index(index, "not an HDF5 file", err);
    int status = ATTN_OK;
    if ((file = H5Fopen(index, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0 ||
        (root = H5Gopen2(file, "/", H5P_DEFAULT)) < 0) {
        status = attn_fail(err, ATTN_EIO, "%s: cannot open: %s", index,
                           attn_h5_error_detail(detail, sizeof detail));
    } else {
        char copy[PATH_MAX], parts_name[PATH_MAX];
        snprintf(copy, sizeof copy, "%s", index);
        snprintf(parts_name, sizeof parts_name, "%s" ATTN_INDEX_PARTS_SUFFIX, basename(copy));
        status = contents_of(root, index, parts_name, c, err);
    }
    h5_close(root);
    if (file >= 0 && H5Fclose(file) < 0 && status == ATTN_OK)
        status = attn_fail(err, ATTN_EIO, "%s: cannot close: %s", index,
                           attn_h5_error_detail(detail, sizeof detail));
    H5Eclear2(H5E_DEFAULT);
    if (status != ATTN_OK)
        contents_free(c);
    return status;
}

/*
 * Where G goes among c's entries: ATTN_OK with *replaced the entry G
 * replaces (force), or c->count when G is new; ATTN_EUSAGE when G is
 * there (without force), is a group of other results, or lies inside
 * other results or an empty group attnrun did not write.
 */
static int contents_place(const index_contents *c, const attn_index_target *t, size_t *replaced,
                          attn_error *err)
{
    *replaced = c->count;
    for (size_t i = 0; i < c->count; i++) {
        const index_entry *e = &c->entries[i];
        if (strcmp(e->path, t->group) == 0 && e->target != NULL) {
            if (!t->force)
                return attn_fail_hint(err, ATTN_EUSAGE, ATTN_HINT_REPLACE, "%s: already holds "
                                      "results at %s", t->index, t->group);
            *replaced = i;
        } else if (strcmp(e->path, t->group) == 0) {
            return attn_fail(err, ATTN_EUSAGE, "%s: holds an empty group %s that attnrun did not "
                             "write; it is not replaced", t->index, t->group);
        } else if (path_inside(e->path, t->group)) {
            return attn_fail(err, ATTN_EUSAGE, "%s: %s holds the results at %s; choose another "
                             "group", t->index, t->group, e->path);
        } else if (path_inside(t->group, e->path) && e->target != NULL) {
            return attn_fail(err, ATTN_EUSAGE, "%s: %s would lie inside the results at %s; "
                             "choose another group", t->index, t->group, e->path);
        }
    }
    return ATTN_OK;
}

/* ---- the index written ---------------------------------------------------- */

static herr_t put_attributes(hid_t root)
{
    const long long format = ATTN_INDEX_FORMAT;
    const char *version = ATTN_VERSION;
    hid_t space = H5Screate(H5S_SCALAR), text = H5Tcopy(H5T_C_S1);
    hid_t format_attr = H5I_INVALID_HID, version_attr = H5I_INVALID_HID;
    herr_t result = space < 0 || text < 0 || H5Tset_size(text, H5T_VARIABLE) < 0 ||
                            H5Tset_cset(text, H5T_CSET_UTF8) < 0 ? -1 : 0;
    if (result >= 0 &&
        ((format_attr = H5Acreate2(root, ATTN_INDEX_ATTRIBUTE, H5T_STD_I64LE, space, H5P_DEFAULT,
                                   H5P_DEFAULT)) < 0 ||
         H5Awrite(format_attr, H5T_NATIVE_LLONG, &format) < 0 ||
         (version_attr = H5Acreate2(root, "attnrun_version", text, space, H5P_DEFAULT,
                                    H5P_DEFAULT)) < 0 ||
         H5Awrite(version_attr, text, &version) < 0))
        result = -1;
    h5_close(version_attr, format_attr, text, space);
    return result;
}

/* Tracks (and indexes) the creation order of the links of the groups a
 * property list makes, so that h5py, netCDF and xarray list an index's
 * groups in the order they were appended. */
static herr_t track_order(hid_t plist)
{
    return plist < 0 ? -1
                     : H5Pset_link_creation_order(plist, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
}

/* Makes the groups above `path` ("/a/b/c": /a, /a/b) that file lacks,
 * each with gcpl, so that they too keep their links' order. */
static herr_t make_parents(hid_t file, const char *path, hid_t gcpl)
{
    char prefix[PATH_MAX];
    for (const char *slash = strchr(path + 1, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
        size_t len = (size_t)(slash - path);
        if (len >= sizeof prefix)
            return -1;
        memcpy(prefix, path, len);
        prefix[len] = '\0';
        htri_t exists = H5Lexists(file, prefix, H5P_DEFAULT);
        hid_t group = exists == 0 ? H5Gcreate2(file, prefix, H5P_DEFAULT, gcpl, H5P_DEFAULT)
                                  : H5I_INVALID_HID;
        if (exists < 0 || (exists == 0 && group < 0))
            return -1;
        h5_close(group);
    }
    return 0;
}

/* Writes c as a new index into the (empty) file at path, its links made
 * in c's order. */
static int contents_write(const char *path, const char *index, const index_contents *c,
                          attn_error *err)
{
    char detail[256];
    int status = ATTN_OK;
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), gcpl = H5Pcreate(H5P_GROUP_CREATE);
    hid_t file = track_order(fcpl) < 0 || track_order(gcpl) < 0
                     ? H5I_INVALID_HID
                     : H5Fcreate(path, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    hid_t root = file < 0 ? H5I_INVALID_HID : H5Gopen2(file, "/", H5P_DEFAULT);
    if (root < 0 || put_attributes(root) < 0)
        status = attn_fail(err, ATTN_EIO, "%s: cannot write the index: %s", index,
                           attn_h5_error_detail(detail, sizeof detail));
    for (size_t i = 0; i < c->count && status == ATTN_OK; i++) {
        const index_entry *e = &c->entries[i];
        hid_t group = H5I_INVALID_HID;
        if (make_parents(file, e->path, gcpl) < 0 ||
            (e->target != NULL ? H5Lcreate_external(e->target, e->path, file, e->path, H5P_DEFAULT,
                                                    H5P_DEFAULT) < 0
                               : (group = H5Gcreate2(file, e->path, H5P_DEFAULT, gcpl,
                                                     H5P_DEFAULT)) < 0))
            status = attn_fail(err, ATTN_EIO, "%s: cannot write the index's %s: %s", index,
                               e->path, attn_h5_error_detail(detail, sizeof detail));
        h5_close(group);
    }
    h5_close(root);
    if (file >= 0 && H5Fclose(file) < 0 && status == ATTN_OK)
        status = attn_fail(err, ATTN_EIO, "%s: cannot write the index: %s", index,
                           attn_h5_error_detail(detail, sizeof detail));
    h5_close(gcpl, fcpl);
    H5Eclear2(H5E_DEFAULT);
    return status;
}

/* ---- one append ------------------------------------------------------------ */

int attn_index_check(attn_index_target *target, const char *index, const char *group, bool force,
                     attn_error *err)
{
    struct stat st;
    char base[PATH_MAX];
    index_contents c;
    size_t replaced;
    memset(target, 0, sizeof *target);
    target->group = group;
    target->force = force;
    if (group == NULL || group[0] != '/' || group[1] == '\0')
        return attn_fail(err, ATTN_EUSAGE, "%s: appended results need a group of their own, "
                         "not the root", index);
    if (index[0] == '\0')
        return attn_fail(err, ATTN_EUSAGE, "an index file name is needed, not ''");
    if (strlen(index) >= sizeof target->index)
        return attn_fail(err, ATTN_EUSAGE, "%s: path too long", index);
    snprintf(target->index, sizeof target->index, "%s", index);
    if (lstat(index, &st) == 0 && S_ISLNK(st.st_mode)) {
        char *real = realpath(index, NULL);     /* the index is where its parts are */
        if (real == NULL)
            return attn_fail(err, ATTN_EIO, "%s: cannot follow the symbolic link: %s", index,
                             strerror(errno));
        bool fits = strlen(real) < sizeof target->index;
        if (fits)
            snprintf(target->index, sizeof target->index, "%s", real);
        free(real);
        if (!fits)
            return attn_fail(err, ATTN_EUSAGE, "%s: path too long", index);
    }
    attn_split_path(target->index, target->dir, base);
    if (strlen(target->index) + strlen(ATTN_INDEX_PARTS_SUFFIX) >= sizeof target->parts)
        return attn_fail(err, ATTN_EUSAGE, "%s: path too long", index);
    snprintf(target->parts, sizeof target->parts, "%s" ATTN_INDEX_PARTS_SUFFIX, target->index);
    /* What would only fail at the commit, after the whole computation:
     * a parts name the file system refuses, a parts directory that is
     * not one, or one on another file system (parts are renamed in). */
    struct stat dir_st, parts_st;
    const long name_max = pathconf(target->dir, _PC_NAME_MAX);
    if (name_max > 0 && strlen(base) + strlen(ATTN_INDEX_PARTS_SUFFIX) > (size_t)name_max)
        return attn_fail(err, ATTN_EUSAGE, "%s: the name of its parts directory (the index's "
                         "and \"" ATTN_INDEX_PARTS_SUFFIX "\") is longer than the file system "
                         "allows (%ld bytes)", index, name_max);
    if (stat(target->parts, &parts_st) == 0) {
        if (!S_ISDIR(parts_st.st_mode))
            return attn_fail(err, ATTN_EUSAGE, "%s: exists and is not a directory, so the "
                             "index's parts cannot go there", target->parts);
        if (stat(target->dir, &dir_st) == 0 && dir_st.st_dev != parts_st.st_dev)
            return attn_fail(err, ATTN_EUSAGE, "%s: is on another file system than the index; "
                             "parts are moved into it by renaming, so it must be on the same one",
                             target->parts);
    }
    int status = contents_read(target->index, &c, err);
    if (status == ATTN_OK && c.exists && faccessat(AT_FDCWD, target->index, W_OK, AT_EACCESS) != 0)
        status = attn_fail(err, ATTN_EIO, "%s: cannot write the index: %s", index, strerror(errno));
    if (status == ATTN_OK)
        status = contents_place(&c, target, &replaced, err);
    contents_free(&c);
    return status;
}

/*
 * Locks the index's directory (flock, exclusive; *fd gets the descriptor
 * that holds it, or -1 without a lock), so that appends to indexes there
 * take turns at their commits.  Not the index itself: HDF5 readers hold
 * shared locks on the files they have open (xarray keeps them open), and
 * an append must not wait for them.  The lock is held for milliseconds,
 * so it is waited for.
 */
static int lock_directory(const attn_index_target *t, volatile sig_atomic_t *cancel, int *fd,
                          attn_error *err)
{
    bool best_effort;
    *fd = -1;
    if (attn_h5_locking_disabled(&best_effort))
        return ATTN_OK;
    int dir = open(t->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return attn_fail(err, ATTN_EIO, "%s: cannot open the directory %s: %s", t->index, t->dir,
                         strerror(errno));
    while (flock(dir, LOCK_EX) != 0) {
        int failure = errno;
        if (failure == EINTR && (cancel == NULL || !*cancel))
            continue;
        close(dir);
        if (failure == EINTR)
            return attn_fail(err, ATTN_EINTR, "%s: interrupted while waiting for the lock; "
                             "nothing was written", t->index);
        if (best_effort && (failure == ENOLCK || failure == ENOSYS || failure == EOPNOTSUPP))
            return ATTN_OK;
        return attn_fail(err, ATTN_EIO, "%s: cannot lock the directory %s: %s "
                         "(HDF5_USE_FILE_LOCKING=FALSE runs without locks)", t->index, t->dir,
                         strerror(failure));
    }
    *fd = dir;
    return ATTN_OK;
}

/* The link target of generation g of G ("results.h5.parts/NAME") into
 * target, and its path into path; false when too long. */
static bool part_paths(const attn_index_target *t, unsigned long g, char target[PATH_MAX],
                       char path[PATH_MAX])
{
    char name[NAME_MAX + 1], dir[PATH_MAX], parts_name[PATH_MAX];
    if (!attn_index_part_name(t->group, g, name, sizeof name))
        return false;
    attn_split_path(t->parts, dir, parts_name);
    int a = snprintf(target, PATH_MAX, "%s/%s", parts_name, name);
    int b = snprintf(path, PATH_MAX, "%s/%s", t->parts, name);
    return a > 0 && a < PATH_MAX && b > 0 && b < PATH_MAX;
}

/* The first generation of G after `after` whose part file name no link
 * of c uses. */
static unsigned long free_generation(const attn_index_target *t, const index_contents *c,
                                     unsigned long after)
{
    char target[PATH_MAX], path[PATH_MAX];
    for (unsigned long g = after + 1;; g++) {
        bool used = false;
        if (!part_paths(t, g, target, path))
            return g;                         /* reported by the caller */
        for (size_t i = 0; i < c->count && !used; i++) {
            const char *name = c->entries[i].target ? strrchr(c->entries[i].target, '/') : NULL;
            /* case-insensitively: on a file system that folds case,
             * "Layer0.1.h5" is "layer0.1.h5" */
            used = name != NULL && strcasecmp(name, strrchr(target, '/')) == 0;
        }
        if (!used)
            return g;
    }
}

/*
 * The steps after the point of no return: parts directory, part renamed
 * into it, new index renamed over the old one, the replaced part removed.
 * Undoes what it did when a step fails.
 */
static int publish(const attn_index_target *t, attn_atomic *part, index_contents *c,
                   size_t replaced, attn_error *err)
{
    char target[PATH_MAX], path[PATH_MAX], old[PATH_MAX] = "";
    struct stat st;
    attn_atomic index_tx;
    const char *last = replaced < c->count ? strrchr(c->entries[replaced].target, '/') : NULL;
    unsigned long g = free_generation(t, c, last ? attn_index_part_generation(t->group, last + 1) : 0);
    bool made_dir = false, renamed = false;
    memset(&index_tx, 0, sizeof index_tx);
    if (!part_paths(t, g, target, path) ||
        (replaced < c->count && snprintf(old, sizeof old, "%s/%s", t->dir,
                                         c->entries[replaced].target) >= (int)sizeof old)) {
        attn_atomic_abort(part);
        return attn_fail(err, ATTN_EUSAGE, "%s: path too long for the part of %s", t->index,
                         t->group);
    }
    int status = ATTN_OK;
    if (mkdir(t->parts, 0777) == 0)
        made_dir = true;
    else if (errno != EEXIST)
        status = attn_fail(err, ATTN_EIO, "%s: cannot make the directory %s: %s", t->index,
                           t->parts, strerror(errno));
    if (status == ATTN_OK) {                   /* the part, under its own name */
        snprintf(part->final_path, sizeof part->final_path, "%s", path);
        part->replace = true;                  /* a part no link names: left by a crash */
        status = attn_atomic_publish(part, NULL, err);
        renamed = status == ATTN_OK;
    }
    if (status == ATTN_OK) {                   /* the index, with G's link */
        for (size_t i = c->count; i-- > 0;)     /* an empty group above G is G's now */
            if (c->entries[i].target == NULL && path_inside(t->group, c->entries[i].path)) {
                contents_remove(c, i);
                replaced -= i < replaced;
            }
        /* A replaced group keeps its place in the order; a new one is last. */
        status = (replaced < c->count ? contents_retarget(c, replaced, target)
                                      : contents_add(c, t->group, target))
                     ? ATTN_OK : attn_fail(err, ATTN_ENOMEM, "%s: out of memory", t->index);
    }
    if (status == ATTN_OK && (status = attn_atomic_begin(&index_tx, t->index, c->exists, err)) == ATTN_OK &&
        stat(t->index, &st) == 0)
        index_tx.mode = st.st_mode & 07777;    /* the index keeps its permission bits */
    if (status == ATTN_OK && (status = contents_write(index_tx.temp_path, t->index, c, err)) == ATTN_OK &&
        (status = attn_atomic_flush(&index_tx, err)) == ATTN_OK)
        status = attn_atomic_publish(&index_tx, NULL, err);
    if (status == ATTN_OK) {
        if (old[0] != '\0')
            unlink(old);                       /* the replaced part: no link names it now */
        return ATTN_OK;
    }
    attn_atomic_abort(&index_tx);
    attn_atomic_abort(part);
    if (renamed)
        unlink(path);
    if (made_dir)
        rmdir(t->parts);
    return status;
}

int attn_index_commit(const attn_index_target *t, attn_atomic *part, volatile sig_atomic_t *cancel,
                      attn_error *err)
{
    index_contents c;
    size_t replaced;
    int lock = -1;
    memset(&c, 0, sizeof c);
    int status = lock_directory(t, cancel, &lock, err);
    if (status == ATTN_OK && (status = contents_read(t->index, &c, err)) == ATTN_OK)
        status = contents_place(&c, t, &replaced, err);
    if (status == ATTN_OK) {
        part->committing = 1;                  /* the point of no return */
        if (cancel != NULL && *cancel)
            status = attn_fail(err, ATTN_EINTR, "%s: interrupted; nothing was written", t->index);
        else
            status = publish(t, part, &c, replaced, err);
    }
    if (status != ATTN_OK) {
        attn_atomic_abort(part);
        part->committing = 0;
    }
    contents_free(&c);
    if (lock >= 0)
        close(lock);                           /* releases the lock */
    return status;
}

bool attn_index_is_index(hid_t file)
{
    htri_t there = H5Aexists_by_name(file, "/", ATTN_INDEX_ATTRIBUTE, H5P_DEFAULT);
    H5Eclear2(H5E_DEFAULT);
    return there > 0;
}

int attn_index_read_parts(hid_t file, const char *index, attn_index_part **parts, size_t *count,
                          attn_error *err)
{
    index_contents c;
    memset(&c, 0, sizeof c);
    *parts = NULL;
    *count = 0;
    hid_t root = H5Gopen2(file, "/", H5P_DEFAULT);
    int status = root < 0 ? attn_fail(err, ATTN_EINPUT, "%s: cannot open its root group", index)
                          : contents_of(root, index, NULL, &c, err);
    h5_close(root);
    H5Eclear2(H5E_DEFAULT);
    size_t groups = 0;
    for (size_t i = 0; status == ATTN_OK && i < c.count; i++)
        groups += c.entries[i].target != NULL;
    attn_index_part *list = status == ATTN_OK ? attn_calloc(groups + 1, sizeof *list) : NULL;
    if (status == ATTN_OK && list == NULL)
        status = attn_fail(err, ATTN_ENOMEM, "%s: out of memory", index);
    for (size_t i = 0; status == ATTN_OK && i < c.count; i++) {
        if (c.entries[i].target == NULL)
            continue;                          /* an empty group */
        list[*count].group = c.entries[i].path;        /* taken from c */
        list[*count].file = c.entries[i].target;
        c.entries[i].path = c.entries[i].target = NULL;
        ++*count;
    }
    contents_free(&c);
    if (status == ATTN_OK)
        *parts = list;
    return status;
}

void attn_index_parts_free(attn_index_part *parts, size_t count)
{
    for (size_t i = 0; parts != NULL && i < count; i++) {
        free(parts[i].group);
        free(parts[i].file);
    }
    free(parts);
}
