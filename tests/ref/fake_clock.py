#!/usr/bin/env python3
"""tests/ref/fake_clock.py - an LD_PRELOAD shim that makes the wall clock read
FAKE_TIME seconds (time, clock_gettime of CLOCK_REALTIME, gettimeofday,
timespec_get), for tests/cli/test_runtime.sh's created_utc checks at the
edges of the calendar (guarantee 18); and CLOCK_MONOTONIC run
FAKE_CLOCK_RATE times as fast as it does from the program's start, for
tests/cli/test_progress.sh's runs of minutes in seconds.  Either left unset,
that clock is the system's.

    fake_clock.py build DIR
        writes DIR/fake_time.c and builds DIR/fake_time.so with cc; exits
        1 with the compiler's last line when it does not build
"""
import os
import subprocess

from subcommands import fail, run

SOURCE = r"""/* LD_PRELOAD shim: the wall clock reads FAKE_TIME seconds; CLOCK_MONOTONIC
 * runs FAKE_CLOCK_RATE times as fast from the program's start. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static int (*real_clock_gettime)(clockid_t, struct timespec *);
static double rate;               /* 0: CLOCK_MONOTONIC as it is */
static struct timespec start;     /* CLOCK_MONOTONIC at the start */

__attribute__((constructor)) static void fake_start(void)
{
    real_clock_gettime = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    const char *s = getenv("FAKE_CLOCK_RATE");
    rate = s != NULL ? strtod(s, NULL) : 0;
    real_clock_gettime(CLOCK_MONOTONIC, &start);
}

static int faked(void)
{
    return getenv("FAKE_TIME") != NULL;
}

static time_t fake_now(void)
{
    return (time_t)strtoll(getenv("FAKE_TIME"), NULL, 10);
}

time_t time(time_t *t)
{
    if (!faked()) {
        struct timespec ts;
        real_clock_gettime(CLOCK_REALTIME, &ts);
        if (t != NULL)
            *t = ts.tv_sec;
        return ts.tv_sec;
    }
    time_t now = fake_now();
    if (t != NULL)
        *t = now;
    return now;
}

int clock_gettime(clockid_t clock, struct timespec *ts)
{
    if ((clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE) && faked()) {
        ts->tv_sec = fake_now();
        ts->tv_nsec = 0;
        return 0;
    }
    int status = real_clock_gettime(clock, ts);
    if (clock == CLOCK_MONOTONIC && rate > 0 && status == 0) {
        double since = (double)(ts->tv_sec - start.tv_sec) + 1e-9 * (double)(ts->tv_nsec - start.tv_nsec);
        double at = (double)start.tv_nsec * 1e-9 + since * rate;
        ts->tv_sec = start.tv_sec + (time_t)at;
        ts->tv_nsec = (long)((at - (double)(time_t)at) * 1e9);
    }
    return status;
}

int gettimeofday(struct timeval *tv, void *tz)
{
    (void)tz;
    if (tv == NULL)
        return 0;
    if (!faked()) {
        struct timespec ts;
        real_clock_gettime(CLOCK_REALTIME, &ts);
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
        return 0;
    }
    tv->tv_sec = fake_now();
    tv->tv_usec = 0;
    return 0;
}

int timespec_get(struct timespec *ts, int base)
{
    if (base != TIME_UTC)
        return 0;
    if (!faked())
        return real_clock_gettime(CLOCK_REALTIME, ts) == 0 ? base : 0;
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
