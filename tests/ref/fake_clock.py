#!/usr/bin/env python3
"""tests/ref/fake_clock.py - an LD_PRELOAD shim that makes the wall clock read
FAKE_TIME seconds (time, clock_gettime of CLOCK_REALTIME, gettimeofday,
timespec_get), for tests/cli/test_runtime.sh's created_utc checks at the
edges of the calendar (guarantee 18).

    fake_clock.py build DIR
        writes DIR/fake_time.c and builds DIR/fake_time.so with cc; exits
        1 with the compiler's last line when it does not build
"""
import os
import subprocess

from subcommands import fail, run

SOURCE = r"""/* LD_PRELOAD shim: the wall clock reads FAKE_TIME seconds. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static time_t fake_now(void)
{
    const char *s = getenv("FAKE_TIME");
    return s != NULL ? (time_t)strtoll(s, NULL, 10) : 0;
}

time_t time(time_t *t)
{
    time_t now = fake_now();
    if (t != NULL)
        *t = now;
    return now;
}

int clock_gettime(clockid_t clock, struct timespec *ts)
{
    static int (*real)(clockid_t, struct timespec *);
    if (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE) {
        ts->tv_sec = fake_now();
        ts->tv_nsec = 0;
        return 0;
    }
    if (real == NULL)
        real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    return real(clock, ts);
}

int gettimeofday(struct timeval *tv, void *tz)
{
    (void)tz;
    if (tv != NULL) {
        tv->tv_sec = fake_now();
        tv->tv_usec = 0;
    }
    return 0;
}

int timespec_get(struct timespec *ts, int base)
{
    if (base != TIME_UTC)
        return 0;
    ts->tv_sec = fake_now();
    ts->tv_nsec = 0;
    return base;
}
"""


def build(d):
    c, so = os.path.join(d, "fake_time.c"), os.path.join(d, "fake_time.so")
    with open(c, "w") as f:
        f.write(SOURCE)
    cc = subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", so, c, "-ldl"],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if cc.returncode != 0:
        fail((cc.stdout.strip().splitlines() or ["cc exited %d" % cc.returncode])[-1])


if __name__ == "__main__":
    run({"build": build}, __doc__)
