// The work's views: the task list, one task's page with a live tail of
// its output, the job list and one job's page with its DAG and its
// gang's status.
"use strict";

const TASK_STATES = ["pending", "blocked", "scheduled", "running", "succeeded", "failed", "timeout", "cancelled"];
const JOB_STATES = ["pending", "running", "succeeded", "failed", "cancelled"];
// LOG_KEEP bounds the characters a log tail keeps (the newest).
const LOG_KEEP = 256 * 1024;
// DAG_MAX bounds the tasks a job's graph draws; a bigger job is listed.
const DAG_MAX = 300;
// JOB_TASKS_MAX bounds the tasks a job's page reads at once.
const JOB_TASKS_MAX = 2000;

// TASK_COLUMNS are the task list's columns: header, the value it sorts
// by, and the cell.
const TASK_COLUMNS = [
  ["id", t => t.id, t => taskLink(t.id)],
  ["name", t => t.name || "", t => t.name || "-"],
  ["state", t => t.state, t => t.state],
  ["queue", t => t.queue || "default", t => t.queue || "default"],
  ["tier", t => t.priority === undefined ? 2 : t.priority, t => tierName(t.priority)],
  ["resources", t => resourcesOf(t), t => resourcesOf(t) || "-"],
  ["devices", t => devicesOf(t), t => devicesOf(t) || "-"],
  ["node", t => t.node || "", t => t.node ? el("a", { href: "#/node/" + encodeURIComponent(t.node) }, t.node) : "-"],
  ["age", t => -new Date(t.submitted).getTime(), t => fmtDuration(Math.max(0, (Date.now() - new Date(t.submitted).getTime()) / 1000))],
  ["duration", t => durationOf(t), t => t.started ? fmtDuration(durationOf(t)) : "-"],
  ["reason", t => t.reason || "", t => t.reason || ""],
];

function resourcesOf(t) {
  return Object.entries(t.resources || {}).map(([k, v]) => k.replace(/^.*\//, "") + "=" + v)
    .sort().join(", ");
}

function devicesOf(t) {
  const groups = new Map();
  for (const d of t.devices || []) {
    const k = d.type.replace(/^.*\//, "") + "|" + (d.model || "");
    groups.set(k, [...(groups.get(k) || []), d.id]);
  }
  return [...groups].map(([k, ids]) => {
    const [typ, model] = k.split("|");
    return typ + ":" + ids.join(",") + (model ? " (" + model + ")" : "");
  }).join(", ");
}

// durationOf is how long a task ran (so far), in seconds; -1 before it
// started.
function durationOf(t) {
  if (!t.started) return -1;
  const end = t.finished ? new Date(t.finished).getTime() : Date.now();
  return Math.max(0, (end - new Date(t.started).getTime()) / 1000);
}

// The task list: newest first, one page of the server's; sort= (a
// column, -column descending) orders the page, q= keeps the rows whose
// id, name, node or reason hold it.
VIEWS.tasks = async (_, params) => {
  const q = new URLSearchParams({ limit: "100", order: "newest" });
  for (const k of ["state", "queue", "node", "job", "cursor"]) if (params.get(k)) q.set(k, params.get(k));
  const page = await api("/api/v1/tasks?" + q.toString());
  let tasks = page.tasks;
  const search = (params.get("q") || "").toLowerCase();
  if (search) tasks = tasks.filter(t => [t.id, t.name, t.node, t.reason].some(s => (s || "").toLowerCase().includes(search)));
  const sort = params.get("sort") || "";
  const col = TASK_COLUMNS.find(c => c[0] === sort.replace(/^-/, ""));
  if (col) {
    const dir = sort.startsWith("-") ? -1 : 1;
    tasks = [...tasks].sort((a, b) => { const x = col[1](a), y = col[1](b); return (x < y ? -1 : x > y ? 1 : 0) * dir; });
  }
  const rows = tasks.map(t => el("tr", { "data-id": t.id }, TASK_COLUMNS.map(([name, , cell]) =>
    el("td", name === "state" ? { class: "state-" + t.state, "data-field": "state" } : name === "reason" ? { class: "muted" } : { "data-field": name }, cell(t)))));
  const form = filterForm("tasks", "task-filters", [
    el("input", { name: "q", placeholder: "search id, name, node, reason", value: params.get("q") || "" }),
    selectField("state", TASK_STATES, params.get("state"), "any state"),
    el("input", { name: "queue", placeholder: "queue", value: params.get("queue") || "" }),
    el("input", { name: "node", placeholder: "node", value: params.get("node") || "" }),
    el("input", { name: "job", placeholder: "job", value: params.get("job") || "" })]);
  const headers = TASK_COLUMNS.map(([name]) => {
    const p = new URLSearchParams(params);
    p.set("sort", sort === name ? "-" + name : name);
    const mark = sort === name ? " \u25b2" : sort === "-" + name ? " \u25bc" : "";
    return { label: el("a", { href: "#/tasks?" + p.toString(), "data-sort": name }, name + mark) };
  });
  return [el("section", { class: "card" }, el("h2", {}, "Tasks"), form,
    table(headers, rows, { id: "tasks" }),
    rows.length === 0 ? el("p", { class: "muted", id: "no-tasks" }, "No tasks.") : null,
    pager("tasks", params, page.cursor))];
};

VIEWS.task = async id => {
  const t = await api("/api/v1/tasks/" + encodeURIComponent(id));
  const job = jobOf(t);
  const fields = [
    ["State", t.state, "state"], ["Reason", t.reason, "reason"], ...requested(t), ["Queue", t.queue || "default"],
    ["Tier", tierName(t.priority)], ["Job", job ? el("a", { href: "#/job/" + encodeURIComponent(job) }, job) : undefined],
    ["Node", t.node ? el("a", { href: "#/node/" + encodeURIComponent(t.node) }, t.node) : undefined],
    ["Devices", (t.devices || []).map(d => d.type + ":" + d.id).join(", ")], ["Attempt", t.attempt],
    ["Submitted", fmtTime(t.submitted)], ["Scheduled", fmtTime(t.scheduled)], ["Started", fmtTime(t.started)],
    ["Finished", fmtTime(t.finished)], ["Exit code", t.exitCode], ["Trace", t.trace],
  ];
  if (t.queueing) {
    fields.push(["Queue position", (t.queueing.positionAtMost ? "at most " : "") + t.queueing.position +
      " among its class, " + t.queueing.ahead + " waiting in more important tiers", "position"]);
    fields.push(["Estimated start", t.queueing.estimatedStart ? fmtTime(t.queueing.estimatedStart) : "unknown", "estimated-start"]);
  }
  const attempts = (t.attempts || []).map(a => el("tr", {},
    el("td", {}, a.attempt), el("td", {}, a.node || "-"), el("td", {}, fmtTime(a.started)),
    el("td", {}, fmtTime(a.finished)), el("td", {}, a.exitCode === undefined ? "-" : a.exitCode), el("td", {}, a.reason || "")));
  const final = ["succeeded", "failed", "timeout", "cancelled", "expired", "skipped"].includes(t.state);
  return [el("section", { class: "card", id: "task", "data-id": t.id }, el("h2", {}, "Task " + t.id),
    el("dl", {}, fields.map(([k, v, f]) => [el("dt", {}, k), el("dd", { "data-field": f || null }, v === undefined || v === "" || v === null ? "-" : v)])),
    final ? null : actionBar("task-actions-" + t.id, action("cancel-task", "Cancel task", "Cancel " + t.id + "? Click again",
      async () => { await apiSend("DELETE", "/api/v1/tasks/" + encodeURIComponent(t.id)); return "cancelled"; }))),
  (t.command || []).length ? logTail(t) : null,
  el("section", { class: "card" }, el("h2", {}, "Earlier attempts"),
    attempts.length ? table(["attempt", "node", "started", "finished", "exit", "reason"], attempts) : el("p", { class: "muted" }, "None."))];
};

// requested are what a task asked for, next to its reason (issue 45 §4):
// its resources, alternatives, node selector and affinity, tolerations
// and placement constraints, each a field only when the task gives it.
function requested(t) {
  const kv = m => Object.entries(m || {}).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => k + "=" + v).join(", ");
  const terms = (list, what) => (list || []).map(x => what + " " + (x.match || kv(x.selector)) + " by " + x.topologyKey +
    (x.required ? " (required)" : x.weight ? " (weight " + x.weight + ")" : ""));
  const out = [["Requested", kv(t.resources) || "nothing", "requested"]];
  if ((t.alternatives || []).length) {
    out.push(["Alternatives", t.alternatives.map(a => kv(a.resources) + (a.speed ? " (speed " + a.speed + ")" : "")).join("; "), "alternatives"]);
  }
  if (t.nodeSelector) out.push(["Node selector", kv(t.nodeSelector), "node-selector"]);
  if ((t.nodeAffinity || []).length) out.push(["Node affinity", t.nodeAffinity.join(" or "), "node-affinity"]);
  if ((t.tolerations || []).length) out.push(["Tolerations", t.tolerations.join(", "), "tolerations"]);
  const constraints = [...terms(t.affinity, "near"), ...terms(t.antiAffinity, "away from"),
    ...(t.spread || []).map(s => "spread " + (s.match || kv(s.selector)) + " by " + s.topologyKey + " (max skew " + s.maxSkew + ")"),
    ...(t.hostPorts || []).map(p => "host port " + p.port + "/" + (p.protocol || "TCP"))];
  if (constraints.length) out.push(["Constraints", constraints.join("; "), "constraints"]);
  return out;
}

// jobOf is the job a job's task belongs to: its "job" metadata, when its
// id is "<job>.<task>" (a standalone task's own "job" metadata is not one).
function jobOf(t) {
  const j = (t.metadata || {}).job;
  return j && t.id.startsWith(j + ".") ? j : "";
}

// logTail is a task's output, followed while it runs
// (GET /tasks/{id}/logs?follow=true): the newest LOG_KEEP characters,
// kept across live re-renders for as long as the attempt is the same.
function logTail(t) {
  const started = !!t.started || ["succeeded", "failed", "timeout", "cancelled"].includes(t.state);
  const key = "log:" + t.id + ":" + t.attempt + ":" + (started ? "run" : "wait");
  const out = el("pre", { id: "log", class: "log" });
  const status = el("p", { class: "muted", id: "log-status" });
  const card = el("section", { class: "card", "data-keep": key }, el("h2", {}, "Output (attempt " + t.attempt + ")"), status, out);
  if (!started) {
    status.textContent = "No output yet: the task has not started.";
    return card;
  }
  const signal = stream(card);
  status.textContent = "Following…";
  (async () => {
    try {
      const resp = await fetch("/api/v1/tasks/" + encodeURIComponent(t.id) + "/logs?follow=true&attempt=" + t.attempt,
        { headers: authHeaders("text/plain"), signal, cache: "no-store", credentials: "omit" });
      if (!resp.ok) {
        let msg = resp.statusText;
        try { msg = (await resp.json()).error.message; } catch (e) { /* not the API's error */ }
        status.textContent = "No output: " + msg;
        return;
      }
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += value;
        if (text.length > LOG_KEEP) text = text.slice(text.length - LOG_KEEP);
        const follow = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
        out.textContent = text;
        if (follow) out.scrollTop = out.scrollHeight;
      }
      status.textContent = text.length >= LOG_KEEP ? "Ended; the last " + LOG_KEEP / 1024 + " KiB are shown." : "Ended.";
    } catch (e) {
      if (!signal.aborted) status.textContent = "The log stream broke: " + e.message;
    }
  })();
  return card;
}

VIEWS.jobs = async (_, params) => {
  const q = new URLSearchParams({ limit: "100" });
  for (const k of ["state", "queue", "cursor"]) if (params.get(k)) q.set(k, params.get(k));
  const page = await api("/api/v1/jobs?" + q.toString());
  const rows = (page.jobs || []).map(j => el("tr", { "data-job": j.id },
    el("td", {}, el("a", { href: "#/job/" + encodeURIComponent(j.id) }, j.id)),
    el("td", {}, j.name || ""),
    el("td", { class: "state-" + j.state, "data-field": "state" }, j.state),
    el("td", {}, j.queue || "default"),
    el("td", {}, tierName(j.priority)),
    el("td", { "data-field": "counts" }, countsText(j.counts)),
    el("td", {}, j.gang ? "min " + j.gang.minMember : "-"),
    el("td", {}, fmtTime(j.submitted))));
  const form = filterForm("jobs", "job-filters", [
    selectField("state", JOB_STATES, params.get("state"), "any state"),
    el("input", { name: "queue", placeholder: "queue", value: params.get("queue") || "" })]);
  return [el("section", { class: "card" }, el("h2", {}, "Jobs"), form,
    rows.length ? table(["id", "name", "state", "queue", "tier", "tasks", "gang", "submitted"], rows, { id: "jobs" })
      : el("p", { class: "muted", id: "no-jobs" }, "No jobs."),
    pager("jobs", params, page.cursor))];
};

function countsText(counts) {
  return Object.entries(counts || {}).sort().map(([s, n]) => s + " " + n).join(", ") || "-";
}

VIEWS.job = async id => {
  const path = "/api/v1/jobs/" + encodeURIComponent(id);
  let j = await api(path + "?tasks=false");
  const size = Object.values(j.counts || {}).reduce((a, b) => a + b, 0);
  if (size <= JOB_TASKS_MAX) j = await api(path);
  const tasks = j.tasks || [];
  const out = [el("section", { class: "card", id: "job", "data-job": j.id }, el("h2", {}, "Job " + j.id + (j.name ? " (" + j.name + ")" : "")),
    el("dl", {},
      el("dt", {}, "State"), el("dd", { "data-field": "state", class: "state-" + j.state }, j.state),
      el("dt", {}, "Tasks"), el("dd", { "data-field": "counts" }, countsText(j.counts)),
      el("dt", {}, "Queue"), el("dd", {}, j.queue || "default"),
      el("dt", {}, "Tier"), el("dd", {}, tierName(j.priority)),
      el("dt", {}, "On failure"), el("dd", {}, (j.failurePolicy || "failFast") + (j.retries ? ", " + j.retries.limit + " retries" + (j.retries.backoff ? " after " + j.retries.backoff : "") : "")),
      el("dt", {}, "Submitted"), el("dd", {}, fmtTime(j.submitted))),
    ["succeeded", "failed", "cancelled"].includes(j.state) ? null : actionBar("job-actions-" + j.id,
      action("cancel-job", "Cancel job", "Cancel every unfinished task of " + j.id + "? Click again",
        async () => { await apiSend("DELETE", path); return "cancelled"; })))];
  if (j.gang) out.push(gangCard(j, tasks));
  if (size > JOB_TASKS_MAX) {
    out.push(el("section", { class: "card" }, el("h2", {}, "Tasks"),
      el("p", {}, size + " tasks: too many to draw. ", el("a", { href: "#/tasks?job=" + encodeURIComponent(j.id) }, "List them →"))));
  } else if (tasks.length <= DAG_MAX) {
    out.push(el("section", { class: "card" }, el("h2", {}, "Graph"), dag(j.id, tasks)));
  } else {
    out.push(el("section", { class: "card" }, el("h2", {}, "Tasks"),
      table(["task", "state", "depends on", "reason"], tasks.map(t => el("tr", { "data-id": t.id },
        el("td", {}, taskLink(t.id)), el("td", { class: "state-" + t.state }, t.state),
        el("td", {}, (t.depends || []).map(d => localName(j.id, d)).join(", ") || "-"), el("td", { class: "muted" }, t.reason || ""))), { id: "job-tasks" })));
  }
  return out;
};

function localName(job, id) { return id.startsWith(job + ".") ? id.slice(job.length + 1) : id; }

// gangCard is the gang's status: how many of its members are placed
// against minMember, and why it waits or failed.
function gangCard(j, tasks) {
  const g = j.gang;
  const names = g.tasks && g.tasks.length ? new Set(g.tasks.map(n => j.id + "." + n)) : null;
  const members = tasks.filter(t => !names || names.has(t.id));
  const placedStates = ["scheduled", "running", "succeeded"];
  let placed, total;
  if (tasks.length) {
    placed = members.filter(t => placedStates.includes(t.state)).length;
    total = members.length;
  } else { // a big job's page reads counts only
    placed = placedStates.reduce((n, s) => n + ((j.counts || {})[s] || 0), 0);
    total = Object.values(j.counts || {}).reduce((a, b) => a + b, 0);
  }
  const waiting = members.find(t => t.state === "pending" && t.reason);
  const failed = members.find(t => ["failed", "timeout", "cancelled"].includes(t.state) && /gang/.test(t.reason || ""));
  let status;
  if (failed) status = "failed: " + failed.reason;
  else if (placed >= g.minMember) status = "started: " + placed + " of " + total + " members placed (at least " + g.minMember + " needed)";
  else status = "waiting: " + placed + " of " + total + " members placed, " + g.minMember + " needed to start" + (waiting ? ". " + waiting.reason : "");
  return el("section", { class: "card", id: "gang" }, el("h2", {}, "Gang"),
    el("dl", {},
      el("dt", {}, "Status"), el("dd", { "data-field": "gang-status" }, status),
      el("dt", {}, "Placed"), el("dd", { "data-field": "gang-placed" }, placed + " / " + g.minMember),
      el("dt", {}, "Timeout"), el("dd", {}, g.timeout || "none"),
      el("dt", {}, "Members"), el("dd", {}, names ? g.tasks.join(", ") : "every task"),
      el("dt", {}, "Topology"), el("dd", {}, (g.topology || []).join(", ") || "nvlink, ici, rack")));
}

// dag draws a job's tasks left to right: a task's column is one past the
// deepest task it depends on, each box coloured by its state, an arrow
// from each dependency; a box opens its task.
function dag(job, tasks) {
  const byId = new Map(tasks.map(t => [t.id, t]));
  const depth = new Map();
  // Longest path from a root, by relaxation: at most len(tasks) passes
  // over a DAG (the API refuses cycles); bounded either way.
  for (const t of tasks) depth.set(t.id, 0);
  for (let pass = 0, moved = true; moved && pass < tasks.length; pass++) {
    moved = false;
    for (const t of tasks) for (const d of t.depends || []) {
      if (byId.has(d) && depth.get(t.id) < depth.get(d) + 1) { depth.set(t.id, depth.get(d) + 1); moved = true; }
    }
  }
  const cols = [];
  for (const t of tasks) (cols[depth.get(t.id)] ||= []).push(t);
  const pos = new Map();
  const W = 170, H = 34, GX = 60, GY = 12;
  cols.forEach((col, ci) => {
    if (ci > 0) { // order a column by where its dependencies sit (fewer crossings)
      const rank = t => { const ys = (t.depends || []).filter(d => pos.has(d)).map(d => pos.get(d).y); return ys.length ? ys.reduce((a, b) => a + b) / ys.length : 0; };
      col.sort((a, b) => rank(a) - rank(b) || a.id.localeCompare(b.id));
    }
    col.forEach((t, ri) => pos.set(t.id, { x: ci * (W + GX), y: ri * (H + GY) }));
  });
  const width = Math.max(1, cols.length) * (W + GX) - GX, height = Math.max(...cols.map(c => c.length)) * (H + GY) - GY;
  const edges = [], boxes = [];
  for (const t of tasks) {
    const to = pos.get(t.id);
    for (const d of t.depends || []) {
      const from = pos.get(d);
      if (!from) continue;
      const x1 = from.x + W, y1 = from.y + H / 2, x2 = to.x, y2 = to.y + H / 2, mx = (x1 + x2) / 2;
      edges.push(svg("path", { class: "edge", d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2 - 6},${y2}`, "marker-end": "url(#arrow)", "data-edge": localName(job, d) + "->" + localName(job, t.id) }));
    }
    const name = localName(job, t.id);
    boxes.push(svg("a", { href: "#/task/" + encodeURIComponent(t.id), "data-task": name, "data-state": t.state },
      svg("title", {}, name + ": " + t.state + (t.reason ? " — " + t.reason : "")),
      svg("rect", { class: "box state-" + t.state, x: to.x, y: to.y, width: W, height: H, rx: 5 }),
      svg("text", { x: to.x + 8, y: to.y + 14 }, name.length > 22 ? name.slice(0, 21) + "…" : name),
      svg("text", { class: "sub", x: to.x + 8, y: to.y + 28 }, t.state)));
  }
  return el("div", { class: "dag" }, svg("svg", { id: "dag", width, height, viewBox: `0 0 ${width} ${height}` },
    svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 1, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" },
      svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }))),
    edges, boxes));
}
