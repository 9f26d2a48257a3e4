// Command release builds hetsched's release artefacts into a directory:
// static binaries (CGO off, -trimpath) for each platform, stamped with the
// version, commit and time (`hetsched version`, hetsched_build_info), a
// SHA256SUMS file, and an SPDX 2.3 SBOM (JSON) of the modules each binary
// links, read from the binary itself.
//
//	go run ./tools/release --version v0.3.0 --out dist
//
// The default platforms are linux/amd64 and linux/arm64 (every role) and
// darwin/amd64 and darwin/arm64 (the CLI: submit, get, logs; its server
// and agent run, but are not what it is for).
package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

const stamps = "github.com/hetsched/hetsched/internal/metrics"

var versionRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	version := fs.String("version", "", "the release's version, vMAJOR.MINOR.PATCH[-PRE]")
	commit := fs.String("commit", "", "the source commit (default: git rev-parse HEAD)")
	when := fs.String("time", "", "the build time, RFC 3339 (default: the commit's time, else $SOURCE_DATE_EPOCH, else now)")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64", "GOOS/GOARCH pairs, comma-separated")
	out := fs.String("out", "dist", "the directory to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !versionRE.MatchString(*version) {
		return fmt.Errorf("--version: want vMAJOR.MINOR.PATCH[-PRE], got %q", *version)
	}
	if *commit == "" {
		c, err := git("rev-parse", "HEAD")
		if err != nil {
			return fmt.Errorf("--commit not given and git cannot say: %w", err)
		}
		*commit = c
	}
	if *when == "" {
		*when = defaultTime(*commit)
	}
	if _, err := time.Parse(time.RFC3339, *when); err != nil {
		return fmt.Errorf("--time: %w", err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	ldflags := fmt.Sprintf("-s -w -X %s.stampVersion=%s -X %s.stampCommit=%s -X %s.stampTime=%s", stamps, *version, stamps, *commit, stamps, *when)
	var files []string
	for _, p := range strings.Split(*platforms, ",") {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || goos == "" || goarch == "" {
			return fmt.Errorf("--platforms: %q is not GOOS/GOARCH", p)
		}
		name := fmt.Sprintf("hetsched-%s-%s-%s", *version, goos, goarch)
		bin := filepath.Join(*out, name)
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", bin, "github.com/hetsched/hetsched/cmd/hetsched")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s/%s: %w\n%s", goos, goarch, err, b)
		}
		sbom := bin + ".spdx.json"
		if err := writeSBOM(bin, sbom, *version, *when); err != nil {
			return fmt.Errorf("%s: SBOM: %w", name, err)
		}
		files = append(files, bin, sbom)
		fmt.Fprintln(stdout, bin)
	}
	sums := filepath.Join(*out, "SHA256SUMS")
	if err := writeSums(sums, files); err != nil {
		return err
	}
	fmt.Fprintln(stdout, sums)
	return nil
}

func git(args ...string) (string, error) {
	b, err := exec.Command("git", args...).Output()
	return strings.TrimSpace(string(b)), err
}

// defaultTime is the commit's time, else $SOURCE_DATE_EPOCH, else now.
func defaultTime(commit string) string {
	if t, err := git("show", "-s", "--format=%cI", commit); err == nil && t != "" {
		if p, err := time.Parse(time.RFC3339, t); err == nil {
			return p.UTC().Format(time.RFC3339)
		}
	}
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		var s int64
		if _, err := fmt.Sscan(v, &s); err == nil {
			return time.Unix(s, 0).UTC().Format(time.RFC3339)
		}
	}
	return time.Now().UTC().Format(time.RFC3339)
}

func writeSums(path string, files []string) error {
	var b strings.Builder
	for _, f := range files {
		h, err := sha256File(f)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", h, filepath.Base(f))
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// The SPDX 2.3 document (JSON), the fields this SBOM fills.
type spdxDoc struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreation       `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string       `json:"name"`
	SPDXID           string       `json:"SPDXID"`
	VersionInfo      string       `json:"versionInfo"`
	DownloadLocation string       `json:"downloadLocation"`
	FilesAnalyzed    bool         `json:"filesAnalyzed"`
	Checksums        []spdxSum    `json:"checksums,omitempty"`
	ExternalRefs     []spdxExtRef `json:"externalRefs,omitempty"`
	PrimaryPurpose   string       `json:"primaryPackagePurpose,omitempty"`
	Comment          string       `json:"comment,omitempty"`
	License          string       `json:"licenseConcluded"`
	CopyrightText    string       `json:"copyrightText"`
}

type spdxSum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxExtRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]`)

// writeSBOM writes an SPDX SBOM of the modules bin links, read from its
// build information.
func writeSBOM(bin, path, version, when string) error {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return err
	}
	sum, err := sha256File(bin)
	if err != nil {
		return err
	}
	name := filepath.Base(bin)
	doc := spdxDoc{SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT", Name: name,
		DocumentNamespace: "https://github.com/hetsched/hetsched/releases/" + version + "/" + name + "-" + sum[:16],
		CreationInfo:      spdxCreation{Created: when, Creators: []string{"Tool: hetsched tools/release", "Tool: " + bi.GoVersion}}}
	root := spdxPackage{Name: bi.Path, SPDXID: "SPDXRef-Package-hetsched", VersionInfo: version, DownloadLocation: "https://github.com/hetsched/hetsched",
		Checksums:      []spdxSum{{Algorithm: "SHA256", Value: sum}},
		ExternalRefs:   []spdxExtRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/" + bi.Main.Path + "@" + version}},
		PrimaryPurpose: "APPLICATION", License: "Apache-2.0", CopyrightText: "NOASSERTION"}
	doc.Packages = append(doc.Packages, root)
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", root.SPDXID})
	deps := bi.Deps
	sort.Slice(deps, func(i, j int) bool { return deps[i].Path < deps[j].Path })
	for _, d := range deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		if m.Version == "" {
			return errors.New("a module without a version: " + m.Path)
		}
		p := spdxPackage{Name: m.Path, SPDXID: "SPDXRef-Package-" + spdxIDUnsafe.ReplaceAllString(m.Path+"-"+m.Version, "-"),
			VersionInfo: m.Version, DownloadLocation: "https://proxy.golang.org/" + m.Path + "/@v/" + m.Version + ".zip",
			ExternalRefs: []spdxExtRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/" + m.Path + "@" + m.Version}},
			License:      "NOASSERTION", CopyrightText: "NOASSERTION"}
		if m.Sum != "" {
			p.Comment = "go.sum " + m.Sum
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{root.SPDXID, "DEPENDS_ON", p.SPDXID})
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
