// shardplan explorer: draws a mesh, a tensor's tiles on it and a reshard plan step by
// step, from this server's /v1/reshard, /v1/tiles and /v1/graph answers. Plain
// JavaScript and SVG; every URL is relative to this server.
(() => {
  "use strict";

  const SVGNS = "http://www.w3.org/2000/svg";
  const CELL = 40; // a device's square in a mesh drawing
  const TENSOR_PX = 300; // the longer side of a tensor drawing
  const MAX_DRAWN_DEVICES = 512;

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

  // ---- the mesh as nested grids ----

  // meshLayout places every device of a mesh with axis sizes `sizes` (major to minor):
  // the minor axis runs left to right, the next one top to bottom, the next left to
  // right again around whole blocks, and so on; every level above the last two is a
  // labelled box. Cells are in row-major position order.
  function meshLayout(sizes, names) {
    const n = sizes.length;
    function level(k) {
      if (k === n) return { w: CELL, h: CELL, cells: [[0, 0]], boxes: [] };
      const inner = level(k + 1);
      const horizontal = (n - 1 - k) % 2 === 0;
      const composite = k < n - 2;
      const pad = composite ? 6 : 0;
      const top = composite ? 14 : 0;
      const bw = inner.w + 2 * pad;
      const bh = inner.h + 2 * pad + top;
      const gap = n - 1 - k < 2 ? 4 : 10 + 4 * (n - 1 - k);
      const out = { w: 0, h: 0, cells: [], boxes: [] };
      for (let i = 0; i < sizes[k]; i++) {
        const ox = horizontal ? i * (bw + gap) : 0;
        const oy = horizontal ? 0 : i * (bh + gap);
        for (const [x, y] of inner.cells) out.cells.push([ox + pad + x, oy + pad + top + y]);
        for (const b of inner.boxes) out.boxes.push({ ...b, x: ox + pad + b.x, y: oy + pad + top + b.y });
        if (composite) out.boxes.push({ x: ox, y: oy, w: bw, h: bh, label: names[k] + "=" + i });
      }
      out.w = horizontal ? sizes[k] * bw + (sizes[k] - 1) * gap : bw;
      out.h = horizontal ? bh : sizes[k] * bh + (sizes[k] - 1) * gap;
      return out;
    }
    const lay = level(0);
    const margin = { left: n >= 2 ? 34 : 4, top: 18 };
    lay.cells = lay.cells.map(([x, y]) => [x + margin.left, y + margin.top]);
    lay.boxes = lay.boxes.map((b) => ({ ...b, x: b.x + margin.left, y: b.y + margin.top }));
    lay.w += margin.left + 6;
    lay.h += margin.top + 6;
    return lay;
  }

  function meshInfo(mesh) {
    const sizes = mesh.axes.map((a) => a.size);
    const names = mesh.axes.map((a) => a.name);
    const count = sizes.reduce((a, b) => a * b, 1);
    const ids = mesh.device_ids && mesh.device_ids.length ? mesh.device_ids : Array.from({ length: count }, (_, i) => i);
    const posOf = new Map(ids.map((id, p) => [id, p]));
    return { sizes, names, count, ids, posOf, name: mesh.name || "mesh", layout: meshLayout(sizes, names) };
  }

  function coordsOf(info, p) {
    const c = new Array(info.sizes.length);
    for (let k = info.sizes.length - 1; k >= 0; k--) {
      c[k] = p % info.sizes[k];
      p = Math.floor(p / info.sizes[k]);
    }
    return c;
  }

  // drawMesh draws every device labelled by its id; decorate(svg, info) adds overlays.
  function drawMesh(info, role, decorate) {
    const lay = info.layout;
    const root = sv("svg", { class: "mesh", width: lay.w, height: lay.h, viewBox: "0 0 " + lay.w + " " + lay.h, dataset: { role, devices: String(info.count) } });
    root.append(sv("defs", {}, sv("marker", { id: role + "-head", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      sv("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#c2185b" }))));
    for (const b of lay.boxes) {
      root.append(sv("rect", { class: "box", x: b.x, y: b.y, width: b.w, height: b.h, rx: 4 }),
        sv("text", { class: "axis-label", x: b.x + 4, y: b.y + 11 }, b.label));
    }
    // Axis names of the last two axes.
    const n = info.sizes.length;
    if (n >= 1) root.append(sv("text", { class: "axis-label", x: lay.cells[0][0], y: 12 }, info.names[n - 1] + " →"));
    if (n >= 2) root.append(sv("text", { class: "axis-label", x: 2, y: lay.cells[0][1] + 14 }, info.names[n - 2] + " ↓"));
    info.ids.forEach((id, p) => {
      const [x, y] = lay.cells[p];
      const coords = coordsOf(info, p);
      root.append(sv("g", { class: "device", dataset: { device: String(id), pos: String(p), coords: coords.join(",") } },
        sv("title", {}, "device " + id + " at (" + info.names.map((a, k) => a + "=" + coords[k]).join(", ") + ")"),
        sv("rect", { x, y, width: CELL, height: CELL, rx: 3, fill: "#fff" }),
        sv("text", { x: x + CELL / 2, y: y + CELL / 2 + 4, "text-anchor": "middle" }, String(id))));
    });
    if (decorate) decorate(root, info);
    return root;
  }

  function cellCenter(info, id) {
    const [x, y] = info.layout.cells[info.posOf.get(id)];
    return [x + CELL / 2, y + CELL / 2];
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

  function drawTensor(shape, tiles, view, role, meshNames) {
    const rank = shape.length;
    const rows = view.rows >= 0 ? shape[view.rows] : 1;
    const cols = shape[view.cols];
    const scale = TENSOR_PX / Math.max(rows, cols);
    const w = Math.max(24, cols * scale);
    const h = Math.max(view.rows >= 0 ? 24 : 28, rows * scale);
    const panelRanges = [];
    const groups = tileGroups(tiles, view);
    if (view.panels >= 0) {
      const seen = new Map();
      for (const g of groups) seen.set(rangesKey([g.ranges[view.panels]]), g.ranges[view.panels]);
      panelRanges.push(...[...seen.values()].sort((a, b) => a[0] - b[0]));
    } else {
      panelRanges.push(null);
    }
    const gap = 14;
    const totalW = panelRanges.length * (w + gap) + 6;
    const root = sv("svg", { class: "tensor", width: totalW, height: h + 30, viewBox: "0 0 " + totalW + " " + (h + 30), dataset: { role, tiles: String(groups.length) } });
    panelRanges.forEach((pr, i) => {
      const ox = 4 + i * (w + gap);
      const oy = 18;
      const label = pr ? "dim " + view.panels + " [" + pr[0] + ", " + pr[1] + ")" :
        (view.rows >= 0 ? "dims " + view.rows + " × " + view.cols : "dim " + view.cols);
      root.append(sv("text", { class: "axis-label", x: ox, y: 12 }, label));
      root.append(sv("rect", { x: ox, y: oy, width: w, height: h, fill: "#eee" }));
      for (const g of groups) {
        if (pr && rangesKey([g.ranges[view.panels]]) !== rangesKey([pr])) continue;
        const rr = view.rows >= 0 ? g.ranges[view.rows] : [0, 1];
        const cr = g.ranges[view.cols];
        if (cr[1] <= cr[0] || rr[1] <= rr[0]) continue; // an empty tail tile
        const owner = g.devices[0];
        const rangeText = g.ranges.map((r, d) => "dim " + d + " [" + r[0] + ", " + r[1] + ")").join(", ");
        const who = g.devices.length === 1 ? "device " + owner : "devices " + g.devices.join(", ");
        root.append(sv("rect", {
          class: "tile", x: ox + cr[0] * (w / cols), y: oy + rr[0] * (h / rows),
          width: Math.max(1, (cr[1] - cr[0]) * (w / cols)), height: Math.max(1, (rr[1] - rr[0]) * (h / rows)),
          fill: deviceColor(owner),
          dataset: { devices: g.devices.join(" "), owner: String(owner), color: deviceColor(owner), ranges: JSON.stringify(g.ranges), tip: who + ": " + rangeText },
        }));
        if ((cr[1] - cr[0]) * (w / cols) > 26 && (rr[1] - rr[0]) * (h / rows) > 14) {
          root.append(sv("text", { x: ox + (cr[0] + cr[1]) / 2 * (w / cols), y: oy + (rr[0] + rr[1]) / 2 * (h / rows) + 4, "text-anchor": "middle" },
            g.devices.length > 2 ? g.devices[0] + "…+" + (g.devices.length - 1) : g.devices.join(",")));
        }
      }
    });
    void rank;
    void meshNames;
    return root;
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
    if (step.transfers && step.transfers.length) for (const t of step.transfers) add(t.from, t.to, t.bytes);
    else if (step.pairs) for (const [f, t] of step.pairs) add(f, t, step.bytes_per_device);
    return [...moves.values()];
  }

  // stepGroups lists the device groups of a collective: devices that differ only on the
  // step's mesh axes (full axes or sub-axes "x:(m)k").
  function stepGroups(step, info) {
    if (!["all_gather", "all_to_all", "reduce_scatter", "all_reduce"].includes(step.op)) return [];
    const parts = (step.mesh_axes || []).map((a) => {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)(?::\((\d+)\)(\d+))?$/.exec(a);
      if (!m) return null;
      const k = info.names.indexOf(m[1]);
      const n = info.sizes[k];
      const pre = m[2] ? +m[2] : 1;
      const size = m[3] ? +m[3] : n;
      return { k, minor: n / (pre * size), size };
    }).filter(Boolean);
    const groups = new Map();
    info.ids.forEach((id, p) => {
      const c = coordsOf(info, p);
      for (const s of parts) {
        const digit = Math.floor(c[s.k] / s.minor) % s.size;
        c[s.k] -= digit * s.minor;
      }
      const key = c.join(",");
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(id);
    });
    return [...groups.values()].filter((g) => g.length > 1);
  }

  function decorateStep(step) {
    return (root, info) => {
      const head = "url(#" + root.dataset.role + "-head)";
      stepGroups(step, info).forEach((g, k) => {
        const color = groupColor(k);
        for (const id of g) {
          const [x, y] = info.layout.cells[info.posOf.get(id)];
          root.append(sv("rect", { class: "group-outline", x: x - 2, y: y - 2, width: CELL + 4, height: CELL + 4, rx: 5, stroke: color, dataset: { group: String(k), device: String(id) } }));
        }
        const pts = g.map((id) => cellCenter(info, id));
        if (pts.length > 1) {
          root.append(sv("polyline", { class: "group-link", stroke: color, points: pts.concat([pts[0]]).map((p) => p.join(",")).join(" ") }));
        }
      });
      for (const [from, to, bytes] of stepMoves(step)) {
        if (!info.posOf.has(from) || !info.posOf.has(to)) continue;
        const [x1, y1] = cellCenter(info, from);
        const [x2, y2] = cellCenter(info, to);
        const dx = x2 - x1, dy = y2 - y1;
        const len = Math.hypot(dx, dy) || 1;
        // Shorten to the cell edges and bend a little so that opposite moves do not overlap.
        const sx = x1 + dx / len * 12, sy = y1 + dy / len * 12, ex = x2 - dx / len * 14, ey = y2 - dy / len * 14;
        const mx = (sx + ex) / 2 - dy / len * 10, my = (sy + ey) / 2 + dx / len * 10;
        root.append(sv("path", { class: "arrow", d: "M " + sx + " " + sy + " Q " + mx + " " + my + " " + ex + " " + ey, "marker-end": head, dataset: { from: String(from), to: String(to), bytes: String(bytes) } },
          sv("title", {}, from + " → " + to + ": " + fmtBytes(bytes))));
      }
    };
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
      state.tiles.set(key, post("/v1/tiles", { mesh: state.plan.mesh, shape: state.plan.shape, element_bytes: 1, sharding: sh.text }).then((r) => r.devices));
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
    const body = { mesh: field("mesh"), source: field("source"), target: field("target"), include: ["pairs"] };
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

  async function showPlan(ev) {
    if (ev) ev.preventDefault();
    stopPlay();
    setStatus("status", "Planning…");
    document.getElementById("show").disabled = true;
    try {
      const plan = await post("/v1/reshard", reshardRequest());
      const info = meshInfo(plan.mesh);
      if (info.count > MAX_DRAWN_DEVICES) throw new Error("the mesh has " + info.count + " devices; this page draws up to " + MAX_DRAWN_DEVICES);
      await present(plan, info);
      setStatus("status", plan.steps.length + " step" + (plan.steps.length === 1 ? "" : "s") + ", " + fmtUS(plan.summary.time_us) + " (plan " + plan.plan_id.slice(0, 12) + "…)");
    } catch (e) {
      setStatus("status", e.message, true);
    } finally {
      document.getElementById("show").disabled = false;
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
      document.getElementById(role + "-view").replaceChildren(drawTensor(plan.shape, tiles, state.view, role, info.names));
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
    const groups = stepGroups(s, info);
    document.getElementById("step-label").textContent = "Step " + (i + 1) + " of " + steps.length + ": " + s.op +
      (s.mesh_axes && s.mesh_axes.length ? " over " + s.mesh_axes.join(", ") : "") + " · " + fmtBytes(s.bytes_per_device) + " per device · " + fmtUS(s.time_us) +
      (moves.length ? " · " + moves.length + " moves" : "") + (groups.length ? " · " + groups.length + " groups of " + groups[0].length : "") +
      (s.lists_omitted ? " · lists left out on this mesh" : "");
    document.getElementById("step-mesh").replaceChildren(drawMesh(info, "step", decorateStep(s)));
    const tiles = await tilesOf(s.after);
    if (state.step !== i) return; // another step was asked for meanwhile
    document.getElementById("step-text").textContent = s.after.partition_spec || s.after.text;
    document.getElementById("step-tensor").replaceChildren(drawTensor(plan.shape, tiles, state.view, "step", info.names));
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
      for (const id of (t.dataset.devices || "").split(" ").filter(Boolean)) {
        const cell = document.querySelector('#mesh-view g.device[data-device="' + id + '"] rect');
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
    try {
      let resp;
      if (/^\s*\{/.test(text)) {
        const req = JSON.parse(text);
        req.include = [...new Set((req.include || []).concat(["ops"]))];
        resp = await post("/v1/graph", req);
      } else {
        const q = new URLSearchParams({ include: "ops" });
        if (mesh) q.set("mesh", mesh);
        resp = await post("/v1/graph?" + q.toString(), text, "application/mlir");
      }
      renderGraph(resp);
      document.getElementById("graph-view").dataset.ready = "true";
      setStatus("graph-status", resp.collectives.length + " collectives, " + fmtUS(resp.summary.time_us));
    } catch (e) {
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
    for (const op of resp.ops || []) {
      const moves = resp.collectives.filter((c) => c.op_name === op.name).map((c) => c.kind + " of " + c.tensor);
      ops.append(el("tr", { dataset: { op: op.name } }, el("td", {}, el("code", {}, op.name)), el("td", {}, op.kind),
        el("td", {}, el("code", {}, (op.operands || []).map(short).join("  ·  "))),
        el("td", {}, el("code", {}, (op.results || []).map(short).join("  ·  "))),
        el("td", {}, moves.join(", "))));
    }
    const list = document.getElementById("graph-collectives");
    list.replaceChildren();
    resp.collectives.forEach((c, k) => {
      const steps = c.plan ? c.plan.steps : c.steps || [];
      const li = el("li", { class: c.kind, dataset: { index: String(k) } },
        c.kind + " of " + c.tensor + " at op " + c.op_name + ": " + steps.map((s) => s.op).join(", ") +
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
    document.getElementById("first").addEventListener("click", () => { stopPlay(); showStep(0); });
    document.getElementById("prev").addEventListener("click", () => { stopPlay(); showStep(state.step - 1); });
    document.getElementById("next").addEventListener("click", () => { stopPlay(); showStep(state.step + 1); });
    document.getElementById("play").addEventListener("click", togglePlay);
    document.getElementById("module").value = graphExample;
    hookTips();
    const wanted = new URLSearchParams(location.search).get("example");
    select.value = examples.some((e) => e.id === wanted) ? wanted : examples[0].id;
    loadExample(select.value);
    document.body.dataset.ready = "true";
    await showPlan();
  }

  init();
})();
