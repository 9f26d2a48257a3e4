// Command helm lints and renders hetsched's Helm chart (deploy/helm/hetsched)
// with Helm's Go SDK, so that neither the tests nor a developer need a helm
// binary, and writes deploy/kubernetes/ as the chart's default rendering.
// It is its own module (tools/helm), so that the main module does not carry
// Helm's dependencies.
//
//	go -C tools/helm run . lint [--chart DIR] [--values FILE]...
//	go -C tools/helm run . template [--chart DIR] [--namespace NS] [--release NAME] [--values FILE]... --out DIR
//	go -C tools/helm run . generate [--chart DIR] [--out DIR]
//
// Relative paths are relative to tools/helm (go -C changes to it): the
// defaults name the chart and deploy/kubernetes from there.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Defaults, relative to tools/helm.
const (
	defaultChart = "../../deploy/helm/hetsched"
	defaultOut   = "../../deploy/kubernetes"
)

// The default rendering's release: deploy/kubernetes/ installs as if by
// `helm install hetsched deploy/helm/hetsched -n hetsched-system`.
const (
	defaultRelease   = "hetsched"
	defaultNamespace = "hetsched-system"
)

// generateCommand is what the generated files say made them.
const generateCommand = "go -C tools/helm run . generate"

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tools/helm:", err)
		os.Exit(1)
	}
}

// valueFiles is a repeatable --values flag.
type valueFiles []string

func (v *valueFiles) String() string     { return strings.Join(*v, ",") }
func (v *valueFiles) Set(s string) error { *v = append(*v, s); return nil }

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("want a command: lint, template or generate")
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(out)
	chartDir := fs.String("chart", defaultChart, "the chart's directory")
	var values valueFiles
	switch cmd {
	case "lint":
		fs.Var(&values, "values", "a values file (repeatable; later files win)")
		ns := fs.String("namespace", defaultNamespace, "the release namespace the templates are linted with")
		if err := parse(fs, args); err != nil {
			return err
		}
		return lintChart(out, *chartDir, *ns, values)
	case "template":
		fs.Var(&values, "values", "a values file (repeatable; later files win)")
		ns := fs.String("namespace", defaultNamespace, "the release namespace")
		release := fs.String("release", defaultRelease, "the release name")
		outDir := fs.String("out", "", "the directory the rendering is written to (one file per template, CRDs in 05-crds.yaml)")
		if err := parse(fs, args); err != nil {
			return err
		}
		if *outDir == "" {
			return errors.New("template: --out is required")
		}
		files, err := render(*chartDir, *release, *ns, values)
		if err != nil {
			return err
		}
		return writeFiles(*outDir, files, "")
	case "generate":
		outDir := fs.String("out", defaultOut, "the directory of the plain manifests (its *.yaml are replaced; subdirectories are left alone)")
		if err := parse(fs, args); err != nil {
			return err
		}
		return generate(*chartDir, *outDir)
	}
	return fmt.Errorf("unknown command %q: want lint, template or generate", cmd)
}

// parse parses a command's flags and refuses arguments left over (an input
// is never ignored).
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	return nil
}
