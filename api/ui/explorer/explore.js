// shardplan explorer: draws a mesh, a tensor's tiles on it and a reshard plan step by
// step, from this server's /v1/reshard, /v1/tiles and /v1/graph answers, and a planned
// transfer from /v1/transfer's answer and drawing. Plain
// JavaScript and SVG; every URL is relative to this server.
(() => {
  "use strict";

  const SVGNS = "http://www.w3.org/2000/svg";
  const CELL = 40; // a device's square in a mesh drawing
  const BLOCK_W = 64, BLOCK_H = 42; // a group of devices' box in a mesh drawing
  const DEVICE_VIEW_LIMIT = 64; // a mesh view draws up to this many devices, else groups
  const FOLD = 8; // a row (or column) of a mesh drawing holds up to this many cells
  const MAX_STRIPES = 16; // group stripes drawn in one box
  const TENSOR_PX = 300; // the longer side of a tensor drawing
  const MAX_PANELS = 12; // tensor panels drawn along the panel dim
  const MAX_TILE_RECTS = 4096; // more distinct tiles than this are drawn as a raster
  const RASTER = 64; // cells per side of that raster
  const LIST_LIMIT = 1024; // /v1/tiles lists every device up to this many unless asked
  const PAIRS_LIMIT = 4096; // a reshard is asked for its explicit move lists up to this many devices

  // ---- small DOM helpers ----

  function el(tag, attrs, ...children) {
    const n = document.createElement(tag);
    setAttrs(n, attrs);
    n.append(...children.flat().filter((c) => c !== null && c !== undefined));
    return n;
  }

  function sv(tag, attrs, ...children) {
    const n = document.createElementNS(SVGNS, tag);
    setAttrs(n, attrs);
    n.append(...children.flat().filter((c) => c !== null && c !== undefined));
    return n;
  }

  function setAttrs(n, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "dataset") Object.assign(n.dataset, v);
      else n.setAttribute(k, String(v));
    }
  }

  function api(path) {
    return new URL(path.replace(/^\//, ""), new URL("/", location.href)).href;
  }

  async function post(path, body, contentType) {
    const resp = await fetch(api(path), {
      method: "POST",
      headers: { "Content-Type": contentType || "application/json", Accept: "application/json" },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await resp.text();
    let data;
    try {
      data = JSON.parse(text);
    } catch (e) {
      data = { detail: text };
    }
    if (!resp.ok) {
      const errs = (data.errors || []).map((e) => (e.field ? e.field + ": " : "") + e.message);
      throw new Error(resp.status + " " + (errs.length ? errs.join("; ") : data.detail || data.title || ""));
    }
    return data;
  }

  // ---- colours: one per device id ----

  function deviceColor(id) {
    const h = (id * 137.508) % 360;
    return "hsl(" + h.toFixed(1) + ", 62%, " + (id % 2 ? 62 : 72) + "%)";
  }

  function groupColor(k) {
    return "hsl(" + ((k * 67 + 200) % 360) + ", 70%, 38%)";
  }

  // ---- the mesh: every device up to DEVICE_VIEW_LIMIT, else groups of devices ----

  // meshLayout places n cells (the product of sizes, major to minor) as nested grids of
  // w x h cells: the minor axis runs left to right, the next one top to bottom, the next
  // left to right again around whole blocks, and so on; every level above the last two
  // is a labelled box. An axis longer than FOLD wraps into rows (across) or columns
  // (down). Cells are in row-major position order.
  function meshLayout(sizes, names, cw, ch, innerGap) {
    const n = sizes.length;
    function level(k) {
      if (k === n) return { w: cw, h: ch, cells: [[0, 0]], boxes: [] };
      const inner = level(k + 1);
      const horizontal = (n - 1 - k) % 2 === 0;
      const composite = k < n - 2;
      const pad = composite ? 6 : 0;
      const top = composite ? 14 : 0;
      const bw = inner.w + 2 * pad;
      const bh = inner.h + 2 * pad + top;
      const gap = n - 1 - k < 2 ? innerGap : innerGap + 4 + 2 * (n - 1 - k);
      const s = sizes[k];
      const runs = Math.min(s, FOLD); // cells in the axis' direction before a wrap
      const wraps = Math.ceil(s / runs);
      const out = { w: 0, h: 0, cells: [], boxes: [] };
      for (let i = 0; i < s; i++) {
        const along = i % runs, across = Math.floor(i / runs);
        const ox = horizontal ? along * (bw + gap) : across * (bw + gap);
        const oy = horizontal ? across * (bh + gap) : along * (bh + gap);
        for (const [x, y] of inner.cells) out.cells.push([ox + pad + x, oy + pad + top + y]);
        for (const b of inner.boxes) out.boxes.push({ ...b, x: ox + pad + b.x, y: oy + pad + top + b.y });
        if (composite) {
          const full = names[k] + "=" + i;
          out.boxes.push({ x: ox, y: oy, w: bw, h: bh, label: textWidth(full, 10) <= bw - 8 ? full : String(i) });
        }
      }
      const nx = horizontal ? runs : wraps, ny = horizontal ? wraps : runs;
      out.w = nx * bw + (nx - 1) * gap;
      out.h = ny * bh + (ny - 1) * gap;
      return out;
    }
    const lay = level(0);
    const margin = { left: 4, top: 20 };
    lay.cells = lay.cells.map(([x, y]) => [x + margin.left, y + margin.top]);
    lay.boxes = lay.boxes.map((b) => ({ ...b, x: b.x + margin.left, y: b.y + margin.top }));
    lay.w += margin.left + 6;
    lay.h += margin.top + 6;
    lay.cw = cw;
    lay.ch = ch;
    return lay;
  }

  // textWidth estimates the width of a monospace text at a font size, in px.
  function textWidth(s, size) {
    return [...String(s)].length * size * 0.62;
  }

  // meshLevels groups the mesh axes, major to minor, into the levels a view steps
  // through: each level's axes hold at most DEVICE_VIEW_LIMIT cells (an axis that does
  // not fit is split into sub-axes, written as Shardy writes them, "name:(pre)size"), so
  // that a view of one level draws at most that many boxes, or devices at the last level.
  function meshLevels(sizes, names) {
    const count = sizes.reduce((a, b) => a * b, 1);
    if (count <= DEVICE_VIEW_LIMIT) return [sizes.map((s, k) => ({ name: names[k], size: s }))];
    const levels = [];
    let cur = [], prod = 1;
    const piece = (k, pre, size) => ({ name: size === sizes[k] ? names[k] : names[k] + ":(" + pre + ")" + size, size });
    sizes.forEach((n, k) => {
      let pre = 1, size = n;
      for (;;) {
        if (prod * size <= DEVICE_VIEW_LIMIT) {
          cur.push(piece(k, pre, size));
          prod *= size;
          break;
        }
        let d = Math.floor(DEVICE_VIEW_LIMIT / prod);
        while (d > 1 && size % d !== 0) d--;
        if (d > 1) {
          cur.push(piece(k, pre, d));
          pre *= d;
          size /= d;
        } else if (cur.length === 0) {
          cur.push(piece(k, pre, size)); // a prime longer than the limit: one long level
          prod = size;
          break;
        }
        levels.push(cur);
        cur = [];
        prod = 1;
      }
    });
    if (cur.length) levels.push(cur);
    return levels;
  }

  function meshInfo(mesh) {
    const sizes = mesh.axes.map((a) => a.size);
    const names = mesh.axes.map((a) => a.name);
    const count = sizes.reduce((a, b) => a * b, 1);
    const ids = mesh.device_ids && mesh.device_ids.length ? mesh.device_ids : Array.from({ length: count }, (_, i) => i);
    const posOf = new Map(ids.map((id, p) => [id, p]));
    return { sizes, names, count, ids, posOf, name: mesh.name || "mesh", levels: meshLevels(sizes, names), zoom: [] };
  }

  function coordsOf(info, p) {
    const c = new Array(info.sizes.length);
    for (let k = info.sizes.length - 1; k >= 0; k--) {
      c[k] = p % info.sizes[k];
      p = Math.floor(p / info.sizes[k]);
    }
    return c;
  }

  // meshView is what a mesh drawing shows at the info's zoom (one item index per level
  // zoomed into): every device of the zoomed group (mode "devices", at the last level),
  // or its groups over the next level's axes (mode "blocks"), each a run of span
  // positions from first. lay.cells[i] is item i's place.
  function meshView(info) {
    const levels = info.levels;
    const z = info.zoom.length;
    const size = (l) => levels[l].reduce((a, x) => a * x.size, 1);
    const spans = levels.map(() => 1);
    for (let l = levels.length - 2; l >= 0; l--) spans[l] = spans[l + 1] * size(l + 1);
    let base = 0;
    for (let l = 0; l < z; l++) base += info.zoom[l] * spans[l];
    const axes = levels[z];
    const n = size(z);
    const each = spans[z];
    const devices = z === levels.length - 1;
    const lay = devices ? meshLayout(axes.map((a) => a.size), axes.map((a) => a.name), CELL, CELL, 22) :
      meshLayout(axes.map((a) => a.size), axes.map((a) => a.name), BLOCK_W, BLOCK_H, 6);
    const items = Array.from({ length: n }, (_, i) => ({ first: base + i * each, span: each }));
    return { mode: devices ? "devices" : "blocks", axes, inner: levels.slice(z + 1).flat(), lay, items, base, span: n * each };
  }

  // itemOf is the index of the view item holding position p, or -1 outside the view.
  function itemOf(view, p) {
    if (p < view.base || p >= view.base + view.span) return -1;
    return Math.floor((p - view.base) / view.items[0].span);
  }

  // idRange prints the ids of positions [first, first+span): "a…b" when consecutive.
  function idRange(info, first, span) {
    const a = info.ids[first], b = info.ids[first + span - 1];
    for (let p = first + 1; p < first + span; p++) if (info.ids[p] !== info.ids[p - 1] + 1) return null;
    return [a, b];
  }

  // drawMesh draws the info's current view: devices labelled by id, or groups of devices
  // labelled by their id range (click to zoom in); decorate(svg, info, view) adds overlays.
  function drawMesh(info, role, decorate) {
    const view = meshView(info);
    const lay = view.lay;
    const legend = "→ " + view.axes.map((a) => a.name).reverse().filter((_, i) => i % 2 === 0).join(", ") +
      (view.axes.length > 1 ? " · ↓ " + view.axes.map((a) => a.name).reverse().filter((_, i) => i % 2 === 1).join(", ") : "") +
      (view.mode === "blocks" ? " · each box: " + view.items[0].span + " devices over " + view.inner.map((a) => a.name).join(", ") + " (click to zoom in)" : "");
    const w = Math.max(lay.w, textWidth(legend, 10) + 8);
    const root = sv("svg", { class: "mesh", width: w, height: lay.h, viewBox: "0 0 " + w + " " + lay.h, dataset: { role, devices: String(info.count), mode: view.mode, items: String(view.items.length) } });
    root.append(sv("defs", {}, sv("marker", { id: role + "-head", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 4, markerHeight: 4, orient: "auto-start-reverse" },
      sv("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#c2185b" }))));
    root.append(sv("text", { class: "axis-label legend", x: 4, y: 12 }, legend));
    for (const b of lay.boxes) {
      root.append(sv("rect", { class: "box", x: b.x, y: b.y, width: b.w, height: b.h, rx: 4 }),
        sv("text", { class: "axis-label", x: b.x + 4, y: b.y + 11 }, b.label));
    }
    view.items.forEach((it, i) => {
      const [x, y] = lay.cells[i];
      const p = it.first;
      if (view.mode === "devices") {
        const id = info.ids[p];
        const coords = coordsOf(info, p);
        root.append(sv("g", { class: "device", dataset: { device: String(id), pos: String(p), coords: coords.join(",") } },
          sv("title", {}, "device " + id + " at (" + info.names.map((a, k) => a + "=" + coords[k]).join(", ") + ")"),
          sv("rect", { x, y, width: CELL, height: CELL, rx: 3, fill: "#fff" }),
          sv("text", { class: "device-label", x: x + CELL / 2, y: y + CELL / 2 + 4, "text-anchor": "middle" }, String(id))));
        return;
      }
      const r = idRange(info, p, it.span);
      const g = sv("g", { class: "block", tabindex: 0, role: "button", dataset: { block: String(i), first: String(p), span: String(it.span) } },
        sv("title", {}, it.span + " devices" + (r ? " " + r[0] + "…" + r[1] : "") + " (positions " + p + "…" + (p + it.span - 1) + "); click to zoom in"),
        sv("rect", { x, y, width: BLOCK_W, height: BLOCK_H, rx: 4, fill: "#fff" }),
        sv("text", { class: "block-label", x: x + BLOCK_W / 2, y: y + 13, "text-anchor": "middle" }, r ? String(r[0]) : "pos " + p),
        sv("text", { class: "block-label", x: x + BLOCK_W / 2, y: y + 25, "text-anchor": "middle" }, r ? "…" + r[1] : "×" + it.span));
      g.addEventListener("click", () => zoomTo(info.zoom.concat([i])));
      g.addEventListener("keydown", (e) => { if (e.key === "Enter") zoomTo(info.zoom.concat([i])); });
      root.append(g);
    });
    if (decorate) decorate(root, info, view);
    return root;
  }

  // zoomDigits are the coordinates of item i over a level's axes.
  function zoomDigits(axes, i) {
    const out = new Array(axes.length);
    for (let k = axes.length - 1; k >= 0; k--) {
      out[k] = i % axes[k].size;
      i = Math.floor(i / axes[k].size);
    }
    return out;
  }

  // zoomTo shows the mesh group at zoom (virtual coordinates) in the mesh and step views.
  function zoomTo(zoom) {
    if (!state.info) return;
    state.info.zoom = zoom;
    renderMeshPanel();
    if (state.plan) showStep(state.step);
  }

  // renderZoom writes the zoom path as buttons: the whole mesh, then each group.
  function renderZoom() {
    const info = state.info;
    const box = document.getElementById("mesh-zoom");
    box.replaceChildren();
    if (info.levels.length < 2) return;
    const crumb = (depth, label) => {
      const b = el("button", { type: "button", class: "zoom", dataset: { depth: String(depth) } }, label);
      b.addEventListener("click", () => zoomTo(info.zoom.slice(0, depth)));
      if (depth === info.zoom.length) b.setAttribute("aria-current", "true");
      return b;
    };
    const parts = [el("span", { class: "hint" }, "Showing "), crumb(0, "whole mesh")];
    info.zoom.forEach((i, l) => {
      const digits = zoomDigits(info.levels[l], i);
      parts.push(el("span", { class: "hint" }, " › "), crumb(l + 1, info.levels[l].map((a, k) => a.name + "=" + digits[k]).join(", ")));
    });
    box.append(...parts);
  }

  // cellBox is the rectangle of item i in a view.
  function cellBox(view, i) {
    const [x, y] = view.lay.cells[i];
    return { x, y, w: view.lay.cw, h: view.lay.ch };
  }

  // ---- tiles: the tensor coloured by owning device ----

  // viewDims picks the dims a tensor drawing shows: rows and columns (-1: none) and the
  // dim split into panels (-1: none); other dims are drawn at index 0.
  function defaultViewDims(rank) {
    if (rank === 1) return { rows: -1, cols: 0, panels: -1 };
    if (rank === 2) return { rows: 0, cols: 1, panels: -1 };
    return { rows: rank - 2, cols: rank - 1, panels: rank - 3 };
  }

  function rangesKey(r) {
    return r.map((x) => x[0] + ":" + x[1]).join(",");
  }

  // tileGroups merges devices holding the same tile (replicas) and keeps the tiles that
  // hold index 0 of every dim not drawn.
  function tileGroups(tiles, view) {
    const groups = new Map();
    for (const t of tiles) {
      let shown = true;
      t.ranges.forEach((r, d) => {
        if (d !== view.rows && d !== view.cols && d !== view.panels && r[0] !== 0) shown = false;
      });
      if (!shown) continue;
      const key = rangesKey(t.ranges);
      if (!groups.has(key)) groups.set(key, { ranges: t.ranges, devices: [], coords: [] });
      groups.get(key).devices.push(t.device);
      groups.get(key).coords.push(t.coords);
    }
    const out = [...groups.values()];
    for (const g of out) g.devices.sort((a, b) => a - b);
    return out;
  }

  // replicaText is the one notation for a tile and its replicas, on the page and in the
  // API's SVG: the lowest device id, then "×n" when n devices hold the tile.
  function replicaText(devices) {
    return devices.length > 1 ? devices[0] + " ×" + devices.length : String(devices[0]);
  }

  // drawTensor draws a tensor's tiles coloured by owner (the lowest id holding each),
  // labelled where the label fits; tiles too thin for a border are drawn without one so
  // that hundreds of narrow tiles read as colour, not as white lines. A panel dim draws
  // up to MAX_PANELS panels, wrapped to fit the figure.
  function drawTensor(shape, tiles, view, role) {
    const rows = view.rows >= 0 ? shape[view.rows] : 1;
    const cols = shape[view.cols];
    const scale = TENSOR_PX / Math.max(rows, cols);
    // A very long or very wide tensor is drawn at least a quarter as wide as long, so that
    // its tiles stay visible.
    const w = Math.max(TENSOR_PX / 4, cols * scale);
    const h = view.rows >= 0 ? Math.max(TENSOR_PX / 4, rows * scale) : 28;
    let panelRanges = [];
    const groups = tileGroups(tiles, view);
    if (view.panels >= 0) {
      const seen = new Map();
      for (const g of groups) seen.set(rangesKey([g.ranges[view.panels]]), g.ranges[view.panels]);
      panelRanges.push(...[...seen.values()].sort((a, b) => a[0] - b[0]));
    } else {
      panelRanges.push(null);
    }
    const allPanels = panelRanges.length;
    panelRanges = panelRanges.slice(0, MAX_PANELS);
    const gap = 14, rowGap = 26;
    const perRow = Math.max(1, Math.min(panelRanges.length, Math.floor(600 / (w + gap))));
    const nrows = Math.ceil(panelRanges.length / perRow);
    const note = allPanels > panelRanges.length ? "first " + panelRanges.length + " of " + allPanels + " panels along dim " + view.panels : "";
    const totalW = Math.max(perRow * (w + gap) + 6, textWidth(note, 10) + 8);
    const totalH = nrows * (h + 18 + rowGap) + (note ? 14 : 0);
    const root = sv("svg", { class: "tensor", width: totalW, height: totalH, viewBox: "0 0 " + totalW + " " + totalH, "shape-rendering": "crispEdges", dataset: { role, tiles: String(groups.length) } });
    if (note) root.append(sv("text", { class: "axis-label", x: 4, y: totalH - 4 }, note));
    const labels = [];
    panelRanges.forEach((pr, i) => {
      const ox = 4 + (i % perRow) * (w + gap);
      const top = Math.floor(i / perRow) * (h + 18 + rowGap);
      const oy = top + 18;
      const label = pr ? "dim " + view.panels + " [" + pr[0] + ", " + pr[1] + ")" :
        (view.rows >= 0 ? "dims " + view.rows + " × " + view.cols : "dim " + view.cols);
      root.append(sv("text", { class: "axis-label", x: ox, y: top + 12 }, label));
      root.append(sv("rect", { x: ox, y: oy, width: w, height: h, fill: "#eee" }));
      if (groups.length > MAX_TILE_RECTS) {
        root.append(tileRaster(groups.filter((g) => !pr || rangesKey([g.ranges[view.panels]]) === rangesKey([pr])), view, ox, oy, w, h, rows, cols));
        return;
      }
      for (const g of groups) {
        if (pr && rangesKey([g.ranges[view.panels]]) !== rangesKey([pr])) continue;
        const rr = view.rows >= 0 ? g.ranges[view.rows] : [0, 1];
        const cr = g.ranges[view.cols];
        if (cr[1] <= cr[0] || rr[1] <= rr[0]) continue; // an empty tail tile
        const owner = g.devices[0];
        const rangeText = g.ranges.map((r, d) => "dim " + d + " [" + r[0] + ", " + r[1] + ")").join(", ");
        const who = g.devices.length === 1 ? "device " + owner :
          "devices " + g.devices.slice(0, 16).join(", ") + (g.devices.length > 16 ? " … (" + g.devices.length + ")" : "");
        const tw = (cr[1] - cr[0]) * (w / cols), th = (rr[1] - rr[0]) * (h / rows);
        const thin = tw < 6 || th < 6;
        root.append(sv("rect", {
          class: thin ? "tile thin" : "tile", x: ox + cr[0] * (w / cols), y: oy + rr[0] * (h / rows),
          width: Math.max(1, tw), height: Math.max(1, th),
          fill: deviceColor(owner),
          dataset: { devices: g.devices.join(" "), owner: String(owner), color: deviceColor(owner), ranges: JSON.stringify(g.ranges), tip: who + ": " + rangeText },
        }));
        const text = replicaText(g.devices);
        if (tw >= textWidth(text, 11) + 4 && th >= 14) {
          labels.push(sv("text", { class: "tile-label", x: ox + (cr[0] + cr[1]) / 2 * (w / cols), y: oy + (rr[0] + rr[1]) / 2 * (h / rows) + 4, "text-anchor": "middle" }, text));
        }
      }
    });
    root.append(...labels);
    return root;
  }

  // tileRaster draws more tiles than MAX_TILE_RECTS as a RASTER x RASTER grid of cells,
  // each in the colour of the owner of the tile at its top left (the tile under the
  // pointer is named on hover), as the API's SVG does.
  function tileRaster(groups, view, ox, oy, w, h, rows, cols) {
    const cw = w / RASTER, ch = h / RASTER;
    const cells = new Map();
    for (const g of groups) {
      const rr = view.rows >= 0 ? g.ranges[view.rows] : [0, 1];
      const cr = g.ranges[view.cols];
      if (cr[1] <= cr[0] || rr[1] <= rr[0]) continue;
      const x = cr[0] * (w / cols), y = rr[0] * (h / rows);
      const i = Math.min(RASTER - 1, Math.floor(x / cw)), j = Math.min(RASTER - 1, Math.floor(y / ch));
      const k = j * RASTER + i;
      const c = cells.get(k);
      if (!c) cells.set(k, { i, j, x, y, g, tiles: 1 });
      else {
        c.tiles++;
        if (y < c.y || (y === c.y && x < c.x)) Object.assign(c, { x, y, g });
      }
    }
    const out = sv("g", { class: "tile-raster", dataset: { tiles: String(groups.length) } });
    for (const c of cells.values()) {
      const owner = c.g.devices[0];
      out.append(sv("rect", { class: "tile-cell", x: ox + c.i * cw, y: oy + c.j * ch, width: cw, height: ch, fill: deviceColor(owner),
        dataset: { owner: String(owner), tiles: String(c.tiles), tip: c.tiles + " tiles here; at the top left " + replicaText(c.g.devices) + ": " +
          c.g.ranges.map((r, d) => "dim " + d + " [" + r[0] + ", " + r[1] + ")").join(", ") } }));
    }
    return out;
  }

  // ---- copy as ----

  function dtensorPlacements(sh, info) {
    const out = [];
    for (let i = 0; i < info.names.length; i++) out.push("Replicate()");
    for (const u of sh.unreduced || []) {
      const i = info.names.indexOf(u);
      if (i < 0) return null;
      out[i] = "Partial()";
    }
    for (let d = 0; d < sh.dims.length; d++) {
      const idx = sh.dims[d].axes.map((a) => info.names.indexOf(a));
      if (idx.some((i) => i < 0)) return null; // a sub-axis
      const ordered = idx.every((v, k) => k === 0 || idx[k - 1] < v);
      if (ordered) {
        for (const i of idx) out[i] = "Shard(dim=" + d + ")";
      } else if (idx.length === 2) {
        // Major axis later in the mesh: DTensor's strided shard on the earlier mesh dim.
        out[idx[0]] = "Shard(dim=" + d + ")";
        out[idx[1]] = "_StridedShard(dim=" + d + ", sf=" + info.sizes[idx[0]] + ")";
      } else {
        return null;
      }
    }
    return "(" + out.join(", ") + (out.length === 1 ? "," : "") + ")";
  }

  function copyForms(sh, info) {
    const ps = sh.partition_spec || null;
    const named = ps ? "NamedSharding(mesh, " + ps + ")" : null;
    return [
      ["P(...)", ps],
      ["NamedSharding", named],
      ["HloSharding", sh.hlo || null],
      ["Shardy", sh.text ? "#sdy." + sh.text : null],
      ["DTensor placements", dtensorPlacements(sh, info)],
      ["with_sharding_constraint", named ? "x = jax.lax.with_sharding_constraint(x, " + named + ")" : null],
    ];
  }

  function renderCopy(container, sh, info) {
    container.replaceChildren();
    const forms = copyForms(sh, info);
    const select = el("select", { class: "copy-format", "aria-label": "copy format" },
      forms.map(([name]) => el("option", { value: name }, name)));
    const out = el("output", { class: "copy-text" });
    const show = () => {
      const f = forms.find(([name]) => name === select.value);
      out.textContent = f[1] || "(not expressible in this form; use the Shardy text)";
      out.dataset.format = f[0];
    };
    select.addEventListener("change", show);
    const button = el("button", { type: "button", class: "copy-button" }, "Copy");
    button.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(out.textContent);
        button.textContent = "Copied";
      } catch (e) {
        const r = document.createRange();
        r.selectNodeContents(out);
        getSelection().removeAllRanges();
        getSelection().addRange(r);
        button.textContent = "Selected";
      }
      setTimeout(() => { button.textContent = "Copy"; }, 1200);
    });
    container.append(el("span", { class: "hint" }, "Copy as"), select, button, out);
    show();
  }

  // ---- plan steps ----

  // stepMoves lists a step's point-to-point moves as [from, to, bytes] (self moves left
  // out): collective_permute pairs, all_to_all_v and halo transfers.
  function stepMoves(step) {
    const moves = new Map();
    const add = (from, to, bytes) => {
      if (from === to) return;
      const k = from + ">" + to;
      const m = moves.get(k) || [from, to, 0];
      m[2] += bytes || 0;
      moves.set(k, m);
    };
    // Runs expand to the lists: the i-th move is first + i * step, field by field.
    const transfers = (step.transfers || []).slice();
    for (const r of step.transfer_runs || []) {
      for (let i = 0; i < r.count; i++) transfers.push({ from: r.first.from + i * r.step.from, to: r.first.to + i * r.step.to, bytes: r.first.bytes + i * r.step.bytes });
    }
    const pairs = (step.pairs || []).slice();
    for (const r of step.pair_runs || []) {
      for (let i = 0; i < r.count; i++) pairs.push([r.from + i * r.from_step, r.to + i * r.to_step]);
    }
    if (transfers.length) for (const t of transfers) add(t.from, t.to, t.bytes);
    else for (const [f, t] of pairs) add(f, t, step.bytes_per_device);
    return [...moves.values()];
  }

  // stepGroupKeys maps each position to its group's key for a collective step (devices
  // that differ only on the step's mesh axes or sub-axes "x:(m)k" share one), or null
  // for another op.
  function stepGroupKeys(step, info) {
    if (!["all_gather", "all_to_all", "reduce_scatter", "all_reduce"].includes(step.op)) return null;
    const parts = (step.mesh_axes || []).map((a) => {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)(?::\((\d+)\)(\d+))?$/.exec(a);
      if (!m) return null;
      const k = info.names.indexOf(m[1]);
      if (k < 0) return null;
      const n = info.sizes[k];
      const pre = m[2] ? +m[2] : 1;
      const size = m[3] ? +m[3] : n;
      return { k, minor: n / (pre * size), size };
    }).filter(Boolean);
    const keys = new Array(info.count);
    const index = new Map();
    const sizes = new Map();
    for (let p = 0; p < info.count; p++) {
      const c = coordsOf(info, p);
      for (const s of parts) {
        const digit = Math.floor(c[s.k] / s.minor) % s.size;
        c[s.k] -= digit * s.minor;
      }
      const key = c.join(",");
      if (!index.has(key)) index.set(key, index.size);
      keys[p] = index.get(key);
      sizes.set(keys[p], (sizes.get(keys[p]) || 0) + 1);
    }
    return { keys, count: index.size, size: sizes.get(0) || 0 };
  }

  // stepGroups lists the device groups of a collective (each of more than one device).
  function stepGroups(step, info) {
    const g = stepGroupKeys(step, info);
    if (!g || g.size < 2) return [];
    const out = Array.from({ length: g.count }, () => []);
    info.ids.forEach((id, p) => out[g.keys[p]].push(id));
    return out;
  }

  function tint(k) {
    return "hsl(" + ((k * 67 + 200) % 360) + ", 70%, 88%)";
  }

  // edgePoint is where the segment from the centre of box b towards (tx, ty) leaves b,
  // pushed out by pad.
  function edgePoint(b, tx, ty, pad) {
    const cx = b.x + b.w / 2, cy = b.y + b.h / 2;
    const dx = tx - cx, dy = ty - cy;
    const sx = dx === 0 ? Infinity : (b.w / 2 + pad) / Math.abs(dx);
    const sy = dy === 0 ? Infinity : (b.h / 2 + pad) / Math.abs(dy);
    const s = Math.min(sx, sy);
    return [cx + dx * s, cy + dy * s];
  }

  // decorateStep draws a step over a mesh view. Devices: each group's members tinted in
  // the group's colour and outlined (bands, no lines across the mesh), one arrow per
  // move from cell edge to cell edge (heads clear of the ids). Groups of devices: each
  // box striped by the groups its devices belong to, and the moves as a matrix of box
  // to box (drawn beside the mesh by showStep).
  function decorateStep(step) {
    return (root, info, view) => {
      const head = "url(#" + root.dataset.role + "-head)";
      const groups = stepGroupKeys(step, info);
      const grouped = groups && groups.size > 1;
      if (view.mode === "devices") {
        if (grouped) {
          view.items.forEach((it, i) => {
            const k = groups.keys[it.first];
            const b = cellBox(view, i);
            const cell = root.querySelector('g.device[data-pos="' + it.first + '"] rect');
            if (cell) cell.setAttribute("fill", tint(k));
            root.append(sv("rect", { class: "group-outline", x: b.x - 2, y: b.y - 2, width: b.w + 4, height: b.h + 4, rx: 5, stroke: groupColor(k), dataset: { group: String(k), device: String(info.ids[it.first]) } }));
          });
        }
        const moves = stepMoves(step);
        let outside = 0;
        for (const [from, to, bytes] of moves) {
          const i = itemOf(view, info.posOf.get(from)), j = itemOf(view, info.posOf.get(to));
          if (i < 0 || j < 0) {
            outside++;
            continue;
          }
          const a = cellBox(view, i), b = cellBox(view, j);
          const ax = a.x + a.w / 2, ay = a.y + a.h / 2, bx = b.x + b.w / 2, by = b.y + b.h / 2;
          const dx = bx - ax, dy = by - ay;
          const len = Math.hypot(dx, dy) || 1;
          // Bend to the left of the direction of travel, so that opposite moves part.
          const bend = Math.min(28, 10 + len * 0.15);
          const mx = (ax + bx) / 2 - dy / len * bend, my = (ay + by) / 2 + dx / len * bend;
          const [sx, sy] = edgePoint(a, mx, my, 1);
          const [ex, ey] = edgePoint(b, mx, my, 2);
          root.append(sv("path", { class: "arrow", d: "M " + sx + " " + sy + " Q " + mx + " " + my + " " + ex + " " + ey, "marker-end": head, dataset: { from: String(from), to: String(to), bytes: String(bytes) } },
            sv("title", {}, from + " → " + to + ": " + fmtBytes(bytes))));
        }
        root.dataset.outside = String(outside);
        return;
      }
      // Groups of devices: stripes by group.
      view.items.forEach((it, i) => {
        const b = cellBox(view, i);
        const ks = [];
        if (grouped) {
          const seen = new Set();
          for (let p = it.first; p < it.first + it.span && seen.size <= MAX_STRIPES; p++) {
            if (!seen.has(groups.keys[p])) {
              seen.add(groups.keys[p]);
              ks.push(groups.keys[p]);
            }
          }
        }
        const blk = root.querySelector('g.block[data-block="' + i + '"]');
        blk.dataset.groups = String(ks.length);
        if (!ks.length) return;
        // The groups as a bar of stripes under the box's label, one per group.
        const shown = ks.slice(0, MAX_STRIPES);
        const sw = (b.w - 6) / shown.length;
        const bandsG = sv("g", { class: "bands" });
        shown.forEach((k, s) => bandsG.append(sv("rect", { class: "band", x: b.x + 3 + s * sw, y: b.y + b.h - 12, width: sw, height: 9, fill: groupColor(k), dataset: { group: String(k) } })));
        blk.append(bandsG);
      });
    };
  }

  // moveMatrix draws a step's moves between the boxes of a view as a matrix (rows send,
  // columns receive; darker is more bytes), with moves to or from outside the view
  // counted in the caption. Returns null when the step moves nothing point to point.
  function moveMatrix(step, info, view) {
    const moves = stepMoves(step);
    if (!moves.length) return null;
    const n = view.items.length;
    const cells = new Map();
    let outside = 0, most = 0;
    for (const [from, to, bytes] of moves) {
      const i = itemOf(view, info.posOf.get(from)), j = itemOf(view, info.posOf.get(to));
      if (i < 0 || j < 0) {
        outside++;
        continue;
      }
      const k = i * n + j;
      const c = cells.get(k) || { i, j, moves: 0, bytes: 0 };
      c.moves++;
      c.bytes += bytes;
      cells.set(k, c);
      most = Math.max(most, c.bytes);
    }
    const px = Math.max(4, Math.min(14, Math.floor(300 / n)));
    const left = 40, top = 34;
    const size = n * px;
    const caption = "moves between boxes: " + moves.length + (outside ? " (" + outside + " leave or enter this view)" : "");
    const w = Math.max(left + size + 10, textWidth(caption, 10) + 8), h = top + size + 8;
    const root = sv("svg", { class: "matrix", width: w, height: h, viewBox: "0 0 " + w + " " + h, dataset: { moves: String(moves.length), cells: String(cells.size) } });
    root.append(sv("text", { class: "axis-label", x: 4, y: 12 }, caption),
      sv("text", { class: "axis-label", x: left, y: 26 }, "to box →"),
      sv("text", { class: "axis-label", x: 4, y: top + 10 }, "from"),
      sv("rect", { x: left, y: top, width: size, height: size, fill: "#fff", stroke: "#d6dbe4" }));
    for (const c of cells.values()) {
      const shade = 0.25 + 0.75 * (most ? c.bytes / most : 1);
      root.append(sv("rect", { class: "move-cell", x: left + c.j * px, y: top + c.i * px, width: px, height: px, fill: "#c2185b", "fill-opacity": shade.toFixed(2), dataset: { from: String(c.i), to: String(c.j), moves: String(c.moves) } },
        sv("title", {}, "box " + c.i + " → box " + c.j + ": " + c.moves + " moves, " + fmtBytes(c.bytes))));
    }
    return root;
  }

  function fmtBytes(b) {
    if (b >= 1 << 30) return (b / (1 << 30)).toFixed(2) + " GiB";
    if (b >= 1 << 20) return (b / (1 << 20)).toFixed(2) + " MiB";
    if (b >= 1 << 10) return (b / (1 << 10)).toFixed(1) + " KiB";
    return b + " B";
  }

  function fmtUS(us) {
    return us >= 1000 ? (us / 1000).toFixed(2) + " ms" : us.toFixed(2) + " µs";
  }

  // ---- state and rendering ----

  const state = { plan: null, info: null, tiles: new Map(), view: null, step: 0, timer: null };

  async function tilesOf(sh) {
    const key = sh.text;
    if (!state.tiles.has(key)) {
      const req = { mesh: state.plan.mesh, shape: state.plan.shape, element_bytes: 1, sharding: sh.text };
      // Above the server's list limit the devices are asked for by id.
      if (state.info.count > LIST_LIMIT) req.devices = state.info.ids;
      state.tiles.set(key, post("/v1/tiles", req).then((r) => r.devices));
    }
    return state.tiles.get(key);
  }

  function setStatus(id, text, bad) {
    const s = document.getElementById(id);
    s.textContent = text;
    s.className = bad ? "bad" : "";
  }

  function field(id) {
    return document.getElementById(id).value.trim();
  }

  function reshardRequest() {
    // The explicit lists up to PAIRS_LIMIT devices (the step's runs above: lists of a
    // large mesh can run to millions of moves).
    const body = { mesh: field("mesh"), source: field("source"), target: field("target"), include: meshCount(field("mesh")) <= PAIRS_LIMIT ? ["pairs"] : undefined };
    const tensor = field("tensor");
    const shape = /^\s*\[?\s*\d+(\s*,\s*\d+)*\s*\]?\s*$/.test(tensor) ? tensor.replace(/[[\]\s]/g, "").split(",").map(Number) : null;
    if (shape) {
      body.shape = shape;
      body.dtype = "f32";
    } else {
      body.tensor = tensor;
    }
    for (const k of ["source", "target"]) {
      const v = body[k];
      if (/^\s*[[{]/.test(v) && !/^\s*\{\s*[a-z{]/.test(v)) {
        try {
          body[k] = JSON.parse(v); // an array or object form typed as JSON
        } catch (e) { /* a string form */ }
      }
    }
    body.cost_model = field("cost-model") || undefined;
    body.strategy = field("strategy") || undefined;
    const ops = field("allowed-ops");
    if (ops) body.allowed_ops = ops.split(/[\s,]+/).filter(Boolean);
    return body;
  }

  // meshCount reads the device count of a mesh as typed, from its axis sizes (0 when the
  // text names none): "X=2,Y=4", Mesh('X': 2, 'Y': 4), sdy's ["X"=2, "Y"=4]. A DeviceMesh
  // of nested lists reads as 0, and is asked for its lists.
  function meshCount(text) {
    const sizes = [...text.matchAll(/["']?[A-Za-z_][A-Za-z0-9_]*["']?\s*[=:]\s*(\d+)/g)].map((m) => +m[1]);
    return sizes.length ? sizes.reduce((a, b) => a * b, 1) : 0;
  }

  async function showPlan(ev) {
    if (ev) ev.preventDefault();
    stopPlay();
    setStatus("status", "Planning…");
    document.getElementById("show").disabled = true;
    try {
      const plan = await post("/v1/reshard", reshardRequest());
      await present(plan, meshInfo(plan.mesh));
      setStatus("status", count(plan.steps.length, "step") + ", " + fmtUS(plan.summary.time_us) + " (plan " + plan.plan_id.slice(0, 12) + "…)");
    } catch (e) {
      clearPlan();
      setStatus("status", e.message, true);
    } finally {
      document.getElementById("show").disabled = false;
    }
  }

  // count writes n with a noun in the singular or the plural.
  function count(n, noun) {
    return n + " " + noun + (n === 1 ? "" : "s");
  }

  // clearPlan removes a drawn plan, so that an error is never shown over an old answer.
  function clearPlan() {
    stopPlay();
    state.plan = null;
    state.info = null;
    state.tiles = new Map();
    const planEl = document.getElementById("plan");
    delete planEl.dataset.ready;
    delete planEl.dataset.drawn;
    delete planEl.dataset.planId;
    document.getElementById("views").hidden = true;
    for (const id of ["mesh-view", "mesh-zoom", "source-view", "target-view", "step-list", "step-mesh", "step-tensor", "timeline", "suggestions"]) {
      document.getElementById(id).replaceChildren();
    }
    for (const c of document.querySelectorAll("#views .copy")) c.replaceChildren();
    for (const id of ["summary", "step-label", "links-note", "plan-caption", "mesh-caption", "tensor-caption", "source-text", "target-text", "step-text"]) {
      document.getElementById(id).textContent = "";
    }
  }

  // present draws a plan: the mesh, the source and target tiles, and its first step.
  async function present(plan, info) {
    stopPlay();
    const planEl = document.getElementById("plan");
    delete planEl.dataset.ready;
    delete planEl.dataset.drawn;
    planEl.dataset.steps = String(plan.steps.length);
    state.plan = plan;
    state.info = info;
    state.tiles = new Map();
    state.view = defaultViewDims(plan.shape.length || 1);
    state.step = 0;
    renderMeshPanel();
    renderViewDims();
    await renderTensors();
    renderSteps();
    await showStep(0);
    document.getElementById("views").hidden = false;
    planEl.dataset.planId = plan.plan_id || "";
    planEl.dataset.ready = "true";
  }

  function renderMeshPanel() {
    const { info, plan } = state;
    document.getElementById("mesh-caption").textContent = info.names.map((a, k) => a + "=" + info.sizes[k]).join(", ") + " · " + info.count + " devices" +
      (plan.mesh.device_ids ? " · device_ids permuted" : "");
    document.getElementById("mesh-view").replaceChildren(drawMesh(info, "mesh"));
    renderZoom();
  }

  function renderViewDims() {
    const { plan } = state;
    const box = document.getElementById("view-dims");
    box.replaceChildren();
    const rank = plan.shape.length;
    document.getElementById("tensor-caption").textContent = "[" + plan.shape.join(", ") + "], rank " + rank;
    if (rank < 3) return;
    const opts = (sel) => plan.shape.map((n, d) => el("option", { value: d, selected: d === sel ? "selected" : null }, "dim " + d + " (" + n + ")"));
    const rows = el("select", { id: "view-rows" }, opts(state.view.rows));
    const cols = el("select", { id: "view-cols" }, opts(state.view.cols));
    const panels = el("select", { id: "view-panels" }, el("option", { value: -1 }, "none"), opts(state.view.panels));
    const apply = async () => {
      const v = { rows: +rows.value, cols: +cols.value, panels: +panels.value };
      if (v.rows === v.cols || v.panels === v.rows || v.panels === v.cols) return;
      state.view = v;
      await renderTensors();
      await showStep(state.step);
    };
    for (const s of [rows, cols, panels]) s.addEventListener("change", apply);
    box.append(el("span", { class: "hint" }, "Draw rows "), rows, el("span", { class: "hint" }, " columns "), cols,
      el("span", { class: "hint" }, " panels along "), panels, el("span", { class: "hint" }, " (other dims at index 0)"));
  }

  async function renderTensors() {
    const { plan, info } = state;
    for (const role of ["source", "target"]) {
      const sh = plan[role];
      const tiles = await tilesOf(sh);
      document.getElementById(role + "-text").textContent = sh.partition_spec || sh.text;
      document.getElementById(role + "-view").replaceChildren(drawTensor(plan.shape, tiles, state.view, role));
      renderCopy(document.querySelector('.copy[data-for="' + role + '"]'), sh, info);
    }
  }

  function renderSteps() {
    const { plan } = state;
    const list = document.getElementById("step-list");
    list.replaceChildren();
    plan.steps.forEach((s, i) => {
      const li = el("li", { dataset: { step: String(i) } }, (i + 1) + ". " + s.op + (s.mesh_axes && s.mesh_axes.length ? " over " + s.mesh_axes.join(",") : ""));
      li.addEventListener("click", () => { stopPlay(); showStep(i); });
      list.append(li);
    });
    const sum = plan.summary;
    document.getElementById("plan-caption").textContent = sum.strategy + " on " + sum.cost_model;
    document.getElementById("summary").textContent =
      "Total " + fmtUS(sum.time_us) + " against a lower bound of " + fmtUS(sum.time_lower_bound_us || 0) +
      " (time efficiency " + (sum.time_efficiency || 0).toFixed(2) + "); " + fmtBytes(sum.bytes_per_device) + " per device against " +
      fmtBytes(sum.lower_bound_bytes_per_device) + "; peak memory " + fmtBytes(sum.peak_bytes_per_device) + " per device" +
      (sum.full_rematerialization ? "; passes through full replication" : "") + ".";
    document.getElementById("links-note").textContent =
      "Busiest links: the API does not report per-link loads, so no heat overlay is drawn; each step's time already prices its busiest links (" + (plan.steps.map((s) => s.link).filter(Boolean)[0] || "model") + ").";
    const sug = document.getElementById("suggestions");
    sug.replaceChildren();
    if (plan.suggested_constraints && plan.suggested_constraints.length) {
      sug.append(el("h3", {}, "Suggested constraints (each hop passes XLA without its fallback)"));
      for (const c of plan.suggested_constraints) {
        const box = el("div", { class: "copy suggestion" });
        renderCopy(box, c.sharding, state.info);
        box.querySelector("select").value = "with_sharding_constraint";
        box.querySelector("select").dispatchEvent(new Event("change"));
        sug.append(box);
      }
    } else if (plan.suggestion_note) {
      sug.append(el("p", { class: "hint" }, plan.suggestion_note));
    }
    document.getElementById("play").disabled = plan.steps.length < 2;
  }

  async function showStep(i) {
    const { plan, info } = state;
    const steps = plan.steps;
    const planEl = document.getElementById("plan");
    if (steps.length === 0) {
      planEl.dataset.step = "0";
      document.getElementById("step-label").textContent = "Nothing moves: the source already is the target.";
      document.getElementById("step-mesh").replaceChildren(drawMesh(info, "step"));
      planEl.dataset.drawn = "0";
      document.getElementById("step-tensor").replaceChildren();
      document.getElementById("timeline").replaceChildren();
      return;
    }
    i = Math.max(0, Math.min(steps.length - 1, i));
    state.step = i;
    const s = steps[i];
    planEl.dataset.step = String(i);
    delete planEl.dataset.drawn;
    document.querySelectorAll("#step-list li").forEach((li) => {
      if (+li.dataset.step === i) li.setAttribute("aria-current", "step");
      else li.removeAttribute("aria-current");
    });
    const moves = stepMoves(s);
    const groups = stepGroupKeys(s, info);
    document.getElementById("step-label").textContent = "Step " + (i + 1) + " of " + steps.length + ": " + s.op +
      (s.mesh_axes && s.mesh_axes.length ? " over " + s.mesh_axes.join(", ") : "") + " · " + fmtBytes(s.bytes_per_device) + " per device · " + fmtUS(s.time_us) +
      (moves.length ? " · " + count(moves.length, "move") : "") + (groups && groups.size > 1 ? " · " + count(groups.count, "group") + " of " + groups.size : "") +
      (s.lists_omitted ? " · lists left out on this mesh" : "");
    const meshSVG = drawMesh(info, "step", decorateStep(s));
    const parts = [meshSVG];
    if (meshSVG.dataset.mode === "blocks") {
      const m = moveMatrix(s, info, meshView(info));
      if (m) parts.push(m);
    }
    document.getElementById("step-mesh").replaceChildren(...parts);
    document.getElementById("step-caption").textContent = "What moves in this step: " + (meshSVG.dataset.mode === "blocks" ?
      (groups && groups.size > 1 ? "the stripes under each box are the groups its devices belong to, one colour per group" : "") +
      (parts.length > 1 ? (groups && groups.size > 1 ? "; " : "") + "the matrix counts the moves from box to box" : "") :
      (groups && groups.size > 1 ? "each group tinted in its colour" : "") + (moves.length ? (groups && groups.size > 1 ? "; " : "") + "an arrow per point-to-point move" : ""));
    const tiles = await tilesOf(s.after);
    if (state.plan !== plan || state.step !== i) return; // another plan or step was asked for meanwhile
    document.getElementById("step-text").textContent = s.after.partition_spec || s.after.text;
    document.getElementById("step-tensor").replaceChildren(drawTensor(plan.shape, tiles, state.view, "step"));
    renderCopy(document.querySelector('.copy[data-for="step"]'), s.after, info);
    drawTimeline(i);
    planEl.dataset.drawn = String(i);
  }

  function drawTimeline(i) {
    const { plan } = state;
    const total = plan.summary.time_us || 1;
    const bound = plan.summary.time_lower_bound_us || 0;
    const W = 520, H = 40;
    const scale = W / Math.max(total, bound, 1e-9);
    let t = 0;
    const root = sv("svg", { width: W + 10, height: H + 16, viewBox: "0 0 " + (W + 10) + " " + (H + 16), class: "timeline" });
    plan.steps.forEach((s, k) => {
      const x = 4 + t * scale;
      const w = Math.max(1, s.time_us * scale);
      root.append(sv("rect", { x, y: 6, width: w, height: 18, fill: k <= i ? "#2458c6" : "#c5cfe6", stroke: "#fff", dataset: { step: String(k) } },
        sv("title", {}, "step " + (k + 1) + ": " + fmtUS(s.time_us))));
      t += s.time_us;
    });
    const spent = plan.steps.slice(0, i + 1).reduce((a, s) => a + s.time_us, 0);
    root.append(sv("line", { x1: 4 + bound * scale, x2: 4 + bound * scale, y1: 2, y2: 28, stroke: "#2e7d32", "stroke-width": 2 }),
      sv("text", { x: 4, y: 40 }, "after step " + (i + 1) + ": " + fmtUS(spent) + " of " + fmtUS(total) + "; lower bound " + fmtUS(bound) + " (green)"));
    document.getElementById("timeline").replaceChildren(root);
  }

  function stopPlay() {
    if (state.timer) clearInterval(state.timer);
    state.timer = null;
    document.getElementById("play").textContent = "▶ play";
  }

  function togglePlay() {
    if (state.timer) {
      stopPlay();
      return;
    }
    const n = state.plan ? state.plan.steps.length : 0;
    if (n < 2) return;
    document.getElementById("play").textContent = "⏸ pause";
    if (state.step >= n - 1) showStep(0);
    state.timer = setInterval(() => {
      if (state.step >= n - 1) {
        stopPlay();
        return;
      }
      showStep(state.step + 1);
    }, 1200);
  }

  // ---- hover: the tile under the pointer ----

  function hookTips() {
    const tip = document.getElementById("tip");
    document.addEventListener("mouseover", (e) => {
      const t = e.target.closest ? e.target.closest("[data-tip]") : null;
      if (!t) return;
      tip.textContent = t.dataset.tip;
      tip.hidden = false;
      tip.dataset.devices = t.dataset.devices || "";
      // Light up the tile's owners in the mesh drawing.
      const view = state.info ? meshView(state.info) : null;
      for (const id of (t.dataset.devices || "").split(" ").filter(Boolean)) {
        let cell = document.querySelector('#mesh-view g.device[data-device="' + id + '"] rect');
        if (!cell && view && view.mode === "blocks") {
          const i = itemOf(view, state.info.posOf.get(+id));
          if (i >= 0) cell = document.querySelector('#mesh-view g.block[data-block="' + i + '"] rect');
        }
        if (cell) {
          cell.setAttribute("fill", t.dataset.color || "#ffd54f");
          cell.classList.add("lit");
        }
      }
    });
    document.addEventListener("mousemove", (e) => {
      if (!tip.hidden) {
        tip.style.left = Math.min(e.clientX + 14, innerWidth - 300) + "px";
        tip.style.top = (e.clientY + 14) + "px";
      }
    });
    document.addEventListener("mouseout", (e) => {
      if (e.target.closest && e.target.closest("[data-tip]")) {
        tip.hidden = true;
        for (const cell of document.querySelectorAll("#mesh-view rect.lit")) {
          cell.setAttribute("fill", "#fff");
          cell.classList.remove("lit");
        }
      }
    });
  }

  // ---- graphs ----

  async function showGraph(ev) {
    if (ev) ev.preventDefault();
    setStatus("graph-status", "Propagating…");
    const text = document.getElementById("module").value;
    const mesh = field("graph-mesh");
    const strategy = field("graph-strategy");
    const view = document.getElementById("graph-view");
    delete view.dataset.ready;
    try {
      let resp;
      if (/^\s*\{/.test(text)) {
        const req = JSON.parse(text);
        if (Array.isArray(req.targets)) {
          // A transfer request: the transfer pane plans it.
          document.getElementById("transfer-request").value = text;
          setStatus("graph-status", "A transfer request: planned in the transfer pane below.");
          await showTransfer();
          document.getElementById("transfer-input").scrollIntoView({ block: "start" });
          return;
        }
        req.include = [...new Set((req.include || []).concat(["ops"]))];
        if (strategy) req.strategy = strategy;
        resp = await post("/v1/graph", req);
      } else {
        const q = new URLSearchParams({ include: "ops" });
        if (mesh) q.set("mesh", mesh);
        if (strategy) q.set("strategy", strategy);
        resp = await post("/v1/graph?" + q.toString(), text, "application/mlir");
      }
      renderGraph(resp);
      view.dataset.ready = "true";
      view.dataset.strategy = resp.summary.strategy;
      const remat = resp.collectives.filter((c) => c.full_rematerialization).length;
      setStatus("graph-status", count(resp.summary.collectives, "collective") + " at " + count(resp.collectives.length, "site") + ", " + fmtUS(resp.summary.time_us) +
        " (" + resp.summary.strategy + ")" + (remat ? "; " + count(remat, "full rematerialization") : ""));
    } catch (e) {
      view.hidden = true;
      for (const id of ["graph-ops", "graph-tensors"]) document.querySelector("#" + id + " tbody").replaceChildren();
      document.getElementById("graph-collectives").replaceChildren();
      setStatus("graph-status", e.message, true);
    }
  }

  function renderGraph(resp) {
    const info = meshInfo(resp.mesh);
    const body = document.querySelector("#graph-tensors tbody");
    body.replaceChildren();
    for (const id of Object.keys(resp.shardings).sort()) {
      const sh = resp.shardings[id];
      const copy = el("div", { class: "copy" });
      renderCopy(copy, sh, info);
      body.append(el("tr", { dataset: { tensor: id } }, el("td", {}, el("code", {}, id)), el("td", {}, el("code", {}, sh.partition_spec || sh.text)), el("td", {}, copy)));
    }
    const ops = document.querySelector("#graph-ops tbody");
    ops.replaceChildren();
    const short = (sh) => sh.partition_spec || sh.text;
    // An operand is shown with its own sharding (the tensor's), and with the sharding the
    // op computes in after an arrow where the two differ (a reshard runs there).
    const operandCell = (op, k, sh) => {
      const id = (op.operand_tensors || [])[k];
      const own = id !== undefined ? resp.shardings[id] : null;
      const parts = [el("code", { class: "tensor-id" }, id !== undefined ? id : "#" + k), " ", el("code", { class: "own" }, own ? short(own) : short(sh))];
      if (own && own.text !== sh.text) parts.push(" → ", el("code", { class: "consumed", title: "the sharding the op computes in" }, short(sh)));
      return el("div", { class: "operand", dataset: { tensor: id !== undefined ? id : "" } }, parts);
    };
    for (const op of resp.ops || []) {
      const moves = resp.collectives.filter((c) => c.op_name === op.name).map((c) => (c.reduction || c.kind) + " of " + c.tensor + (c.full_rematerialization ? " (full rematerialization)" : ""));
      ops.append(el("tr", { dataset: { op: op.name } }, el("td", {}, el("code", {}, op.name)), el("td", {}, op.kind),
        el("td", {}, (op.operands || []).map((sh, k) => operandCell(op, k, sh))),
        el("td", {}, el("code", {}, (op.results || []).map(short).join("  ·  "))),
        el("td", {}, moves.join(", "))));
    }
    const list = document.getElementById("graph-collectives");
    list.replaceChildren();
    resp.collectives.forEach((c, k) => {
      const steps = c.plan ? c.plan.steps : c.steps || [];
      const li = el("li", { class: c.kind, dataset: { index: String(k) } },
        (c.reduction || c.kind) + " of tensor " + c.tensor + " at op " + c.op_name + ": " + steps.map((s) => s.op).join(", ") +
        (c.full_rematerialization ? " — full rematerialization" : c.xla_fallback ? " — XLA's last resort within device groups" : "") +
        (c.plan ? " (" + fmtUS(c.plan.summary.time_us) + "; click to step through it)" : ""));
      if (c.plan) {
        li.addEventListener("click", () => showGraphReshard(resp, c));
      }
      list.append(li);
    });
    document.getElementById("graph-view").hidden = false;
  }

  async function showGraphReshard(resp, c) {
    // The reshard's plan on the tensor's shape (read back from its local shapes when the
    // answer does not carry it).
    const s0 = c.plan.steps[0];
    const before = s0 ? s0.before : resp.shardings[c.tensor];
    const counts = before.dims.map((d) => d.axes.reduce((n, a) => n * axisSize(resp.mesh, a), 1));
    const shape = c.shape || (s0 ? s0.local_shape_before.map((n, d) => n * counts[d]) : []);
    const plan = { ...c.plan, mesh: resp.mesh, shape, source: before, target: c.plan.steps.length ? c.plan.steps[c.plan.steps.length - 1].after : before };
    await present(plan, meshInfo(resp.mesh));
    document.getElementById("plan").scrollIntoView({ block: "start" });
  }

  function axisSize(mesh, a) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)(?::\((\d+)\)(\d+))?$/.exec(a);
    if (m && m[3]) return +m[3];
    const ax = mesh.axes.find((x) => x.name === a);
    return ax ? ax.size : 1;
  }

  // ---- examples ----

  const examples = [
    {
      id: "seed003-case1", label: "JAX: P('X', None) → P('Y', 'X') on Mesh('X': 2, 'Y': 4), 2048×2048 f32",
      mesh: "Mesh('X': 2, 'Y': 4)", tensor: "tensor<2048x2048xf32>",
      source: '#sdy.sharding<@mesh, [{"X"}, {}]>', target: "NamedSharding(mesh=Mesh('X': 2, 'Y': 4), spec=PartitionSpec('Y', 'X'))", cost_model: "tpu-v5p",
    },
    {
      id: "xla-pairs", label: "XLA's own plan of the same reshard: a slice, then collective_permute pairs",
      mesh: 'sdy.mesh @mesh = <["X"=2, "Y"=4]>', tensor: "f32[2048,2048]",
      source: "sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}, metadata={op_name=\"x\"}", target: "{devices=[4,2]<=[2,4]T(1,0)}",
      cost_model: "tpu-v5p", allowed_ops: "slice, all_gather, all_to_all, collective_permute",
    },
    {
      id: "dtensor", label: "PyTorch: (Shard(dim=0), Replicate()) → (Replicate(), Shard(dim=1)) on a 2×4 DeviceMesh",
      mesh: "DeviceMesh('cuda', [[0, 1, 2, 3], [4, 5, 6, 7]], mesh_dim_names=('dp', 'tp'))", tensor: "f32[64,48]",
      source: "(Shard(dim=0), Replicate())", target: "(Replicate(), Shard(dim=1))", cost_model: "h100",
    },
    {
      id: "three-axes", label: "A 2×2×2 mesh and a rank-3 tensor (panels along dim 0)",
      mesh: "a=2,b=2,c=2", tensor: "bf16[4,16,12]",
      source: "P('a', 'b', 'c')", target: "P(None, ('c', 'a'), 'b')", cost_model: "tpu-v5p",
    },
    {
      id: "gather", label: "All-gather then slice: P(('x', 'y')) → P('y') on x=2,y=4",
      mesh: "x=2,y=4", tensor: "f32[1024]", source: "P(('x', 'y'))", target: "P('y')", cost_model: "tpu-v5p",
    },
  ];

  const graphExample = [
    'sdy.mesh @mesh = <["data"=2, "model"=4]>',
    "func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"data\"}, {}]>},",
    "                %arg1: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {\"model\"}]>},",
    "                %arg2: tensor<32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"model\"}, {}]>})",
    "    -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"model\"}, {\"data\"}]>}) {",
    "  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>",
    "  %1 = stablehlo.dot_general %0, %arg2, contracting_dims = [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>",
    "  return %1 : tensor<8x16xf32>",
    "}",
  ].join("\n");

  function loadExample(id) {
    const ex = examples.find((e) => e.id === id) || examples[0];
    for (const k of ["mesh", "tensor", "source", "target"]) document.getElementById(k).value = ex[k];
    document.getElementById("cost-model").value = ex.cost_model || "tpu-v5p";
    document.getElementById("strategy").value = ex.strategy || "optimal";
    document.getElementById("allowed-ops").value = ex.allowed_ops || "";
  }

  // ---- transfers ----

  // postSVG posts a JSON request and returns the server's drawing as an SVG element.
  async function postSVG(path, body) {
    const resp = await fetch(api(path), {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "image/svg+xml" },
      body: JSON.stringify(body),
    });
    const text = await resp.text();
    if (!resp.ok) {
      let msg = text;
      try {
        const data = JSON.parse(text);
        const errs = (data.errors || []).map((e) => (e.field ? e.field + ": " : "") + e.message);
        msg = errs.length ? errs.join("; ") : data.detail || data.title || text;
      } catch (e) { /* not JSON: the text itself */ }
      throw new Error(resp.status + " " + msg);
    }
    const doc = new DOMParser().parseFromString(text, "image/svg+xml");
    const root = doc.documentElement;
    if (root.nodeName !== "svg") throw new Error("the drawing is not an SVG");
    return document.importNode(root, true);
  }

  // transferMoves calls f(from, to, bytes) for every move of a group, its runs expanded.
  function transferMoves(g, f) {
    for (const m of g.transfers || []) f(m.from, m.to, m.bytes);
    for (const r of g.transfer_runs || []) {
      for (let i = 0; i < r.count; i++) f(r.first.from + i * r.step.from, r.first.to + i * r.step.to, r.first.bytes + i * r.step.bytes);
    }
  }

  // flowMatrix sums the network bytes each target node receives for each replica: every
  // move of every group (times the group's tensors) whose sender and receiver are on
  // different nodes, by the receiver's node and replica (as the server's drawing places
  // them).
  function flowMatrix(resp, svg) {
    const node = new Map(), replica = new Map();
    for (const g of svg.querySelectorAll("g.node[data-node]")) {
      for (const d of g.querySelectorAll("rect.device[data-device]")) {
        const id = +d.dataset.device;
        node.set(id, +g.dataset.node);
        const m = /replica (\d+)/.exec(d.dataset.role || "");
        if (m) replica.set(id, +m[1]);
      }
    }
    const cells = new Map(); // node -> Map(replica or -1 -> bytes)
    const replicas = new Set(replica.values());
    for (const id of replica.keys()) if (!cells.has(node.get(id))) cells.set(node.get(id), new Map());
    let total = 0;
    for (const g of resp.groups) {
      transferMoves(g, (from, to, bytes) => {
        const nf = node.get(from), nt = node.get(to);
        if (nf === undefined || nt === undefined || nf === nt) return;
        const r = replica.has(to) ? replica.get(to) : -1;
        if (!cells.has(nt)) cells.set(nt, new Map());
        const row = cells.get(nt);
        const b = bytes * g.count;
        row.set(r, (row.get(r) || 0) + b);
        total += b;
      });
    }
    const cols = [...replicas].sort((a, b) => a - b);
    if ([...cells.values()].some((row) => row.has(-1))) cols.push(-1);
    return { rows: [...cells.keys()].sort((a, b) => a - b), cols, cells, total };
  }

  function renderTransferSummary(resp) {
    const s = resp.summary;
    const rows = [
      ["strategy", s.strategy + (s.optimality ? " (" + s.optimality + ")" : "")],
      ["time", fmtUS(s.time_us)],
      ["lower bound", fmtUS(s.time_lower_bound_us) + (s.bound && s.bound.binding ? ", bound by " + s.bound.binding : "")],
      ["efficiency", (100 * s.time_efficiency).toFixed(1) + "% of the bound"],
      ["network bytes", fmtBytes(s.network_bytes) + " (" + s.network_bytes + " B)"],
      ["buckets", s.buckets + " of " + fmtBytes(s.bucket_bytes)],
      ["tensors", s.tensors + " in " + count(s.groups, "group") + ", " + fmtBytes(s.tensor_bytes)],
      ["why", s.why],
    ];
    const dl = document.getElementById("transfer-summary");
    dl.replaceChildren(...rows.flatMap(([k, v]) => [el("dt", null, k), el("dd", { dataset: { field: k } }, v)]));
  }

  function renderFlowMatrix(m) {
    const name = (r) => (r < 0 ? "no replica" : "replica " + r);
    const table = document.getElementById("transfer-matrix");
    table.querySelector("thead").replaceChildren(el("tr", null, el("th", null, "node"), m.cols.map((r) => el("th", { class: "bytes", dataset: { replica: r } }, name(r))), el("th", { class: "bytes" }, "node total")));
    table.querySelector("tbody").replaceChildren(...m.rows.map((n) => {
      const row = m.cells.get(n);
      let sum = 0;
      const tds = m.cols.map((r) => {
        const b = row.get(r) || 0;
        sum += b;
        return el("td", { class: "bytes" + (b ? "" : " zero"), title: b + " B", dataset: { replica: r, bytes: b } }, b ? fmtBytes(b) : "0");
      });
      return el("tr", { dataset: { node: n } }, el("th", null, "node " + n), tds, el("td", { class: "bytes" }, fmtBytes(sum)));
    }));
    const colSums = m.cols.map((r) => m.rows.reduce((a, n) => a + (m.cells.get(n).get(r) || 0), 0));
    table.querySelector("tfoot").replaceChildren(el("tr", null, el("th", null, "total"), colSums.map((b) => el("td", { class: "bytes" }, fmtBytes(b))), el("td", { class: "bytes", dataset: { bytes: m.total } }, fmtBytes(m.total))));
  }

  async function showTransfer(ev) {
    if (ev) ev.preventDefault();
    const view = document.getElementById("transfer-view");
    delete view.dataset.ready;
    setStatus("transfer-status", "Planning…");
    try {
      let req;
      try {
        req = JSON.parse(document.getElementById("transfer-request").value);
      } catch (e) {
        throw new Error("the request is not JSON: " + e.message);
      }
      if (!req || typeof req !== "object" || !Array.isArray(req.targets)) throw new Error("a transfer request has targets (a list of placements)");
      // The moves are asked for (include transfers), for the flow table; an answer that
      // would be too large with them is asked for again without.
      const withMoves = Object.assign({}, req, { include: [...new Set((req.include || []).concat(["transfers"]))] });
      let resp, moves = true;
      try {
        resp = await post("/v1/transfer", withMoves);
      } catch (e) {
        if (!/^422 /.test(e.message)) throw e;
        resp = await post("/v1/transfer", req);
        moves = false;
      }
      renderTransferSummary(resp);
      const box = document.getElementById("transfer-svg");
      const note = document.getElementById("transfer-matrix-note");
      let svg = null;
      try {
        svg = await postSVG("/v1/transfer", req);
        box.replaceChildren(svg);
      } catch (e) {
        box.replaceChildren(el("p", { class: "hint" }, "No drawing: " + e.message));
      }
      const table = document.getElementById("transfer-matrix");
      if (svg && moves) {
        const m = flowMatrix(resp, svg);
        renderFlowMatrix(m);
        table.hidden = false;
        note.textContent = "Each cell sums the bytes that cross the network (sender and receiver on different nodes) into a target node's devices for one replica: every move the answer's groups list, times the tensors of its group. NVLink moves inside a node are left out. Total " +
          fmtBytes(m.total) + (m.total === resp.summary.network_bytes ? ", the answer's network bytes." : "; the answer counts " + fmtBytes(resp.summary.network_bytes) + ".");
      } else {
        table.hidden = true;
        note.textContent = moves ? "No flow table: it places the devices as the drawing does." : "No flow table: the answer with every move listed would be too large.";
      }
      view.hidden = false;
      view.dataset.ready = "true";
      setStatus("transfer-status", resp.summary.strategy + ", " + fmtUS(resp.summary.time_us) + ", " + fmtBytes(resp.summary.network_bytes) + " over the network");
    } catch (e) {
      view.hidden = true;
      setStatus("transfer-status", e.message, true);
    }
  }

  // The transfer pane's example: a trainer of 16 H100s to two replicas of 8 on the
  // other two nodes of a 32-GPU fabric.
  const transferExample = JSON.stringify({
    cost_model: "h100", fabric_devices: 32,
    source: { name: "trainer", mesh: "fsdp=2,tp=8", first_device: 0 },
    targets: [{ name: "rollout0", mesh: "tp=8", first_device: 16 }, { name: "rollout1", mesh: "tp=8", first_device: 24 }],
    tensors: [
      { name: "layers.{i}.mlp.up_proj.weight", shape: [14336, 4096], dtype: "bf16", source: [["fsdp", "tp"], null], target: ["tp", null], repeat: 32 },
      { name: "layers.{i}.mlp.down_proj.weight", tensor: "bf16[4096,14336]", source: "P('fsdp', 'tp')", target: { placements: ["Shard(1)"] }, repeat: 32 },
      { name: "norm.weight", shape: [4096], dtype: "bf16", source: ["fsdp"], target: [null] },
    ],
  }, null, 1);

  async function init() {
    const select = document.getElementById("example");
    select.append(...examples.map((e) => el("option", { value: e.id }, e.label)));
    select.addEventListener("change", () => { loadExample(select.value); showPlan(); });
    const cm = document.getElementById("cost-model");
    try {
      const resp = await fetch(api("/v1/cost-models"), { headers: { Accept: "application/json" } });
      const data = await resp.json();
      const names = (data.profiles || data.cost_models || data.models || []).map((p) => (typeof p === "string" ? p : p.name)).filter(Boolean);
      cm.append(...(names.length ? names : ["tpu-v5p", "h100"]).map((n) => el("option", { value: n }, n)));
    } catch (e) {
      cm.append(...["tpu-v5p", "h100"].map((n) => el("option", { value: n }, n)));
    }
    document.getElementById("reshard-form").addEventListener("submit", showPlan);
    document.getElementById("graph-form").addEventListener("submit", showGraph);
    document.getElementById("transfer-form").addEventListener("submit", showTransfer);
    document.getElementById("first").addEventListener("click", () => { stopPlay(); showStep(0); });
    document.getElementById("prev").addEventListener("click", () => { stopPlay(); showStep(state.step - 1); });
    document.getElementById("next").addEventListener("click", () => { stopPlay(); showStep(state.step + 1); });
    document.getElementById("play").addEventListener("click", togglePlay);
    document.getElementById("module").value = graphExample;
    document.getElementById("transfer-request").value = transferExample;
    hookTips();
    const wanted = new URLSearchParams(location.search).get("example");
    select.value = examples.some((e) => e.id === wanted) ? wanted : examples[0].id;
    loadExample(select.value);
    document.body.dataset.ready = "true";
    await showPlan();
  }

  init();
})();
