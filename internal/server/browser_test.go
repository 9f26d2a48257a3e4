package server

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// csrfBody is the command task: it would write pwned.txt.
const csrfBody = `{"id":"csrf","command":["sh","-c","id > pwned.txt"],"resources":{"cpu":"10m"}}`

// send makes one raw request and returns its status, error code and headers.
func send(t *testing.T, method, url, host string, hdr map[string]string, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e errorBody
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, string(e.Error.Code), resp.Header
}

// The reproductions, sent exactly, against a server with auth off:
// each is refused and nothing is stored.
func TestBrowserPagesCannotReachTheAPI(t *testing.T) {
	s := start(t, t.TempDir())
	defer s.stop(t)
	tasks := s.base + "/api/v1/tasks"
	_, port, _ := strings.Cut(strings.TrimPrefix(s.base, "http://"), ":")

	// curl -X POST -H 'Content-Type: text/plain;charset=UTF-8' -H 'Origin: http://evil.example' --data '…'
	code, ec, hdr := send(t, "POST", tasks, "", map[string]string{"Content-Type": "text/plain;charset=UTF-8", "Origin": "http://evil.example"}, csrfBody)
	if code != 403 || ec != "permission_denied" {
		t.Errorf("cross-origin text/plain POST: %d %s, want 403", code, ec)
	}
	if hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS header sent to a foreign origin: %q", hdr.Get("Access-Control-Allow-Origin"))
	}
	// The same body from a non-browser client without Origin, as text/plain.
	if code, ec, _ = send(t, "POST", tasks, "", map[string]string{"Content-Type": "text/plain;charset=UTF-8"}, csrfBody); code != 415 || ec != "unsupported_media_type" {
		t.Errorf("text/plain POST: %d %s, want 415", code, ec)
	}
	// A form post and a body without a Content-Type.
	for _, ct := range []string{"application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
		h := map[string]string{}
		if ct != "" {
			h["Content-Type"] = ct
		}
		if code, _, _ = send(t, "POST", tasks, "", h, csrfBody); code != 415 {
			t.Errorf("POST as %q: %d, want 415", ct, code)
		}
	}
	// curl -H 'Host: evil.example:7070' http://127.0.0.1:7070/api/v1/tasks (DNS rebinding)
	if code, ec, _ = send(t, "GET", tasks, "evil.example:"+port, nil, ""); code != 421 || ec != "misdirected" {
		t.Errorf("rebound Host GET: %d %s, want 421", code, ec)
	}
	if code, _, _ = send(t, "POST", tasks, "evil.example:"+port, map[string]string{"Content-Type": "application/json"}, csrfBody); code != 421 {
		t.Errorf("rebound Host POST: %d, want 421", code)
	}
	// Nothing was stored.
	c, m := call(t, "GET", tasks, "")
	if c != 200 || len(m["tasks"].([]any)) != 0 {
		t.Fatalf("after the refused requests: %d %v", c, m)
	}
	if c, _ := call(t, "GET", tasks+"/csrf", ""); c != 404 {
		t.Fatalf("the csrf task exists: %d", c)
	}

	// What the CLI and same-origin pages send still works.
	for _, host := range []string{"", "localhost:" + port, "[::1]:" + port} {
		if code, _, _ = send(t, "GET", tasks, host, nil, ""); code != 200 {
			t.Errorf("GET with Host %q: %d", host, code)
		}
	}
	own := map[string]string{"Content-Type": "application/json", "Origin": s.base}
	if code, ec, _ = send(t, "POST", tasks, "", own, `{"id":"same-origin","resources":{"cpu":"10m"}}`); code != 201 {
		t.Errorf("same-origin JSON POST: %d %s", code, ec)
	}
	if code, _, _ = send(t, "POST", tasks, "", map[string]string{"Content-Type": "application/json; charset=utf-8"}, `{"id":"json-utf8","resources":{"cpu":"10m"}}`); code != 201 {
		t.Errorf("JSON with charset: %d", code)
	}
	// A write without a body needs no Content-Type (cancel).
	if code, _, _ = send(t, "DELETE", tasks+"/json-utf8", "", nil, ""); code != 200 {
		t.Errorf("DELETE without a body: %d", code)
	}
}

// With tokens on, any Host is served (names are the operator's), but a
// foreign Origin is still refused unless --allow-origin lists it, and a
// listed origin gets CORS headers and its preflight answered.
func TestAllowedOriginsGetCORS(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	writeFile(t, tokens, "tokens:\n  - {token: "+adminTok+", role: admin}\n")
	s := startWith(t, Options{DataDir: filepath.Join(dir, "data"), TokensFile: tokens, AllowOrigins: []string{"https://ui.example:8443"}})
	defer s.stop(t)
	tasks := s.base + "/api/v1/tasks"
	auth := "Bearer " + adminTok
	if code, _, _ := send(t, "GET", tasks, "scheduler.internal:7070", map[string]string{"Authorization": auth}, ""); code != 200 {
		t.Errorf("tokens on, another Host: %d, want 200", code)
	}
	code, _, hdr := send(t, "POST", tasks, "", map[string]string{"Authorization": auth, "Content-Type": "application/json", "Origin": "http://evil.example"}, csrfBody)
	if code != 403 || hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("tokens on, foreign origin: %d, ACAO %q", code, hdr.Get("Access-Control-Allow-Origin"))
	}
	code, _, hdr = send(t, "OPTIONS", tasks, "", map[string]string{"Origin": "https://ui.example:8443", "Access-Control-Request-Method": "POST"}, "")
	if code != 204 || hdr.Get("Access-Control-Allow-Origin") != "https://ui.example:8443" || !strings.Contains(hdr.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %d %v", code, hdr)
	}
	code, _, hdr = send(t, "POST", tasks, "", map[string]string{"Authorization": auth, "Content-Type": "application/json", "Origin": "https://ui.example:8443"}, `{"id":"from-ui","resources":{"cpu":"10m"}}`)
	if code != 201 || hdr.Get("Access-Control-Allow-Origin") != "https://ui.example:8443" {
		t.Errorf("allowed origin: %d, ACAO %q", code, hdr.Get("Access-Control-Allow-Origin"))
	}
}

func TestAllowOriginValidated(t *testing.T) {
	for _, bad := range []string{"evil.example", "ftp://x", "https://x/path", "https://", "*"} {
		if _, err := ParseAllowedOrigins([]string{bad}); err == nil {
			t.Errorf("--allow-origin %q accepted", bad)
		}
	}
	got, err := ParseAllowedOrigins([]string{"https://A.example, http://b.example:8080"})
	if err != nil || len(got) != 2 || got[0] != "https://a.example" {
		t.Errorf("got %v %v", got, err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A YAML body, as the CLI may send a job file, is read as its JSON.
func TestYAMLBody(t *testing.T) {
	s := start(t, t.TempDir())
	defer s.stop(t)
	yamlTask := "id: from-yaml\nresources: {cpu: 10m}\n"
	if code, ec, _ := send(t, "POST", s.base+"/api/v1/tasks", "", map[string]string{"Content-Type": "application/yaml"}, yamlTask); code != 201 {
		t.Fatalf("YAML task: %d %s", code, ec)
	}
	if code, ec, _ := send(t, "POST", s.base+"/api/v1/tasks", "", map[string]string{"Content-Type": "application/yaml"}, "id: [unclosed\n"); code != 400 || ec != "invalid_argument" {
		t.Fatalf("bad YAML: %d %s", code, ec)
	}
	if c, m := call(t, "GET", s.base+"/api/v1/tasks/from-yaml", ""); c != 200 || m["id"] != "from-yaml" {
		t.Fatalf("the YAML task: %d %v", c, m)
	}
}
