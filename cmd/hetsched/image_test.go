package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestImage (issue 42 §1): tools/image assembles hetsched's container image
// from static binaries, without Docker; the OCI layout and the docker
// tarballs it writes are read back here with the standard library: one
// manifest per platform, the entrypoint, the non-root user 65532, the
// OCI labels, the architecture (the configuration's and the binary's own
// ELF machine), the CA bundle, and no shell. linux/arm64 is built too
// under CI=true or HETSCHED_IMAGE_ARCHS=all (its cold cross-build takes
// about 3 minutes on 2 cores).
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: cross-builds hetsched and assembles its image")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool: %v", err)
	}
	archs := map[string]elf.Machine{"amd64": elf.EM_X86_64}
	if os.Getenv("CI") == "true" || os.Getenv("HETSCHED_IMAGE_ARCHS") == "all" {
		archs["arm64"] = elf.EM_AARCH64
	} else {
		t.Log("linux/amd64 only; CI=true or HETSCHED_IMAGE_ARCHS=all builds linux/arm64 too")
	}
	dir := t.TempDir()
	args := []string{"-C", filepath.Join("..", "..", "tools", "image"), "run", ".", "--version", "v0.0.0-test", "--revision", "0123abc", "--out", filepath.Join(dir, "out")}
	for arch := range archs {
		bin := filepath.Join(dir, "hetsched-linux-"+arch)
		build := exec.Command(goBin, "build", "-trimpath", "-o", bin, "github.com/hetsched/hetsched/cmd/hetsched")
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build linux/%s: %v\n%s", arch, err, out)
		}
		args = append(args, "--binary", "linux/"+arch+"="+bin)
	}
	if out, err := exec.Command(goBin, args...).CombinedOutput(); err != nil {
		t.Fatalf("tools/image: %v\n%s", err, out)
	}
	oci := filepath.Join(dir, "out", "oci")
	var index struct {
		MediaType string `json:"mediaType"`
		Manifests []struct {
			Digest   string `json:"digest"`
			Platform struct {
				OS           string `json:"os"`
				Architecture string `json:"architecture"`
			} `json:"platform"`
		} `json:"manifests"`
	}
	readJSON(t, filepath.Join(oci, "index.json"), &index)
	if index.MediaType != "application/vnd.oci.image.index.v1+json" || len(index.Manifests) != len(archs) {
		t.Fatalf("index: %+v", index)
	}
	for _, m := range index.Manifests {
		machine, ok := archs[m.Platform.Architecture]
		if !ok || m.Platform.OS != "linux" {
			t.Fatalf("a manifest for %+v", m.Platform)
		}
		var manifest struct {
			Config struct{ Digest string }              `json:"config"`
			Layers []struct{ Digest, MediaType string } `json:"layers"`
		}
		readJSON(t, blob(oci, m.Digest), &manifest)
		var cfg struct {
			Architecture string `json:"architecture"`
			OS           string `json:"os"`
			Config       struct {
				Entrypoint []string          `json:"Entrypoint"`
				User       string            `json:"User"`
				Labels     map[string]string `json:"Labels"`
			} `json:"config"`
		}
		readJSON(t, blob(oci, manifest.Config.Digest), &cfg)
		if cfg.Architecture != m.Platform.Architecture || cfg.OS != "linux" || !slices.Equal(cfg.Config.Entrypoint, []string{"/usr/local/bin/hetsched"}) || cfg.Config.User != "65532:65532" {
			t.Errorf("%s: configuration %+v", m.Platform.Architecture, cfg)
		}
		for k, want := range map[string]string{"org.opencontainers.image.version": "v0.0.0-test", "org.opencontainers.image.revision": "0123abc", "org.opencontainers.image.source": "https://github.com/hetsched/hetsched"} {
			if cfg.Config.Labels[k] != want {
				t.Errorf("%s: label %s = %q, want %q", m.Platform.Architecture, k, cfg.Config.Labels[k], want)
			}
		}
		files := map[string]*tar.Header{}
		var exe []byte
		for _, l := range manifest.Layers {
			f, err := os.Open(blob(oci, l.Digest))
			if err != nil {
				t.Fatal(err)
			}
			zr, err := gzip.NewReader(f)
			if err != nil {
				t.Fatal(err)
			}
			tr := tar.NewReader(zr)
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				files[strings.TrimSuffix(h.Name, "/")] = h
				if h.Name == "usr/local/bin/hetsched" {
					if exe, err = io.ReadAll(tr); err != nil {
						t.Fatal(err)
					}
				}
			}
			f.Close()
		}
		for _, want := range []string{"usr/local/bin/hetsched", "etc/ssl/certs/ca-certificates.crt", "etc/passwd", "home/nonroot", "tmp"} {
			if files[want] == nil {
				t.Errorf("%s: no %s in the image", m.Platform.Architecture, want)
			}
		}
		for name := range files {
			if base := filepath.Base(name); base == "sh" || base == "bash" || base == "busybox" {
				t.Errorf("%s: the image has a shell: %s", m.Platform.Architecture, name)
			}
		}
		if h := files["usr/local/bin/hetsched"]; h != nil && h.Mode&0o111 == 0 {
			t.Errorf("%s: the binary is not executable (%o)", m.Platform.Architecture, h.Mode)
		}
		if ef, err := elf.NewFile(bytes.NewReader(exe)); err != nil || ef.Machine != machine {
			t.Errorf("%s: the binary is not an ELF for %s: %v", m.Platform.Architecture, machine, err)
		}
	}
	// docker load's tarball names its tag.
	for arch := range archs {
		f, err := os.Open(filepath.Join(dir, "out", "hetsched-v0.0.0-test-linux-"+arch+".tar"))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(f)
		found := false
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Name == "manifest.json" {
				var m []struct{ RepoTags []string }
				if err := json.NewDecoder(tr).Decode(&m); err != nil || len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{"hetsched:v0.0.0-test"}) {
					t.Errorf("%s: docker manifest %+v %v", arch, m, err)
				}
				found = true
			}
		}
		f.Close()
		if !found {
			t.Errorf("%s: the docker tarball has no manifest.json", arch)
		}
	}
}

func blob(layout, digest string) string {
	algo, hex, _ := strings.Cut(digest, ":")
	return filepath.Join(layout, "blobs", algo, hex)
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
