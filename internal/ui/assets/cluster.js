// The cluster's views: the overview (capacity and allocation per
// resource, devices by type and model, pending by tier, the device
// heatmap), queues, the node list and one node's page.
"use strict";

// HEATMAP_NODES bounds the nodes the overview's heatmap reads (pages of
// 10,000): past it the heatmap says how many it left out.
const HEATMAP_NODES = 50000;

VIEWS.overview = async () => {
  const [c, heat, hist] = await Promise.all([api("/api/v1/cluster"), heatmap(), seriesOf()]);
  const res = Object.keys(c.resources || {}).sort();
  const resRows = res.map(name => {
    const r = c.resources[name];
    return el("tr", { "data-resource": name },
      el("td", {}, name),
      el("td", { class: "num", "data-field": "capacity" }, fmtResource(name, r.capacity)),
      el("td", { class: "num", "data-field": "allocated" }, fmtResource(name, r.allocated)),
      el("td", {}, bar(r.allocatedFraction || 0), " ", el("span", { "data-field": "allocated-fraction" }, pct(r.allocatedFraction || 0))),
      el("td", { "data-field": "utilization" }, r.utilization === undefined ? "not reported" : pct(r.utilization)));
  });
  const devRows = (c.devices || []).map(d => el("tr", { "data-device": d.type + "/" + d.model },
    el("td", {}, d.type), el("td", {}, d.model || "-"),
    el("td", { class: "num", "data-field": "devices" }, d.devices),
    el("td", { class: "num", "data-field": "allocated" }, +d.allocated.toFixed(3)),
    el("td", {}, bar(d.devices ? d.allocated / d.devices : 0)),
    el("td", { class: "num", "data-field": "unhealthy" }, d.unhealthy),
    el("td", { "data-field": "utilization" }, d.utilization === undefined ? "not reported" : pct(d.utilization) + " (" + d.reported + " reporting)")));
  const states = Object.keys(c.nodes || {}).sort();
  return [
    el("section", { class: "card" }, el("h2", {}, "Cluster"),
      el("dl", {},
        el("dt", {}, "Policy"), el("dd", { id: "cluster-policy" }, c.policy),
        el("dt", {}, "Tasks held"), el("dd", { id: "cluster-tasks" }, c.tasks),
        el("dt", {}, "Nodes"), el("dd", { id: "cluster-nodes" },
          states.map(s => el("a", { href: "#/nodes?state=" + encodeURIComponent(s), "data-state": s }, s + " " + c.nodes[s]), "  ")))),
    historyCard(hist),
    el("section", { class: "card" }, el("h2", {}, "Capacity and allocation"),
      table(["resource", { label: "capacity", num: true }, { label: "allocated", num: true }, "allocated %", "utilization (measured)"], resRows, { id: "resources" })),
    el("section", { class: "card" }, el("h2", {}, "Devices by type and model"),
      devRows.length ? table(["type", "model", { label: "devices", num: true }, { label: "allocated", num: true }, "", { label: "unhealthy", num: true }, "utilization"], devRows, { id: "devices" })
        : el("p", { class: "muted" }, "No devices.")),
    // Each task counts in its own tier; those aging raised one tier up
    // are said apart (they are served with that tier).
    el("section", { class: "card" }, el("h2", {}, "Pending by tier"),
      table(TIERS.map(t => ({ label: t, num: true })),
        [el("tr", {}, TIERS.map(t => el("td", { class: "num", "data-tier": t }, String((c.pending || {})[t] || 0),
          ((c.pendingRaised || {})[t] || 0) > 0 ? el("span", { class: "muted", "data-field": "raised" }, " (" + c.pendingRaised[t] + " raised a tier by aging)") : "")))], { id: "pending" })),
    heat,
  ];
};

// heatmap reads the nodes and draws one cell per device on a canvas,
// grouped by node: red when unhealthy, grey when no utilization was
// reported, else green by utilization; a dark base marks an allocated
// device. Pointing at a cell names it; a click opens its node.
async function heatmap() {
  const nodes = [];
  let total = 0, cursor = "";
  do {
    const page = await api("/api/v1/nodes?limit=10000" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
    nodes.push(...(page.nodes || []).filter(n => (n.devices || []).length));
    total = page.total;
    cursor = page.cursor || "";
  } while (cursor && nodes.length < HEATMAP_NODES);
  const cells = [];
  let unhealthy = 0, reporting = 0;
  for (const n of nodes) {
    const util = (n.usage && n.usage.devices) || {};
    const alloc = n.deviceAllocated || {};
    for (const d of n.devices) {
      const u = util[d.id] ? util[d.id].utilization : undefined;
      if (d.unhealthy) unhealthy++;
      if (u !== undefined) reporting++;
      cells.push({ node: n.name, d, u, a: (alloc[d.type + "/" + d.id] || 0) / 1000, first: d === n.devices[0] });
    }
  }
  const card = el("section", { class: "card" }, el("h2", {}, "Device heatmap"));
  if (!cells.length) return fill(card, {}, [el("p", { class: "muted" }, "No devices.")]);
  // Cells as big as fit about 640 px of height, 6 to 18 px; a gap of 1
  // between cells and 4 between nodes; the canvas 1120 px wide.
  const width = 1120, G = 1, NODE_GAP = 4;
  const C = Math.max(6, Math.min(18, Math.floor(Math.sqrt(width * 640 / cells.length)) - G));
  let x = 0, y = 0;
  for (const c of cells) {
    if (c.first && x > 0) x += NODE_GAP;
    if (x + C > width) { x = 0; y += C + G; }
    c.x = x; c.y = y;
    x += C + G;
  }
  const height = y + C;
  const canvas = el("canvas", { id: "heatmap", "data-cells": cells.length, "data-unhealthy": unhealthy });
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * dpr); canvas.height = Math.round(height * dpr);
  canvas.style.width = width + "px"; canvas.style.height = height + "px"; // CSSOM, allowed by the policy
  const g = canvas.getContext("2d");
  g.scale(dpr, dpr);
  for (const c of cells) {
    g.fillStyle = c.d.unhealthy ? "#b91c1c" : c.u === undefined ? "#cbd5e1" : `hsl(142, 70%, ${Math.round(88 - 58 * Math.min(1, c.u))}%)`;
    g.fillRect(c.x, c.y, C, C);
    if (c.a > 0) { g.fillStyle = "#0f172a"; g.fillRect(c.x, c.y + C - 2, C * Math.min(1, c.a), 2); }
  }
  const tip = el("p", { class: "muted", id: "heatmap-tip" }, "Point at a device.");
  const at = ev => {
    const r = canvas.getBoundingClientRect(), px = ev.clientX - r.left, py = ev.clientY - r.top;
    const row = Math.floor(py / (C + G));
    return cells.find(c => c.y === row * (C + G) && px >= c.x && px < c.x + C);
  };
  canvas.addEventListener("mousemove", ev => {
    const c = at(ev);
    tip.textContent = c ? `${c.node} ${c.d.type} ${c.d.id} ${c.d.model || ""}: ${c.d.unhealthy ? "unhealthy" : c.u === undefined ? "utilization not reported" : pct(c.u) + " utilized"}, ${pct(c.a)} allocated` : "Point at a device.";
  });
  canvas.addEventListener("click", ev => { const c = at(ev); if (c) location.hash = "#/node/" + encodeURIComponent(c.node); });
  const left = total > nodes.length && cursor ? ` Showing the first ${nodes.length} nodes with devices; the list has ${total}.` : "";
  return fill(card, {}, [
    el("p", { id: "heatmap-summary" }, `${plural(cells.length, "device")} on ${plural(nodes.length, "node")}: ${unhealthy} unhealthy, ${reporting} reporting utilization.` + left),
    el("div", { class: "legend" }, legend("#15803d", "utilized"), legend("#dcfce7", "idle"), legend("#cbd5e1", "not reported"), legend("#b91c1c", "unhealthy"), legend("#0f172a", "allocated (base)")),
    canvas, tip]);
}

function legend(color, text) {
  const swatch = el("span", { class: "swatch" });
  swatch.style.background = color; // CSSOM
  return el("span", {}, swatch, text);
}

// queues: the tree, each queue's usage against its guarantee and max per
// resource (usage above the guarantee is borrowed), its fair share, and
// its waiting tasks by reason.
VIEWS.queues = async () => {
  const [body, hist] = await Promise.all([api("/api/v1/queues"), seriesOf()]);
  const qs = body.queues || [];
  const byName = new Map(qs.map(q => [q.name, q]));
  const depth = q => { let d = 0; for (let p = q.parent; p && byName.has(p) && d < 32; p = byName.get(p).parent) d++; return d; };
  const order = [];
  const visit = parent => {
    for (const q of qs.filter(x => (x.parent || "") === parent).sort((a, b) => a.name.localeCompare(b.name))) {
      if (order.length > qs.length) return; // a cycle cannot come from the API; stay bounded anyway
      order.push(q);
      visit(q.name);
    }
  };
  visit("");
  for (const q of qs) if (!order.includes(q)) order.push(q); // parents outside this tenant's view
  const rows = order.map(q => {
    const names = [...new Set([...Object.keys(q.usage || {}), ...Object.keys(q.guaranteed || {}), ...Object.keys(q.max || {})])].sort();
    const res = names.map(r => {
      const used = parseQty((q.usage || {})[r]), guar = parseQty((q.guaranteed || {})[r]);
      const max = q.max && q.max[r] !== undefined ? parseQty(q.max[r]) : Infinity;
      const borrowed = guar >= 0 && used > guar ? used - guar : 0;
      const scale = isFinite(max) ? max : Math.max(used, guar, 1);
      return el("div", { "data-resource": r }, el("span", { class: "muted" }, r + ": "),
        el("span", { "data-field": "usage" }, (q.usage || {})[r] || "0"), " / ",
        el("span", { "data-field": "guaranteed" }, (q.guaranteed || {})[r] || "0"), " guaranteed",
        isFinite(max) ? [" / ", el("span", { "data-field": "max" }, q.max[r]), " max"] : null, " ",
        bar(scale ? used / scale : 0),
        borrowed > 0 ? el("span", { class: "muted", "data-field": "borrowed" }, " borrowing " + fmtBase(r, borrowed)) : null,
        (q.fairShare || {})[r] !== undefined ? el("span", { class: "muted" }, " fair share " + q.fairShare[r]) : null);
    });
    const pending = Object.entries(q.pending || {}).filter(([, n]) => n > 0).map(([k, n]) => k + " " + n).join(", ");
    return el("tr", { "data-queue": q.name },
      el("td", {}, "\u2003".repeat(depth(q)), el("a", { href: "#/tasks?queue=" + encodeURIComponent(q.name) }, q.name)),
      el("td", { "data-field": "weight" }, weightForm(q)),
      el("td", {}, res.length ? res : "-"),
      el("td", { "data-field": "pending" }, pending || "-"));
  });
  return [el("section", { class: "card" }, el("h2", {}, "Queues"),
    rows.length ? table(["queue", "weight", "used / guaranteed / max", "waiting"], rows, { id: "queues" })
      : el("p", { class: "muted" }, "No queues: every task runs in the root's share.")),
  queueHistoryCard(hist)];
};

const NODE_STATES = ["ready", "notready", "cordoned", "draining"];

// nodes: a page of nodes (100, in name order, filtered by state and
// label selector) with their allocation per resource and a heatmap cell
// per device.
VIEWS.nodes = async (_, params) => {
  const q = new URLSearchParams({ limit: "100" });
  for (const k of ["state", "selector", "cursor"]) if (params.get(k)) q.set(k, params.get(k));
  const page = await api("/api/v1/nodes?" + q.toString());
  const rows = (page.nodes || []).map(n => {
    const cap = n.capacity || {}, alloc = n.allocated || {};
    const types = [...new Set((n.devices || []).map(d => d.type))].sort();
    const resCell = ["cpu", "memory", ...types].filter(r => cap[r] !== undefined || alloc[r] !== undefined || types.includes(r)).map(r => {
      const c = r === "cpu" || r === "memory" ? parseQty(cap[r]) : (n.devices || []).filter(d => d.type === r).length;
      const a = (alloc[r] || 0) / (r === "memory" ? 1 : 1000);
      return el("div", { "data-resource": r }, el("span", { class: "muted" }, r + ": "),
        el("span", { "data-field": "allocated" }, r === "memory" ? fmtBytes(a) : +a.toFixed(3)), " / ",
        el("span", { "data-field": "capacity" }, r === "memory" ? fmtBytes(c) : c));
    });
    return el("tr", { "data-node": n.name },
      el("td", {}, el("a", { href: "#/node/" + encodeURIComponent(n.name) }, n.name)), el("td", { "data-field": "state" }, n.state || "ready"), el("td", {}, n.agent || "static"),
      el("td", {}, resCell), el("td", { class: "num" }, n.tasks || 0), el("td", { class: "heat" }, deviceCells(n)));
  });
  const form = filterForm("nodes", "node-filters", [
    selectField("state", NODE_STATES, params.get("state"), "any state"),
    el("input", { name: "selector", placeholder: "label selector, e.g. rack=r1", value: params.get("selector") || "", size: 32 })]);
  return [el("section", { class: "card" }, el("h2", {}, "Nodes"), form,
    el("p", { class: "muted", id: "nodes-total" }, `${plural(page.total, "node")} ${page.total === 1 ? "matches" : "match"}; ${rows.length} on this page.`),
    rows.length ? table(["node", "state", "agent", "allocated / capacity", { label: "tasks", num: true }, "devices"], rows, { id: "nodes" })
      : el("p", { class: "muted" }, "No nodes."),
    pager("nodes", params, page.cursor))];
};

// deviceCells is a node's devices as heatmap cells (red: unhealthy;
// shaded by the agent's latest utilization sample; grey: none reported).
function deviceCells(n) {
  const util = (n.usage && n.usage.devices) || {};
  return (n.devices || []).map(d => {
    const u = util[d.id] ? util[d.id].utilization : undefined;
    const cell = el("span", { class: "cell" + (d.unhealthy ? " unhealthy" : u === undefined ? " unknown" : ""),
      "data-device": d.type + "/" + d.id, title: d.type + " " + d.id + " " + (d.model || "") + (d.unhealthy ? " unhealthy" : u === undefined ? "" : " " + pct(u)) });
    if (!d.unhealthy && u !== undefined) cell.style.opacity = String(0.25 + 0.75 * u); // CSSOM, allowed by the policy
    return cell;
  });
}

// node: one node, each device with its health, utilization, allocated
// share and the tasks that hold it, and the node's latest tasks.
VIEWS.node = async name => {
  const [n, list] = await Promise.all([
    api("/api/v1/nodes/" + encodeURIComponent(name)),
    api("/api/v1/tasks?order=newest&limit=200&node=" + encodeURIComponent(name))]);
  const holders = {};
  for (const t of list.tasks || []) {
    if (t.state !== "scheduled" && t.state !== "running") continue;
    for (const d of t.devices || []) (holders[d.type + "/" + d.id] ||= []).push(t);
  }
  const util = (n.usage && n.usage.devices) || {};
  const devRows = (n.devices || []).map(d => {
    const key = d.type + "/" + d.id, u = util[d.id];
    return el("tr", { "data-device": key },
      el("td", {}, d.type), el("td", {}, d.id), el("td", {}, d.model || "-"), el("td", {}, d.memory || "-"),
      el("td", { "data-field": "health", class: d.unhealthy ? "error" : null }, d.unhealthy ? "unhealthy" : "healthy"),
      el("td", { "data-field": "utilization" }, u ? pct(u.utilization) : "not reported"),
      el("td", { class: "num", "data-field": "allocated" }, ((n.deviceAllocated || {})[key] || 0) / 1000),
      el("td", { "data-field": "tasks" }, (holders[key] || []).map((t, i) => [i ? ", " : "", taskLink(t.id)])));
  });
  const taskRows = (list.tasks || []).map(t => el("tr", { "data-id": t.id },
    el("td", {}, taskLink(t.id)), el("td", { class: "state-" + t.state }, t.state), el("td", {}, t.queue || "default"),
    el("td", {}, (t.devices || []).map(d => d.type + ":" + d.id).join(", ") || "-")));
  const cap = n.capacity || {}, alloc = n.allocated || {};
  return [
    el("section", { class: "card", id: "node", "data-node": n.name }, el("h2", {}, "Node " + n.name),
      el("dl", {},
        el("dt", {}, "State"), el("dd", { "data-field": "state" }, n.state || "ready"),
        el("dt", {}, "Agent"), el("dd", {}, n.agent || "static inventory"),
        el("dt", {}, "Last heartbeat"), el("dd", {}, n.usage ? fmtTime(n.usage.lastHeartbeat) : "-"),
        el("dt", {}, "CPU"), el("dd", {}, fmtResource("cpu", alloc.cpu || 0) + " of " + (cap.cpu || "0") + " allocated" + (n.utilization ? ", " + pct(n.utilization.cpu || 0) + " used" : "")),
        el("dt", {}, "Memory"), el("dd", {}, fmtBytes(alloc.memory || 0) + " of " + (cap.memory || "0") + " allocated"),
        el("dt", {}, "Labels"), el("dd", {}, Object.entries({ ...(n.labels || {}), ...(n.derivedLabels || {}) }).map(([k, v]) => k + "=" + v).join(", ") || "-"),
        el("dt", {}, "Taints"), el("dd", {}, (n.taints || []).join(", ") || "-")),
      nodeActions(n)),
    el("section", { class: "card" }, el("h2", {}, "Devices"),
      devRows.length ? table(["type", "id", "model", "memory", "health", "utilization", { label: "allocated", num: true }, "held by"], devRows, { id: "node-devices" })
        : el("p", { class: "muted" }, "No devices.")),
    el("section", { class: "card" }, el("h2", {}, "Tasks (latest 200)"),
      taskRows.length ? table(["id", "state", "queue", "devices"], taskRows, { id: "node-tasks" }) : el("p", { class: "muted" }, "None."),
      el("p", {}, el("a", { href: "#/tasks?node=" + encodeURIComponent(n.name) }, "All of this node's tasks →"))),
  ];
};

// nodeActions are the node's state changes its state allows: cordon
// (no new placements), drain (move its tasks away too), uncordon.
function nodeActions(n) {
  const state = n.state || "ready";
  const post = (verb, done) => async () => { await apiSend("POST", "/api/v1/nodes/" + encodeURIComponent(n.name) + "/" + verb, {}); return done; };
  const buttons = [];
  if (state === "ready") buttons.push(action("cordon", "Cordon", "Cordon " + n.name + "? Click again", post("cordon", "cordoned")));
  if (state === "ready" || state === "cordoned") buttons.push(action("drain", "Drain", "Drain " + n.name + " (its tasks move)? Click again", post("drain", "draining")));
  if (state === "cordoned" || state === "draining") buttons.push(action("uncordon", "Uncordon", "Uncordon " + n.name + "? Click again", post("uncordon", "ready")));
  return buttons.length ? actionBar("node-actions-" + n.name, ...buttons) : null;
}
