#!/usr/bin/env python3
"""tests/ref/view_browser.py - attnrun view's page in a real browser:
headless Chromium driven by Selenium (Debian's chromium, chromium-driver
and python3-selenium), through the automation interface docs/view.md
documents (the "attnrun-ready" mark, the fragment, canvas[data-role=thumb]
and canvas[data-role=map], the role=tooltip element).  Expected colours
come from plot_check.colour_of (attnrun plot's colour map, written from
docs/pictures.md), expected values from the results files read with h5py,
census scores from heads_ref (float64, from their definitions).

    python3 tests/ref/view_browser.py PAGES DATA
                                                the pages test_view.sh wrote in
                                                PAGES (hand.html, long.html,
                                                append.html, odd.html,
                                                empty.html) of the files in
                                                DATA (view_check.py inputs,
                                                rollout.h5)
    python3 tests/ref/view_browser.py firefox PAGE DATA
                                                the head view in headless Firefox
                                                (firefox-esr --screenshot), its
                                                cells' colours in the picture
    python3 tests/ref/view_browser.py shot PAGE PNG [FRAGMENT]
                                                a screenshot (docs/images)
Each check prints "ok ..." or "FAIL ..."; the status is 1 on a failure.
"""
import json
import math
import os
import sys
import tempfile
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import heads_ref     # noqa: E402
import plot_check    # noqa: E402
import view_check    # noqa: E402

from selenium import webdriver                                   # noqa: E402
from selenium.common.exceptions import WebDriverException        # noqa: E402
from selenium.webdriver.chrome.options import Options            # noqa: E402
from selenium.webdriver.chrome.service import Service            # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By                      # noqa: E402
from selenium.webdriver.common.keys import Keys                  # noqa: E402
from selenium.webdriver.support.ui import Select                 # noqa: E402

verdict = view_check.verdict


def browser(downloads):
    o = Options()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000", "--force-device-scale-factor=1", "--no-first-run",
              "--disable-background-networking", "--disable-component-update"):
        o.add_argument(a)
    o.binary_location = "/usr/bin/chromium"
    o.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    o.add_experimental_option("prefs", {"download.default_directory": downloads,
                                        "download.prompt_for_download": False})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)


class Page:
    def __init__(self, driver, path):
        self.d = driver
        self.url = "file://" + os.path.abspath(path)
        self.console = []
        self.requests = []

    def open(self, fragment=""):
        self.d.get("about:blank")
        self.d.get(self.url + fragment)
        return self.wait_ready()

    def wait_ready(self):
        end = time.time() + 30
        while time.time() < end:
            if self.d.execute_script('return performance.getEntriesByName("attnrun-ready").length > 0'):
                return True
            time.sleep(0.02)
        return False

    def js(self, script, *args):
        return self.d.execute_script(script, *args)

    def fragment(self):
        text = self.js("return location.hash").lstrip("#")
        return dict(p.split("=", 1) for p in text.split("&") if "=" in p)

    def settle(self):
        """Waits for the hashchange the last action caused to be drawn."""
        self.d.execute_async_script("requestAnimationFrame(() => requestAnimationFrame(arguments[0]))")

    def logs(self):
        for e in self.d.get_log("browser"):
            self.console.append(e)
        for e in self.d.get_log("performance"):
            msg = json.loads(e["message"])["message"]
            if msg.get("method") == "Network.requestWillBeSent":
                self.requests.append(msg["params"]["request"]["url"])

    def pixels(self, selector, points):
        """The RGB of canvas `selector` at each (x, y) of its own pixels."""
        return self.js("""
            const c = document.querySelector(arguments[0]), ctx = c.getContext('2d');
            return arguments[1].map(([x, y]) => Array.from(ctx.getImageData(x, y, 1, 1).data.slice(0, 3)));
        """, selector, points)

    def hover(self, element, fx, fy):
        """Moves the mouse to the fraction (fx, fy) of element's box."""
        rect = self.js("const r = arguments[0].getBoundingClientRect(); return [r.width, r.height];", element)
        ActionChains(self.d).move_to_element_with_offset(
            element, int((fx - 0.5) * rect[0]), int((fy - 0.5) * rect[1])).perform()
        return self.js("const t = document.querySelector('[role=tooltip]'); return t.hidden ? '' : t.textContent;")


def close_colour(got, want, tol=1):
    return all(abs(int(a) - int(b)) <= tol for a, b in zip(got, want))


def expected_colour(values, v, colour="linear"):
    lo, hi = plot_check.bar_range(values, "zero", colour)
    return plot_check.colour_of(v, lo, hi, colour)


def same3(text, v):
    """Whether text shows v to 3 significant digits."""
    if math.isnan(v):
        return text == "NaN"
    try:
        return float(text) == float("%.3g" % v)
    except ValueError:
        return False


# ----------------------------------------------------------------- checks

def check_hand(p, d):
    with h5py.File(os.path.join(d, "hand.h5"), "r") as f:
        W = {g: np.asarray(f[g + "/weights"]) for g in ("a", "b", "c")}
        toks = [[x.decode() for x in row] for row in f["a/query_token"][()]]
    verdict(p.open(), "hand.html: the page marks attnrun-ready")
    thumbs = p.d.find_elements(By.CSS_SELECTOR, "canvas[data-role=thumb]")
    got = [(t.get_attribute("data-layer"), t.get_attribute("data-head")) for t in thumbs]
    want = [("/" + g, str(h)) for g in ("a", "b", "c") for h in range(2)]
    verdict(got == want, "model view: a thumbnail per layer and head, layers as rows", repr(got))
    bad = []
    for g in ("a", "b", "c"):
        for h in range(2):
            sel = "canvas[data-role=thumb][data-layer='/%s'][data-head='%d']" % (g, h)
            v = W[g][0, h]
            pts = [(k, q) for q in range(6) for k in range(6)]
            for (k, q), rgb in zip(pts, p.pixels(sel, pts)):
                want_rgb = expected_colour(v, v[q, k])
                if not close_colour(rgb, want_rgb):
                    bad.append("/%s head %d (%d, %d): %r, expected %r" % (g, h, q, k, rgb, want_rgb))
    verdict(not bad, "model view: every thumbnail cell has its value's colour (item 0)", "; ".join(bad[:3]))

    thumb = p.d.find_element(By.CSS_SELECTOR, "canvas[data-role=thumb][data-layer='/b'][data-head='1']")
    tip = p.hover(thumb, 0.5, 0.5)
    ref = heads_ref.census(W["b"].astype(np.float64), _tokens(d, "b", "query_token"),
                           _tokens(d, "b", "key_token"))
    lines = dict(line.rsplit(" ", 1) for line in tip.split("\n")[1:] if " " in line)
    ok = tip.startswith("/b  head 1") and all(
        same3(lines.get(name, ""), float(heads_ref.score(ref, name)[1])) for name in ("entropy", "previous", "first"))
    verdict(ok, "model view: hovering a thumbnail shows its census scores", repr(tip[:200]))

    thumb = p.d.find_element(By.CSS_SELECTOR, "canvas[data-role=thumb][data-layer='/c'][data-head='1']")
    thumb.click()
    p.settle()
    fr = p.fragment()
    verdict(fr.get("view") == "head" and fr.get("layer") == "/c" and fr.get("head") == "1",
            "a click on a thumbnail opens its head (the fragment says so)", repr(fr))
    check_map(p, W["c"][0, 1], "head view /c head 1")
    m = p.d.find_element(By.CSS_SELECTOR, "canvas[data-role=map]")
    tip = p.hover(m, (1 + 0.5) / 6, (3 + 0.5) / 6)
    lines = tip.split("\n")
    ok = len(lines) == 3 and lines[0] == "query 3 " + json.dumps(toks[0][3]) and \
        lines[1] == "key 1 " + json.dumps(toks[0][1]) and lines[2].startswith("weight ") and \
        same3(lines[2].split(" ", 1)[1], float(W["c"][0, 1, 3, 1]))
    verdict(ok, "head view: the tooltip names query, key, their tokens and the value to 3 digits", repr(tip))

    # keys: head, layer, zoom, reset; then back and forward
    body = p.d.find_element(By.TAG_NAME, "body")
    body.send_keys("]")
    p.settle()
    verdict(p.fragment().get("head") == "0", "] moves to the next head (wrapping)", repr(p.fragment()))
    body.send_keys("}")
    p.settle()
    verdict(p.fragment().get("layer") == "/a", "} moves to the next layer (wrapping)", repr(p.fragment()))
    body.send_keys("+")
    p.settle()
    span = p.js("const m = document.querySelector('canvas[data-role=map]'); "
                "return [m.dataset.queryFirst, m.dataset.queryEnd, m.dataset.keyFirst, m.dataset.keyEnd].map(Number);")
    verdict(span[1] - span[0] == 3 and span[3] - span[2] == 3, "+ zooms in: the map covers half the queries and keys", repr(span))
    check_map(p, W["a"][0, 0], "head view zoomed in", span)
    body.send_keys("0")
    p.settle()
    span = p.js("const m = document.querySelector('canvas[data-role=map]'); return [m.dataset.queryFirst, m.dataset.queryEnd].map(Number);")
    verdict(span == [0, 6], "0 resets the zoom", repr(span))
    # the wheel zooms in around the pointer, a drag pans
    m = p.d.find_element(By.CSS_SELECTOR, "canvas[data-role=map]")
    p.hover(m, 0.75, 0.75)
    from selenium.webdriver.common.actions.wheel_input import ScrollOrigin
    ActionChains(p.d).scroll_from_origin(ScrollOrigin.from_element(m, 0, 0), 0, -120).perform()
    p.settle()
    span = p.js("const m = document.querySelector('canvas[data-role=map]'); "
                "return [m.dataset.queryFirst, m.dataset.queryEnd, m.dataset.keyFirst, m.dataset.keyEnd].map(Number);")
    verdict(span[1] - span[0] == 3 and span[3] - span[2] == 3, "the wheel zooms in", repr(span))
    before = span
    m = p.d.find_element(By.CSS_SELECTOR, "canvas[data-role=map]")
    w = p.js("return arguments[0].getBoundingClientRect().width", m)
    ActionChains(p.d).move_to_element(m).click_and_hold().move_by_offset(int(w / 3 * 1.2), 0) \
        .release().perform()
    p.settle()
    span = p.js("const m = document.querySelector('canvas[data-role=map]'); "
                "return [m.dataset.queryFirst, m.dataset.queryEnd, m.dataset.keyFirst, m.dataset.keyEnd].map(Number);")
    verdict(span[2] < before[2] and span[3] - span[2] == 3 and span[:2] == before[:2],
            "a drag to the right pans to earlier keys", "%r after %r" % (span, before))
    check_map(p, W["a"][0, 0], "head view after the wheel and a drag", span)
    body.send_keys("0")
    p.settle()
    p.d.back()
    p.settle()
    fr = p.fragment()
    verdict(fr.get("layer") == "/c" and fr.get("head") == "0" and
            "/c  head 0" in p.js("return document.getElementById('head-title').textContent"),
            "back returns to the head before, and draws it", repr(fr))
    p.d.forward()
    p.settle()
    verdict(p.fragment().get("layer") == "/a", "forward goes on again", repr(p.fragment()))

    for colour in ("sqrt", "log"):
        p.open("#view=head&item=0&layer=/b&head=0&scale=" + colour)
        check_map(p, W["b"][0, 0], "head view, --color %s's scale" % colour, colour=colour)

    # a link reopens the same view; hostile tokens stay text
    before = p.js("return document.scripts.length")
    verdict(p.open("#view=head&item=1&layer=/a&head=0"), "a link with a fragment opens")
    fr = p.fragment()
    verdict(fr.get("item") == "1" and Select(p.d.find_element(By.ID, "item")).first_selected_option.text == "1"
            and "/a  head 0, item 1" in p.js("return document.getElementById('head-title').textContent"),
            "the fragment's item, layer and head are the ones shown", repr(fr))
    m = p.d.find_element(By.CSS_SELECTOR, "canvas[data-role=map]")
    tip = p.hover(m, (0 + 0.5) / 6, (1 + 0.5) / 6)
    ok = json.dumps(view_check.HOSTILE[1]) in tip and json.dumps(view_check.HOSTILE[0]) in tip
    verdict(ok, "hostile tokens are shown as text in the tooltip", repr(tip[:200]))
    state = p.js("return [typeof window.__pwned, document.images.length, document.scripts.length, "
                 "document.querySelectorAll('iframe,object,embed,link').length]")
    verdict(state == ["undefined", 0, before, 0], "hostile tokens run nothing and add no element", repr(state))

    # the issue's own link: a map named without a view opens the head view
    p.open("#item=1&layer=/b&head=1")
    verdict("/b  head 1, item 1" in p.js("return document.getElementById('head-title').textContent") and
            not p.js("return document.getElementById('head-view').hidden"),
            "#item=1&layer=/b&head=1 opens that head", repr(p.fragment()))

    # token view
    p.open("#view=token&item=0&layer=/a&query=3")
    items = [li.text for li in p.d.find_elements(By.CSS_SELECTOR, "#top-keys li")]
    row = W["a"][0, 0, 3]
    k = int(np.argmax(row))
    ok = len(items) == 2 and items[0].startswith("head 0: %d %s " % (k, json.dumps(toks[0][k])))
    verdict(ok, "token view: each head's heaviest keys for the query, with their tokens", repr(items))
    cell = p.js("const c = document.getElementById('strips'); return [c.width, c.height];")
    cellw = (cell[0] - 60) // 6
    pts = [(60 + k * cellw + cellw // 2, 8) for k in range(6)]
    got = p.pixels("#strips", pts)
    want = [expected_colour(W["a"][0, 0], row[k]) for k in range(6)]
    verdict(all(close_colour(a, b) for a, b in zip(got, want)), "token view: the query's row in its head's colours",
            "%r, expected %r" % (got, want))
    p.d.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_RIGHT)
    p.settle()
    verdict(p.fragment().get("query") == "4" and "query 4" in p.js("return document.getElementById('token-title').textContent"),
            "token view: the right arrow moves to the next query", repr(p.fragment()))

    # census: sort, then open
    p.open("#view=census&item=0")
    heads = p.d.find_elements(By.CSS_SELECTOR, "#census th")
    prev = [h for h in heads if h.text.startswith("previous")][0]
    prev.click()
    prev = [h for h in p.d.find_elements(By.CSS_SELECTOR, "#census th") if h.text.startswith("previous")][0]
    first = p.d.find_element(By.CSS_SELECTOR, "#census tbody tr")
    scores = []
    for g in ("a", "b", "c"):
        ref = heads_ref.census(W[g].astype(np.float64))
        for h in range(2):
            scores.append((float(heads_ref.score(ref, "previous")[h]), "/" + g, h))
    best = max(scores)
    verdict(prev.get_attribute("aria-sort") == "descending" and
            first.get_attribute("data-layer") == best[1] and first.get_attribute("data-head") == str(best[2]),
            "census: a click on a score sorts by it, the largest first", "%s head %s, expected %r" % (
                first.get_attribute("data-layer"), first.get_attribute("data-head"), best))
    first.click()
    p.settle()
    fr = p.fragment()
    verdict(fr.get("view") == "head" and fr.get("layer") == best[1] and fr.get("head") == str(best[2]),
            "census: a click on a row opens its head", repr(fr))

    # items
    p.open()
    Select(p.d.find_element(By.ID, "item")).select_by_visible_text("2")
    p.settle()
    got = p.pixels("canvas[data-role=thumb][data-layer='/a'][data-head='0']", [(2, 4)])[0]
    verdict(p.fragment().get("item") == "2" and close_colour(got, expected_colour(W["a"][2, 0], W["a"][2, 0, 4, 2])),
            "choosing item 2 redraws the thumbnails with its maps", repr(got))


def _tokens(d, g, name):
    with h5py.File(os.path.join(d, "hand.h5"), "r") as f:
        return [[heads_ref.text(x) for x in row] for row in f[g + "/" + name][()]]


def check_map(p, values, name, span=None, colour="linear"):
    """The map canvas's cells, at their proportional places, against the
    colours of values (full resolution)."""
    n, m = values.shape
    info = p.js("const c = document.querySelector('canvas[data-role=map]'); "
                "return [c.width, c.height, c.dataset.queryFirst, c.dataset.queryEnd, c.dataset.keyFirst, "
                "c.dataset.keyEnd, c.dataset.level].map(Number);")
    W_, H_, q0, q1, k0, k1, level = info
    if span is not None and [q0, q1, k0, k1] != span:
        verdict(False, name + ": the shown grid", repr(info))
        return
    pts, want = [], []
    for q in range(q0, q1):
        for k in range(k0, k1):
            pts.append((int((k - k0 + 0.5) / (k1 - k0) * W_), int((q - q0 + 0.5) / (q1 - q0) * H_)))
            want.append(expected_colour(values, values[q, k], colour))
    got = p.pixels("canvas[data-role=map]", pts)
    bad = [(pt, a, b) for pt, a, b in zip(pts, got, want) if not close_colour(a, b)]
    verdict(level == 0 and not bad, name + ": each cell at its proportional place has its value's colour",
            repr(bad[:3]))


def check_pooled(p, d):
    with h5py.File(os.path.join(d, "long.h5"), "r") as f:
        v = np.asarray(f["x/weights"][0, 1], np.float64)
    verdict(p.open("#view=head&item=0&layer=/x&head=1"), "long.html (pooled): the page marks attnrun-ready")
    level = p.d.find_element(By.ID, "level").text
    title = p.d.find_element(By.ID, "head-title").text
    verdict("Pooled" in level and "blocks of 4\u00d74" in level and "level 2" in title,
            "a pooled page says it is pooled, at which level", repr((level, title)))
    info = p.js("const c = document.querySelector('canvas[data-role=map]'); return [c.dataset.level, c.dataset.queryEnd, c.dataset.keyEnd];")
    verdict(info == ["2", "300", "277"], "the pooled map covers every query and key", repr(info))
    m = p.d.find_element(By.CSS_SELECTOR, "canvas[data-role=map]")
    rows, cols = 75, 70
    for pool in ("max", "mean"):
        if pool == "mean":
            p.open("#view=head&item=0&layer=/x&head=1&pool=mean")
            m = p.d.find_element(By.CSS_SELECTOR, "canvas[data-role=map]")
        tip = p.hover(m, (3 + 0.5) / cols, (5 + 0.5) / rows)
        lines = tip.split("\n")
        ok = len(lines) == 3 and lines[0].startswith("queries ") and lines[1].startswith("keys ")
        if ok:
            q0, q1 = (int(x) for x in lines[0].split(" ")[1].split("\u2013"))
            k0, k1 = (int(x) for x in lines[1].split(" ")[1].split("\u2013"))
            r, c = q0 // 4, k0 // 4
            want = view_check.pool(v, 2, pool)[r, c]
            ok = q0 % 4 == 0 and q1 == q0 + 3 and k0 % 4 == 0 and k1 == k0 + 3 and abs(r - 5) <= 1 and \
                abs(c - 3) <= 1 and lines[2].startswith(pool + " ") and same3(lines[2].split(" ")[1], want)
        verdict(ok, "a pooled cell's tooltip names its 4x4 block and its %s" % pool, repr(tip))


def check_rollout(p, d):
    verdict(p.open("#view=rollout&item=1"), "append.html (with --rollout): the page marks attnrun-ready")
    with h5py.File(os.path.join(d, "rollout.h5"), "r") as f:
        R = np.asarray(f["rollout"][1], np.float64)
    thumbs = p.d.find_elements(By.CSS_SELECTOR, "canvas[data-role=rollout-thumb]")
    verdict(len(thumbs) == R.shape[0], "rollout view: a map per layer", "%d, expected %d" % (len(thumbs), R.shape[0]))
    thumbs[-1].click()
    p.settle()
    fr = p.fragment()
    verdict(fr.get("view") == "head" and fr.get("rollout") == str(R.shape[0] - 1) and
            "rollout through" in p.d.find_element(By.ID, "head-title").text,
            "a click on a rollout map opens it", repr(fr))
    check_map(p, R[-1], "the rollout map")


def check_odd(p, d):
    with h5py.File(os.path.join(d, "odd.h5"), "r") as f:
        W = np.asarray(f["l/weights"][0])
    verdict(p.open("#view=head&item=0&layer=/l&head=0"), "odd.html: the page marks attnrun-ready")
    check_map(p, W[0], "NaN, -inf and weights summing to 3")
    legend = p.js("return document.getElementById('legend').textContent")
    verdict("NaN" in legend and "\u2212inf" in legend, "the legend names NaN and -inf in their own colours", repr(legend))
    p.open("#view=head&item=0&layer=/l&head=1")
    check_map(p, W[1], "a negative weight")


def check_empty(p, d):
    verdict(p.open(), "empty.html (maps of no query): the page marks attnrun-ready")
    verdict(len(p.d.find_elements(By.CSS_SELECTOR, "canvas[data-role=thumb]")) == 2,
            "a map of no query is an empty thumbnail")


def check_save(p, downloads):
    p.open("#view=head&item=0&layer=/a&head=1")
    p.d.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
    p.d.find_element(By.ID, "save").click()
    end = time.time() + 15
    files = []
    while time.time() < end:
        files = [f for f in os.listdir(downloads) if f.endswith(".png")]
        if files:
            break
        time.sleep(0.1)
    ok = False
    if files:
        time.sleep(0.3)
        with open(os.path.join(downloads, files[0]), "rb") as f:
            ok = f.read(8) == b"\x89PNG\r\n\x1a\n"
    verdict(ok, "Save PNG downloads the current view as a PNG", repr(files))


def run_all(pages, d):
    downloads = tempfile.mkdtemp(prefix="view-downloads-")
    driver = browser(downloads)
    try:
        for page, check in (("hand.html", check_hand), ("long.html", check_pooled), ("append.html", check_rollout),
                            ("odd.html", check_odd), ("empty.html", check_empty)):
            p = Page(driver, os.path.join(pages, page))
            try:
                check(p, d)
            except (WebDriverException, KeyError, IndexError, ValueError) as e:
                verdict(False, page + ": the checks ran to their end", repr(e)[:300])
            p.logs()
            errors = [e for e in p.console if e.get("level") == "SEVERE"]
            verdict(not errors, page + ": no console error", repr(errors[:2]))
            foreign = [u for u in p.requests if not u.startswith(p.url.split("#")[0]) and not u.startswith("blob:")
                       and u != "about:blank"]
            verdict(p.requests and not foreign, page + ": no request but the page itself (performance log)",
                    repr(foreign[:3]))
        p = Page(driver, os.path.join(pages, "hand.html"))
        check_save(p, downloads)
    finally:
        driver.quit()


def shot(page, png, fragment=""):
    driver = browser(tempfile.mkdtemp(prefix="view-shot-"))
    try:
        p = Page(driver, page)
        verdict(p.open(fragment), "the page marks attnrun-ready")
        driver.save_screenshot(png)
    finally:
        driver.quit()


def firefox(page, d, work):
    """The page in headless Firefox (firefox-esr's --screenshot, no driver):
    every cell of the head view's map appears in the picture in its
    value's colour."""
    import subprocess
    profile = tempfile.mkdtemp(prefix="view-firefox-", dir=work)
    png = os.path.join(work, "firefox.png")
    url = "file://" + os.path.abspath(page) + "#view=head&item=0&layer=/b&head=1"
    r = subprocess.run(["firefox-esr", "--headless", "--no-remote", "--profile", profile,
                        "--window-size=1400,1000", "--screenshot", png, url],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    if r.returncode != 0 or not os.path.exists(png):
        verdict(False, "Firefox: a screenshot of the head view", r.stdout.decode(errors="replace")[-300:])
        return
    image = plot_check.png_read(png)                       # (height, width, 3)
    keys, counts = np.unique(image.reshape(-1, 3), axis=0, return_counts=True)
    colours = {tuple(int(x) for x in k): int(c) for k, c in zip(keys, counts)}
    with h5py.File(os.path.join(d, "hand.h5"), "r") as f:
        v = np.asarray(f["b/weights"][0, 1])
    missing = []
    for q in range(6):
        for k in range(6):
            want = expected_colour(v, v[q, k])
            seen = sum(c for rgb, c in colours.items() if close_colour(rgb, want))
            if seen < 400:
                missing.append(((q, k), want, seen))
    verdict(not missing, "Firefox draws every cell of the map in its value's colour (headless screenshot)",
            repr(missing[:3]))


def main(argv):
    if len(argv) == 4 and argv[1] == "firefox":
        firefox(argv[2], argv[3], argv[3])
    elif len(argv) >= 4 and argv[1] == "shot":
        shot(argv[2], argv[3], argv[4] if len(argv) > 4 else "")
    elif len(argv) == 3:
        run_all(argv[1], argv[2])
    else:
        print(__doc__)
        return 2
    return 1 if view_check.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
