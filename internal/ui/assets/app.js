// hetsched's web UI: views chosen by the URL's fragment, every number
// read from the HTTP API with the tab's token (sessionStorage, sent as a
// bearer header), live updates from GET /api/v1/events read as a stream.
// No library, no build step. Text from the API is inserted as text
// (textContent), never as HTML.
//
// This file is the frame: the API client, element helpers, formatting,
// the router and the live stream. cluster.js (overview, queues, nodes)
// and work.js (tasks, jobs, logs) register their views in VIEWS.
"use strict";

const TOKEN_KEY = "hetsched.token";
const TIERS = ["urgent", "high", "medium", "low"];
// VIEWS maps a fragment's first path segment ("tasks" in #/tasks?x=1,
// "task" in #/task/ID) to a function (rest, params) that resolves to the
// view's nodes.
const VIEWS = {};

let renderSeq = 0; // the latest render: an older one's answers are dropped
let renderedHash = ""; // the fragment the page shows now
let renderCost = 0; // how long the latest render took, ms
let events = null; // the live stream's AbortController

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

// ApiError is an API answer other than 2xx, with its code and message.
class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

function authHeaders(accept) {
  const headers = { "Accept": accept };
  if (token()) headers["Authorization"] = "Bearer " + token();
  return headers;
}

async function api(path) { return apiSend("GET", path); }

// apiSend is a request with method and, unless undefined, a JSON body;
// an answer other than 2xx is an ApiError.
async function apiSend(method, path, body) {
  const headers = authHeaders("application/json");
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store", credentials: "omit" });
  let out = null;
  try { out = await resp.json(); } catch (e) { out = null; }
  if (!resp.ok) {
    const err = out && out.error ? out.error : { code: String(resp.status), message: resp.statusText };
    throw new ApiError(resp.status, err.code, err.message);
  }
  return out;
}

// el builds an element: attributes, then children (strings become text).
function el(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

// svg builds an SVG element as el does.
function svg(tag, attrs, ...children) {
  return fill(document.createElementNS("http://www.w3.org/2000/svg", tag), attrs, children);
}

function fill(e, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "class") e.setAttribute("class", v); else e.setAttribute(k, v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// table is a table that scrolls inside its card when it is wider.
function table(headers, rows, attrs) {
  return el("div", { class: "scroll" }, el("table", attrs,
    el("thead", {}, el("tr", {}, headers.map(h => el("th", { class: h.num ? "num" : null }, h.label || h)))),
    el("tbody", {}, rows)));
}

// filterForm is a form of filters whose submit moves to #/<path>?<its
// fields>; it is kept across live re-renders (data-keep), so what a user
// types and where the caret is survive an update.
function filterForm(path, id, fields) {
  const form = el("form", { class: "filters", id, "data-keep": id }, fields, el("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", ev => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) p.set(k, v);
    location.hash = "#/" + path + (p.toString() ? "?" + p.toString() : "");
  });
  return form;
}

function selectField(name, values, current, anyLabel) {
  return el("select", { name }, ["", ...values].map(
    s => el("option", s === (current || "") ? { value: s, selected: "" } : { value: s }, s || anyLabel)));
}

// pager is the links under a paged list: back to the first page, and on
// to the next while the API gave a cursor.
function pager(path, params, cursor) {
  const links = [];
  if (params.get("cursor")) {
    const first = new URLSearchParams(params);
    first.delete("cursor");
    links.push(el("a", { href: "#/" + path + (first.toString() ? "?" + first.toString() : ""), id: "first-page" }, "← First page"), " ");
  }
  if (cursor) {
    const next = new URLSearchParams(params);
    next.set("cursor", cursor);
    links.push(el("a", { href: "#/" + path + "?" + next.toString(), id: "next-page" }, "Next page →"));
  }
  return links.length ? el("p", { class: "pager" }, links) : null;
}

// Units: the API's canonical integers (cpu in millicores, memory in
// bytes, extended resources in thousandths), shown as the CLI shows them.
function fmtResource(name, v) {
  if (name === "memory" || name === "ephemeral-storage") return fmtBytes(v);
  const x = v / 1000;
  return Number.isInteger(x) ? String(x) : x.toFixed(3).replace(/0+$/, "");
}

// fmtBase writes a quantity in base units (cores, devices, bytes) in a
// person's units: bytes in Ki, Mi, Gi…, the rest to three decimals.
function fmtBase(name, v) {
  if (name === "memory" || name === "ephemeral-storage") return fmtBytes(v);
  return String(+v.toFixed(3));
}

function fmtBytes(v) {
  const units = ["B", "Ki", "Mi", "Gi", "Ti", "Pi"];
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (Number.isInteger(v) ? v : v.toFixed(1)) + units[i];
}

// parseQty reads a quantity as the API writes it ("2", "1.5", "500m",
// "64Gi") in base units (cores, devices, bytes).
function parseQty(s) {
  const m = /^([0-9]+(?:\.[0-9]+)?)(m|Ki|Mi|Gi|Ti|Pi|Ei)?$/.exec(String(s || "0"));
  if (!m) return NaN;
  const mult = { m: 1e-3, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
  return parseFloat(m[1]) * (m[2] ? mult[m[2]] : 1);
}

function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }

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

function tierName(p) { return TIERS[p === undefined ? 2 : p] || String(p); }

function taskLink(id, text) { return el("a", { href: "#/task/" + encodeURIComponent(id) }, text || id); }

// route renders the view the fragment names. live is set when an event
// asked for it: the page then keeps its kept parts (data-keep) and the
// focus stays where the user had it.
async function route(live) {
  const seq = ++renderSeq;
  const started = performance.now();
  const hash = location.hash || "#/overview";
  const [path, query] = hash.slice(1).split("?");
  const params = new URLSearchParams(query || "");
  const segs = path.split("/").filter(Boolean);
  const name = segs[0] || "overview";
  const section = { task: "tasks", job: "jobs", node: "nodes" }[name] || name;
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.id === "nav-" + section);
  const view = VIEWS[name];
  try {
    const nodes = view ? await view(segs.slice(1).map(decodeURIComponent).join("/"), params) : [el("p", { class: "error" }, "No page " + path)];
    if (seq !== renderSeq) return;
    put(nodes, live === true && hash === renderedHash);
    renderedHash = hash;
    main.dataset.rendered = String(seq);
    renderCost = performance.now() - started;
    main.dataset.renderedAt = String(Math.round(performance.now())); // ms since the page's navigation began
    startEvents();
  } catch (err) {
    if (seq !== renderSeq) return;
    if (err instanceof ApiError && err.status === 401) { askToken(err.message); return; }
    renderedHash = "";
    put([el("p", { class: "error", id: "error" }, err.message)], false);
  }
}

const main = document.getElementById("main");

// put shows nodes in main. With keep, an element of the new view whose
// data-keep matches one on the page is replaced by the one on the page
// (a filter form being typed in, a log being followed), and the focused
// element gets the focus and its selection back.
function put(nodes, keep) {
  const active = document.activeElement;
  const caret = active && "selectionStart" in active ? [active.selectionStart, active.selectionEnd] : null;
  if (keep) {
    const old = new Map([...main.querySelectorAll("[data-keep]")].map(e => [e.dataset.keep, e]));
    for (const n of nodes) {
      if (!(n instanceof Element)) continue;
      for (const e of [n, ...n.querySelectorAll("[data-keep]")]) {
        const o = e.dataset.keep !== undefined ? old.get(e.dataset.keep) : undefined;
        if (o && o !== e) e.replaceWith(o);
        if (o && e === n) nodes[nodes.indexOf(n)] = o;
      }
    }
  }
  main.replaceChildren(...nodes.filter(n => n !== null && n !== undefined));
  stopDetached();
  if (active && active !== document.body && active.isConnected && document.activeElement !== active) {
    active.focus({ preventScroll: true });
    if (caret) try { active.setSelectionRange(caret[0], caret[1]); } catch (e) { /* not a text field */ }
  }
}

// Streams a view started (a followed log) end once their element left
// the page.
const streams = new Map(); // element → AbortController

function stream(elem) {
  const c = new AbortController();
  streams.set(elem, c);
  return c.signal;
}

function stopDetached() {
  for (const [e, c] of streams) if (!e.isConnected) { c.abort(); streams.delete(e); }
}

function askToken(message) {
  stopEvents();
  const form = document.getElementById("token-form").content.firstElementChild.cloneNode(true);
  main.replaceChildren(form);
  stopDetached();
  if (token()) form.querySelector("#token-error").textContent = message;
  form.addEventListener("submit", ev => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, form.querySelector("#token-input").value.trim());
    document.getElementById("signout").hidden = false;
    route();
  });
}

// Live updates: the events stream, read with fetch (EventSource cannot
// send the token). A change re-renders the view once the page is quiet:
// at most every 500 ms, and never more than a tenth of the time (a view
// that took 300 ms to render waits 3 s), so a busy fleet's event rate
// cannot keep the browser or the server busy.
function startEvents() {
  if (events || document.hidden) return;
  events = new AbortController();
  const signal = events.signal;
  const live = document.getElementById("live");
  let pending = null;
  const changed = () => {
    if (pending) return;
    pending = setTimeout(() => { pending = null; route(true); }, Math.min(10000, Math.max(500, 10 * renderCost)));
  };
  (async () => {
    try {
      const resp = await fetch("/api/v1/events", { headers: authHeaders("text/event-stream"), signal, cache: "no-store", credentials: "omit" });
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
        if (buf.length > 1 << 20) buf = ""; // a frame this big is not one of ours: drop it, stay bounded
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

document.addEventListener("DOMContentLoaded", () => {
  const signout = document.getElementById("signout");
  signout.addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    signout.hidden = true;
    stopEvents();
    route();
  });
  signout.hidden = !token();
  window.addEventListener("hashchange", () => route());
  // A browser holds 6 connections per server over HTTP/1.1, and each tab's
  // live stream is one: a page put away (a tab in the background, a page
  // left for the back-forward cache) closes its stream and reopens it,
  // re-rendering, when it shows again.
  window.addEventListener("pagehide", () => stopEvents());
  window.addEventListener("pageshow", ev => { if (ev.persisted) route(true); });
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) stopEvents(); else route(true);
  });
  route();
});
