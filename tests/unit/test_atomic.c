/*
 * test_atomic.c - unit tests for attn_atomic (temporary files renamed onto
 * their destination) and attn_same_file, in a temporary directory per test.
 */
#define _GNU_SOURCE             /* renameat2, RENAME_NOREPLACE, syscall */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "attn_atomic.h"
#include "test_support.h"

/* A per-test temporary directory holding plain files only. */
typedef struct atomic_fixture {
    test_dir tmp;
    char final_path[256];   /* dir/out.h5, not created by setup */
    attn_atomic tx;         /* the test's transaction */
    attn_error err;
} atomic_fixture;

static int setup(void **state)
{
    if (test_dir_setup(state, sizeof(atomic_fixture), "test_atomic") != 0)
        return -1;
    atomic_fixture *f = *state;
    snprintf(f->final_path, sizeof f->final_path, "%s/out.h5", f->tmp.dir);
    return 0;
}

/*
 * renameat2 as libattn (linked statically into this test) sees it.  While
 * fake_noreplace_errno is set, a call with RENAME_NOREPLACE fails with that
 * errno, as on a kernel or file system without the flag (ENOSYS, EINVAL)
 * or one that refuses the rename (EPERM); every other call is the system
 * call.  fake_noreplace_calls counts the calls failed so: a test that sets
 * the errno checks that the library met the fake.
 */
static int fake_noreplace_errno;
static int fake_noreplace_calls;

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
              unsigned int flags)
{
    if (fake_noreplace_errno != 0 && (flags & RENAME_NOREPLACE) != 0) {
        fake_noreplace_calls++;
        errno = fake_noreplace_errno;
        return -1;
    }
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags);
}

static int teardown(void **state)
{
    fake_noreplace_errno = 0;
    fake_noreplace_calls = 0;
    return test_dir_teardown(state);
}

static void assert_file_holds(const char *path, const char *expected)
{
    assert_file_bytes(path, expected, strlen(expected));
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* The fixture's directory holds `count` entries, `temps` of them carrying
 * ATTN_TEMP_MARKER. */
static void assert_entries(const atomic_fixture *f, size_t count, size_t temps)
{
    assert_dir_entries(f->tmp.dir, ATTN_TEMP_MARKER, count, temps);
}

/* The destination is alone in the directory, holding `expected`. */
static void assert_destination_alone(const atomic_fixture *f, const char *expected)
{
    assert_file_holds(f->final_path, expected);
    assert_entries(f, 1, 0);
}

static void test_begin_creates_marked_temp_beside_destination(void **state)
{
    atomic_fixture *f = *state;
    mode_t old_mask = umask(027);
    int status = attn_atomic_begin(&f->tx, f->final_path, false, &f->err);
    umask(old_mask);
    assert_int_equal(status, ATTN_OK);

    /* dir/.out.h5.attnrun-tmp-XXXXXX, empty, the owner's alone while it is
     * written (whatever the umask, the owner can reopen it) */
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s/.out.h5" ATTN_TEMP_MARKER, f->tmp.dir);
    assert_int_equal(strncmp(f->tx.temp_path, prefix, strlen(prefix)), 0);
    assert_int_equal(strlen(f->tx.temp_path), strlen(prefix) + 6);
    assert_string_equal(f->tx.final_path, f->final_path);
    struct stat st;
    assert_int_equal(stat(f->tx.temp_path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_size, 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_false(exists(f->final_path));

    assert_entries(f, 1, 1);
    attn_atomic_abort(&f->tx);
}

static void test_commit_renames_temp_onto_destination(void **state)
{
    atomic_fixture *f = *state;
    mode_t old_mask = umask(027);
    assert_int_equal(attn_atomic_begin(&f->tx, f->final_path, false, &f->err), ATTN_OK);
    umask(old_mask);
    char temp[PATH_MAX];
    snprintf(temp, sizeof temp, "%s", f->tx.temp_path);
    test_write_file(temp, "result", 6);

    int status = attn_atomic_commit(&f->tx, NULL, &f->err);
    if (status != ATTN_OK)
        fail_msg("commit: %d %s", status, f->err.msg);
    assert_file_holds(f->final_path, "result");
    struct stat st;                         /* 0666 less the umask 027 */
    assert_int_equal(stat(f->final_path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    assert_false(exists(temp));
    assert_string_equal(f->tx.temp_path, "");
    assert_true(f->tx.committing);  /* "stays set after a successful rename" */
    assert_entries(f, 1, 0);   /* out.h5 only */
    attn_atomic_abort(&f->tx);                             /* harmless now */
    assert_true(exists(f->final_path));
}

static void test_abort_removes_temp_and_leaves_no_destination(void **state)
{
    atomic_fixture *f = *state;
    assert_int_equal(attn_atomic_begin(&f->tx, f->final_path, false, &f->err), ATTN_OK);
    char temp[PATH_MAX];
    snprintf(temp, sizeof temp, "%s", f->tx.temp_path);
    test_write_file(temp, "partial", 7);

    attn_atomic_abort(&f->tx);
    assert_false(exists(temp));
    assert_false(exists(f->final_path));
    assert_string_equal(f->tx.temp_path, "");
    attn_atomic_abort(&f->tx);                             /* twice is safe */
    assert_entries(f, 0, 0);
}

/* An existing destination: refused without replace, and left as it is;
 * with replace, kept until the commit replaces it. */
static void test_existing_destination_replaced_only_with_replace(void **state)
{
    atomic_fixture *f = *state;
    test_write_file(f->final_path, "old", 3);
    assert_int_equal(attn_atomic_begin(&f->tx, f->final_path, false, &f->err), ATTN_EUSAGE);
    assert_non_null(strstr(f->err.msg, f->final_path));
    assert_destination_alone(f, "old");

    assert_int_equal(attn_atomic_begin(&f->tx, f->final_path, true, &f->err), ATTN_OK);
    assert_file_holds(f->final_path, "old");   /* untouched until the commit */
    test_write_file(f->tx.temp_path, "new!", 4);
    assert_file_holds(f->final_path, "old");
    assert_int_equal(attn_atomic_commit(&f->tx, NULL, &f->err), ATTN_OK);
    assert_destination_alone(f, "new!");
}

static void test_commit_refuses_destination_that_appeared(void **state)
{
    atomic_fixture *f = *state;
    assert_int_equal(attn_atomic_begin(&f->tx, f->final_path, false, &f->err), ATTN_OK);
    test_write_file(f->tx.temp_path, "mine", 4);
    test_write_file(f->final_path, "theirs", 6);   /* another writer got there first */
    assert_int_equal(attn_atomic_commit(&f->tx, NULL, &f->err), ATTN_EUSAGE);
    assert_destination_alone(f, "theirs");
}

static void test_begin_in_missing_directory_is_io_error(void **state)
{
    atomic_fixture *f = *state;
    char path[256];
    snprintf(path, sizeof path, "%s/no/such/dir/out.h5", f->tmp.dir);
    assert_int_equal(attn_atomic_begin(&f->tx, path, false, &f->err), ATTN_EIO);
    assert_true(strlen(f->err.msg) > 0);
    assert_string_equal(f->tx.temp_path, "");
    attn_atomic_abort(&f->tx);
    assert_entries(f, 0, 0);
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
    test_write_file(f->final_path, payload, len);
    assert_int_equal(chmod(f->final_path, 0640), 0);

    int status = attn_atomic_begin_copy(&f->tx, f->final_path, -1, &f->err);
    if (status != ATTN_OK)
        fail_msg("begin_copy: %d %s", status, f->err.msg);
    assert_non_null(strstr(f->tx.temp_path, ATTN_TEMP_MARKER));

    size_t copy_len;
    unsigned char *copy = test_read_file(f->tx.temp_path, &copy_len);
    assert_int_equal(copy_len, len);
    assert_memory_equal(copy, payload, len);
    free(copy);
    struct stat st;                 /* the owner's while written */
    assert_int_equal(stat(f->tx.temp_path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);

    /* a change to the copy reaches the destination only on commit */
    FILE *temp = fopen(f->tx.temp_path, "r+b");
    assert_non_null(temp);
    assert_int_equal(fputc('Z', temp), 'Z');
    assert_int_equal(fclose(temp), 0);
    size_t final_len;
    unsigned char *before = test_read_file(f->final_path, &final_len);
    assert_memory_equal(before, payload, len);
    free(before);

    assert_int_equal(attn_atomic_commit(&f->tx, NULL, &f->err), ATTN_OK);
    unsigned char *after = test_read_file(f->final_path, &final_len);
    assert_int_equal(final_len, len);
    assert_int_equal(after[0], 'Z');
    assert_memory_equal(after + 1, payload + 1, len - 1);
    free(after);
    assert_int_equal(stat(f->final_path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    assert_entries(f, 1, 0);
    free(payload);
}

static void test_begin_copy_of_missing_file_is_io_error(void **state)
{
    atomic_fixture *f = *state;
    assert_int_equal(attn_atomic_begin_copy(&f->tx, f->final_path, -1, &f->err), ATTN_EIO);
    assert_non_null(strstr(f->err.msg, f->final_path));
    assert_entries(f, 0, 0);
}

static void test_same_file_existing_paths(void **state)
{
    atomic_fixture *f = *state;
    char other[256], link_path[256], dotted[256];
    snprintf(other, sizeof other, "%s/other.h5", f->tmp.dir);
    snprintf(link_path, sizeof link_path, "%s/link.h5", f->tmp.dir);
    snprintf(dotted, sizeof dotted, "%s/./out.h5", f->tmp.dir);
    test_write_file(f->final_path, "same", 4);
    test_write_file(other, "same", 4);            /* equal bytes, other file */
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
    snprintf(fresh, sizeof fresh, "%s/fresh.h5", f->tmp.dir);
    test_write_file(f->final_path, "x", 1);
    assert_false(attn_same_file(f->final_path, fresh));
    assert_false(attn_same_file(fresh, f->final_path));
}

static void test_same_file_new_path_is_itself(void **state)
{
    /* Neither exists: "the same canonical directory and name" (attn_atomic.h). */
    atomic_fixture *f = *state;
    char dotted[256];
    snprintf(dotted, sizeof dotted, "%s/./out.h5", f->tmp.dir);
    assert_false(exists(f->final_path));
    assert_true(attn_same_file(f->final_path, f->final_path));
    assert_true(attn_same_file(f->final_path, dotted));
}

/* ---- the temporary's name when the destination's name is long --------- */

/* The directory's name limit, for the tests below: NAME_MAX when unknown
 * (attn_atomic.h: the file system's limit).  Skips the test when it is too
 * short for a temporary or too long for these buffers. */
static size_t name_limit_of(const char *dir)
{
    long limit = pathconf(dir, _PC_NAME_MAX);
    size_t n = limit > 0 ? (size_t)limit : NAME_MAX;
    if (n < 40 || n > 1000)
        skip();
    return n;
}

/* Bytes a temporary's name takes besides the kept part of the
 * destination's: ".", then ATTN_TEMP_MARKER and six random characters. */
#define TEMP_NAME_EXTRA (1 + strlen(ATTN_TEMP_MARKER) + 6)

/* tx's temporary is dir/.KEPT<marker>XXXXXX, KEPT the first `kept` bytes
 * of name, and exists. */
static void assert_temp_keeps(const atomic_fixture *f, const attn_atomic *tx, const char *name,
                              size_t kept)
{
    char prefix[PATH_MAX];
    size_t n = (size_t)snprintf(prefix, sizeof prefix, "%s/.", f->tmp.dir);
    memcpy(prefix + n, name, kept);
    snprintf(prefix + n + kept, sizeof prefix - n - kept, "%s", ATTN_TEMP_MARKER);
    assert_int_equal(strncmp(tx->temp_path, prefix, strlen(prefix)), 0);
    assert_int_equal(strlen(tx->temp_path), strlen(prefix) + 6);
    assert_true(exists(tx->temp_path));
}

/* A destination name of 3-byte UTF-8 characters (U+20AC, E2 82 AC) as long
 * as the limit allows: the temporary keeps the most whole characters that fit
 * -- never part of one -- and the commit still makes the full name. */
static void test_long_name_cut_between_utf8_characters(void **state)
{
    atomic_fixture *f = *state;
    const size_t limit = name_limit_of(f->tmp.dir), chars = limit / 3;
    char name[1024] = "", path[PATH_MAX];
    for (size_t i = 0; i < chars; i++)
        memcpy(name + 3 * i, "\xe2\x82\xac", 4);
    assert_int_equal(strlen(name), 3 * chars);
    assert_true(strlen(name) + TEMP_NAME_EXTRA > limit);    /* it must be cut */
    snprintf(path, sizeof path, "%s/%s", f->tmp.dir, name);

    int status = attn_atomic_begin(&f->tx, path, false, &f->err);
    if (status != ATTN_OK)
        fail_msg("begin: %d %s", status, f->err.msg);
    size_t whole = (limit - TEMP_NAME_EXTRA) / 3;      /* characters that fit */
    assert_temp_keeps(f, &f->tx, name, 3 * whole);
    test_write_file(f->tx.temp_path, "long", 4);
    assert_int_equal(attn_atomic_commit(&f->tx, NULL, &f->err), ATTN_OK);
    assert_file_holds(path, "long");
    assert_entries(f, 1, 0);
}

/* A name of continuation bytes alone (0x80: no character starts in it, a
 * name Linux takes all the same): the only boundary to cut at is its start,
 * so the temporary keeps none of it. */
static void test_long_name_without_character_start_kept_empty(void **state)
{
    atomic_fixture *f = *state;
    const size_t limit = name_limit_of(f->tmp.dir);
    char name[1024], path[PATH_MAX];
    memset(name, 0x80, limit);
    name[limit] = '\0';
    snprintf(path, sizeof path, "%s/%s", f->tmp.dir, name);

    int status = attn_atomic_begin(&f->tx, path, false, &f->err);
    if (status != ATTN_OK)
        fail_msg("begin: %d %s", status, f->err.msg);
    assert_temp_keeps(f, &f->tx, name, 0);
    attn_atomic_abort(&f->tx);
    assert_entries(f, 0, 0);
}

/* ---- a kernel without RENAME_NOREPLACE ------------------------------------ */

/* The flag unknown (ENOSYS): the commit still renames the temporary onto a
 * destination that does not exist. */
static void test_commit_without_noreplace_renames(void **state)
{
    atomic_fixture *f = *state;
    assert_int_equal(attn_atomic_begin(&f->tx, f->final_path, false, &f->err), ATTN_OK);
    test_write_file(f->tx.temp_path, "fallback", 8);
    fake_noreplace_errno = ENOSYS;
    int status = attn_atomic_commit(&f->tx, NULL, &f->err);
    if (status != ATTN_OK)
        fail_msg("commit: %d %s", status, f->err.msg);
    assert_true(fake_noreplace_calls > 0);
    assert_string_equal(f->tx.temp_path, "");
    assert_destination_alone(f, "fallback");
}

/* The flag refused by the file system (EINVAL): a destination that appeared
 * in the meantime is still refused, and left as it is. */
static void test_commit_without_noreplace_refuses_destination_that_appeared(void **state)
{
    atomic_fixture *f = *state;
    assert_int_equal(attn_atomic_begin(&f->tx, f->final_path, false, &f->err), ATTN_OK);
    test_write_file(f->tx.temp_path, "mine", 4);
    test_write_file(f->final_path, "theirs", 6);
    fake_noreplace_errno = EINVAL;
    assert_int_equal(attn_atomic_commit(&f->tx, NULL, &f->err), ATTN_EUSAGE);
    assert_true(fake_noreplace_calls > 0);
    assert_destination_alone(f, "theirs");
}

/* The rename itself refused (EPERM): an I/O error naming the destination,
 * the temporary removed, no destination. */
static void test_commit_rename_refused_is_io_error(void **state)
{
    atomic_fixture *f = *state;
    assert_int_equal(attn_atomic_begin(&f->tx, f->final_path, false, &f->err), ATTN_OK);
    test_write_file(f->tx.temp_path, "mine", 4);
    fake_noreplace_errno = EPERM;
    assert_int_equal(attn_atomic_commit(&f->tx, NULL, &f->err), ATTN_EIO);
    assert_true(fake_noreplace_calls > 0);
    assert_non_null(strstr(f->err.msg, f->final_path));
    assert_string_equal(f->tx.temp_path, "");
    assert_false(f->tx.committing);            /* a later signal: nothing was written */
    assert_entries(f, 0, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        test_with_fixture(test_begin_creates_marked_temp_beside_destination),
        test_with_fixture(test_commit_renames_temp_onto_destination),
        test_with_fixture(test_abort_removes_temp_and_leaves_no_destination),
        test_with_fixture(test_existing_destination_replaced_only_with_replace),
        test_with_fixture(test_commit_refuses_destination_that_appeared),
        test_with_fixture(test_begin_in_missing_directory_is_io_error),
        test_with_fixture(test_begin_copy_is_byte_identical_with_same_mode),
        test_with_fixture(test_begin_copy_of_missing_file_is_io_error),
        test_with_fixture(test_same_file_existing_paths),
        test_with_fixture(test_same_file_existing_and_new_path_differ),
        test_with_fixture(test_same_file_new_path_is_itself),
        test_with_fixture(test_long_name_cut_between_utf8_characters),
        test_with_fixture(test_long_name_without_character_start_kept_empty),
        test_with_fixture(test_commit_without_noreplace_renames),
        test_with_fixture(test_commit_without_noreplace_refuses_destination_that_appeared),
        test_with_fixture(test_commit_rename_refused_is_io_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
