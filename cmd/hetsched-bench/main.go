// Command hetsched-bench runs hetsched's benchmarks (BENCHMARKS.md). It is
// its own binary, so that the shipping hetsched links none of the
// harnesses (load generators, a Kubernetes test control plane, etcd's
// tools): the benchmarks that need a server, an agent or hetsched kube
// run the hetsched binary named by --hetsched.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/cli"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "hetsched-bench:", err)
		os.Exit(1)
	}
}

// hetschedPath is --hetsched.
var hetschedPath string

func newRoot() *cobra.Command {
	root := newBench()
	root.Use = "hetsched-bench"
	root.Short = "Benchmarks of hetsched's parts (BENCHMARKS.md)"
	root.SilenceUsage, root.SilenceErrors = true, true
	root.Version = cli.VersionText()
	root.SetVersionTemplate("{{.Version}}")
	root.PersistentFlags().StringVar(&hetschedPath, "hetsched", "", "the hetsched binary the benchmarks run as server, agent or kube (default: hetsched beside this binary, else on $PATH)")
	return root
}

// hetschedBin is the hetsched binary to run: --hetsched, else hetsched
// beside this binary, else on $PATH.
func hetschedBin() (string, error) {
	if hetschedPath != "" {
		if _, err := os.Stat(hetschedPath); err != nil {
			return "", fmt.Errorf("--hetsched: %w", err)
		}
		return hetschedPath, nil
	}
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), "hetsched")
		if st, err := os.Stat(beside); err == nil && !st.IsDir() {
			return beside, nil
		}
	}
	p, err := exec.LookPath("hetsched")
	if err != nil {
		return "", errors.New("no hetsched binary: build it (go build ./cmd/hetsched) beside hetsched-bench, put it on $PATH, or name it with --hetsched")
	}
	return p, nil
}
