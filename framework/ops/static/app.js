// logwheel ui: draws /api/pipeline (framework/ops/dashboard.py) and asks again every refresh_ms.
// No build step, no library: the graph is placed by the server, drawn here as SVG.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
let refreshMs = 3000;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(c ?? ""));
  return node;
}

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function utc(ms) {
  return ms == null ? "–" : new Date(ms).toISOString().replace("T", " ").slice(0, 19);
}

function duration(ms) {
  if (ms == null) return "–";
  const s = Math.round(ms / 1000);
  if (Math.abs(s) < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  return h < 48 ? `${h}h ${m % 60}m` : `${Math.floor(h / 24)}d ${h % 24}h`;
}

function num(v) { return v == null ? "–" : String(v); }

// -- the graph ---------------------------------------------------------------------------

function shape(node) {
  const { x, y, w, h } = node;
  if (node.kind === "source" || node.kind === "stream") {
    const g = svg("g");
    const attrs = { cx: x + w / 2, cy: y + h / 2, rx: w / 2, ry: h / 2, class: "shape" };
    g.append(svg("ellipse", attrs));
    if (node.kind === "source") {
      g.append(svg("ellipse", { ...attrs, rx: w / 2 - 3, ry: h / 2 - 3, fill: "none" }));
    }
    return g;
  }
  if (node.kind === "table") {
    const r = 6;
    const d = `M${x},${y + r} a${w / 2},${r} 0 0 0 ${w},0 a${w / 2},${r} 0 0 0 ${-w},0` +
      ` v${h - 2 * r} a${w / 2},${r} 0 0 0 ${w},0 v${-(h - 2 * r)}`;
    return svg("path", { d, class: "shape" });
  }
  if (node.kind === "sink") {
    const d = `M${x},${y + 6} h${w * 0.3} l6,-6 h${w * 0.7 - 6} v${h} h${-w} z`;
    return svg("path", { d, class: "shape" });
  }
  if (node.kind === "join") {
    const k = 12;
    const d = `M${x + k},${y} h${w - 2 * k} l${k},${h / 2} l${-k},${h / 2} h${-(w - 2 * k)}` +
      ` l${-k},${-h / 2} z`;
    return svg("path", { d, class: "shape" });
  }
  return svg("rect", { x, y, width: w, height: h, rx: node.kind === "window" ? 10 : 3, class: "shape" });
}

function drawGraph(data) {
  const g = data.graph;
  const root = document.getElementById("graph");
  root.replaceChildren();
  root.setAttribute("width", g.width);
  root.setAttribute("height", g.height);
  root.setAttribute("viewBox", `0 0 ${g.width} ${g.height}`);
  const defs = svg("defs");
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#98a1ae" }));
  defs.append(marker);
  root.append(defs);

  const nodes = Object.fromEntries(g.nodes.map((n) => [n.id, n]));
  const computations = Object.fromEntries(data.computations.map((c) => [c.node, c]));
  const holding = new Set();  // nodes named as holding a watermark back
  for (const c of data.computations) {
    for (const p of c.partitions) {
      if (p.holding_back) holding.add(p.topic.endsWith(".by-key") ? c.node : "s:" + p.topic);
      if (p.held_back_by_place && p.held_back_by_place.node) holding.add(p.held_back_by_place.node);
    }
  }

  for (const e of g.edges) {
    const a = nodes[e.source], b = nodes[e.target];
    if (!a || !b) continue;
    const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = b.x, y2 = b.y + b.h / 2;
    let d;
    if (x2 > x1) {
      const dx = (x2 - x1) / 2;
      d = `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`;
    } else {  // an edge back (a cycle): under the nodes
      const low = Math.max(a.y + a.h, b.y + b.h) + 30;
      d = `M${x1},${y1} C${x1 + 60},${low} ${x2 - 60},${low} ${x2},${y2}`;
    }
    const path = svg("path", { d, class: `edge ${e.kind}`, "marker-end": "url(#arrow)",
      "data-source": e.source, "data-target": e.target });
    root.append(path);
    if (e.label) {
      root.append(svg("text", { x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 4, "text-anchor": "middle",
        class: "edge-label" }, e.label));
    }
  }

  for (const n of g.nodes) {
    const held = holding.has(n.id);
    const group = svg("g", { class: `node ${n.kind}${held ? " held-back" : ""}`, "data-id": n.id,
      "data-kind": n.kind });
    group.append(svg("title", {}, `${n.kind} ${n.label}`));
    group.append(shape(n));
    const cy = n.y + (n.detail ? n.h / 2 - 3 : n.h / 2 + 4);
    group.append(svg("text", { x: n.x + n.w / 2, y: cy, "text-anchor": "middle" }, n.label));
    if (n.detail) {
      group.append(svg("text", { x: n.x + n.w / 2, y: cy + 14, "text-anchor": "middle",
        class: "kind" }, n.detail));
    }
    const c = computations[n.id];
    if (c && !["computation", "window", "join"].includes(n.kind)) {
      group.append(svg("text", { x: n.x + 4, y: n.y + 11, class: "kind" }, n.kind));
    }
    if (c && c.dead_letters.total > 0) {
      const bx = n.x + n.w - 2, by = n.y + 2;
      group.append(svg("circle", { cx: bx, cy: by, r: 9, class: "badge-dl" }));
      group.append(svg("text", { x: bx, y: by + 3.5, "text-anchor": "middle",
        class: "badge-text dead-letter-badge" }, String(c.dead_letters.total)));
    }
    if (c) {  // the computation's figures under its box
      const figures = `lag ${duration(c.lag_ms)} · ${num(c.records_per_second)}/s`;
      group.append(svg("text", { x: n.x + n.w / 2, y: n.y + n.h + 13, "text-anchor": "middle",
        class: "kind figures" }, figures));
    }
    if (held) {
      group.append(svg("text", { x: n.x - 2, y: n.y + 4, class: "warn-mark" }, "⚠"));
    }
    root.append(group);
  }
}

// -- the figures -------------------------------------------------------------------------

function table(headers, rows) {
  const head = el("tr", {}, ...headers.map((h) => el("th", {}, h)));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows));
}

function cell(value, cls) { return el("td", cls ? { class: cls } : {}, value); }

function copyButton(text) {
  const b = el("button", { class: "copy", type: "button", title: "copy the command" }, "copy");
  b.addEventListener("click", () => navigator.clipboard && navigator.clipboard.writeText(text));
  return b;
}

function computationCard(c, now) {
  const card = el("article", { class: "computation", id: `computation-${c.name}`,
    "data-name": c.name });
  card.append(el("h2", {}, `${c.name} `, el("span", { class: "muted" }, `${c.kind} · group ${c.group}`)));
  const summary = el("div", { class: "summary" },
    el("span", {}, "low watermark ", el("b", {}, utc(c.low_watermark))),
    el("span", {}, "lag ", el("b", {}, duration(c.lag_ms))),
    el("span", {}, "consumer lag ", el("b", {}, num(c.consumer_lag))),
    el("span", {}, "records/s ", el("b", {}, num(c.records_per_second))),
    el("span", {}, "last commit ", el("b", {}, c.last_commit == null ? "–" :
      `${utc(c.last_commit)} (${duration(now - c.last_commit)} ago)`)),
    el("span", {}, "dead letters ", el("b", {}, String(c.dead_letters.total))));
  card.append(summary);

  card.append(el("h3", {}, "input partitions"));
  card.append(table(
    ["topic", "partition", "low watermark (UTC)", "lag", "held back by", "consumer lag",
      "records/s", "last commit (UTC)", "owner"],
    c.partitions.map((p) => {
      const flag = p.holding_back ? el("span", { class: "flag" }, " ⚠ holds the watermark back") : "";
      const by = p.held_back_by_place ? p.held_back_by_place.label : "–";
      const row = el("tr", { class: p.holding_back ? "partition held-back" : "partition",
        "data-topic": p.topic, "data-partition": String(p.partition),
        "data-held-back": String(p.holding_back) },
        cell(p.topic), cell(String(p.partition), "num"),
        el("td", {}, utc(p.low_watermark), flag), cell(duration(p.lag_ms), "num"),
        cell(by, "held-back-by"), cell(num(p.consumer_lag), "num"),
        cell(num(p.records_per_second), "num"), cell(utc(p.last_commit)), cell(p.owner || "–", "owner"));
      return row;
    })));

  if (c.tasks.length) {  // a sink keeps no keyed state
    card.append(el("h3", {}, "tasks (keyed partitions)"));
    card.append(table(["partition", "owner", "standbys", "state (changelog offsets)"],
      c.tasks.map((t) => el("tr", { class: "task" }, cell(String(t.partition), "num"),
        cell(t.owner || "–", "owner"), cell(t.standbys.length ? t.standbys.join(", ") : "–"),
        cell(num(t.state_offsets), "num")))));
  }

  card.append(el("h3", {}, `dead letters (${c.dead_letters.topic})`));
  const letters = el("div", { class: "dead-letters" });
  if (!c.dead_letters.by_stage.length) {
    letters.append(el("p", { class: "muted" }, "none"));
  } else {
    letters.append(table(["stage", "dead letters", "replay them with"],
      c.dead_letters.by_stage.map((s) => el("tr", { class: "stage", "data-stage": s.stage },
        cell(s.stage), cell(String(s.count), "num count"),
        s.replay ? el("td", {}, el("code", { class: "replay" }, s.replay), copyButton(s.replay))
          : cell("a sink's refused rows: fix the rows or the table, then write them again")))));
  }
  card.append(letters);
  return card;
}

function render(data) {
  document.getElementById("pipeline").textContent = data.pipeline;
  document.title = `logwheel · ${data.pipeline}`;
  const error = document.getElementById("error");
  error.hidden = !data.error;
  error.textContent = data.error ? `could not gather the figures: ${data.error}` : "";
  if (!data.graph) return;
  refreshMs = data.refresh_ms || refreshMs;
  document.getElementById("updated").textContent =
    `figures of ${utc(data.now)} UTC · refreshed every ${refreshMs / 1000} s · read-only`;
  drawGraph(data);
  document.getElementById("computations")
    .replaceChildren(...data.computations.map((c) => computationCard(c, data.now)));
  document.body.dataset.loaded = String(data.now);
}

async function refresh() {
  try {
    const answer = await fetch("api/pipeline", { cache: "no-store" });
    render(await answer.json());
  } catch (e) {
    const error = document.getElementById("error");
    error.hidden = false;
    error.textContent = `the dashboard's server does not answer: ${e}`;
  }
  setTimeout(refresh, refreshMs);
}

refresh();
