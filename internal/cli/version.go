package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"

	"github.com/hetsched/hetsched/internal/metrics"
)

// Version prints the binary's build: module version, commit and its
// time, whether the tree was dirty, and the Go version.
func Version(w io.Writer, output string) error {
	b := metrics.ReadBuild()
	switch output {
	case JSON, YAML:
		j, _ := json.MarshalIndent(b, "", "  ")
		if output == YAML {
			y, err := yaml.JSONToYAML(j)
			if err != nil {
				return err
			}
			_, err = w.Write(y)
			return err
		}
		_, err := fmt.Fprintln(w, string(j))
		return err
	}
	_, err := io.WriteString(w, VersionText())
	return err
}

// VersionText is the table form of Version (also --version's).
func VersionText() string { return versionText(metrics.ReadBuild()) }

func versionText(b metrics.Build) string {
	commit := b.Commit
	switch {
	case commit == "":
		commit = "unknown (built without VCS information)"
	case b.Dirty:
		commit += " (dirty: uncommitted changes)"
	}
	t := b.Time
	if t == "" {
		t = "unknown"
	}
	return fmt.Sprintf("hetsched %s\ncommit:  %s\ntime:    %s\ngo:      %s\n", b.Version, commit, t, b.GoVersion)
}
