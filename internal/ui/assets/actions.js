// Actions and charts.
//
// Actions change the cluster through the API the CLI uses, with the
// tab's token: the server decides whether the token may (a tenant's may
// cancel its own work, not cordon a node), and a refusal shows its
// message beside the button. A button acts on its second click (the
// first asks to confirm); the answer is shown after the view renders
// again.
//
// Charts draw the server's own recent history (GET /api/v1/series: a
// sample every 15 s of the last hour) as small SVG line charts.
"use strict";

// lastAction is the answer of the latest action ({keep, ok, text, at}),
// shown by the bar it came from (keep) in the renders of the next 10 s
// (a render may be overtaken by a live one: each shows it).
let lastAction = null;

// resultOf is the place an action's answer shows, with lastAction's
// when it belongs to keep.
function resultOf(keep) {
  const out = el("span", { class: "action-result", "data-field": "action-result", role: "status" });
  if (lastAction && lastAction.keep === keep && Date.now() - lastAction.at < 10000) {
    out.textContent = lastAction.text;
    out.classList.add(lastAction.ok ? "ok" : "error");
  }
  return out;
}

// actionBar is a row of action buttons with the place their answers
// show; it is kept across live re-renders (data-keep) so that a button
// waiting for its confirming click stays armed.
function actionBar(keep, ...buttons) {
  const out = resultOf(keep);
  return el("div", { class: "actions", "data-keep": keep }, buttons.map(b => b(keep, out)), out);
}

// action is a button for actionBar: the first click arms it, the second
// runs run (resolving to what to say), then the view renders again; a
// refusal is shown and the view stays.
function action(id, label, confirmLabel, run) {
  return (keep, out) => {
    const b = el("button", { type: "button", id, "data-action": id }, label);
    let armed = false;
    b.addEventListener("click", async () => {
      if (!armed) {
        armed = true;
        b.textContent = confirmLabel;
        b.classList.add("confirm");
        out.textContent = "";
        return;
      }
      armed = false;
      b.disabled = true;
      b.textContent = label;
      b.classList.remove("confirm");
      try {
        lastAction = { keep, ok: true, text: await run(), at: Date.now() };
        b.closest(".actions").removeAttribute("data-keep"); // stale now: the next render, live or not, builds it anew
        route();
      } catch (err) {
        out.className = "action-result error";
        out.textContent = err.message;
        b.disabled = false;
      }
    });
    return b;
  };
}

// weightForm sets a queue's weight (PUT /api/v1/queues/NAME with the
// queue as it is, its weight changed), kept while it is typed in.
function weightForm(q) {
  const keep = "weight-" + q.name;
  const out = resultOf(keep);
  const input = el("input", { type: "number", name: "weight", min: "0.001", step: "any", value: String(q.weight || 1), size: 5, "aria-label": "weight of " + q.name });
  const form = el("form", { class: "weight", "data-keep": keep, "data-queue": q.name }, input, el("button", { type: "submit" }, "Set"), out);
  form.addEventListener("submit", async ev => {
    ev.preventDefault();
    const body = { name: q.name, weight: Number(input.value) };
    if (q.parent) body.parent = q.parent;
    if (q.guaranteed && Object.keys(q.guaranteed).length) body.guaranteed = q.guaranteed;
    if (q.max && Object.keys(q.max).length) body.max = q.max;
    try {
      await apiSend("PUT", "/api/v1/queues/" + encodeURIComponent(q.name), body);
      lastAction = { keep, ok: true, text: "weight set to " + body.weight, at: Date.now() };
      form.removeAttribute("data-keep"); // stale now: the next render builds it anew
      route();
    } catch (err) {
      out.className = "action-result error";
      out.textContent = err.message;
    }
  });
  return form;
}

// seriesOf reads the server's recent history; null when it keeps none or
// the token may not read it (the charts are then left out).
async function seriesOf() {
  try { return await api("/api/v1/series"); } catch (e) { return null; }
}

const CHART_W = 320, CHART_H = 80;

// lineChart draws lines over time: lines is [{name, values: [[ms, v]]}];
// max, when set, is the top of the scale (1 for fractions), else the
// largest value; fmt writes a value for the legend (the latest).
function lineChart(id, title, lines, max, fmt) {
  lines = lines.filter(l => l.values.length > 0);
  if (!lines.length) return el("div", { class: "chart", id }, el("h3", {}, title), el("p", { class: "muted" }, "No samples yet."));
  let t0 = Infinity, t1 = -Infinity, top = max || 0;
  for (const l of lines) for (const [t, v] of l.values) { t0 = Math.min(t0, t); t1 = Math.max(t1, t); if (!max) top = Math.max(top, v); }
  top = top || 1;
  const x = t => t1 > t0 ? (t - t0) / (t1 - t0) * CHART_W : CHART_W;
  const y = v => CHART_H - Math.min(1, v / top) * (CHART_H - 2) - 1;
  const plot = svg("svg", { viewBox: `0 0 ${CHART_W} ${CHART_H}`, preserveAspectRatio: "none", class: "chart-plot", role: "img", "aria-label": title },
    svg("line", { x1: 0, y1: CHART_H - 1, x2: CHART_W, y2: CHART_H - 1, class: "axis" }),
    lines.map((l, i) => svg("polyline", { class: "s" + (i % 6), "data-line": l.name, "data-points": l.values.length,
      points: l.values.map(([t, v]) => x(t).toFixed(1) + "," + y(v).toFixed(1)).join(" ") })));
  const legend = el("div", { class: "legend" }, lines.map((l, i) =>
    el("span", {}, el("span", { class: "swatch s" + (i % 6) }), l.name + " " + fmt(l.values[l.values.length - 1][1]))));
  return el("div", { class: "chart", id }, el("h3", {}, title, " ", el("span", { class: "muted" }, "top " + fmt(top))), plot, legend);
}

// seriesLines makes a chart's lines from the points: pick(point) is a
// map name → value.
function seriesLines(points, pick) {
  const by = new Map();
  for (const p of points) for (const [name, v] of Object.entries(pick(p) || {})) {
    if (!by.has(name)) by.set(name, []);
    by.get(name).push([Date.parse(p.at), v]);
  }
  return [...by.keys()].sort().map(name => ({ name, values: by.get(name) }));
}

// historyCard is the overview's last hour: allocation and measured use
// per resource, and the waiting tasks per tier.
function historyCard(s) {
  if (!s) return null;
  const pts = s.points || [];
  return el("section", { class: "card", id: "history" }, el("h2", {}, "Last hour ", el("span", { class: "muted" }, "(a sample every " + s.every + ")")),
    el("div", { class: "charts" },
      lineChart("chart-allocated", "Allocated", seriesLines(pts, p => p.allocated), 1, pct),
      lineChart("chart-utilization", "Utilization (measured)", seriesLines(pts, p => p.utilization), 1, pct),
      lineChart("chart-pending", "Waiting by tier", seriesLines(pts, p => p.pendingByTier), 0, String)));
}

// queueHistoryCard is the queues page's last hour: the waiting tasks per
// queue.
function queueHistoryCard(s) {
  if (!s) return null;
  return el("section", { class: "card", id: "queue-history" }, el("h2", {}, "Waiting by queue, last hour"),
    lineChart("chart-queues", "Waiting tasks", seriesLines(s.points || [], p => p.pendingByQueue), 0, String));
}
