package main

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
)

// crdsFile is the rendering's file of the chart's crds/ (Helm installs
// them before the templates; a name that sorts first after the Namespace).
const crdsFile = "05-crds.yaml"

// renderTimeout bounds a rendering (the engine does no network calls: no
// lookup without a cluster, no DNS).
const renderTimeout = time.Minute

// file is one file of a rendering.
type file struct{ name, content string }

// loadValues reads and merges values files as `helm install -f` does (a
// later file's keys win, maps merge).
func loadValues(files []string) (map[string]any, error) {
	vals := map[string]any{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		v, err := loader.LoadValues(fh)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		vals = loader.MergeMaps(vals, v)
	}
	return vals, nil
}

// render renders the chart as `helm template` (and `helm install`) would:
// the values coalesced with the chart's and checked against its schema,
// the templates run by Helm's engine, NOTES.txt and partials left out.
// The files are the CRDs (crdsFile) and one file per template that renders
// to something, named as the template, in name order.
func render(chartDir, release, namespace string, valueFiles []string) ([]file, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	vals, err := loadValues(valueFiles)
	if err != nil {
		return nil, err
	}
	opts := common.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}
	top, err := util.ToRenderValuesWithSchemaValidation(chrt, vals, opts, common.DefaultCapabilities.Copy(), false)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), renderTimeout)
	defer cancel()
	rendered, err := engine.Engine{}.RenderWithContext(ctx, chrt, top)
	if err != nil {
		return nil, err
	}
	files := []file{}
	if crds := crdContent(chrt); crds != "" {
		files = append(files, file{crdsFile, crds})
	}
	seen := map[string]string{crdsFile: "crds/"}
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		base := path.Base(name)
		if base == "NOTES.txt" || strings.HasPrefix(base, "_") {
			continue
		}
		content := strings.TrimLeft(rendered[name], "\n")
		if strings.TrimSpace(content) == "" {
			continue // a template its values turned off
		}
		if other, ok := seen[base]; ok {
			return nil, fmt.Errorf("%s and %s would both be %s", other, name, base)
		}
		seen[base] = name
		files = append(files, file{base, strings.TrimRight(content, "\n") + "\n"})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	return files, nil
}

// crdContent is the chart's crds/ files, in name order, as one stream of
// documents.
func crdContent(chrt *chartv2.Chart) string {
	crds := chrt.CRDObjects()
	sort.Slice(crds, func(i, j int) bool { return crds[i].Name < crds[j].Name })
	var b strings.Builder
	for i, c := range crds {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString(strings.TrimRight(string(c.File.Data), "\n") + "\n")
	}
	return b.String()
}

// writeFiles writes files into dir (made if need be), each after header.
func writeFiles(dir string, files []file, header string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(header+f.content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// generatedHeader starts every file of deploy/kubernetes/.
var generatedHeader = fmt.Sprintf(`# Generated from the Helm chart deploy/helm/hetsched with its default
# values (release %s, namespace %s) by
# %s: change the chart, then run that.
`, defaultRelease, defaultNamespace, "`"+generateCommand+"`")

// namespaceFile is the release namespace, which `helm install
// --create-namespace` makes and kubectl needs a manifest for.
var namespaceFile = file{"00-namespace.yaml", fmt.Sprintf(`# hetsched's own namespace: the Deployment, its ServiceAccount, its leader
# Lease and its metrics Service live here.
apiVersion: v1
kind: Namespace
metadata:
  name: %s
`, defaultNamespace)}

// generate writes the chart's default rendering, and the Namespace, into
// outDir as the plain manifests, removing the *.yaml files there it did not
// write (a template renamed or gone); subdirectories (examples/) are left
// alone.
func generate(chartDir, outDir string) error {
	files, err := render(chartDir, defaultRelease, defaultNamespace, nil)
	if err != nil {
		return err
	}
	files = append([]file{namespaceFile}, files...)
	old, err := filepath.Glob(filepath.Join(outDir, "*.yaml"))
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, f := range files {
		keep[f.name] = true
	}
	for _, o := range old {
		if !keep[filepath.Base(o)] {
			if err := os.Remove(o); err != nil {
				return err
			}
		}
	}
	return writeFiles(outDir, files, generatedHeader)
}
