// hetsched's web UI: views chosen by the URL's fragment, every number
// read from the HTTP API with the tab's token (sessionStorage, sent as a
// bearer header), live updates from GET /api/v1/events read as a stream.
// No library, no build step. Text from the API is inserted as text
// (textContent), never as HTML.
"use strict";

const TOKEN_KEY = "hetsched.token";
const main = document.getElementById("main");
let renderSeq = 0; // the latest render: an older one's answers are dropped
let events = null; // the live stream's AbortController

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

// ApiError is an API answer other than 2xx, with its code and message.
class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function api(path) {
  const headers = { "Accept": "application/json" };
  if (token()) headers["Authorization"] = "Bearer " + token();
  const resp = await fetch(path, { headers, cache: "no-store", credentials: "omit" });
  let body = null;
  try { body = await resp.json(); } catch (e) { body = null; }
  if (!resp.ok) {
    const err = body && body.error ? body.error : { code: String(resp.status), message: resp.statusText };
    throw new ApiError(resp.status, err.code, err.message);
  }
  return body;
}

// el builds an element: attributes, then children (strings become text).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function table(headers, rows, attrs) {
  return el("table", attrs,
    el("thead", {}, el("tr", {}, headers.map(h => el("th", { class: h.num ? "num" : null }, h.label || h)))),
    el("tbody", {}, rows));
}

// Units: the API's canonical integers (cpu in millicores, memory in
// bytes, extended resources in thousandths), shown as the CLI shows them.
function fmtResource(name, v) {
  if (name === "memory" || name === "ephemeral-storage") return fmtBytes(v);
  const x = v / 1000;
  return Number.isInteger(x) ? String(x) : x.toFixed(3).replace(/0+$/, "");
}

function fmtBytes(v) {
  const units = ["B", "Ki", "Mi", "Gi", "Ti", "Pi"];
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (Number.isInteger(v) ? v : v.toFixed(1)) + units[i];
}

function pct(f) { return (100 * f).toFixed(1) + "%"; }

function bar(f) {
  const fill = el("span", {});
  fill.style.width = Math.min(100, 100 * f).toFixed(1) + "%"; // CSSOM: the policy allows no style attributes
  return el("span", { class: "bar", title: pct(f) }, fill);
}

function fmtTime(s) {
  if (!s) return "-";
  const d = new Date(s);
  const ago = (Date.now() - d.getTime()) / 1000;
  const rel = ago >= 0 ? fmtDuration(ago) + " ago" : "in " + fmtDuration(-ago);
  return d.toISOString().replace(/\.\d+Z$/, "Z") + " (" + rel + ")";
}

function fmtDuration(s) {
  if (s < 120) return Math.round(s) + "s";
  if (s < 7200) return Math.round(s / 60) + "m";
  if (s < 172800) return Math.round(s / 3600) + "h";
  return Math.round(s / 86400) + "d";
}

const TIERS = ["urgent", "high", "medium", "low"];

// Views. Each returns the nodes to show; route() puts them in place.

async function overview() {
  const c = await api("/api/v1/cluster");
  const res = Object.keys(c.resources || {}).sort();
  const resRows = res.map(name => {
    const r = c.resources[name];
    return el("tr", { "data-resource": name },
      el("td", {}, name),
      el("td", { class: "num", "data-field": "capacity" }, fmtResource(name, r.capacity)),
      el("td", { class: "num", "data-field": "allocated" }, fmtResource(name, r.allocated)),
      el("td", {}, bar(r.utilization), " ", el("span", { "data-field": "utilization" }, pct(r.utilization))));
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
          states.map(s => el("span", { "data-state": s }, s + " " + c.nodes[s] + "  "))))),
    el("section", { class: "card" }, el("h2", {}, "Capacity and allocation"),
      table(["resource", { label: "capacity", num: true }, { label: "allocated", num: true }, "utilization"], resRows, { id: "resources" })),
    el("section", { class: "card" }, el("h2", {}, "Devices by type and model"),
      devRows.length ? table(["type", "model", { label: "devices", num: true }, { label: "allocated", num: true }, "", { label: "unhealthy", num: true }, "utilization"], devRows, { id: "devices" })
        : el("p", { class: "muted" }, "No devices.")),
    el("section", { class: "card" }, el("h2", {}, "Pending by tier"),
      table(TIERS.map(t => ({ label: t, num: true })),
        [el("tr", {}, TIERS.map(t => el("td", { class: "num", "data-tier": t }, (c.pending || {})[t] || 0)))], { id: "pending" })),
  ];
}

// parseQty reads a quantity as the API writes it ("2", "1.5", "500m",
// "64Gi") in base units (cores, devices, bytes).
function parseQty(s) {
  const m = /^([0-9]+(?:\.[0-9]+)?)(m|Ki|Mi|Gi|Ti|Pi|Ei)?$/.exec(String(s || "0"));
  if (!m) return NaN;
  const mult = { m: 1e-3, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
  return parseFloat(m[1]) * (m[2] ? mult[m[2]] : 1);
}

// queues: the tree, each queue's usage against its guarantee and max per
// resource (usage above the guarantee is borrowed), its fair share, and
// its waiting tasks by reason.
async function queues() {
  const body = await api("/api/v1/queues");
  const qs = body.queues || [];
  const byName = new Map(qs.map(q => [q.name, q]));
  const depth = q => { let d = 0; for (let p = q.parent; p && byName.has(p) && d < 32; p = byName.get(p).parent) d++; return d; };
  const order = [];
  const visit = (parent, d) => {
    for (const q of qs.filter(x => (x.parent || "") === parent).sort((a, b) => a.name.localeCompare(b.name))) {
      if (order.length > qs.length) return; // a cycle cannot come from the API; stay bounded anyway
      order.push(q);
      visit(q.name, d + 1);
    }
  };
  visit("", 0);
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
        borrowed > 0 ? el("span", { class: "muted", "data-field": "borrowed" }, " borrowing " + +borrowed.toFixed(3)) : null,
        (q.fairShare || {})[r] !== undefined ? el("span", { class: "muted" }, " fair share " + q.fairShare[r]) : null);
    });
    const pending = Object.entries(q.pending || {}).filter(([, n]) => n > 0).map(([k, n]) => k + " " + n).join(", ");
    return el("tr", { "data-queue": q.name },
      el("td", {}, "\u2003".repeat(depth(q)) + q.name),
      el("td", { class: "num" }, q.weight || 1),
      el("td", {}, res.length ? res : "-"),
      el("td", { "data-field": "pending" }, pending || "-"));
  });
  return [el("section", { class: "card" }, el("h2", {}, "Queues"),
    rows.length ? table(["queue", { label: "weight", num: true }, "used / guaranteed / max", "waiting"], rows, { id: "queues" })
      : el("p", { class: "muted" }, "No queues: every task runs in the root's share."))];
}

// nodes: every node with its state, its allocation per resource, and a
// heatmap cell per device (red: unhealthy; shaded by the agent's latest
// utilization sample; grey: none reported).
async function nodes() {
  const body = await api("/api/v1/nodes");
  const rows = (body.nodes || []).map(n => {
    const cap = n.capacity || {}, alloc = n.allocated || {};
    const types = [...new Set((n.devices || []).map(d => d.type))].sort();
    const resCell = ["cpu", "memory", ...types].filter(r => cap[r] !== undefined || alloc[r] !== undefined || types.includes(r)).map(r => {
      const c = r === "cpu" || r === "memory" ? parseQty(cap[r]) : (n.devices || []).filter(d => d.type === r).length;
      const a = (alloc[r] || 0) / (r === "memory" ? 1 : 1000);
      return el("div", { "data-resource": r }, el("span", { class: "muted" }, r + ": "),
        el("span", { "data-field": "allocated" }, r === "memory" ? fmtBytes(a) : +a.toFixed(3)), " / ",
        el("span", { "data-field": "capacity" }, r === "memory" ? fmtBytes(c) : c));
    });
    const util = (n.usage && n.usage.devices) || {};
    const cells = (n.devices || []).map(d => {
      const u = util[d.id] ? util[d.id].utilization : undefined;
      const cell = el("span", { class: "cell" + (d.unhealthy ? " unhealthy" : u === undefined ? " unknown" : ""),
        "data-device": d.type + "/" + d.id, title: d.type + " " + d.id + " " + (d.model || "") + (d.unhealthy ? " unhealthy" : u === undefined ? "" : " " + pct(u)) });
      if (!d.unhealthy && u !== undefined) cell.style.opacity = String(0.25 + 0.75 * u); // CSSOM, allowed by the policy
      return cell;
    });
    return el("tr", { "data-node": n.name },
      el("td", {}, n.name), el("td", { "data-field": "state" }, n.state || "ready"), el("td", {}, n.agent || "static"),
      el("td", {}, resCell), el("td", { class: "num" }, n.tasks || 0), el("td", { class: "heat" }, cells));
  });
  return [el("section", { class: "card" }, el("h2", {}, "Nodes"),
    rows.length ? table(["node", "state", "agent", "allocated / capacity", { label: "tasks", num: true }, "devices"], rows, { id: "nodes" })
      : el("p", { class: "muted" }, "No nodes."))];
}

async function tasks(params) {
  const q = new URLSearchParams();
  for (const k of ["state", "queue", "node", "job", "cursor"]) if (params.get(k)) q.set(k, params.get(k));
  q.set("limit", "100");
  const page = await api("/api/v1/tasks?" + q.toString());
  const rows = page.tasks.map(t => el("tr", { "data-id": t.id },
    el("td", {}, el("a", { href: "#/task/" + encodeURIComponent(t.id) }, t.id)),
    el("td", { class: "state-" + t.state, "data-field": "state" }, t.state),
    el("td", {}, t.queue || "default"),
    el("td", {}, TIERS[t.priority === undefined ? 2 : t.priority] || t.priority),
    el("td", {}, t.node || "-"),
    el("td", { class: "muted" }, t.reason || "")));
  const form = el("form", { class: "filters", id: "task-filters" },
    el("select", { name: "state" }, ["", "pending", "blocked", "scheduled", "running", "succeeded", "failed", "timeout", "cancelled"].map(
      s => el("option", s === (params.get("state") || "") ? { value: s, selected: "" } : { value: s }, s || "any state"))),
    el("input", { name: "queue", placeholder: "queue", value: params.get("queue") || "" }),
    el("input", { name: "node", placeholder: "node", value: params.get("node") || "" }),
    el("input", { name: "job", placeholder: "job", value: params.get("job") || "" }),
    el("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", ev => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) p.set(k, v);
    location.hash = "#/tasks" + (p.toString() ? "?" + p.toString() : "");
  });
  const out = [el("section", { class: "card" }, el("h2", {}, "Tasks"), form,
    table(["id", "state", "queue", "tier", "node", "reason"], rows, { id: "tasks" }),
    rows.length === 0 ? el("p", { class: "muted", id: "no-tasks" }, "No tasks.") : null)];
  if (page.cursor) {
    const next = new URLSearchParams(params);
    next.set("cursor", page.cursor);
    out.push(el("a", { href: "#/tasks?" + next.toString(), id: "next-page" }, "Next page →"));
  }
  return out;
}

async function task(id) {
  const t = await api("/api/v1/tasks/" + encodeURIComponent(id));
  const fields = [
    ["State", t.state, "state"], ["Reason", t.reason], ["Queue", t.queue || "default"],
    ["Tier", TIERS[t.priority === undefined ? 2 : t.priority]], ["Node", t.node],
    ["Devices", (t.devices || []).map(d => d.type + ":" + d.id).join(", ")],
    ["Submitted", fmtTime(t.submitted)], ["Scheduled", fmtTime(t.scheduled)], ["Started", fmtTime(t.started)],
    ["Finished", fmtTime(t.finished)], ["Exit code", t.exitCode],
  ];
  if (t.queueing) {
    fields.push(["Queue position", (t.queueing.positionAtMost ? "at most " : "") + t.queueing.position +
      " among its class, " + t.queueing.ahead + " waiting in more important tiers", "position"]);
    fields.push(["Estimated start", t.queueing.estimatedStart ? fmtTime(t.queueing.estimatedStart) : "unknown", "estimated-start"]);
  }
  const attempts = (t.attempts || []).map(a => el("tr", {},
    el("td", {}, a.attempt), el("td", {}, a.node || "-"), el("td", {}, fmtTime(a.started)),
    el("td", {}, fmtTime(a.finished)), el("td", {}, a.exitCode === undefined ? "-" : a.exitCode), el("td", {}, a.reason || "")));
  return [el("section", { class: "card", id: "task", "data-id": t.id }, el("h2", {}, "Task " + t.id),
    el("dl", {}, fields.map(([k, v, f]) => [el("dt", {}, k), el("dd", { "data-field": f || null }, v === undefined || v === "" ? "-" : v)]))),
  el("section", { class: "card" }, el("h2", {}, "Earlier attempts"),
    attempts.length ? table(["attempt", "node", "started", "finished", "exit", "reason"], attempts) : el("p", { class: "muted" }, "None."))];
}

// route renders the view the fragment names.
async function route() {
  const seq = ++renderSeq;
  const hash = location.hash || "#/overview";
  const [path, query] = hash.slice(1).split("?");
  const params = new URLSearchParams(query || "");
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", hash.startsWith(a.getAttribute("href")));
  let view;
  if (path === "/overview" || path === "/") view = () => overview();
  else if (path === "/tasks") view = () => tasks(params);
  else if (path === "/queues") view = () => queues();
  else if (path === "/nodes") view = () => nodes();
  else if (path.startsWith("/task/")) view = () => task(decodeURIComponent(path.slice(6)));
  else view = async () => [el("p", { class: "error" }, "No page " + path)];
  try {
    const nodes = await view();
    if (seq !== renderSeq) return;
    main.replaceChildren(...nodes);
    main.dataset.rendered = String(seq);
    startEvents();
  } catch (err) {
    if (seq !== renderSeq) return;
    if (err instanceof ApiError && err.status === 401) { askToken(err.message); return; }
    main.replaceChildren(el("p", { class: "error", id: "error" }, err.message));
  }
}

function askToken(message) {
  stopEvents();
  const form = document.getElementById("token-form").content.firstElementChild.cloneNode(true);
  main.replaceChildren(form);
  if (token()) form.querySelector("#token-error").textContent = message;
  form.addEventListener("submit", ev => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, form.querySelector("#token-input").value.trim());
    document.getElementById("signout").hidden = false;
    route();
  });
}

// Live updates: the events stream, read with fetch (EventSource cannot
// send the token); a change re-renders the view, at most every 500 ms.
function startEvents() {
  if (events) return;
  events = new AbortController();
  const signal = events.signal;
  const live = document.getElementById("live");
  let pending = null;
  const changed = () => {
    if (pending) return;
    pending = setTimeout(() => { pending = null; route(); }, 500);
  };
  (async () => {
    const headers = { "Accept": "text/event-stream" };
    if (token()) headers["Authorization"] = "Bearer " + token();
    try {
      const resp = await fetch("/api/v1/events", { headers, signal, cache: "no-store", credentials: "omit" });
      if (!resp.ok || !resp.body) throw new Error("events: " + resp.status);
      live.classList.add("on");
      live.textContent = "●";
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const frame = buf.slice(0, i);
          buf = buf.slice(i + 2);
          if (/^data: /m.test(frame)) changed();
        }
      }
    } catch (e) {
      if (signal.aborted) return;
    }
    live.classList.remove("on");
    live.textContent = "○";
    events = null;
    if (!signal.aborted) setTimeout(startEvents, 2000); // reconnect
  })();
}

function stopEvents() {
  if (events) { events.abort(); events = null; }
}

document.getElementById("signout").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  document.getElementById("signout").hidden = true;
  stopEvents();
  route();
});
document.getElementById("signout").hidden = !token();
window.addEventListener("hashchange", route);
route();
