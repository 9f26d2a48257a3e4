package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hetsched/hetsched/internal/testdisk"
)

// The systemd units (issue 42 §1): deploy/systemd's units pass
// `systemd-analyze verify` (which names an unknown key or a value it
// cannot parse, and fails on a binary that is not there), carry the
// hardening users expect, and start hetsched with flags it takes: the
// unit's ExecStart with its example environment file's arguments parses
// (run with --help).
func TestSystemdUnits(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		testdisk.SkipOrFail(t, "no systemd-analyze: apt-get install -y systemd")
	}
	self, err := os.Executable() // an executable where the units name /usr/local/bin/hetsched
	if err != nil {
		t.Fatal(err)
	}
	units := map[string]string{ // unit -> its example environment file
		"hetsched-server.service":    "server.env",
		"hetsched-server-ha.service": "server-ha.env",
		"hetsched-agent.service":     "agent.env",
	}
	dir := t.TempDir()
	for unit, envFile := range units {
		t.Run(unit, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "systemd", unit))
			if err != nil {
				t.Fatal(err)
			}
			text := string(b)
			for _, want := range []string{"Restart=on-failure", "LimitNOFILE=", "ProtectSystem=strict", "NoNewPrivileges=yes", "User=hetsched", "StateDirectory=", "EnvironmentFile=", "/etc/hetsched/" + envFile} {
				if !strings.Contains(text, want) {
					t.Errorf("%s lacks %q", unit, want)
				}
			}
			path := filepath.Join(dir, unit)
			if err := os.WriteFile(path, []byte(strings.ReplaceAll(text, "/usr/local/bin/hetsched", self)), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(analyze, "verify", path).CombinedOutput()
			if err != nil || len(strings.TrimSpace(string(out))) > 0 {
				t.Fatalf("systemd-analyze verify %s: %v\n%s", unit, err, out)
			}
			args := execArgs(t, text)
			env := envArgs(t, filepath.Join("..", "..", "deploy", "systemd", envFile))
			var full []string
			for _, a := range args {
				if strings.HasPrefix(a, "$") {
					full = append(full, strings.Fields(env[strings.TrimPrefix(a, "$")])...)
					continue
				}
				full = append(full, strings.ReplaceAll(a, "%S", "/var/lib"))
			}
			if _, err := run(t, append(full, "--help")...); err != nil {
				t.Fatalf("hetsched %s: %v", strings.Join(full, " "), err)
			}
		})
	}
}

// execArgs is the unit's ExecStart command line without its binary.
func execArgs(t *testing.T, unit string) []string {
	t.Helper()
	for line := range strings.SplitSeq(unit, "\n") {
		if cmd, ok := strings.CutPrefix(line, "ExecStart="); ok {
			f := strings.Fields(cmd)
			if len(f) < 2 || f[0] != "/usr/local/bin/hetsched" {
				t.Fatalf("ExecStart=%s: want /usr/local/bin/hetsched and a command", cmd)
			}
			return f[1:]
		}
	}
	t.Fatal("no ExecStart")
	return nil
}

// envArgs reads an environment file's uncommented assignments.
func envArgs(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not KEY=VALUE", path, line)
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		env[k] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return env
}
