package server

import (
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
)

// Browser protection (issue 15 §1; docs/security.md).
//
// A page the user opens can make the browser send requests to any
// address, the loopback API included, without reading the answers: a
// "simple" cross-origin POST (text/plain, a form) needs no CORS preflight,
// and DNS rebinding lets a page's own host name resolve to 127.0.0.1, so
// that it can read the answers too. With auth off (the `hetsched up`
// default) such a request would act as the user. browserGuard refuses:
//   - a write whose body is not JSON (or the CLI's YAML): 415, so no
//     simple request can carry a body the API reads;
//   - a request whose Origin is not the server's own (scheme and Host of
//     the request) nor listed by --allow-origin: 403;
//   - with auth off, a Host that is not a loopback name nor the listen
//     address: 421 (a rebound name).
//
// No CORS headers are sent unless --allow-origin lists the origin; then
// the listed origin gets them, preflights included.

// browserGuard checks every request before its route runs.
type browserGuard struct {
	// checkHost is set when auth is off: only loopback Hosts and the
	// listen address are served.
	checkHost bool
	// listenHost is the host of the listen address (no port).
	listenHost string
	// allowed are the --allow-origin origins ("https://ui.example:8443").
	allowed map[string]bool
}

// newBrowserGuard builds the guard. origins are validated by the caller
// (ParseAllowedOrigins).
func newBrowserGuard(authOff bool, listen string, origins []string) *browserGuard {
	g := &browserGuard{checkHost: authOff, allowed: make(map[string]bool, len(origins))}
	if h, _, err := net.SplitHostPort(listen); err == nil {
		g.listenHost = strings.ToLower(h)
	}
	for _, o := range origins {
		g.allowed[o] = true
	}
	return g
}

// ParseAllowedOrigins validates --allow-origin values: each is
// scheme://host[:port] with scheme http or https and nothing after it.
func ParseAllowedOrigins(vals []string) ([]string, error) {
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		for _, o := range strings.Split(v, ",") {
			o = strings.TrimSpace(o)
			if o == "" {
				continue
			}
			scheme, host, ok := strings.Cut(o, "://")
			if !ok || (scheme != "http" && scheme != "https") || host == "" || strings.ContainsAny(host, "/?#@ ") {
				return nil, errs.Invalid("allow-origin", "%q is not an origin: want scheme://host[:port] with scheme http or https", errs.Clip(o))
			}
			out = append(out, strings.ToLower(o))
		}
	}
	return out, nil
}

// check returns the error to answer r with, or nil when r may go on.
func (g *browserGuard) check(r *http.Request) error {
	if g.checkHost && !g.hostAllowed(r.Host) {
		return errs.New(errs.Misdirected, "Host", "this server has authentication off and answers only to loopback names (localhost, 127.0.0.1, [::1]) or its listen address, not %q", errs.Clip(r.Host))
	}
	if origin := r.Header.Get("Origin"); origin != "" && !g.originAllowed(origin, r) {
		return errs.New(errs.PermissionDenied, "Origin", "cross-origin requests from %q are refused (the operator may allow an origin with --allow-origin)", errs.Clip(origin))
	}
	if isWrite(r.Method) && r.ContentLength != 0 {
		ct := r.Header.Get("Content-Type")
		if !writeMediaType(ct) {
			if ct == "" {
				ct = "none"
			}
			return errs.New(errs.UnsupportedMediaType, "Content-Type", "a request body must be sent as application/json (or application/yaml), got %s", errs.Clip(ct))
		}
	}
	return nil
}

// cors sets the CORS headers for an allowed cross-origin request and
// reports whether r was a preflight, which it answers.
func (g *browserGuard) cors(w http.ResponseWriter, r *http.Request) (answered bool) {
	origin := r.Header.Get("Origin")
	if origin == "" || !g.allowed[strings.ToLower(origin)] {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// hostAllowed reports whether host (a Host header: name or IP, maybe a
// port) is a loopback name or the listen address's host.
func (g *browserGuard) hostAllowed(host string) bool {
	h := host
	if name, _, err := net.SplitHostPort(host); err == nil {
		h = name
	}
	h = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
	if h == "" {
		return false
	}
	if h == g.listenHost && !isUnspecified(h) {
		return true
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true // RFC 6761: resolvers answer loopback for these
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// isUnspecified reports whether h is 0.0.0.0 or ::, which no Host names.
func isUnspecified(h string) bool {
	ip := net.ParseIP(h)
	return ip != nil && ip.IsUnspecified()
}

// originAllowed reports whether origin is the request's own (same scheme
// and host as r) or listed by --allow-origin.
func (g *browserGuard) originAllowed(origin string, r *http.Request) bool {
	origin = strings.ToLower(origin)
	if g.allowed[origin] {
		return true
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	own := scheme + "://" + strings.ToLower(r.Host)
	if origin == own {
		return true
	}
	// A default port may be left out of one and written in the other.
	switch scheme {
	case "http":
		return origin+":80" == own || origin == strings.TrimSuffix(own, ":80")
	default:
		return origin+":443" == own || origin == strings.TrimSuffix(own, ":443")
	}
}

// isWrite reports whether method may change state.
func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// writeMediaType reports whether a write's Content-Type is one the API
// reads: application/json, or YAML as the CLI may send it (+json and
// +yaml suffixes included), with any parameters.
func writeMediaType(ct string) bool {
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return isJSONType(mt) || isYAMLType(mt)
}

func isJSONType(mt string) bool {
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

func isYAMLType(mt string) bool {
	return mt == "application/yaml" || mt == "application/x-yaml" || mt == "text/yaml"
}

// refuse answers a request the browser guard stopped, counted under its
// route like any other answer.
func (s *Server) refuse(sw *statusWriter, r *http.Request, err error) {
	writeError(sw, err)
	if s.metrics != nil {
		s.metrics.APIDuration.WithLabelValues("refused", strconv.Itoa(sw.code)).Observe(time.Since(sw.start).Seconds())
	}
}
