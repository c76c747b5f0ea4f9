/* guard.c - checks made before a run writes or computes (guard.h). */
#define _GNU_SOURCE     /* pthread_getattr_default_np */
#include "core/guard.h"

#include "attn_threads.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Address space HDF5 may add while it parses the input's metadata. */
#define PARSE_MEMORY ((rlim_t)1 << 30)

/* The malloc arena glibc reserves for a new thread (HEAP_MAX_SIZE). */
#define THREAD_ARENA_BYTES ((size_t)64 << 20)

/* Address space for what is not counted: HDF5's caches, stdio, libraries
 * loaded late. */
#define SLACK_BYTES ((size_t)64 << 20)

/* The process's address space now, in bytes (0 when unknown). */
static size_t address_space_used(void)
{
    unsigned long pages = 0;
    FILE *statm = fopen("/proc/self/statm", "r");
    if (statm == NULL)
        return 0;
    bool read = fscanf(statm, "%lu", &pages) == 1;
    fclose(statm);
    long page = sysconf(_SC_PAGESIZE);
    return read && page > 0 ? (size_t)pages * (size_t)page : 0;
}

bool attn_guard_cap_parse_memory(struct rlimit *saved)
{
#if defined(__SANITIZE_ADDRESS__)
    (void)saved;
    return false;
#else
    size_t used = address_space_used();
    if (used == 0 || getrlimit(RLIMIT_AS, saved) != 0)
        return false;
    struct rlimit tight = *saved;
    rlim_t cap = (rlim_t)used + PARSE_MEMORY;
    if (tight.rlim_cur != RLIM_INFINITY && tight.rlim_cur <= cap)
        return false;                       /* already as tight */
    tight.rlim_cur = cap;
    return setrlimit(RLIMIT_AS, &tight) == 0;
#endif
}

void attn_guard_restore_memory(const struct rlimit *saved)
{
    setrlimit(RLIMIT_AS, saved);
}

/*
 * The stack size libgomp gives its threads: OMP_STACKSIZE (or
 * GOMP_STACKSIZE), a number with an optional B, K, M or G (K when none),
 * else the default of a new thread.
 */
static size_t openmp_stack_size(void)
{
    const char *text = getenv("OMP_STACKSIZE");
    size_t size = 0;
    if (text == NULL)
        text = getenv("GOMP_STACKSIZE");
    if (text != NULL) {
        char *end;
        errno = 0;
        unsigned long long value = strtoull(text, &end, 10);
        while (*end == ' ')
            end++;
        unsigned shift = *end == 'B' || *end == 'b' ? 0 : *end == 'M' || *end == 'm' ? 20
                       : *end == 'G' || *end == 'g' ? 30 : 10;
        if (errno == 0 && end != text && value <= (SIZE_MAX >> shift))
            size = (size_t)value << shift;
    }
    if (size == 0) {
        pthread_attr_t attr;
        if (pthread_getattr_default_np(&attr) == 0) {
            pthread_attr_getstacksize(&attr, &size);
            pthread_attr_destroy(&attr);
        }
    }
    return size != 0 ? size : (size_t)8 << 20;
}

static void *thread_probe(void *unused)
{
    return unused;
}

int attn_guard_threads(int threads, attn_error *err)
{
    pthread_t started[threads > 1 ? threads - 1 : 1];
    pthread_attr_t attr;
    int count = 0, failure = 0;
    if (threads <= 1)
        return ATTN_OK;
    if ((failure = pthread_attr_init(&attr)) == 0) {
        size_t stack = openmp_stack_size();
        if (stack < (size_t)PTHREAD_STACK_MIN)
            stack = (size_t)PTHREAD_STACK_MIN;
        if ((failure = pthread_attr_setstacksize(&attr, stack)) == 0)
            while (count < threads - 1 &&
                   (failure = pthread_create(&started[count], &attr, thread_probe, NULL)) == 0)
                count++;
        pthread_attr_destroy(&attr);
    }
    for (int i = 0; i < count; i++)
        pthread_join(started[i], NULL);
    if (failure == 0)
        return ATTN_OK;
    return attn_fail_hint(err, ATTN_EIO, ATTN_HINT_THREADS,
                          "cannot start %d threads (%d started): %s", threads, count + 1,
                          strerror(failure));
}

int attn_guard_memory(size_t buffer_bytes, int threads, attn_error *err)
{
    char need_text[32], left_text[32];
    size_t extra = openmp_stack_size() + THREAD_ARENA_BYTES + ATTN_BLAS_BUFFER_BYTES;
    size_t need = buffer_bytes, total;
    if (!attn_size_add(&need, need, ATTN_BLAS_BUFFER_BYTES + SLACK_BYTES) ||
        !attn_size_mul(&total, (size_t)(threads > 1 ? threads - 1 : 0), extra) ||
        !attn_size_add(&need, need, total))
        return attn_fail(err, ATTN_ENOMEM, "out of memory: the buffers overflow the address space");
    void *reserved = mmap(NULL, need, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (reserved != MAP_FAILED) {
        munmap(reserved, need);
        return ATTN_OK;
    }
    int failure = errno;
    struct rlimit limit;
    attn_format_bytes(need_text, sizeof need_text, (double)need);
    if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
        double used = (double)address_space_used(), cap = (double)limit.rlim_cur;
        attn_format_bytes(left_text, sizeof left_text, cap > used ? cap - used : 0);
        return attn_fail_hint(err, ATTN_ENOMEM, threads > 1 ? ATTN_HINT_THREADS : ATTN_HINT_NONE,
                              "out of memory: this run needs %s more address space (its buffers, "
                              "and %d threads at 128 MiB each for OpenBLAS) but the limit "
                              "(ulimit -v) leaves %s; raise it%s", need_text, threads, left_text,
                              threads > 1 ? ", or run fewer threads" : "");
    }
    return attn_fail(err, ATTN_ENOMEM, "out of memory: cannot reserve %s for this run (%d threads): %s",
                     need_text, threads, strerror(failure));
}

int attn_guard_free_space(const char *target, double need_bytes, const char *what,
                          attn_error *err)
{
    char dir[PATH_MAX], need_text[32], free_text[32];
    struct statvfs fs;
    /* The real file's directory: a symbolic link may lead to another file
     * system.  A target that does not exist yet is a name in its
     * directory. */
    char *real = realpath(target, NULL);
    snprintf(dir, sizeof dir, "%s", real != NULL ? real : target);
    free(real);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (statvfs(dir, &fs) != 0 || fs.f_blocks == 0)
        return ATTN_OK;                 /* no figures: the writes will tell */
    double available = (double)fs.f_bavail * (double)fs.f_frsize;
    if (need_bytes <= available)
        return ATTN_OK;
    return attn_fail_hint(err, ATTN_EIO, ATTN_HINT_LOW_SPACE,
                          "%s: needs %s (%s) but %s has %s free", target,
                          attn_format_bytes(need_text, sizeof need_text, need_bytes), what, dir,
                          attn_format_bytes(free_text, sizeof free_text, available));
}
