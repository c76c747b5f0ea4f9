/*
 * close.h - one way to close any set of HDF5 ids, for the clean-up paths
 * of the h5 layer's files (internal to it).
 *
 *     hid_t type = H5Dget_type(dset), space = H5Dget_space(dset);
 *     ...
 *     h5_close(type, space);       // each one that is open (>= 0)
 */
#ifndef ATTN_H5_CLOSE_H
#define ATTN_H5_CLOSE_H

#include <hdf5.h>

#include <stddef.h>

/*
 * Closes each id of ids (count) that is open (>= 0), whatever it is -- a
 * file, group, dataset, attribute, dataspace, datatype or property list --
 * in the order given.  Clean-up paths have nothing left to report, so the
 * result of each close is not kept.
 */
void h5_close_ids(const hid_t *ids, size_t count);

/* h5_close_ids over the ids named. */
#define h5_close(...)                                                          \
    h5_close_ids((const hid_t[]){__VA_ARGS__}, sizeof((hid_t[]){__VA_ARGS__}) / sizeof(hid_t))

#endif
