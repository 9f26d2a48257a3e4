// Package ui is the web UI the server serves at /ui: static pages whose
// scripts read the same HTTP API as the CLI, with the same tokens
// (docs/ui.md).
//
// Glossary:
//   - Asset: a file of the UI (index.html, app.js, cluster.js, work.js,
//     actions.js, app.css), embedded in the binary: nothing is built or fetched at
//     build, test or run time.
//   - View: one page of the UI, chosen by the URL's fragment (#/overview,
//     #/queues, #/jobs, #/job/ID, #/tasks, #/task/ID, #/nodes,
//     #/node/NAME); every number on it comes from the API.
//   - Live stream: GET /api/v1/events read by the page; an event renders
//     the view again, throttled by what the last render cost. A page put
//     away closes its stream (a browser holds 6 connections per server).
//   - Kept element: a part of a view marked data-keep (a filter form, a
//     followed log) that a live render leaves in place, with the focus.
//   - Action: a button that changes the cluster (cancel a task or job,
//     cordon, drain or uncordon a node, set a queue's weight) through the
//     API with the tab's token; the server's checks decide, and a
//     refusal shows its message. It acts on a second, confirming click.
//   - Chart: a line chart of the server's last hour (GET /api/v1/series).
//   - Token: the bearer token a user enters once; the page keeps it in
//     the tab's sessionStorage and sends it in the Authorization header
//     (never a cookie, so no other page can make the browser use it).
package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// Handler serves the UI's assets under prefix ("/ui/"): the page and its
// script and style, with a Content-Security-Policy that allows only the
// page's own script, style and API (no inline script, no framing).
func Handler(prefix string) http.Handler {
	files, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, prefix)
		if name == "" || name == "index.html" {
			name = "index.html"
		}
		if path.Clean(name) != name || strings.Contains(name, "/") {
			http.NotFound(w, r)
			return
		}
		b, err := fs.ReadFile(files, name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", contentType(name))
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(b)
	})
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	}
	return "application/octet-stream"
}
