/*
 * test_guard.c - unit tests for the checks made before a run (core/guard.h:
 * the address-space cap while HDF5 parses, the address space a run
 * reserves, the threads that must start) and for attn_threads' rule for a
 * sequential OpenBLAS.
 *
 * Every test saves and gives back the process's soft RLIMIT_AS,
 * OMP_STACKSIZE and GOMP_STACKSIZE (teardown), since the checks read them.
 * Expected figures come from guard.h's definitions, worked out here by
 * hand:
 *
 *   attn_guard_memory(buffer, threads) reserves
 *       buffer + 128 MiB (OpenBLAS) + 64 MiB (slack)
 *       + (threads - 1) x (stack + 64 MiB malloc arena + 128 MiB OpenBLAS)
 *   with stack = OMP_STACKSIZE (else GOMP_STACKSIZE): a number with an
 *   optional B, K, M or G in either case (K when none), spaces allowed
 *   before the letter.
 *
 *   attn_guard_cap_parse_memory lowers the soft RLIMIT_AS to the address
 *   space in use + 1 GiB, unless it is already at most that, or the
 *   address space in use cannot be read from /proc/self/statm.
 *
 * Two functions of the libraries are replaced here for the library's
 * code linked into this program: fopen (only for /proc/self/statm, and
 * only while a test asks, to stand for a system without /proc) and
 * openblas_get_parallel (to stand for each build of OpenBLAS).
 */
#define _GNU_SOURCE     /* RTLD_NEXT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>
#include <cblas.h>

#include "attn_threads.h"
#include "core/guard.h"
#include "test_support.h"

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)

/* The cap's headroom (guard.c's PARSE_MEMORY), by guard.h's word. */
#define PARSE_HEADROOM ((rlim_t)GIB)

/* How far apart two readings of the address space in use may be here:
 * fopen's buffer, a heap grown by malloc. */
#define USED_TOLERANCE ((rlim_t)16 * MIB)

/* Under AddressSanitizer attn_guard_cap_parse_memory never caps. */
#if defined(__SANITIZE_ADDRESS__)
static const bool asan = true;
#else
static const bool asan = false;
#endif

/* ---- stand-ins for the libraries ----------------------------------------- */

/* What openblas_get_parallel answers: 0 sequential, 1 pthreads, 2 OpenMP. */
static int blas_parallel = 2;

int openblas_get_parallel(void)
{
    return blas_parallel;
}

/* While statm_fake is set, fopen("/proc/self/statm") fails (statm_text
 * NULL) or reads statm_text. */
static bool statm_fake;
static const char *statm_text;

FILE *fopen(const char *restrict path, const char *restrict mode)
{
    static FILE *(*real_fopen)(const char *restrict, const char *restrict);
    if (statm_fake && strcmp(path, "/proc/self/statm") == 0) {
        if (statm_text == NULL) {
            errno = ENOENT;
            return NULL;
        }
        return fmemopen((void *)statm_text, strlen(statm_text), mode);
    }
    if (real_fopen == NULL) {
        void *symbol = dlsym(RTLD_NEXT, "fopen");
        if (symbol == NULL)
            abort();
        memcpy(&real_fopen, &symbol, sizeof real_fopen);
    }
    return real_fopen(path, mode);
}

/* ---- the fixture ----------------------------------------------------------- */

typedef struct guard_fixture {
    struct rlimit limit;        /* RLIMIT_AS as the test found it */
    char *omp_stacksize;        /* the variables as found (NULL: unset) */
    char *gomp_stacksize;
    attn_error err;
} guard_fixture;

static char *saved_env(const char *name)
{
    const char *value = getenv(name);
    return value != NULL ? strdup(value) : NULL;
}

static void restore_env(const char *name, char *value)
{
    if (value != NULL)
        setenv(name, value, 1);
    else
        unsetenv(name);
    free(value);
}

static int setup(void **state)
{
    guard_fixture *f = calloc(1, sizeof *f);
    if (f == NULL || getrlimit(RLIMIT_AS, &f->limit) != 0) {
        free(f);
        return -1;
    }
    f->omp_stacksize = saved_env("OMP_STACKSIZE");
    f->gomp_stacksize = saved_env("GOMP_STACKSIZE");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    guard_fixture *f = *state;
    int result = setrlimit(RLIMIT_AS, &f->limit);
    restore_env("OMP_STACKSIZE", f->omp_stacksize);
    restore_env("GOMP_STACKSIZE", f->gomp_stacksize);
    statm_fake = false;
    statm_text = NULL;
    blas_parallel = 2;
    free(f);
    return result;
}

/* ---- helpers ----------------------------------------------------------------- */

/* The address space in use, read here with open(2) (not through the fopen
 * above): /proc/self/statm's first field x the page size; 0 when unknown. */
static rlim_t used_now(void)
{
    char text[128];
    int fd = open("/proc/self/statm", O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t got = read(fd, text, sizeof text - 1);
    close(fd);
    if (got <= 0)
        return 0;
    text[got] = '\0';
    unsigned long long pages = strtoull(text, NULL, 10);
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? (rlim_t)pages * (rlim_t)page : 0;
}

/* Sets the soft RLIMIT_AS (the hard one stays); skips the test when the
 * hard limit does not allow it. */
static void set_soft_limit(rlim_t soft)
{
    struct rlimit limit;
    assert_int_equal(getrlimit(RLIMIT_AS, &limit), 0);
    if (limit.rlim_max != RLIM_INFINITY && (soft == RLIM_INFINITY || soft > limit.rlim_max))
        skip();
    limit.rlim_cur = soft;
    assert_int_equal(setrlimit(RLIMIT_AS, &limit), 0);
}

static rlim_t soft_limit(void)
{
    struct rlimit limit;
    assert_int_equal(getrlimit(RLIMIT_AS, &limit), 0);
    return limit.rlim_cur;
}

/* The address space in use, or the test skipped where /proc has none. */
static rlim_t used_or_skip(void)
{
    rlim_t used = used_now();
    if (used == 0)
        skip();
    return used;
}

/* Asserts that cur is within USED_TOLERANCE of want. */
static void assert_limit_near(rlim_t cur, rlim_t want)
{
    if (cur + USED_TOLERANCE < want || cur > want + USED_TOLERANCE)
        fail_msg("limit %llu, want %llu (+- %llu)", (unsigned long long)cur,
                 (unsigned long long)want, (unsigned long long)USED_TOLERANCE);
}

/* ---- attn_guard_cap_parse_memory ------------------------------------------ */

/* With no soft limit: the cap is the address space in use + 1 GiB, *saved
 * holds the old limit, and attn_guard_restore_memory gives it back. */
static void test_cap_without_limit_is_used_plus_headroom(void **state)
{
    (void)state;
    set_soft_limit(RLIM_INFINITY);
    rlim_t used = used_or_skip();
    struct rlimit saved;
    bool capped = attn_guard_cap_parse_memory(&saved);
    if (asan) {
        assert_false(capped);
        assert_true(soft_limit() == RLIM_INFINITY);
        return;
    }
    assert_true(capped);
    assert_true(saved.rlim_cur == RLIM_INFINITY);
    assert_limit_near(soft_limit(), used + PARSE_HEADROOM);
    attn_guard_restore_memory(&saved);
    assert_true(soft_limit() == RLIM_INFINITY);
}

/* A soft limit well above the cap is lowered to it, and given back. */
static void test_cap_lowers_a_looser_limit(void **state)
{
    (void)state;
    rlim_t used = used_or_skip();
    rlim_t loose = used + 4 * PARSE_HEADROOM;
    set_soft_limit(loose);
    struct rlimit saved;
    bool capped = attn_guard_cap_parse_memory(&saved);
    if (asan) {
        assert_false(capped);
        assert_true(soft_limit() == loose);
        return;
    }
    assert_true(capped);
    assert_true(saved.rlim_cur == loose);
    assert_limit_near(soft_limit(), used + PARSE_HEADROOM);
    attn_guard_restore_memory(&saved);
    assert_true(soft_limit() == loose);
}

/* A soft limit already below the cap stays as it is. */
static void test_cap_keeps_a_tighter_limit(void **state)
{
    (void)state;
    rlim_t used = used_or_skip();
    rlim_t tight = used + PARSE_HEADROOM / 2;
    set_soft_limit(tight);
    struct rlimit saved;
    assert_false(attn_guard_cap_parse_memory(&saved));
    assert_true(soft_limit() == tight);
}

/* Where the address space in use cannot be read (no /proc; a statm that
 * says 0 pages or is not a number), there is no cap: the limit stays. */
static void test_no_cap_when_address_space_unknown(void **state)
{
    (void)state;
    static const char *const texts[] = {NULL, "0 0 0 0 0 0 0\n", "x\n"};
    set_soft_limit(RLIM_INFINITY);
    for (size_t i = 0; i < COUNT(texts); i++) {
        struct rlimit saved;
        statm_fake = true;
        statm_text = texts[i];
        bool capped = attn_guard_cap_parse_memory(&saved);
        statm_fake = false;
        if (capped)
            attn_guard_restore_memory(&saved);
        if (capped)
            fail_msg("statm %s: capped", texts[i] != NULL ? texts[i] : "(none)");
        assert_true(soft_limit() == RLIM_INFINITY);
    }
}

/* ---- attn_guard_memory: OMP_STACKSIZE as guard.h reads it ------------------- */

/*
 * With the soft limit 256 MiB above the address space in use, no
 * reservation below fits: attn_guard_memory(640 MiB, 2 threads) fails and
 * says it needs 640 + 128 + 64 + (stack + 64 + 128) MiB = 1 GiB + stack.
 * Asserts that it says `want` for OMP_STACKSIZE `omp` (unset when NULL)
 * and GOMP_STACKSIZE `gomp`.
 */
static void assert_need(guard_fixture *f, const char *omp, const char *gomp, const char *want)
{
    char said[128];
    rlim_t used = used_or_skip();
    if (omp != NULL)
        setenv("OMP_STACKSIZE", omp, 1);
    else
        unsetenv("OMP_STACKSIZE");
    if (gomp != NULL)
        setenv("GOMP_STACKSIZE", gomp, 1);
    else
        unsetenv("GOMP_STACKSIZE");
    set_soft_limit(used + 256 * MIB);
    memset(&f->err, 0, sizeof f->err);
    int status = attn_guard_memory(640 * MIB, 2, &f->err);
    set_soft_limit(f->limit.rlim_cur);
    snprintf(said, sizeof said, "needs %s more address space", want);
    if (status != ATTN_ENOMEM || strstr(f->err.msg, said) == NULL)
        fail_msg("OMP_STACKSIZE %s, GOMP_STACKSIZE %s: status %d, \"%s\"; want \"%s\"",
                 omp != NULL ? omp : "(unset)", gomp != NULL ? gomp : "(unset)", status,
                 f->err.msg, said);
    assert_int_equal(f->err.hint, ATTN_HINT_THREADS);
}

/* 1 GiB of stack, in every unit and case guard.h names: 2.0 GiB. */
static void test_memory_reads_stack_size_units(void **state)
{
    guard_fixture *f = *state;
    static const char *const one_gib[] = {
        "1G", "1g", "1 G", "1024M", "1024m", "1048576K", "1048576k", "1048576",
        "1073741824B", "1073741824b", "1073741824 b",
    };
    for (size_t i = 0; i < COUNT(one_gib); i++)
        assert_need(f, one_gib[i], NULL, "2.0 GiB");
}

/* Other sizes, so that no unit is read as another: 1 GiB + stack. */
static void test_memory_stack_size_figures(void **state)
{
    guard_fixture *f = *state;
    assert_need(f, "2G", NULL, "3.0 GiB");
    assert_need(f, "3072m", NULL, "4.0 GiB");
    assert_need(f, "2147483648B", NULL, "3.0 GiB");
    assert_need(f, "4194304", NULL, "5.0 GiB");      /* K: 4 GiB */
    assert_need(f, "1048576B", NULL, "1.0 GiB");     /* 1 MiB: 1025 MiB */
}

/* GOMP_STACKSIZE when OMP_STACKSIZE is unset; OMP_STACKSIZE first. */
static void test_memory_reads_gomp_stacksize(void **state)
{
    guard_fixture *f = *state;
    assert_need(f, NULL, "2g", "3.0 GiB");
    assert_need(f, "1G", "2G", "2.0 GiB");
}

/* One thread needs no thread's stack, arena or OpenBLAS buffer beside the
 * calling one: 640 + 128 + 64 MiB = 832 MiB, whatever OMP_STACKSIZE. */
static void test_memory_one_thread_adds_no_thread(void **state)
{
    guard_fixture *f = *state;
    rlim_t used = used_or_skip();
    setenv("OMP_STACKSIZE", "1G", 1);
    unsetenv("GOMP_STACKSIZE");
    set_soft_limit(used + 256 * MIB);
    memset(&f->err, 0, sizeof f->err);
    int status = attn_guard_memory(640 * MIB, 1, &f->err);
    set_soft_limit(f->limit.rlim_cur);
    if (status != ATTN_ENOMEM || strstr(f->err.msg, "needs 832.0 MiB more address space") == NULL)
        fail_msg("one thread: status %d, \"%s\"; want \"needs 832.0 MiB more address space\"",
                 status, f->err.msg);
}

/* ---- attn_guard_threads ----------------------------------------------------- */

/* One thread (or fewer) starts nothing: OK whatever the limits. */
static void test_threads_one_or_fewer_start_nothing(void **state)
{
    guard_fixture *f = *state;
    setenv("OMP_STACKSIZE", "1G", 1);
    set_soft_limit(used_or_skip() + 256 * MIB);
    assert_int_equal(attn_guard_threads(1, &f->err), ATTN_OK);
    assert_int_equal(attn_guard_threads(0, &f->err), ATTN_OK);
    assert_int_equal(attn_guard_threads(-1, &f->err), ATTN_OK);
}

/* Threads whose stacks fit start; threads with a 512 MiB stack each do not
 * fit 256 MiB: "cannot start 3 threads (1 started)", the calling one. */
static void test_threads_that_cannot_start(void **state)
{
    guard_fixture *f = *state;
    setenv("OMP_STACKSIZE", "1M", 1);
    assert_int_equal(attn_guard_threads(4, &f->err), ATTN_OK);
    setenv("OMP_STACKSIZE", "512M", 1);
    set_soft_limit(used_or_skip() + 256 * MIB);
    assert_int_equal(attn_guard_threads(3, &f->err), ATTN_EIO);
    set_soft_limit(f->limit.rlim_cur);
    if (strstr(f->err.msg, "cannot start 3 threads (1 started)") == NULL)
        fail_msg("\"%s\"", f->err.msg);
    assert_int_equal(f->err.hint, ATTN_HINT_THREADS);
}

/* ---- attn_threads and the OpenBLAS build ------------------------------------- */

/* A sequential OpenBLAS (0) runs one thread whatever was asked; the
 * pthread (1) and OpenMP (2) builds run the threads asked. */
static void test_threads_by_openblas_build(void **state)
{
    (void)state;
    attn_set_threads(3);
    blas_parallel = 0;
    assert_int_equal(attn_threads(), 1);
    blas_parallel = 1;
    assert_int_equal(attn_threads(), 3);
    blas_parallel = 2;
    assert_int_equal(attn_threads(), 3);
    attn_set_threads(1);
    assert_int_equal(attn_threads(), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        test_with_fixture(test_cap_without_limit_is_used_plus_headroom),
        test_with_fixture(test_cap_lowers_a_looser_limit),
        test_with_fixture(test_cap_keeps_a_tighter_limit),
        test_with_fixture(test_no_cap_when_address_space_unknown),
        test_with_fixture(test_memory_reads_stack_size_units),
        test_with_fixture(test_memory_stack_size_figures),
        test_with_fixture(test_memory_reads_gomp_stacksize),
        test_with_fixture(test_memory_one_thread_adds_no_thread),
        test_with_fixture(test_threads_one_or_fewer_start_nothing),
        test_with_fixture(test_threads_that_cannot_start),
        test_with_fixture(test_threads_by_openblas_build),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
