// shardplan API explorer: reads openapi2.json (Swagger 2.0, as swag writes it) from this
// server, lists its operations by tag and sends requests to them with fetch. No
// dependencies, nothing loaded from another origin, no inline script (the page is served
// with a strict Content-Security-Policy).
"use strict";

(function () {
  // Request bodies that do something useful, for the operations where the schema's own
  // example values would not make a valid request on their own.
  const presetBodies = {
    "post /v1/tiles": {
      mesh: "x=2,y=4",
      shape: [16, 23],
      dtype: "f32",
      sharding: ["x", "y"],
      locate: [[13, 17]],
    },
    "post /v1/reshard": {
      mesh: "x=2,y=4",
      shape: [16, 16],
      dtype: "f32",
      source: ["x", null],
      target: ["y", "x"],
      cost_model: "tpu-v5p",
      strategy: "optimal",
      include: ["diagram"],
    },
    "post /v1/graph": {
      mesh: { name: "mesh", axes: [{ name: "data", size: 2 }, { name: "model", size: 4 }] },
      tensors: {
        x: { shape: [8, 16], dtype: "bf16", sharding: ["data", null] },
        w: { shape: [16, 32], dtype: "bf16", sharding: ["model", null] },
        y: { shape: [8, 32], dtype: "bf16" },
      },
      ops: [
        {
          name: "mm", op: "dot_general", operands: ["x", "w"], results: ["y"],
          attrs: { lhs_contracting_dimensions: [1], rhs_contracting_dimensions: [0] },
        },
      ],
      cost_model: "tpu-v5p",
      policy: { forbid_full_rematerialization: true },
    },
  };

  // Response headers worth showing, in this order.
  const shownHeaders = ["content-type", "x-cache", "x-request-id", "retry-after", "allow", "location", "content-length"];

  const methods = ["get", "put", "post", "delete", "patch", "head", "options"];

  // el builds an element: el("a", {href: "#x", class: "y"}, "text", child, ...).
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "dataset") Object.assign(node.dataset, v);
      else if (k === "hidden") node.hidden = true;
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  // richText renders text with `backtick` spans as <code>; everything else stays text.
  function richText(tag, cls, text) {
    const node = el(tag, { class: cls });
    String(text || "").split(/(`[^`]+`)/).forEach((part) => {
      if (part.length > 2 && part.startsWith("`") && part.endsWith("`")) node.append(el("code", {}, part.slice(1, -1)));
      else if (part) node.append(document.createTextNode(part));
    });
    return node;
  }

  function opKey(method, path) {
    return method.toLowerCase() + " " + path;
  }

  function opID(method, path) {
    return "op-" + (method + path).toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/-+$/, "");
  }

  // Schema helpers ----------------------------------------------------------------------

  function refName(ref) {
    return ref.replace(/^#\/definitions\//, "");
  }

  // resolve follows $ref and folds allOf, so callers see one plain schema.
  function resolve(spec, schema, seen) {
    seen = seen || new Set();
    if (!schema) return {};
    if (schema.$ref) {
      const name = refName(schema.$ref);
      if (seen.has(name)) return { type: "object", description: "(recursive " + name + ")" };
      const next = new Set(seen).add(name);
      const target = (spec.definitions || {})[name] || {};
      return Object.assign({ title: name }, resolve(spec, target, next));
    }
    if (schema.allOf) {
      const merged = Object.assign({}, schema);
      delete merged.allOf;
      for (const part of schema.allOf) {
        const r = resolve(spec, part, seen);
        merged.properties = Object.assign({}, r.properties, merged.properties);
        merged.required = (r.required || []).concat(merged.required || []);
        for (const k of ["type", "title", "items", "enum", "example", "description"]) {
          if (merged[k] === undefined && r[k] !== undefined) merged[k] = r[k];
        }
      }
      return merged;
    }
    return schema;
  }

  function typeLabel(spec, schema) {
    if (schema.$ref) return refName(schema.$ref);
    const s = resolve(spec, schema);
    if (s.type === "array") return (s.items ? typeLabel(spec, s.items) : "any") + "[]";
    let t = s.type || (s.properties ? "object" : "any");
    if (s.format) t += " (" + s.format + ")";
    if (s.title && t === "object") t = s.title;
    return t;
  }

  function constraints(s) {
    const out = [];
    if (s.minimum !== undefined) out.push(">= " + s.minimum);
    if (s.maximum !== undefined) out.push("<= " + s.maximum);
    if (s.minItems !== undefined) out.push("min items " + s.minItems);
    if (s.maxItems !== undefined) out.push("max items " + s.maxItems);
    if (s.minLength !== undefined) out.push("min length " + s.minLength);
    if (s.maxLength !== undefined) out.push("max length " + s.maxLength);
    return out.join(", ");
  }

  // schemaTree renders the properties of schema as a nested list, depth-limited.
  function schemaTree(spec, schema, depth, seen) {
    seen = seen || new Set();
    let s = schema;
    if (schema.$ref) {
      const name = refName(schema.$ref);
      if (seen.has(name)) return el("p", { class: "hint" }, "(" + name + ", see above)");
      seen = new Set(seen).add(name);
    }
    s = resolve(spec, s);
    if (s.type === "array" && s.items) return schemaTree(spec, s.items, depth, seen);
    const props = s.properties || {};
    const names = Object.keys(props);
    if (names.length === 0) return null;
    const required = new Set(s.required || []);
    names.sort((a, b) => (required.has(b) - required.has(a)) || a.localeCompare(b));
    const list = el("ul", { class: "schema" });
    for (const name of names) {
      const p = props[name];
      const r = resolve(spec, p);
      const item = el("li", {},
        el("span", { class: "prop-name" }, name), " ",
        el("span", { class: "prop-type" }, typeLabel(spec, p)),
        required.has(name) ? el("span", { class: "required" }, " required") : null,
        r.enum ? el("span", { class: "prop-enum" }, " one of: " + r.enum.join(", ")) : null,
        constraints(r) ? el("span", { class: "prop-enum" }, " (" + constraints(r) + ")") : null,
        r.example !== undefined ? el("span", { class: "prop-enum" }, " e.g. " + JSON.stringify(r.example)) : null,
        (p.description || r.description) ? richText("div", "prop-desc", p.description || r.description) : null);
      if (depth > 0) {
        const child = schemaTree(spec, p, depth - 1, seen);
        if (child) item.append(child);
      }
      list.append(item);
    }
    return list;
  }

  // exampleFor builds an example value: the schema's example when it has one, else the
  // required properties (and those with examples) filled from their own examples.
  function exampleFor(spec, schema, depth, seen) {
    seen = seen || new Set();
    if (depth < 0 || !schema) return undefined;
    if (schema.$ref) {
      const name = refName(schema.$ref);
      if (seen.has(name)) return undefined;
      seen = new Set(seen).add(name);
    }
    const s = resolve(spec, schema);
    if (s.example !== undefined) return s.example;
    if (s.default !== undefined) return s.default;
    if (s.enum && s.enum.length) return s.enum[0];
    switch (s.type) {
      case "string": return s.format === "date-time" ? new Date(0).toISOString() : "string";
      case "integer": return s.minimum !== undefined ? s.minimum : 0;
      case "number": return s.minimum !== undefined ? s.minimum : 0;
      case "boolean": return false;
      case "array": {
        const item = exampleFor(spec, s.items, depth - 1, seen);
        return item === undefined ? [] : [item];
      }
    }
    if (s.properties) {
      const out = {};
      const required = new Set(s.required || []);
      for (const [name, p] of Object.entries(s.properties)) {
        const r = resolve(spec, p);
        if (!required.has(name) && r.example === undefined) continue;
        const v = exampleFor(spec, p, depth - 1, seen);
        if (v !== undefined) out[name] = v;
      }
      return out;
    }
    return s.type === "object" ? {} : undefined;
  }

  // Rendering ---------------------------------------------------------------------------

  function collectOps(spec) {
    const ops = [];
    for (const [path, item] of Object.entries(spec.paths || {})) {
      for (const method of methods) {
        const op = item[method];
        if (!op) continue;
        const params = (item.parameters || []).concat(op.parameters || []);
        ops.push({ method, path, op, params, key: opKey(method, path), id: opID(method, path), tag: (op.tags && op.tags[0]) || "other" });
      }
    }
    return ops;
  }

  // groupByTag orders tags as the spec lists them, else API (/v1) tags before the rest, in
  // order of first appearance.
  function groupByTag(spec, ops) {
    const groups = new Map();
    for (const o of ops) {
      if (!groups.has(o.tag)) groups.set(o.tag, []);
      groups.get(o.tag).push(o);
    }
    const declared = (spec.tags || []).map((t) => t.name);
    const rank = (tag) => {
      const i = declared.indexOf(tag);
      if (i >= 0) return i;
      const api = groups.get(tag).some((o) => o.path.startsWith("/v1/"));
      return declared.length + (api ? 0 : 1000);
    };
    const order = [...groups.keys()];
    order.sort((a, b) => rank(a) - rank(b) || order.indexOf(a) - order.indexOf(b));
    return order.map((tag) => ({ tag, ops: groups.get(tag), info: (spec.tags || []).find((t) => t.name === tag) }));
  }

  function renderNav(groups) {
    const list = document.getElementById("endpoint-list");
    list.replaceChildren();
    for (const g of groups) {
      const ul = el("ul", {});
      for (const o of g.ops) {
        const link = el("a", { href: "#" + o.id, dataset: { opLink: o.key } },
          el("span", { class: "method " + o.method }, o.method.toUpperCase()), " ",
          el("code", {}, o.path),
          o.op.summary ? el("span", { class: "summary" }, o.op.summary) : null);
        // The hash may not change (same link twice), so open the operation here too.
        link.addEventListener("click", () => { o.node.open = true; });
        ul.append(el("li", { dataset: { search: [o.method, o.path, o.tag, o.op.summary || ""].join(" ").toLowerCase() } }, link));
      }
      list.append(el("section", { class: "tag-group", dataset: { tag: g.tag }, "aria-label": g.tag + " endpoints" },
        el("h2", {}, g.tag), ul));
    }
    list.dataset.state = "ready";
  }

  function acceptChoices(o) {
    const produces = o.op.produces || o.spec.produces || ["application/json"];
    return produces.filter((t) => t !== "application/problem+json");
  }

  function renderParams(o, ui) {
    const visible = o.params.filter((p) => p.in !== "body");
    if (visible.length === 0) return null;
    const body = el("tbody", {});
    for (const p of visible) {
      const inputID = o.id + "-param-" + p.name;
      const input = el("input", {
        id: inputID, name: p.name, type: "text", class: "param",
        dataset: { in: p.in, name: p.name },
        value: p.example !== undefined ? p.example : (p.default !== undefined ? p.default : ""),
        placeholder: p.type || "",
        required: !!p.required,
      });
      ui.params.push({ p, input });
      body.append(el("tr", {},
        el("td", {}, el("label", { for: inputID }, el("code", {}, p.name)), p.required ? el("span", { class: "required" }, " required") : null),
        el("td", {}, p.in),
        el("td", {}, el("span", { class: "prop-type" }, p.type || (p.schema ? typeLabel(o.spec, p.schema) : ""))),
        el("td", {}, p.description ? richText("div", "prop-desc", p.description) : null, input)));
    }
    return el("div", { class: "params" }, el("h3", {}, "Parameters"),
      el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "Name"), el("th", {}, "In"), el("th", {}, "Type"), el("th", {}, "Value"))), body));
  }

  function renderBody(o, ui) {
    const bodyParam = o.params.find((p) => p.in === "body");
    if (!bodyParam) return null;
    const schema = bodyParam.schema || {};
    const example = presetBodies[o.key] !== undefined ? presetBodies[o.key] : exampleFor(o.spec, schema, 6);
    ui.example = formatJSON(example === undefined ? {} : example, 60);
    const inputID = o.id + "-body";
    ui.body = el("textarea", { id: inputID, class: "body-input", spellcheck: "false", rows: Math.min(18, ui.example.split("\n").length + 1) });
    ui.body.value = ui.example;
    const tree = schemaTree(o.spec, schema, 3);
    const consumes = o.op.consumes || o.spec.consumes || ["application/json"];
    // Several body media types (application/json, application/mlir): a choice, and the
    // body is sent as the chosen type (JSON checked and compacted, anything else as typed).
    ui.contentType = consumes.length > 1
      ? el("select", { id: inputID + "-type", class: "content-type" }, consumes.map((c) => el("option", { value: c }, c)))
      : null;
    if (ui.contentType) {
      ui.contentType.addEventListener("change", () => {
        const raw = ui.contentType.value !== "application/json";
        const untouched = ui.body.value === ui.example || ui.body.value === (rawExamples[ui.contentType.value] || "") ||
          Object.values(rawExamples).includes(ui.body.value);
        if (untouched) ui.body.value = raw ? (rawExamples[ui.contentType.value] || "") : ui.example;
      });
    }
    return el("div", { class: "editor" },
      el("h3", {}, "Request body"),
      bodyParam.description ? richText("p", "hint", bodyParam.description) : null,
      tree ? el("details", { class: "schema-view" }, el("summary", {}, "Schema: " + typeLabel(o.spec, schema)), tree) : null,
      ui.contentType
        ? el("label", { for: inputID + "-type" }, "Content-Type ", ui.contentType)
        : null,
      el("label", { for: inputID }, "Body (" + (ui.contentType ? "as the Content-Type chosen" : consumes.join(", ")) + ")"),
      ui.body);
  }

  // Bodies in the other media types an endpoint consumes.
  const rawExamples = {
    "application/mlir": [
      'sdy.mesh @mesh = <["data"=2, "model"=4]>',
      "func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"data\"}, {}]>},",
      "                %arg1: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {\"model\"}]>}) -> tensor<8x32xf32> {",
      "  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>",
      "  return %0 : tensor<8x32xf32>",
      "}",
      "",
    ].join("\n"),
  };

  function renderResponses(o) {
    const rows = Object.entries(o.op.responses || {}).map(([code, r]) =>
      el("tr", {}, el("td", {}, el("code", {}, code)), el("td", {}, r.description || ""),
        el("td", {}, r.schema ? el("span", { class: "prop-type" }, typeLabel(o.spec, r.schema)) : "")));
    if (rows.length === 0) return null;
    return el("div", { class: "responses" }, el("h3", {}, "Responses"),
      el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "Status"), el("th", {}, "Description"), el("th", {}, "Schema"))), el("tbody", {}, rows)));
  }

  function renderOp(o) {
    const ui = { params: [], body: null, example: "" };
    const choices = acceptChoices(o);
    const acceptID = o.id + "-accept";
    ui.accept = choices.length > 1
      ? el("select", { id: acceptID, class: "accept" }, choices.map((c) => el("option", { value: c }, c)))
      : null;
    ui.tryButton = el("button", { type: "button", class: "try", "aria-describedby": o.id + "-status" }, "Try it");
    ui.status = el("span", { class: "status", id: o.id + "-status" });
    ui.elapsed = el("span", { class: "elapsed" });
    ui.headers = el("dl", { class: "headers" });
    ui.responseBody = el("pre", { class: "body", tabindex: "0", "aria-label": "Response body" });
    ui.curl = el("pre", { class: "curl" });
    ui.response = el("section", { class: "response", "aria-live": "polite", "aria-label": "Response", hidden: true },
      el("h3", {}, "Response"),
      el("div", { class: "status-line" }, ui.status, ui.elapsed),
      ui.headers, ui.responseBody,
      el("details", { class: "curl-view" }, el("summary", {}, "As curl"), ui.curl));

    const params = renderParams(o, ui);
    const body = renderBody(o, ui);
    const controls = el("div", { class: "controls" },
      ui.accept ? el("div", { class: "field" }, el("label", { for: acceptID }, "Accept"), ui.accept) : null,
      ui.tryButton,
      ui.body ? el("button", { type: "button", class: "reset" }, "Reset body") : null);

    const details = el("details", { class: "op", id: o.id, dataset: { op: o.key, tag: o.tag } },
      el("summary", {},
        el("span", { class: "method " + o.method }, o.method.toUpperCase()), " ",
        el("code", {}, o.path), " ",
        o.op.summary ? el("span", { class: "summary" }, o.op.summary) : null),
      el("div", { class: "op-body" },
        o.op.description ? richText("p", "op-description", o.op.description) : null,
        params, body, renderResponses(o), controls, ui.response));

    ui.tryButton.addEventListener("click", () => send(o, ui));
    const resetButton = controls.querySelector(".reset");
    if (resetButton) resetButton.addEventListener("click", () => { ui.body.value = ui.example; });
    o.ui = ui;
    o.node = details;
    return details;
  }

  // Sending -----------------------------------------------------------------------------

  // apiURL resolves an API path against the directory this page is served from, so the
  // explorer also works behind a reverse proxy that adds a path prefix.
  function apiURL(spec, path) {
    const base = (spec.basePath || "/").replace(/^\/+|\/+$/g, "");
    const rel = (base ? base + "/" : "") + path.replace(/^\/+/, "");
    return new URL(rel, new URL(".", document.baseURI));
  }

  function setStatus(ui, text, cls, code) {
    ui.status.textContent = text;
    ui.status.className = "status " + cls;
    if (code === undefined) delete ui.status.dataset.code;
    else ui.status.dataset.code = String(code);
  }

  function shellQuote(s) {
    return "'" + String(s).replace(/'/g, "'\\''") + "'";
  }

  async function send(o, ui) {
    ui.response.hidden = false;
    ui.headers.replaceChildren();
    ui.responseBody.textContent = "";
    ui.elapsed.textContent = "";
    o.node.dataset.state = "sending";

    let path = o.path;
    const query = new URLSearchParams();
    for (const { p, input } of ui.params) {
      const v = input.value.trim();
      if (p.required && v === "") {
        setStatus(ui, "Fill in " + p.name + " first", "bad");
        o.node.dataset.state = "invalid";
        input.focus();
        return;
      }
      if (p.in === "path") path = path.replace("{" + p.name + "}", encodeURIComponent(v));
      else if (p.in === "query" && v !== "") query.append(p.name, v);
    }
    const url = apiURL(o.spec, path);
    url.search = query.toString();

    const headers = {};
    const accept = ui.accept ? ui.accept.value : acceptChoices(o).concat(["application/problem+json"]).join(", ");
    headers["Accept"] = accept;
    let body;
    const contentType = ui.contentType ? ui.contentType.value : "application/json";
    if (ui.body && contentType !== "application/json") {
      body = ui.body.value;
      headers["Content-Type"] = contentType;
    } else if (ui.body) {
      try {
        body = JSON.stringify(JSON.parse(ui.body.value));
      } catch (e) {
        setStatus(ui, "The body is not valid JSON: " + e.message, "bad");
        o.node.dataset.state = "invalid";
        ui.body.focus();
        return;
      }
      headers["Content-Type"] = "application/json";
    }

    const curl = ["curl -sS -i -X " + o.method.toUpperCase() + " " + shellQuote(url.href)];
    for (const [k, v] of Object.entries(headers)) curl.push("-H " + shellQuote(k + ": " + v));
    if (body !== undefined) curl.push("--data " + shellQuote(body));
    ui.curl.textContent = curl.join(" \\\n  ");

    setStatus(ui, "Sending…", "");
    ui.tryButton.disabled = true;
    const started = performance.now();
    try {
      const resp = await fetch(url, { method: o.method.toUpperCase(), headers, body, cache: "no-store", credentials: "same-origin" });
      const text = await resp.text();
      ui.elapsed.textContent = Math.round(performance.now() - started) + " ms";
      const cls = resp.ok ? "ok" : resp.status < 400 ? "redirect" : "bad";
      setStatus(ui, resp.status + " " + (resp.statusText || ""), cls, resp.status);
      for (const name of shownHeaders) {
        const v = resp.headers.get(name);
        if (v !== null) ui.headers.append(el("dt", {}, displayHeader(name)), el("dd", { dataset: { header: name } }, v));
      }
      ui.responseBody.textContent = pretty(text, resp.headers.get("content-type") || "");
      if (resp.ok && o.key === "post /v1/reshard") rememberPlan(o, text);
      o.node.dataset.state = "done";
    } catch (e) {
      setStatus(ui, "Request failed: " + e.message, "bad", 0);
      o.node.dataset.state = "failed";
    } finally {
      ui.tryButton.disabled = false;
    }
  }

  function displayHeader(name) {
    return name.split("-").map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join("-").replace(/-Id$/, "-ID");
  }

  function pretty(text, contentType) {
    if (!/json/i.test(contentType)) return text;
    try {
      return formatJSON(JSON.parse(text), 100);
    } catch (e) {
      return text;
    }
  }

  // compactJSON is JSON on one line with a space after commas and colons.
  function compactJSON(v) {
    if (Array.isArray(v)) return "[" + v.map(compactJSON).join(", ") + "]";
    if (v !== null && typeof v === "object") {
      return "{" + Object.keys(v).map((k) => JSON.stringify(k) + ": " + compactJSON(v[k])).join(", ") + "}";
    }
    const s = JSON.stringify(v);
    return s === undefined ? "null" : s;
  }

  // formatJSON indents objects and arrays by two spaces but keeps a value on one line when
  // its compact form fits before column width, so shapes like [16, 23] stay readable.
  // column is where the value starts on its first line.
  function formatJSON(value, width, indent, column) {
    indent = indent || "";
    column = column === undefined ? indent.length : column;
    const compact = compactJSON(value);
    if (value === null || typeof value !== "object" || column + compact.length <= width) return compact;
    const inner = indent + "  ";
    if (Array.isArray(value)) {
      if (value.length === 0) return "[]";
      return "[\n" + value.map((v) => inner + formatJSON(v, width, inner)).join(",\n") + "\n" + indent + "]";
    }
    const keys = Object.keys(value);
    if (keys.length === 0) return "{}";
    const lines = keys.map((k) => {
      const key = JSON.stringify(k) + ": ";
      return inner + key + formatJSON(value[k], width, inner, inner.length + key.length);
    });
    return "{\n" + lines.join(",\n") + "\n" + indent + "}";
  }

  // rememberPlan prefills GET /v1/plans/{plan_id} with the plan a reshard just made.
  function rememberPlan(o, text) {
    let id;
    try {
      id = JSON.parse(text).plan_id;
    } catch (e) {
      return;
    }
    if (!id) return;
    const target = o.all.find((x) => x.path === "/v1/plans/{plan_id}" && x.method === "get");
    const param = target && target.ui.params.find((x) => x.p.name === "plan_id");
    if (param) param.input.value = id;
  }

  // Navigation and filtering ------------------------------------------------------------

  function openFromHash(ops) {
    const id = decodeURIComponent(location.hash.slice(1));
    const o = ops.find((x) => x.id === id);
    if (!o) return;
    o.node.open = true;
    for (const a of document.querySelectorAll("#endpoint-list a")) a.classList.toggle("current", a.getAttribute("href") === "#" + id);
    o.node.scrollIntoView({ block: "start" });
  }

  function applyFilter(ops, text) {
    const words = text.toLowerCase().split(/\s+/).filter(Boolean);
    const match = (s) => words.every((w) => s.includes(w));
    for (const li of document.querySelectorAll("#endpoint-list li")) li.hidden = !match(li.dataset.search);
    for (const section of document.querySelectorAll("#endpoint-list .tag-group")) {
      section.hidden = !section.querySelector("li:not([hidden])");
    }
    for (const o of ops) {
      o.node.hidden = !match([o.method, o.path, o.tag, o.op.summary || "", o.op.description || ""].join(" ").toLowerCase());
    }
    for (const h of document.querySelectorAll("#operations .op-tag")) {
      h.hidden = !ops.some((o) => o.tag === h.dataset.tag && !o.node.hidden);
    }
  }

  // Start -------------------------------------------------------------------------------

  async function main() {
    const list = document.getElementById("endpoint-list");
    let spec;
    try {
      const resp = await fetch(new URL("openapi2.json", document.baseURI), { headers: { Accept: "application/json" } });
      if (!resp.ok) throw new Error("GET openapi2.json answered " + resp.status);
      spec = await resp.json();
    } catch (e) {
      const msg = document.getElementById("load-error");
      msg.textContent = "Could not load the OpenAPI spec: " + e.message;
      msg.hidden = false;
      list.dataset.state = "error";
      list.replaceChildren(el("p", { class: "error" }, "No spec."));
      return;
    }

    const info = spec.info || {};
    if (info.title) {
      document.getElementById("title").textContent = info.title;
      document.title = info.title + " explorer";
    }
    document.getElementById("version").textContent = info.version ? "v" + info.version : "";
    document.getElementById("description").replaceChildren(richText("span", "", info.description || ""));

    const ops = collectOps(spec);
    const groups = groupByTag(spec, ops);
    const main = document.getElementById("operations");
    for (const o of ops) {
      o.spec = spec;
      o.all = ops;
    }
    for (const g of groups) {
      main.append(el("h2", { class: "op-tag", dataset: { tag: g.tag } }, g.tag));
      if (g.info && g.info.description) main.append(richText("p", "hint", g.info.description));
      for (const o of g.ops) main.append(renderOp(o));
    }
    renderNav(groups);

    document.getElementById("filter").addEventListener("input", (e) => applyFilter(ops, e.target.value));
    window.addEventListener("hashchange", () => openFromHash(ops));
    openFromHash(ops);
    document.body.dataset.ready = "true";
  }

  document.addEventListener("DOMContentLoaded", main);
})();
