#!/usr/bin/env python3
"""bench/view.py - how fast attnrun view writes its page and how fast the
page is in headless Chromium (make bench, make bench-view).

    python3 bench/view.py --attnrun build/attnrun [--runs 3] [--only model,long]
                          [--work build/bench/view]

The workloads are results files of random attention maps (rows of a
softmax of normal scores, causal), written once with h5py into the work
directory as hand-made results groups, with a token per position:

    model   12 layers x 12 heads, n = 512, one item (GPT-2 small's shape)
    long    1 layer x 4 heads, n = 2048
    huge    1 layer x 4 heads, n = 8192 (1 GiB of weights: pooled to fit)

For each: `attnrun view` (default --max-size), the median of --runs whole
runs, with its CPU seconds and peak RSS (/usr/bin/time); the page's size and
level; then in headless Chromium (Debian's chromium and chromium-driver,
through python3-selenium), the median over --runs loads of the time from
navigation to the "attnrun-ready" mark, and the medians of 5 head
switches (`]`: to the next head, which the page decodes ahead while it is
idle), of 3 jumps across layers (a link to a map not decoded ahead: model
only) and of 5 zoom steps (`+`), each measured in the page from the key
or the new fragment to the next animation frame.  The targets (docs: bench/README.md, "attnrun view"): writing
model's page in at most 2 s; model's first view within 2 s, long's within
3 s; a head switch or zoom step within 100 ms; huge works.
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import time

import h5py
import numpy as np

WORKLOADS = {
    "model": (12, 12, 512),
    "long": (1, 4, 2048),
    "huge": (1, 4, 8192),
}
TARGET_WRITE = {"model": 2.0}
TARGET_READY = {"model": 2.0, "long": 3.0}
TARGET_STEP_MS = 100.0


def make(path, layers, heads, n):
    if os.path.exists(path):
        return
    rng = np.random.default_rng(7)
    tmp = path + ".tmp"
    causal = np.tril(np.ones((n, n), bool))
    tokens = np.array(["t%d" % i for i in range(n)], dtype=h5py.string_dtype())
    with h5py.File(tmp, "w") as f:
        for l in range(layers):
            g = f.create_group("layer%02d" % l)
            g.attrs["attnrun_version"] = "bench"
            d = g.create_dataset("weights", (1, heads, n, n), np.float32, chunks=(1, 1, min(n, 256), n))
            for h in range(heads):
                for r in range(0, n, 512):
                    s = rng.standard_normal((min(512, n - r), n)).astype(np.float32) * 3
                    s[~causal[r:r + 512]] = -np.inf
                    s -= s.max(axis=1, keepdims=True)
                    w = np.exp(s)
                    d[0, h, r:r + 512] = w / w.sum(axis=1, keepdims=True)
            g["query_token"] = tokens
            g["key_token"] = tokens
    os.rename(tmp, path)


def timed(cmd, work):
    """(wall s, cpu s, peak RSS KiB, status, stderr) of one run, measured by
    /usr/bin/time (wait4 from this process would count the RSS of the
    Python it forked from)."""
    stats = os.path.join(work, "time.txt")
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", stats] + cmd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t
    user, system, rss = open(stats).read().split()[-3:]
    return wall, float(user) + float(system), int(rss), p.returncode, p.stderr.decode(errors="replace")


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    o = Options()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000", "--force-device-scale-factor=1"):
        o.add_argument(a)
    o.binary_location = "/usr/bin/chromium"
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)


def in_browser(driver, page, runs, layer, layers):
    url = "file://" + os.path.abspath(page)
    ready = []
    for _ in range(runs):
        driver.get("about:blank")
        driver.get(url)
        end = time.time() + 120
        t = None
        while time.time() < end:
            t = driver.execute_script(
                'const e = performance.getEntriesByName("attnrun-ready"); return e.length ? e[0].startTime : null')
            if t is not None:
                break
            time.sleep(0.01)
        ready.append(t / 1000 if t is not None else float("inf"))
    driver.get(url + "#view=head&item=0&layer=" + layer + "&head=0")
    driver.execute_async_script("requestAnimationFrame(() => requestAnimationFrame(arguments[0]))")
    step = """
        const key = arguments[0], done = arguments[1], t0 = performance.now();
        const finish = () => requestAnimationFrame(() => done(performance.now() - t0));
        if (key === ']') window.addEventListener('hashchange', finish, {once: true});
        document.body.dispatchEvent(new KeyboardEvent('keydown', {key: key, bubbles: true}));
        if (key !== ']') finish();
    """
    switches = [driver.execute_async_script(step, "]") for _ in range(5)]
    zooms = [driver.execute_async_script(step, k) for k in ("+", "+", "-", "+", "0")]
    jump = """
        const hash = arguments[0], done = arguments[1], t0 = performance.now();
        window.addEventListener('hashchange', () => requestAnimationFrame(() => done(performance.now() - t0)),
                                {once: true});
        location.hash = hash;
    """
    jumps = []
    if layers > 2:
        for k in range(3):
            target = "#view=head&item=0&layer=/layer%02d&head=%d" % (2 + 3 * k, 5 + k)
            jumps.append(driver.execute_async_script(jump, target))
    return (statistics.median(ready), statistics.median(switches), statistics.median(zooms),
            statistics.median(jumps) if jumps else float("nan"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnrun", default="build/attnrun")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--work", default="build/bench/view")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    try:
        driver = browser()
    except Exception as e:                                   # noqa: BLE001
        print("attnrun view in the browser: skipped (%s)" % str(e).splitlines()[0][:120])
        driver = None
    print("attnrun view: %d runs each, median; Chromium: %d loads, 5 head switches, 5 zoom steps"
          % (args.runs, args.runs))
    print("%-6s %-16s %8s %7s %8s %9s %6s %8s %8s %8s %8s  %s" % (
        "name", "shape", "write s", "cpu s", "RSS MiB", "page MiB", "level", "ready s", "head ms",
        "jump ms", "zoom ms", "targets"))
    failed = False
    try:
        for name in args.only.split(","):
            layers, heads, n = WORKLOADS[name]
            src = os.path.join(args.work, "%s.h5" % name)
            make(src, layers, heads, n)
            page = os.path.join(args.work, "%s.html" % name)
            results = []
            for _ in range(args.runs):
                if os.path.exists(page):
                    os.remove(page)
                results.append(timed([args.attnrun, "view", src, "-o", page, "-q"], args.work))
            bad = [r for r in results if r[3] != 0]
            if bad:
                print("%-6s attnrun view failed: %s" % (name, bad[0][4].strip()[:200]))
                failed = True
                continue
            wall = statistics.median(r[0] for r in results)
            cpu = statistics.median(r[1] for r in results)
            rss = max(r[2] for r in results) / 1024
            size = os.path.getsize(page) / 2**20
            with open(page, encoding="utf-8") as f:
                text = f.read()
            level = text[text.rindex('"level":') + 8:].split("}")[0]
            ready = head = zoom = jump = float("nan")
            if driver is not None:
                ready, head, zoom, jump = in_browser(driver, page, args.runs, "/layer00", layers)
            verdicts = []
            if name in TARGET_WRITE:
                verdicts.append("write %s" % ("met" if wall <= TARGET_WRITE[name] else "MISSED"))
            if name in TARGET_READY and driver is not None:
                verdicts.append("ready %s" % ("met" if ready <= TARGET_READY[name] else "MISSED"))
            if driver is not None:
                steps = max(head, zoom, 0 if math.isnan(jump) else jump)
                verdicts.append("steps %s" % ("met" if steps <= TARGET_STEP_MS else "MISSED"))
            print("%-6s %-16s %8.2f %7.2f %8.0f %9.1f %6s %8.2f %8.1f %8.1f %8.1f  %s" % (
                name, "%dx%d n=%d" % (layers, heads, n), wall, cpu, rss, size, level, ready, head, jump,
                zoom, ", ".join(verdicts)))
    finally:
        if driver is not None:
            driver.quit()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
