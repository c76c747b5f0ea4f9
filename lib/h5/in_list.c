/*
 * in_list.c - the groups and datasets of an input listed, for the
 * messages that name what a missing name could have meant (h5/h5.h).
 * Only hard links are followed (H5Ovisit), as the lookups of in_safety.c
 * follow no external link unless allowed; nothing but the headers of the
 * objects is read.
 */
#include "h5/in.h"

#include "core/core.h"
#include "h5/close.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The walk's state (H5Ovisit's callback data). */
typedef struct list_walk {
    const attn_h5in *in;
    attn_h5in_list *list;
    size_t capacity;
    bool out_of_memory;
} list_walk;

/* Room for one more object; false when out of memory. */
static bool grow(list_walk *walk)
{
    attn_h5in_list *list = walk->list;
    if (list->count < walk->capacity)
        return true;
    size_t capacity = walk->capacity == 0 ? 64 : 2 * walk->capacity, bytes;
    if (!attn_size_mul(&bytes, capacity, sizeof *list->objects))
        return false;
    attn_h5in_object *grown = attn_malloc(bytes);
    if (grown == NULL)
        return false;
    if (list->count > 0)
        memcpy(grown, list->objects, list->count * sizeof *list->objects);
    free(list->objects);
    list->objects = grown;
    walk->capacity = capacity;
    return true;
}

/* A dataset's element class, rank and shape into o; false when HDF5
 * cannot say. */
static bool describe(hid_t root, const char *name, attn_h5in_object *o)
{
    hid_t dataset = H5Dopen2(root, name, H5P_DEFAULT);
    hid_t type = dataset < 0 ? H5I_INVALID_HID : H5Dget_type(dataset);
    hid_t space = dataset < 0 ? H5I_INVALID_HID : H5Dget_space(dataset);
    hsize_t dims[H5S_MAX_RANK];
    int rank = space < 0 ? -1 : H5Sget_simple_extent_dims(space, dims, NULL);
    bool ok = type >= 0 && rank >= 0;
    if (ok) {
        H5T_class_t cls = H5Tget_class(type);
        o->floating = cls == H5T_FLOAT;
        o->integer = cls == H5T_INTEGER || cls == H5T_ENUM;
        o->strings = cls == H5T_STRING;
        o->rank = (size_t)rank;
        for (int i = 0; i < rank && i < 4; i++)
            o->dims[i] = (size_t)dims[i];
        o->ours = H5Aexists(dataset, ATTN_ROLE_ATTRIBUTE) > 0;
    }
    h5_close(space, type, dataset);
    return ok;
}

static herr_t visit(hid_t root, const char *name, const H5O_info_t *info, void *data)
{
    list_walk *walk = data;
    attn_h5in_list *list = walk->list;
    attn_error damaged;
    if (info->type == H5O_TYPE_GROUP &&
        h5in_check_names_at(walk->in, info->addr, name, &damaged) != ATTN_OK)
        return 1;                           /* stops the walk: the list is a hint */
    if (strcmp(name, ".") == 0 || (info->type != H5O_TYPE_GROUP && info->type != H5O_TYPE_DATASET))
        return 0;
    if (list->count == ATTN_H5IN_LIST_MAX) {
        list->cut = true;
        return 1;                           /* stops the walk */
    }
    if (!grow(walk)) {
        walk->out_of_memory = true;
        return -1;
    }
    attn_h5in_object *o = &list->objects[list->count];
    memset(o, 0, sizeof *o);
    o->group = info->type == H5O_TYPE_GROUP;
    if (!o->group && !describe(root, name, o)) {
        H5Eclear2(H5E_DEFAULT);
        return 0;                           /* left out */
    }
    size_t len = strlen(name) + 2;
    if ((o->path = attn_malloc(len)) == NULL) {
        walk->out_of_memory = true;
        return -1;
    }
    snprintf(o->path, len, "/%s", name);
    list->count++;
    return 0;
}

void attn_h5in_list_free(attn_h5in_list *list)
{
    for (size_t i = 0; i < list->count; i++)
        free(list->objects[i].path);
    free(list->objects);
    memset(list, 0, sizeof *list);
}

int attn_h5in_list_objects(attn_h5in *in, attn_h5in_list *list, attn_error *err)
{
    list_walk walk = {.in = in, .list = list};
    memset(list, 0, sizeof *list);
    attn_parsing_enter();
    hid_t root = H5Gopen2(in->file, "/", H5P_DEFAULT);
    if (root >= 0)
        H5Ovisit2(root, H5_INDEX_NAME, H5_ITER_INC, visit, &walk, H5O_INFO_BASIC);
    h5_close(root);
    H5Eclear2(H5E_DEFAULT);
    attn_parsing_leave();
    if (walk.out_of_memory) {
        attn_h5in_list_free(list);
        return attn_fail(err, ATTN_ENOMEM, "%s: out of memory", in->path);
    }
    return ATTN_OK;
}
