package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/server/servertest"
)

// completions runs cobra's hidden `__complete` (what the shell scripts
// call) and returns the completions and the directive line.
func completions(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	out, err := run(t, append([]string{"__complete"}, args...)...)
	if err != nil {
		t.Fatalf("__complete %v: %v\n%s", args, err, out)
	}
	var words []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, ":") {
			return words, l
		}
		words = append(words, strings.SplitN(l, "\t", 2)[0]) // "word\tdescription"
	}
	t.Fatalf("no directive in %q", out)
	return nil, ""
}

// TestCompletionScripts: `completion SHELL` prints cobra's script for
// each shell; another shell is refused.
func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{"bash": "__start_hetsched", "zsh": "#compdef hetsched", "fish": "complete -c hetsched", "powershell": "Register-ArgumentCompleter"} {
		out, err := run(t, "completion", shell)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("completion %s: %v\n%.300s", shell, err, out)
		}
	}
	if _, err := run(t, "completion", "tcsh"); err == nil {
		t.Error("completion tcsh accepted")
	}
}

// TestCompletionFromTheServer: kinds, and task ids, job ids, node and
// queue names from the server the command line names, each with no file
// completion.
func TestCompletionFromTheServer(t *testing.T) {
	base := servertest.Start(t, oneGPUNode)
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	dir := t.TempDir()
	for name, text := range map[string]string{
		"tasks.yaml": "- {id: t-a, resources: {cpu: \"1\"}}\n- {id: t-b, resources: {cpu: \"1\"}}\n",
		"job.yaml":   "id: etl\ntasks:\n  - {id: x, resources: {cpu: \"1\"}}\n",
	} {
		os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600)
		if out, err := run(t, "submit", "-f", filepath.Join(dir, name), "--server", base); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	req, _ := http.NewRequest("PUT", base+"/api/v1/queues/team-a", strings.NewReader(`{"name":"team-a"}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("PUT queue: %v %v", err, resp)
	}
	if out, err := run(t, "run", "-d", "--id", "team-run", "--queue", "team-a", "--server", base, "--", "true"); err != nil {
		t.Fatal(err, out)
	}
	const noFiles = ":4" // cobra.ShellCompDirectiveNoFileComp
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", ""}, "tasks jobs nodes queues servers services cluster"},
		{[]string{"get", "n"}, "nodes"},
		{[]string{"get", "tasks", ""}, ""},
		{[]string{"describe", ""}, "task job node queue service"},
		{[]string{"describe", "task", "t-"}, "t-a t-b"},
		{[]string{"describe", "job", ""}, "etl"},
		{[]string{"describe", "node", ""}, "gpu-a"},
		{[]string{"describe", "nodes", "g"}, "gpu-a"},
		{[]string{"describe", "queue", ""}, "team-a"},
		{[]string{"cancel", ""}, "task job"},
		{[]string{"cancel", "t"}, "task t-a t-b team-run"},
		{[]string{"cancel", "job", ""}, "etl"},
		{[]string{"logs", "t-b"}, "t-b"},
		{[]string{"complete", "team"}, "team-run"},
		{[]string{"renew", "t-a"}, "t-a"},
		{[]string{"renew", "t-a", ""}, ""},
		{[]string{"cordon", ""}, "gpu-a"},
		{[]string{"uncordon", "x"}, ""},
		{[]string{"drain", ""}, "gpu-a"},
	} {
		words, directive := completions(t, append(c.args[:len(c.args)-1:len(c.args)-1], "--server", base, c.args[len(c.args)-1])...)
		got := strings.Join(words, " ")
		if got != c.want || directive != noFiles {
			t.Errorf("%v: %q %s, want %q %s", c.args, got, directive, c.want, noFiles)
		}
	}
}

// TestCompletionWithoutAServer: a server that is down, or hangs, gives no
// completions within the 2s timeout and never an error in the shell.
func TestCompletionWithoutAServer(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	for _, server := range []string{"http://127.0.0.1:1", hang.URL} {
		start := time.Now()
		out, err := run(t, "__complete", "logs", "--server", server, "")
		if err != nil || strings.TrimSpace(out) != ":4\nCompletion ended with directive: ShellCompDirectiveNoFileComp" {
			t.Errorf("%s: %v %q", server, err, out)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: completion took %v", server, d)
		}
	}
}
