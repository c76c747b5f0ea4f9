/*
 * test_atomic.c - unit tests for attn_atomic (temporary files renamed onto
 * their destination) and attn_same_file, in a temporary directory per test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "attn_atomic.h"
#include "test_support.h"

/* A per-test temporary directory holding plain files only. */
typedef struct atomic_fixture {
    char dir[128];
    char final_path[256];   /* dir/out.h5, not created by setup */
} atomic_fixture;

static int setup(void **state)
{
    atomic_fixture *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -1;
    if (test_make_dir(f->dir, sizeof f->dir, "test_atomic") != 0) {
        free(f);
        return -1;
    }
    snprintf(f->final_path, sizeof f->final_path, "%s/out.h5", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    atomic_fixture *f = *state;
    int result = test_remove_dir(f->dir);
    free(f);
    return result;
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    assert_int_equal(fwrite(data, 1, len, file), len);
    assert_int_equal(fclose(file), 0);
}

/* The whole content of path (caller frees); *len receives its size. */
static unsigned char *read_file(const char *path, size_t *len)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    unsigned char *data = malloc((size_t)st.st_size + 1);
    assert_non_null(data);
    FILE *file = fopen(path, "rb");
    assert_non_null(file);
    *len = fread(data, 1, (size_t)st.st_size + 1, file);
    assert_int_equal(fclose(file), 0);
    assert_int_equal(*len, (size_t)st.st_size);
    return data;
}

static void assert_file_holds(const char *path, const char *expected)
{
    size_t len;
    unsigned char *data = read_file(path, &len);
    assert_int_equal(len, strlen(expected));
    assert_memory_equal(data, expected, len);
    free(data);
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Entries of dir other than . and ..; *temps counts those carrying
 * ATTN_TEMP_MARKER. */
static size_t count_entries(const char *path, size_t *temps)
{
    size_t count = test_count_entries(path, ATTN_TEMP_MARKER, temps);
    assert_true(count != (size_t)-1);
    return count;
}

static void test_begin_creates_marked_temp_beside_destination(void **state)
{
    atomic_fixture *f = *state;
    attn_atomic tx;
    attn_error err = {0};
    mode_t old_mask = umask(027);
    int status = attn_atomic_begin(&tx, f->final_path, false, &err);
    umask(old_mask);
    assert_int_equal(status, ATTN_OK);

    /* dir/.out.h5.attnrun-tmp-XXXXXX, empty, the owner's alone while it is
     * written (whatever the umask, the owner can reopen it) */
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s/.out.h5" ATTN_TEMP_MARKER, f->dir);
    assert_int_equal(strncmp(tx.temp_path, prefix, strlen(prefix)), 0);
    assert_int_equal(strlen(tx.temp_path), strlen(prefix) + 6);
    assert_string_equal(tx.final_path, f->final_path);
    struct stat st;
    assert_int_equal(stat(tx.temp_path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_size, 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_false(exists(f->final_path));

    size_t temps;
    assert_int_equal(count_entries(f->dir, &temps), 1);
    assert_int_equal(temps, 1);
    attn_atomic_abort(&tx);
}

static void test_commit_renames_temp_onto_destination(void **state)
{
    atomic_fixture *f = *state;
    attn_atomic tx;
    attn_error err = {0};
    mode_t old_mask = umask(027);
    assert_int_equal(attn_atomic_begin(&tx, f->final_path, false, &err), ATTN_OK);
    umask(old_mask);
    char temp[PATH_MAX];
    snprintf(temp, sizeof temp, "%s", tx.temp_path);
    write_file(temp, "result", 6);

    int status = attn_atomic_commit(&tx, NULL, &err);
    if (status != ATTN_OK)
        fail_msg("commit: %d %s", status, err.msg);
    assert_file_holds(f->final_path, "result");
    struct stat st;                         /* 0666 less the umask 027 */
    assert_int_equal(stat(f->final_path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    assert_false(exists(temp));
    assert_string_equal(tx.temp_path, "");
    size_t temps;
    assert_int_equal(count_entries(f->dir, &temps), 1);   /* out.h5 only */
    assert_int_equal(temps, 0);
    attn_atomic_abort(&tx);                                /* harmless now */
    assert_true(exists(f->final_path));
}

static void test_abort_removes_temp_and_leaves_no_destination(void **state)
{
    atomic_fixture *f = *state;
    attn_atomic tx;
    attn_error err = {0};
    assert_int_equal(attn_atomic_begin(&tx, f->final_path, false, &err), ATTN_OK);
    char temp[PATH_MAX];
    snprintf(temp, sizeof temp, "%s", tx.temp_path);
    write_file(temp, "partial", 7);

    attn_atomic_abort(&tx);
    assert_false(exists(temp));
    assert_false(exists(f->final_path));
    assert_string_equal(tx.temp_path, "");
    attn_atomic_abort(&tx);                                /* twice is safe */
    size_t temps;
    assert_int_equal(count_entries(f->dir, &temps), 0);
}

static void test_begin_refuses_existing_destination_without_replace(void **state)
{
    atomic_fixture *f = *state;
    attn_atomic tx;
    attn_error err = {0};
    write_file(f->final_path, "old", 3);
    assert_int_equal(attn_atomic_begin(&tx, f->final_path, false, &err), ATTN_EUSAGE);
    assert_non_null(strstr(err.msg, f->final_path));
    assert_file_holds(f->final_path, "old");
    size_t temps;
    assert_int_equal(count_entries(f->dir, &temps), 1);
    assert_int_equal(temps, 0);
}

static void test_begin_with_replace_replaces_on_commit(void **state)
{
    atomic_fixture *f = *state;
    attn_atomic tx;
    attn_error err = {0};
    write_file(f->final_path, "old", 3);
    assert_int_equal(attn_atomic_begin(&tx, f->final_path, true, &err), ATTN_OK);
    assert_file_holds(f->final_path, "old");   /* untouched until the commit */
    write_file(tx.temp_path, "new!", 4);
    assert_file_holds(f->final_path, "old");
    assert_int_equal(attn_atomic_commit(&tx, NULL, &err), ATTN_OK);
    assert_file_holds(f->final_path, "new!");
    size_t temps;
    assert_int_equal(count_entries(f->dir, &temps), 1);
    assert_int_equal(temps, 0);
}

static void test_commit_refuses_destination_that_appeared(void **state)
{
    atomic_fixture *f = *state;
    attn_atomic tx;
    attn_error err = {0};
    assert_int_equal(attn_atomic_begin(&tx, f->final_path, false, &err), ATTN_OK);
    write_file(tx.temp_path, "mine", 4);
    write_file(f->final_path, "theirs", 6);   /* another writer got there first */
    assert_int_equal(attn_atomic_commit(&tx, NULL, &err), ATTN_EUSAGE);
    assert_file_holds(f->final_path, "theirs");
    size_t temps;
    assert_int_equal(count_entries(f->dir, &temps), 1);
    assert_int_equal(temps, 0);
}

static void test_begin_in_missing_directory_is_io_error(void **state)
{
    atomic_fixture *f = *state;
    attn_atomic tx;
    attn_error err = {0};
    char path[256];
    snprintf(path, sizeof path, "%s/no/such/dir/out.h5", f->dir);
    assert_int_equal(attn_atomic_begin(&tx, path, false, &err), ATTN_EIO);
    assert_true(strlen(err.msg) > 0);
    assert_string_equal(tx.temp_path, "");
    attn_atomic_abort(&tx);
    size_t temps;
    assert_int_equal(count_entries(f->dir, &temps), 0);
}

/* 200000 bytes, zeros included, across several 64 KiB copy blocks. */
static unsigned char *make_payload(size_t len)
{
    unsigned char *data = malloc(len);
    assert_non_null(data);
    for (size_t i = 0; i < len; i++)
        data[i] = (unsigned char)((i * 131 + i / 977) & 0xff);
    return data;
}

static void test_begin_copy_is_byte_identical_with_same_mode(void **state)
{
    atomic_fixture *f = *state;
    const size_t len = 200000;
    unsigned char *payload = make_payload(len);
    write_file(f->final_path, payload, len);
    assert_int_equal(chmod(f->final_path, 0640), 0);

    attn_atomic tx;
    attn_error err = {0};
    int status = attn_atomic_begin_copy(&tx, f->final_path, -1, &err);
    if (status != ATTN_OK)
        fail_msg("begin_copy: %d %s", status, err.msg);
    assert_non_null(strstr(tx.temp_path, ATTN_TEMP_MARKER));

    size_t copy_len;
    unsigned char *copy = read_file(tx.temp_path, &copy_len);
    assert_int_equal(copy_len, len);
    assert_memory_equal(copy, payload, len);
    free(copy);
    struct stat st;                 /* the owner's while written */
    assert_int_equal(stat(tx.temp_path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);

    /* a change to the copy reaches the destination only on commit */
    FILE *temp = fopen(tx.temp_path, "r+b");
    assert_non_null(temp);
    assert_int_equal(fputc('Z', temp), 'Z');
    assert_int_equal(fclose(temp), 0);
    size_t final_len;
    unsigned char *before = read_file(f->final_path, &final_len);
    assert_memory_equal(before, payload, len);
    free(before);

    assert_int_equal(attn_atomic_commit(&tx, NULL, &err), ATTN_OK);
    unsigned char *after = read_file(f->final_path, &final_len);
    assert_int_equal(final_len, len);
    assert_int_equal(after[0], 'Z');
    assert_memory_equal(after + 1, payload + 1, len - 1);
    free(after);
    assert_int_equal(stat(f->final_path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    size_t temps;
    assert_int_equal(count_entries(f->dir, &temps), 1);
    assert_int_equal(temps, 0);
    free(payload);
}

static void test_begin_copy_of_missing_file_is_io_error(void **state)
{
    atomic_fixture *f = *state;
    attn_atomic tx;
    attn_error err = {0};
    assert_int_equal(attn_atomic_begin_copy(&tx, f->final_path, -1, &err), ATTN_EIO);
    assert_non_null(strstr(err.msg, f->final_path));
    size_t temps;
    assert_int_equal(count_entries(f->dir, &temps), 0);
}

static void test_same_file_existing_paths(void **state)
{
    atomic_fixture *f = *state;
    char other[256], link_path[256], dotted[256];
    snprintf(other, sizeof other, "%s/other.h5", f->dir);
    snprintf(link_path, sizeof link_path, "%s/link.h5", f->dir);
    snprintf(dotted, sizeof dotted, "%s/./out.h5", f->dir);
    write_file(f->final_path, "same", 4);
    write_file(other, "same", 4);                 /* equal bytes, other file */
    assert_int_equal(link(f->final_path, link_path), 0);

    assert_true(attn_same_file(f->final_path, f->final_path));
    assert_true(attn_same_file(f->final_path, dotted));
    assert_true(attn_same_file(f->final_path, link_path));
    assert_true(attn_same_file(link_path, f->final_path));
    assert_false(attn_same_file(f->final_path, other));
    assert_false(attn_same_file(other, link_path));
}

static void test_same_file_existing_and_new_path_differ(void **state)
{
    atomic_fixture *f = *state;
    char fresh[256];
    snprintf(fresh, sizeof fresh, "%s/fresh.h5", f->dir);
    write_file(f->final_path, "x", 1);
    assert_false(attn_same_file(f->final_path, fresh));
    assert_false(attn_same_file(fresh, f->final_path));
}

static void test_same_file_new_path_is_itself(void **state)
{
    /* Neither exists: "the same canonical directory and name" (attn_atomic.h). */
    atomic_fixture *f = *state;
    char dotted[256];
    snprintf(dotted, sizeof dotted, "%s/./out.h5", f->dir);
    assert_false(exists(f->final_path));
    assert_true(attn_same_file(f->final_path, f->final_path));
    assert_true(attn_same_file(f->final_path, dotted));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_begin_creates_marked_temp_beside_destination, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_renames_temp_onto_destination, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort_removes_temp_and_leaves_no_destination, setup, teardown),
        cmocka_unit_test_setup_teardown(test_begin_refuses_existing_destination_without_replace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_begin_with_replace_replaces_on_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_refuses_destination_that_appeared, setup, teardown),
        cmocka_unit_test_setup_teardown(test_begin_in_missing_directory_is_io_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_begin_copy_is_byte_identical_with_same_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_begin_copy_of_missing_file_is_io_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_file_existing_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_file_existing_and_new_path_differ, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_file_new_path_is_itself, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
