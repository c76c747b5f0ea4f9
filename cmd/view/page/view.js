"use strict";
/*
 * view.js - the script of attnrun view's page (docs/view.md).  Plain
 * JavaScript, no library.  It reads the JSON element "attnrun-meta" and
 * decodes a map's base64 float32 element ("m<id>", "t<id>") only when it
 * is first drawn.  Everything taken from the results file is put into the
 * page as text (textContent, fillText), never as markup.
 *
 * Map ids: per item shown i, layer l, head h: i * perItem + l * H + h;
 * then the rollout's layers r: i * perItem + L * H + r.
 */
(function () {
  const meta = JSON.parse(document.getElementById("attnrun-meta").textContent);
  const $ = (id) => document.getElementById(id);
  const L = meta.layers.length;
  const H = meta.heads;
  const RL = meta.rollout ? meta.rollout.groups.length : 0;
  const perItem = L * H + RL;
  const VIEWS = ["model", "head", "token", "census", "rollout"];
  const SCALES = ["linear", "sqrt", "log"];
  const MAP_SIDE = 640;             /* the head view's map, CSS pixels at most */
  const THUMB_CSS = 64;
  const littleEndian = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

  /* ------------------------------------------------------------ state */

  let state = null;
  let win = null;                   /* the head view's window, level cells */
  let winKey = "";
  let ready = false;
  let censusSort = { col: -1, dir: 1 };

  function defaults() {
    return { view: "model", item: meta.items[0], layer: L > 0 ? meta.layers[0].group : "",
             head: 0, rollout: -1, query: 0, scale: "linear", pool: "max" };
  }

  function readHash() {
    const s = defaults();
    const text = location.hash.replace(/^#/, "");
    let named = false, viewed = false;      /* a map named, a view named */
    for (const part of text.split("&")) {
      const eq = part.indexOf("=");
      if (eq < 0) continue;
      let key, value;
      try {
        key = decodeURIComponent(part.slice(0, eq));
        value = decodeURIComponent(part.slice(eq + 1));
      } catch (e) {
        continue;
      }
      if (key === "layer" || key === "head" || key === "rollout") named = true;
      if (key === "view") viewed = true;
      if (key === "view" && VIEWS.includes(value)) s.view = value;
      else if (key === "item" && meta.items.includes(Number(value))) s.item = Number(value);
      else if (key === "layer" && meta.layers.some((x) => x.group === value)) s.layer = value;
      else if (key === "head" && /^\d+$/.test(value) && Number(value) < H) s.head = Number(value);
      else if (key === "rollout" && /^\d+$/.test(value) && Number(value) < RL) s.rollout = Number(value);
      else if (key === "query" && /^\d+$/.test(value)) s.query = Number(value);
      else if (key === "scale" && SCALES.includes(value)) s.scale = value;
      else if (key === "pool" && (value === "max" || value === "mean")) s.pool = value;
    }
    if (named && !viewed) s.view = "head";    /* #item=1&layer=/layer3&head=5 */
    if (s.view === "rollout" && RL === 0) s.view = "model";
    return s;
  }

  function enc(v) {
    return encodeURIComponent(String(v)).replace(/%2F/g, "/");
  }

  function hashOf(s) {
    const parts = ["view=" + s.view, "item=" + s.item];
    if (s.rollout >= 0 && s.view === "head") parts.push("rollout=" + s.rollout);
    else parts.push("layer=" + enc(s.layer), "head=" + s.head);
    if (s.view === "token") parts.push("query=" + s.query);
    if (s.scale !== "linear") parts.push("scale=" + s.scale);
    if (s.pool !== "max") parts.push("pool=" + s.pool);
    return "#" + parts.join("&");
  }

  /* Moves to a new state: a new entry of the history, so that back and
   * forward work; the hashchange draws it. */
  function go(changes) {
    const next = Object.assign({}, state, changes);
    const hash = hashOf(next);
    if (hash === location.hash) render();
    else location.hash = hash;
  }

  /* ------------------------------------------------------------ maps */

  const decoded = new Map();

  /* base64 to bytes: the browser's own decoder where it has one. */
  function bytesOf(text) {
    if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(text);
    const bin = atob(text);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return bytes;
  }

  function decode(id) {
    if (decoded.has(id)) return decoded.get(id);
    const el = document.getElementById(id);
    if (!el) return null;
    const bytes = bytesOf(el.textContent.trim());
    let values;
    if (littleEndian) {
      values = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length >> 2);
    } else {
      const view = new DataView(bytes.buffer, bytes.byteOffset);
      values = new Float32Array(bytes.length >> 2);
      for (let i = 0; i < values.length; i++) values[i] = view.getFloat32(4 * i, true);
    }
    decoded.set(id, values);
    return values;
  }

  function itemIndex(item) {
    return meta.items.indexOf(item);
  }

  function layerIndex(group) {
    return meta.layers.findIndex((x) => x.group === group);
  }

  function mapId(s) {
    const i = itemIndex(s.item);
    return s.rollout >= 0 ? i * perItem + L * H + s.rollout : i * perItem + layerIndex(s.layer) * H + s.head;
  }

  function pooledSide(x, k) {
    return Math.ceil(x / Math.pow(2, k));
  }

  /* A map at its embedded level: rows, cols, its values (a pooled level's
   * maxes; its means, decoded when first asked for, by meansOf). */
  function detailOf(id) {
    const e = meta.maps[id];
    return { id: id, e: e, level: e.level, side: Math.pow(2, e.level), n: e.n, m: e.m,
             rows: pooledSide(e.n, e.level), cols: pooledSide(e.m, e.level),
             pooled: e.level > 0, values: decode("m" + id) };
  }

  function thumbOf(id) {
    const e = meta.maps[id];
    if (e.thumb <= e.level) return detailOf(id);
    return { id: id, e: e, level: e.thumb, side: Math.pow(2, e.thumb), n: e.n, m: e.m,
             rows: pooledSide(e.n, e.thumb), cols: pooledSide(e.m, e.thumb),
             pooled: false, thumb: true, values: decode("t" + id) };
  }

  function meansOf(d) {
    return d.pooled ? decode("a" + d.id) : d.values;
  }

  function valuesOf(d, pool) {
    return d.pooled && pool === "mean" ? meansOf(d) : d.values;
  }

  function valueAt(d, r, c, pool) {
    return valuesOf(d, pool)[r * d.cols + c];
  }

  /* ------------------------------------------------------------ colour */

  const stops = meta.colours.stops;

  function colourAt(t) {
    t = t > 0 ? (t < 1 ? t : 1) : 0;
    const last = stops.length - 1;
    const x = t * last;
    const i = x >= last ? last - 1 : Math.floor(x);
    const u = x - i;
    const a = stops[i], b = stops[i + 1];
    return [Math.round(a[0] + u * (b[0] - a[0])), Math.round(a[1] + u * (b[1] - a[1])),
            Math.round(a[2] + u * (b[2] - a[2]))];
  }

  function position(scale, bar, v) {
    const lo = bar[0], hi = bar[1];
    if (scale === "sqrt") {
      const t = (v - lo) / (hi - lo);
      return t > 0 ? Math.sqrt(t) : 0;
    }
    if (scale === "log")
      return v > lo ? (Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo)) : 0;
    return (v - lo) / (hi - lo);
  }

  function colourOf(v, scale, bar) {
    if (Number.isNaN(v)) return meta.colours.nan;
    if (v === -Infinity) return meta.colours.negInf;
    if (v === Infinity) return meta.colours.posInf;
    return colourAt(position(scale, bar, v));
  }

  function barOf(e, scale) {
    return e.bars[SCALES.indexOf(scale)];
  }

  /* The map's cells as an image, one pixel a cell: a canvas, kept for
   * the last few (id, level, scale, pool). */
  const images = new Map();

  function imageOf(d, scale, pool) {
    const key = [d.id, d.thumb ? "t" : "m", scale, pool].join(":");
    if (images.has(key)) return images.get(key);
    const canvas = document.createElement("canvas");
    canvas.width = Math.max(1, d.cols);
    canvas.height = Math.max(1, d.rows);
    const ctx = canvas.getContext("2d");
    if (d.rows > 0 && d.cols > 0 && d.values) {
      const img = ctx.createImageData(d.cols, d.rows);
      paint(img.data, d, scale, pool);
      ctx.putImageData(img, 0, 0);
    }
    images.set(key, canvas);
    if (images.size > 400) images.delete(images.keys().next().value);
    return canvas;
  }

  /* Every cell's colour into px (RGBA): colourOf, inlined, since a map
   * may have millions of cells. */
  function paint(px, d, scale, pool) {
    const bar = barOf(d.e, scale), lo = bar[0], hi = bar[1];
    const last = stops.length - 1;
    const flat = new Float64Array(3 * stops.length);
    stops.forEach((c, i) => { flat[3 * i] = c[0]; flat[3 * i + 1] = c[1]; flat[3 * i + 2] = c[2]; });
    const llo = Math.log10(lo), lspan = Math.log10(hi) - llo, mode = SCALES.indexOf(scale);
    const vals = valuesOf(d, pool), cells = d.rows * d.cols;
    for (let i = 0, p = 0; i < cells; i++, p += 4) {
      const v = vals[i];
      let rgb = null;
      if (v !== v) rgb = meta.colours.nan;
      else if (v === -Infinity) rgb = meta.colours.negInf;
      else if (v === Infinity) rgb = meta.colours.posInf;
      if (rgb !== null) {
        px[p] = rgb[0]; px[p + 1] = rgb[1]; px[p + 2] = rgb[2]; px[p + 3] = 255;
        continue;
      }
      let t;
      if (mode === 2) t = v > lo ? (Math.log10(v) - llo) / lspan : 0;
      else {
        t = (v - lo) / (hi - lo);
        if (mode === 1) t = t > 0 ? Math.sqrt(t) : 0;
      }
      t = t > 0 ? (t < 1 ? t : 1) : 0;
      const x = t * last, k = x >= last ? last - 1 : Math.floor(x), u = x - k, a = 3 * k, b = a + 3;
      px[p] = Math.round(flat[a] + u * (flat[b] - flat[a]));
      px[p + 1] = Math.round(flat[a + 1] + u * (flat[b + 1] - flat[a + 1]));
      px[p + 2] = Math.round(flat[a + 2] + u * (flat[b + 2] - flat[a + 2]));
      px[p + 3] = 255;
    }
  }

  /* ------------------------------------------------------------ text */

  function fmt(v) {
    if (Number.isNaN(v)) return "NaN";
    if (v === -Infinity) return "\u2212inf";
    if (v === Infinity) return "+inf";
    return Number(v).toPrecision(3);
  }

  function tokensOf(itemIdx, layer) {
    const t = meta.itemTokens[itemIdx] && meta.itemTokens[itemIdx][layer];
    return {
      query: t && t[0] >= 0 ? meta.tokens[t[0]] : null,
      key: t && t[1] >= 0 ? meta.tokens[t[1]] : null,
    };
  }

  function quoted(list, i) {
    return list && i < list.length ? " " + JSON.stringify(list[i]) : "";
  }

  function censusText(l, h) {
    const names = meta.census.names;
    const scores = meta.census.scores[l][h];
    const lines = [meta.layers[l].group + "  head " + h];
    for (let k = 0; k < names.length; k++) {
      const v = scores[k];
      lines.push(names[k] + " " + (v === null ? "\u2013" : v === "nan" ? "nan" : fmt(v)));
    }
    return lines.join("\n");
  }

  const tooltip = $("tooltip");

  function showTip(text, x, y) {
    tooltip.textContent = text;
    tooltip.hidden = false;
    const w = tooltip.offsetWidth, h = tooltip.offsetHeight;
    tooltip.style.left = Math.max(0, Math.min(x + 14, window.innerWidth - w - 4)) + "px";
    tooltip.style.top = Math.max(0, Math.min(y + 14, window.innerHeight - h - 4)) + "px";
  }

  function hideTip() {
    tooltip.hidden = true;
  }

  /* ------------------------------------------------------------ model view */

  /* A thumbnail of map id that opens `open` on a click or Enter. */
  function thumbCanvas(id, scale, pool, open) {
    const d = thumbOf(id);
    const canvas = document.createElement("canvas");
    canvas.dataset.role = "thumb";
    canvas.width = Math.max(1, d.cols);
    canvas.height = Math.max(1, d.rows);
    canvas.tabIndex = 0;
    canvas.getContext("2d").drawImage(imageOf(d, scale, d.pooled ? pool : "max"), 0, 0);
    canvas.addEventListener("click", open);
    canvas.addEventListener("keydown", (ev) => { if (ev.key === "Enter") open(); });
    return canvas;
  }

  function label(cls, text) {
    const div = document.createElement("div");
    div.className = cls;
    div.textContent = text;
    return div;
  }

  let modelKey = "";

  function renderModel() {
    const key = [state.item, state.scale, state.pool].join(":");
    if (key === modelKey) return;
    modelKey = key;
    const grid = $("grid");
    grid.replaceChildren();
    grid.style.gridTemplateColumns = "auto repeat(" + H + ", " + (THUMB_CSS + 2) + "px)";
    grid.appendChild(label("col-label", ""));
    for (let h = 0; h < H; h++) grid.appendChild(label("col-label", "head " + h));
    const i = itemIndex(state.item);
    for (let l = 0; l < L; l++) {
      const row = label("row-label", meta.layers[l].group);
      row.title = meta.layers[l].group;
      grid.appendChild(row);
      for (let h = 0; h < H; h++) {
        const open = () => go({ view: "head", layer: meta.layers[l].group, head: h, rollout: -1 });
        const canvas = thumbCanvas(i * perItem + l * H + h, state.scale, state.pool, open);
        canvas.dataset.layer = meta.layers[l].group;
        canvas.dataset.head = String(h);
        canvas.setAttribute("aria-label", meta.layers[l].group + " head " + h);
        canvas.addEventListener("mousemove", (ev) => showTip(censusText(l, h), ev.clientX, ev.clientY));
        canvas.addEventListener("mouseleave", hideTip);
        grid.appendChild(canvas);
      }
    }
  }

  let rolloutKey = "";

  function renderRollout() {
    const key = [state.item, state.scale, state.pool].join(":");
    if (key === rolloutKey) return;
    rolloutKey = key;
    const grid = $("rollout-grid");
    grid.replaceChildren();
    grid.style.gridTemplateColumns = "repeat(auto-fill, " + (THUMB_CSS + 40) + "px)";
    const i = itemIndex(state.item);
    for (let r = 0; r < RL; r++) {
      const box = document.createElement("div");
      const canvas = thumbCanvas(i * perItem + L * H + r, state.scale, state.pool,
        () => go({ view: "head", rollout: r }));
      canvas.dataset.role = "rollout-thumb";
      canvas.dataset.layer = meta.rollout.groups[r] || String(r);
      box.appendChild(canvas);
      box.appendChild(label("col-label", "through " + (meta.rollout.groups[r] || "layer " + r)));
      grid.appendChild(box);
    }
  }

  /* ------------------------------------------------------------ head view */

  function currentLayer() {
    return state.rollout >= 0 ? 0 : Math.max(0, layerIndex(state.layer));
  }

  function mapTitle(s) {
    if (s.rollout >= 0)
      return "rollout through " + (meta.rollout.groups[s.rollout] || "layer " + s.rollout) + ", item " + s.item;
    return s.layer + "  head " + s.head + ", item " + s.item;
  }

  function resetWindow(d) {
    win = { r0: 0, c0: 0, rs: Math.max(1, d.rows), cs: Math.max(1, d.cols) };
  }

  function clampWindow(d) {
    win.rs = Math.min(Math.max(1, Math.round(win.rs)), Math.max(1, d.rows));
    win.cs = Math.min(Math.max(1, Math.round(win.cs)), Math.max(1, d.cols));
    win.r0 = Math.min(Math.max(0, Math.round(win.r0)), Math.max(0, d.rows - win.rs));
    win.c0 = Math.min(Math.max(0, Math.round(win.c0)), Math.max(0, d.cols - win.cs));
  }

  let shown = null;                /* the head view's map: detail, size */

  function renderHead() {
    const id = mapId(state);
    const d = detailOf(id);
    if (winKey !== String(id)) {
      winKey = String(id);
      resetWindow(d);
    }
    clampWindow(d);
    $("head-title").textContent = mapTitle(state) + "  \u2014  " + levelText(d);
    const px = Math.min(MAP_SIDE / win.cs, MAP_SIDE / win.rs);
    const W = Math.max(1, Math.round(win.cs * px)), Hh = Math.max(1, Math.round(win.rs * px));
    const map = $("map");
    map.width = W;
    map.height = Hh;
    map.dataset.level = String(d.level);
    map.dataset.queryFirst = String(win.r0 * d.side);
    map.dataset.queryEnd = String(Math.min(d.n, (win.r0 + win.rs) * d.side));
    map.dataset.keyFirst = String(win.c0 * d.side);
    map.dataset.keyEnd = String(Math.min(d.m, (win.c0 + win.cs) * d.side));
    const ctx = map.getContext("2d");
    ctx.imageSmoothingEnabled = false;
    ctx.clearRect(0, 0, W, Hh);
    if (d.rows > 0 && d.cols > 0)
      ctx.drawImage(imageOf(d, state.scale, state.pool), win.c0, win.r0, win.cs, win.rs, 0, 0, W, Hh);
    shown = { d: d, W: W, H: Hh, px: px };
    drawAxes(d, W, Hh, px);
    drawBar(d.e);
  }

  function levelText(d) {
    if (!d.pooled) return "full resolution (float32 as stored)";
    return "level " + d.level + ": blocks of " + d.side + "\u00d7" + d.side + ", showing the " +
      state.pool + " of each (float32)";
  }

  function axisLabel(list, first, last, pooled) {
    if (pooled) return first + "\u2013" + last;
    const t = list && first < list.length ? list[first] : null;
    const text = t === null ? String(first) : first + " " + t;
    return text.length > 18 ? text.slice(0, 17) + "\u2026" : text;
  }

  function drawAxes(d, W, Hh, px) {
    const toks = tokensOf(itemIndex(state.item), currentLayer());
    const keyAxis = $("key-axis"), queryAxis = $("query-axis");
    keyAxis.width = W; keyAxis.height = 90;
    queryAxis.width = 130; queryAxis.height = Hh;
    const kc = keyAxis.getContext("2d"), qc = queryAxis.getContext("2d");
    kc.font = qc.font = "11px sans-serif";
    kc.fillStyle = qc.fillStyle = "#222";
    const every = Math.max(1, Math.ceil(13 / px));
    for (let c = win.c0; c < win.c0 + win.cs; c += every) {
      const x = (c - win.c0 + 0.5) * px;
      const last = Math.min(d.m, (c + 1) * d.side) - 1;
      kc.save();
      kc.translate(x + 4, 88);
      kc.rotate(-Math.PI / 2);
      kc.fillText(axisLabel(toks.key, c * d.side, last, d.pooled), 0, 0);
      kc.restore();
    }
    qc.textAlign = "right";
    qc.textBaseline = "middle";
    for (let r = win.r0; r < win.r0 + win.rs; r += every) {
      const y = (r - win.r0 + 0.5) * px;
      const last = Math.min(d.n, (r + 1) * d.side) - 1;
      qc.fillText(axisLabel(toks.query, r * d.side, last, d.pooled), 126, y);
    }
  }

  function drawBar(e) {
    const bar = barOf(e, state.scale);
    const canvas = $("bar");
    const BW = 16, BH = 160, top = 8;
    canvas.width = 110; canvas.height = BH + 2 * top;
    const ctx = canvas.getContext("2d");
    for (let j = 0; j < BH; j++) {
      const t = (BH - 1 - j) / (BH - 1);
      const rgb = colourAt(t);
      ctx.fillStyle = "rgb(" + rgb.join(",") + ")";
      ctx.fillRect(0, top + j, BW, 1);
    }
    ctx.fillStyle = "#222";
    ctx.font = "11px sans-serif";
    ctx.textBaseline = "middle";
    const ticks = [];
    if (state.scale === "log") {
      for (let p = Math.ceil(Math.log10(bar[0]) - 1e-9); p <= Math.floor(Math.log10(bar[1]) + 1e-9); p++)
        ticks.push(Math.pow(10, p));
      if (ticks.length < 2) ticks.push(bar[0], bar[1]);
    } else {
      for (let k = 0; k <= 4; k++) ticks.push(bar[0] + (bar[1] - bar[0]) * k / 4);
    }
    for (const v of ticks) {
      const t = position(state.scale, bar, v);
      const y = top + Math.round((BH - 1) * (1 - t));
      ctx.fillRect(BW, y, 4, 1);
      ctx.fillText(fmt(v), BW + 7, y);
    }
    const legend = $("legend");
    legend.replaceChildren();
    const specials = [[1, "negInf", "\u2212inf (masked)"], [2, "posInf", "+inf"], [4, "nan", "NaN"]];
    for (const [bit, name, text] of specials) {
      if (!(e.specials & bit)) continue;
      const row = document.createElement("div");
      const sw = document.createElement("span");
      sw.className = "swatch";
      sw.style.background = "rgb(" + meta.colours[name].join(",") + ")";
      row.appendChild(sw);
      row.appendChild(document.createTextNode(text));
      legend.appendChild(row);
    }
    if (e.negative) legend.appendChild(label("", "negative values"));
  }

  function cellAt(ev) {
    if (!shown) return null;
    const rect = $("map").getBoundingClientRect();
    const x = (ev.clientX - rect.left) / rect.width, y = (ev.clientY - rect.top) / rect.height;
    if (x < 0 || y < 0 || x >= 1 || y >= 1) return null;
    return { r: win.r0 + Math.floor(y * win.rs), c: win.c0 + Math.floor(x * win.cs), x: x, y: y };
  }

  function headTip(ev) {
    const cell = cellAt(ev);
    if (!cell) return hideTip();
    const d = shown.d;
    const v = valueAt(d, cell.r, cell.c, state.pool);
    const name = state.rollout >= 0 ? "rollout" : "weight";
    let text;
    if (!d.pooled) {
      const toks = tokensOf(itemIndex(state.item), currentLayer());
      text = "query " + cell.r + quoted(toks.query, cell.r) + "\nkey " + cell.c +
        quoted(toks.key, cell.c) + "\n" + name + " " + fmt(v);
    } else {
      const q1 = Math.min(d.n, (cell.r + 1) * d.side) - 1, k1 = Math.min(d.m, (cell.c + 1) * d.side) - 1;
      text = "queries " + cell.r * d.side + "\u2013" + q1 + "\nkeys " + cell.c * d.side + "\u2013" + k1 +
        "\n" + state.pool + " " + fmt(v) + " (block " + cell.r + ", " + cell.c + " of level " + d.level + ")";
    }
    showTip(text, ev.clientX, ev.clientY);
  }

  function zoom(factor, ax, ay) {
    const d = shown.d;
    const cr = win.r0 + ay * win.rs, cc = win.c0 + ax * win.cs;
    win.rs = Math.max(1, Math.round(win.rs * factor));
    win.cs = Math.max(1, Math.round(win.cs * factor));
    win.r0 = cr - ay * win.rs;
    win.c0 = cc - ax * win.cs;
    clampWindow(d);
    renderHead();
  }

  function pan(dr, dc) {
    win.r0 += dr;
    win.c0 += dc;
    clampWindow(shown.d);
    renderHead();
  }

  function stepHead(delta) {
    if (state.rollout >= 0) {
      go({ rollout: (state.rollout + delta + RL) % RL });
      return;
    }
    go({ head: (state.head + delta + H) % H });
  }

  function stepLayer(delta) {
    if (state.rollout >= 0) return;
    const l = (currentLayer() + delta + L) % L;
    go({ layer: meta.layers[l].group });
  }

  function headKeys(ev) {
    if (!shown) return false;
    const stepR = Math.max(1, Math.round(win.rs / 8)), stepC = Math.max(1, Math.round(win.cs / 8));
    switch (ev.key) {
      case "+": case "=": zoom(0.5, 0.5, 0.5); return true;
      case "-": case "_": zoom(2, 0.5, 0.5); return true;
      case "0": resetWindow(shown.d); renderHead(); return true;
      case "ArrowLeft": pan(0, -stepC); return true;
      case "ArrowRight": pan(0, stepC); return true;
      case "ArrowUp": pan(-stepR, 0); return true;
      case "ArrowDown": pan(stepR, 0); return true;
      case "[": stepHead(-1); return true;
      case "]": stepHead(1); return true;
      case "{": stepLayer(-1); return true;
      case "}": stepLayer(1); return true;
      default: return false;
    }
  }

  function wireHead() {
    const map = $("map");
    let drag = null;
    map.addEventListener("mousemove", (ev) => {
      if (drag && ev.buttons & 1) {
        const dc = Math.round((drag.x - ev.clientX) / shown.px), dr = Math.round((drag.y - ev.clientY) / shown.px);
        if (dc !== 0 || dr !== 0) {
          drag.moved = true;
          drag.x -= dc * shown.px;
          drag.y -= dr * shown.px;
          pan(dr, dc);
        }
      }
      headTip(ev);
    });
    map.addEventListener("mousedown", (ev) => { drag = { x: ev.clientX, y: ev.clientY, moved: false }; map.focus(); });
    map.addEventListener("mouseup", (ev) => {
      const moved = drag && drag.moved;
      drag = null;
      if (moved || state.rollout >= 0) return;
      const cell = cellAt(ev);
      if (cell) go({ view: "token", query: cell.r * shown.d.side });
    });
    map.addEventListener("mouseleave", () => { drag = null; hideTip(); });
    map.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const cell = cellAt(ev);
      zoom(ev.deltaY < 0 ? 0.5 : 2, cell ? cell.x : 0.5, cell ? cell.y : 0.5);
    }, { passive: false });
  }

  /* ------------------------------------------------------------ token view */

  let strips = null;

  function renderToken() {
    const l = Math.max(0, layerIndex(state.layer));
    const i = itemIndex(state.item);
    const n = meta.layers[l].n, m = meta.layers[l].m;
    const q = Math.min(state.query, Math.max(0, n - 1));
    const toks = tokensOf(i, l);
    $("token-title").textContent = meta.layers[l].group + ", item " + state.item + ": query " + q;
    $("query").max = String(Math.max(0, n - 1));
    $("query").value = String(q);
    $("query-token").textContent = toks.query && q < toks.query.length ? JSON.stringify(toks.query[q]) : "";
    const first = detailOf(i * perItem + l * H);
    const cols = first.cols, cellW = Math.max(1, Math.min(24, Math.floor(900 / Math.max(1, cols))));
    const ROW = 16, LABEL = 60;
    const canvas = $("strips");
    canvas.width = LABEL + cols * cellW;
    canvas.height = H * ROW;
    const ctx = canvas.getContext("2d");
    ctx.font = "11px sans-serif";
    ctx.textBaseline = "middle";
    const list = $("top-keys");
    list.replaceChildren();
    const rows = [];
    for (let h = 0; h < H; h++) {
      const d = detailOf(i * perItem + l * H + h);
      const r = Math.floor(q / d.side);
      const bar = barOf(d.e, state.scale);
      ctx.fillStyle = "#222";
      ctx.fillText("head " + h, 2, h * ROW + ROW / 2);
      const row = [];
      for (let c = 0; c < d.cols && n > 0; c++) {
        const v = valueAt(d, r, c, state.pool);
        row.push(v);
        ctx.fillStyle = "rgb(" + colourOf(v, state.scale, bar).join(",") + ")";
        ctx.fillRect(LABEL + c * cellW, h * ROW + 1, cellW, ROW - 2);
      }
      rows.push({ d: d, row: row });
      const order = row.map((v, c) => [v, c]).filter((p) => Number.isFinite(p[0]))
        .sort((a, b) => b[0] - a[0]).slice(0, 5);
      const li = document.createElement("li");
      li.textContent = "head " + h + ": " + order.map(([v, c]) => {
        if (d.pooled) return "keys " + c * d.side + "\u2013" + (Math.min(m, (c + 1) * d.side) - 1) + " " + fmt(v);
        return c + quoted(toks.key, c) + " " + fmt(v);
      }).join(", ");
      list.appendChild(li);
    }
    strips = { rows: rows, cellW: cellW, ROW: ROW, LABEL: LABEL, toks: toks, q: q };
  }

  function wireToken() {
    const canvas = $("strips");
    canvas.addEventListener("mousemove", (ev) => {
      if (!strips) return;
      const rect = canvas.getBoundingClientRect();
      const x = (ev.clientX - rect.left) * canvas.width / rect.width - strips.LABEL;
      const h = Math.floor((ev.clientY - rect.top) * canvas.height / rect.height / strips.ROW);
      const c = Math.floor(x / strips.cellW);
      const s = strips.rows[h];
      if (!s || x < 0 || c >= s.row.length) return hideTip();
      const d = s.d;
      const what = d.pooled ? "keys " + c * d.side + "\u2013" + (Math.min(d.m, (c + 1) * d.side) - 1) + "\n" + state.pool
        : "key " + c + quoted(strips.toks.key, c) + "\nweight";
      showTip("head " + h + ", query " + strips.q + "\n" + what + " " + fmt(s.row[c]), ev.clientX, ev.clientY);
    });
    canvas.addEventListener("mouseleave", hideTip);
    $("query").addEventListener("change", () => {
      const q = Number($("query").value);
      if (Number.isInteger(q) && q >= 0) go({ query: q });
    });
  }

  /* ------------------------------------------------------------ census */

  function renderCensus() {
    const table = $("census");
    const names = meta.census.names;
    const head = document.createElement("tr");
    ["layer", "head"].concat(names).forEach((name, col) => {
      const th = document.createElement("th");
      th.textContent = name;
      if (col >= 2) th.title = meta.census.definitions[col - 2];
      if (censusSort.col === col) th.setAttribute("aria-sort", censusSort.dir > 0 ? "ascending" : "descending");
      th.addEventListener("click", () => {
        censusSort = { col: col, dir: censusSort.col === col ? -censusSort.dir : (col >= 2 ? -1 : 1) };
        renderCensus();
      });
      head.appendChild(th);
    });
    table.tHead.replaceChildren(head);
    const rows = [];
    for (let l = 0; l < L; l++)
      for (let h = 0; h < H; h++) rows.push({ l: l, h: h, s: meta.census.scores[l][h] });
    const key = (r) => censusSort.col === 0 ? r.l : censusSort.col === 1 ? r.h : r.s[censusSort.col - 2];
    if (censusSort.col >= 0)
      rows.sort((a, b) => {
        const x = key(a), y = key(b);
        const xn = typeof x === "number", yn = typeof y === "number";
        if (!xn || !yn) return xn === yn ? 0 : xn ? -1 : 1;     /* empty last */
        return (x - y) * censusSort.dir || a.l - b.l || a.h - b.h;
      });
    const body = document.createElement("tbody");
    for (const r of rows) {
      const tr = document.createElement("tr");
      tr.dataset.layer = meta.layers[r.l].group;
      tr.dataset.head = String(r.h);
      const cells = [meta.layers[r.l].group, String(r.h)].concat(
        r.s.map((v) => v === null ? "" : v === "nan" ? "nan" : fmt(v)));
      for (const text of cells) {
        const td = document.createElement("td");
        td.textContent = text;
        tr.appendChild(td);
      }
      tr.addEventListener("click", () => go({ view: "head", layer: meta.layers[r.l].group, head: r.h, rollout: -1 }));
      body.appendChild(tr);
    }
    table.replaceChild(body, table.tBodies[0]);
  }

  /* ------------------------------------------------------------ PNG */

  function composeGrid(canvases, columns, labels) {
    const cell = THUMB_CSS + 8, left = 120, top = 24;
    const rows = Math.ceil(canvases.length / columns);
    const out = document.createElement("canvas");
    out.width = left + columns * cell;
    out.height = top + rows * cell;
    const ctx = out.getContext("2d");
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, out.width, out.height);
    ctx.imageSmoothingEnabled = false;
    ctx.fillStyle = "#222";
    ctx.font = "11px sans-serif";
    canvases.forEach((c, k) => {
      const x = left + (k % columns) * cell, y = top + Math.floor(k / columns) * cell;
      ctx.drawImage(c, x, y, THUMB_CSS, THUMB_CSS);
    });
    labels.forEach((text, r) => ctx.fillText(text.slice(0, 18), 4, top + r * cell + THUMB_CSS / 2));
    return out;
  }

  function composeHead() {
    const parts = [$("key-axis"), $("query-axis"), $("map"), $("bar")];
    const out = document.createElement("canvas");
    out.width = 130 + parts[2].width + 12 + parts[3].width;
    out.height = 90 + Math.max(parts[2].height, parts[3].height);
    const ctx = out.getContext("2d");
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, out.width, out.height);
    ctx.drawImage(parts[0], 130, 0);
    ctx.drawImage(parts[1], 0, 90);
    ctx.drawImage(parts[2], 130, 90);
    ctx.drawImage(parts[3], 130 + parts[2].width + 12, 90);
    return out;
  }

  function composeCensus() {
    const table = $("census");
    const rows = Array.from(table.rows).slice(0, 400);
    const out = document.createElement("canvas");
    const widths = [120, 50].concat(meta.census.names.map(() => 80));
    out.width = widths.reduce((a, b) => a + b, 0) + 8;
    out.height = rows.length * 16 + 8;
    const ctx = out.getContext("2d");
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, out.width, out.height);
    ctx.fillStyle = "#222";
    ctx.font = "11px sans-serif";
    rows.forEach((tr, r) => {
      let x = 4;
      Array.from(tr.cells).forEach((td, c) => {
        ctx.fillText(td.textContent.slice(0, 16), x, 14 + r * 16);
        x += widths[c] || 80;
      });
    });
    return out;
  }

  function savePng() {
    let canvas;
    if (state.view === "head") canvas = composeHead();
    else if (state.view === "token") canvas = $("strips");
    else if (state.view === "census") canvas = composeCensus();
    else if (state.view === "rollout")
      canvas = composeGrid(Array.from($("rollout-grid").querySelectorAll("canvas")), Math.max(1, RL), []);
    else
      canvas = composeGrid(Array.from($("grid").querySelectorAll("canvas")), Math.max(1, H),
        meta.layers.map((x) => x.group));
    const name = "attnrun-" + state.view + "-item" + state.item +
      (state.view === "head" || state.view === "token" ? "-" + (state.rollout >= 0 ? "rollout" + state.rollout
        : state.layer.replace(/[^A-Za-z0-9_.-]+/g, "_") + "-head" + state.head) : "") + ".png";
    canvas.toBlob((blob) => {
      const a = document.createElement("a");
      a.href = URL.createObjectURL(blob);
      a.download = name;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 10000);
    }, "image/png");
  }

  /* ------------------------------------------------------------ prefetch */

  /* While the page is idle, the maps a step away from the head shown (the
   * other heads of its layer, the same head in the layers beside it) are
   * decoded and coloured, so that [ ] { } find them ready. */
  let prefetching = [];

  function prefetch() {
    if (state.view !== "head" || state.rollout >= 0) return;
    const i = itemIndex(state.item), l = currentLayer();
    const ids = [];
    for (let k = 1; k < H; k++) ids.push(i * perItem + l * H + (state.head + k) % H);
    for (const dl of [1, L - 1])
      if (L > 1) ids.push(i * perItem + ((l + dl) % L) * H + state.head);
    prefetching = ids;
    const idle = window.requestIdleCallback || ((f) => setTimeout(() => f({ timeRemaining: () => 10 }), 30));
    const step = (deadline) => {
      while (prefetching.length > 0 && deadline.timeRemaining() > 2)
        imageOf(detailOf(prefetching.shift()), state.scale, state.pool);
      if (prefetching.length > 0) idle(step);
    };
    idle(step);
  }

  /* ------------------------------------------------------------ frame */

  function renderChrome() {
    document.title = "attnrun view: " + meta.source;
    $("title").textContent = "attnrun view \u2014 " + meta.source + " (" + L + " layer" + (L === 1 ? "" : "s") +
      ", " + H + " head" + (H === 1 ? "" : "s") + ", items " + meta.items.length + " of " + meta.batch + ")";
    const select = $("item");
    if (select.options.length === 0)
      for (const item of meta.items) {
        const o = document.createElement("option");
        o.value = String(item);
        o.textContent = String(item);
        select.appendChild(o);
      }
    select.value = String(state.item);
    $("scale").value = state.scale;
    $("pool").value = state.pool;
    $("rollout-tab").hidden = RL === 0;
    const pooled = meta.level > 0;
    $("pool-label").hidden = !pooled;
    const levels = meta.layers.map((x, l) => {
      const k = meta.maps[l * H].level, side = Math.pow(2, k);
      return x.group + " " + x.n + "\u00d7" + x.m + (k > 0 ? " as blocks of " + side + "\u00d7" + side +
        " (level " + k + ", max and mean)" : " at full resolution");
    });
    $("level").textContent = pooled
      ? "Pooled to fit " + meta.maxSize + " bytes: " + levels.slice(0, 4).join("; ") + (L > 4 ? "; \u2026" : "") +
        ". Values are float32."
      : "Every map at full resolution: float32 values as stored.";
    for (const b of document.querySelectorAll("nav button[data-view]"))
      b.setAttribute("aria-pressed", String(b.dataset.view === state.view));
  }

  function render() {
    state = readHash();
    hideTip();
    renderChrome();
    for (const v of VIEWS) $(v + "-view").hidden = v !== state.view;
    shown = null;
    if (L === 0 || meta.items.length === 0) return;
    if (state.view === "model") renderModel();
    else if (state.view === "head") { renderHead(); prefetch(); }
    else if (state.view === "token") renderToken();
    else if (state.view === "census") renderCensus();
    else if (state.view === "rollout") renderRollout();
    if (!ready) {
      ready = true;
      requestAnimationFrame(() => performance.mark("attnrun-ready"));
    }
  }

  function wire() {
    for (const b of document.querySelectorAll("nav button[data-view]"))
      b.addEventListener("click", () => go({ view: b.dataset.view, rollout: b.dataset.view === "head" ? state.rollout : -1 }));
    $("item").addEventListener("change", () => go({ item: Number($("item").value) }));
    $("scale").addEventListener("change", () => go({ scale: $("scale").value }));
    $("pool").addEventListener("change", () => go({ pool: $("pool").value }));
    $("save").addEventListener("click", savePng);
    document.addEventListener("keydown", (ev) => {
      if (ev.target && ev.target.tagName === "INPUT") return;
      if (state.view === "head" && headKeys(ev)) { ev.preventDefault(); return; }
      if (state.view === "token" && (ev.key === "ArrowLeft" || ev.key === "ArrowRight")) {
        const n = meta.layers[Math.max(0, layerIndex(state.layer))].n;
        const q = Math.min(Math.max(0, state.query + (ev.key === "ArrowLeft" ? -1 : 1)), Math.max(0, n - 1));
        ev.preventDefault();
        go({ query: q });
        return;
      }
      if (ev.key === "Escape" && state.view !== "model") go({ view: "model", rollout: -1 });
    });
    window.addEventListener("hashchange", render);
    wireHead();
    wireToken();
  }

  wire();
  render();
})();
