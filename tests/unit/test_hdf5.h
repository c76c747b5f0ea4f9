/*
 * test_hdf5.h - HDF5 files written and read back with the HDF5 C API
 * directly, so that the library's own HDF5 layer is never trusted to check
 * itself.  Include it after <cmocka.h>, <hdf5.h> and test_support.h.
 */
#ifndef TEST_HDF5_H
#define TEST_HDF5_H

/* cmocka setup of a test_dir fixture of `size` bytes in whose tests HDF5
 * calls are expected to fail, so its error stack is not printed. */
static inline int test_h5_setup(void **state, size_t size, const char *prefix)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return test_dir_setup(state, size, prefix);
}

/* path opened with the HDF5 C API (flags H5F_ACC_RDONLY or H5F_ACC_RDWR);
 * fails the test when it cannot be. */
static inline hid_t test_h5_open(const char *path, unsigned flags)
{
    hid_t file = H5Fopen(path, flags, H5P_DEFAULT);
    if (file < 0)
        fail_msg("cannot open %s", path);
    return file;
}

/* A dataset `name` of file type `file_type`, shape dims (rank), from
 * values in memory type `mem_type`; intermediate groups are created. */
static inline void test_h5_put(hid_t file, const char *name, hid_t file_type, hid_t mem_type,
                               int rank, const hsize_t *dims, const void *values)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    assert_true(lcpl >= 0);
    assert_true(H5Pset_create_intermediate_group(lcpl, 1) >= 0);
    hid_t space = H5Screate_simple(rank, dims, NULL);
    assert_true(space >= 0);
    hid_t dset = H5Dcreate2(file, name, file_type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(dset >= 0);
    assert_true(H5Dwrite(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0);
    H5Dclose(dset);
    H5Sclose(space);
    H5Pclose(lcpl);
}

/* Asserts that dataset `name` of file is of file type `file_type` and of
 * shape dims (rank), and reads it into values (in mem_type). */
static inline void test_h5_read(hid_t file, const char *name, hid_t file_type, int rank,
                                const hsize_t *dims, hid_t mem_type, void *values)
{
    hid_t dset = H5Dopen2(file, name, H5P_DEFAULT);
    if (dset < 0)
        fail_msg("no dataset %s", name);
    hid_t type = H5Dget_type(dset);
    assert_true(H5Tequal(type, file_type) > 0);
    H5Tclose(type);
    hid_t space = H5Dget_space(dset);
    hsize_t found[8] = {0};
    assert_int_equal(H5Sget_simple_extent_ndims(space), rank);
    assert_int_equal(H5Sget_simple_extent_dims(space, found, NULL), rank);
    for (int a = 0; a < rank; a++)
        if (found[a] != dims[a])
            fail_msg("%s: axis %d is %llu, expected %llu", name, a, (unsigned long long)found[a],
                     (unsigned long long)dims[a]);
    H5Sclose(space);
    assert_true(H5Dread(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0);
    H5Dclose(dset);
}

#endif
