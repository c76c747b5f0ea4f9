/*
 * tests/lib/vanish_on_open.c - an append that lands between two opens of
 * one file, made deterministic; loaded with LD_PRELOAD by
 * test_readers.sh.
 *
 * A reader opens an index's part more than once (its descriptor, then
 * HDF5 by name).  An append that replaces that layer renames a new index
 * over the old one and then removes the old part; if it does so between
 * those opens, the second finds nothing.  The race test of test_readers
 * hits that window now and then; this stand-in hits it every time: the
 * VANISH_AT-th open(2) of a path ending in VANISH_PATH first renames
 * VANISH_FROM over VANISH_TO (the new index over the old) and unlinks the
 * path, then opens it as the real open would (and fails, ENOENT).  With
 * VANISH_KEEP set the path stays: an append of another group, which
 * replaces the index and removes no part.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int open_fn(const char *, int, ...);

static int seen;

/* Whether path ends in VANISH_PATH (a / before it, or all of it). */
static int is_target(const char *path)
{
    const char *want = getenv("VANISH_PATH");
    if (want == NULL || path == NULL)
        return 0;
    size_t n = strlen(path), w = strlen(want);
    return n >= w && strcmp(path + n - w, want) == 0 && (n == w || path[n - w - 1] == '/');
}

static void maybe_vanish(const char *path)
{
    const char *at = getenv("VANISH_AT"), *from = getenv("VANISH_FROM"),
               *to = getenv("VANISH_TO");
    if (!is_target(path) || at == NULL || ++seen != atoi(at))
        return;
    if ((from != NULL && to != NULL && rename(from, to) != 0) ||
        (getenv("VANISH_KEEP") == NULL && unlink(path) != 0)) {
        perror("vanish_on_open");
        abort();
    }
}

/* The next definition of name after this library's: libc's. */
static open_fn *real(const char *name)
{
    open_fn *f = (open_fn *)dlsym(RTLD_NEXT, name);
    if (f == NULL) {
        fprintf(stderr, "vanish_on_open: no %s after this library\n", name);
        abort();
    }
    return f;
}

#define OPEN(name)                                                  \
    int name(const char *path, int flags, ...)                      \
    {                                                               \
        mode_t mode = 0;                                            \
        if (flags & (O_CREAT | O_TMPFILE)) {                        \
            va_list ap;                                             \
            va_start(ap, flags);                                    \
            mode = va_arg(ap, mode_t);                              \
            va_end(ap);                                             \
        }                                                           \
        maybe_vanish(path);                                         \
        return real(#name)(path, flags, mode);                      \
    }

OPEN(open)
OPEN(open64)
