// Command image assembles hetsched's container image without Docker: from
// static hetsched binaries (one per platform) and the host's CA
// certificates, the same image the repository's Dockerfile builds (a
// distroless-style base: no shell, no package manager, user 65532). It
// writes an OCI image layout holding a multi-platform index (for `crane
// push`, `skopeo copy`, `oras`) and, per platform, a tarball for `docker
// load`.
//
//	go -C tools/image run . --binary linux/amd64=hetsched-linux-amd64 \
//	    --binary linux/arm64=hetsched-linux-arm64 --version v0.3.0 \
//	    --revision "$(git rev-parse HEAD)" --out dist/image
//
// It is its own module (go-containerregistry stays out of hetsched's).
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed parts: the Dockerfile says the same.
const (
	binPath   = "/usr/local/bin/hetsched"
	certsPath = "/etc/ssl/certs/ca-certificates.crt"
	user      = "65532:65532"
	passwd    = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group     = "root:x:0:\nnonroot:x:65532:\n"
)

type binaries map[string]string // "linux/amd64" -> path

func (b binaries) String() string { return fmt.Sprint(map[string]string(b)) }

func (b binaries) Set(v string) error {
	platform, path, ok := strings.Cut(v, "=")
	if !ok || !strings.HasPrefix(platform, "linux/") || path == "" {
		return fmt.Errorf("want linux/ARCH=PATH, got %q", v)
	}
	b[platform] = path
	return nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	bins := binaries{}
	fs.Var(bins, "binary", "a static hetsched binary for a platform: linux/amd64=PATH (repeatable)")
	version := fs.String("version", "", "the image's version (org.opencontainers.image.version, and its tag)")
	revision := fs.String("revision", "", "the source revision (org.opencontainers.image.revision)")
	source := fs.String("source", "https://github.com/hetsched/hetsched", "the source repository (org.opencontainers.image.source)")
	certs := fs.String("ca-certs", certsPath, "the CA certificates bundle to include")
	created := fs.String("created", "", "the image's creation time, RFC 3339 (default $SOURCE_DATE_EPOCH, else the Unix epoch: reproducible)")
	out := fs.String("out", "", "the directory to write: oci/ (an OCI image layout) and hetsched-VERSION-linux-ARCH.tar (docker load)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(bins) == 0 || *version == "" || *out == "" {
		return errors.New("--binary, --version and --out are required")
	}
	when, err := creation(*created)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(*certs)
	if err != nil {
		return fmt.Errorf("--ca-certs: %w", err)
	}
	tag, err := name.NewTag("hetsched:" + *version)
	if err != nil {
		return fmt.Errorf("--version: %w", err)
	}
	labels := map[string]string{
		"org.opencontainers.image.title":    "hetsched",
		"org.opencontainers.image.version":  *version,
		"org.opencontainers.image.revision": *revision,
		"org.opencontainers.image.source":   *source,
		"org.opencontainers.image.created":  when.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	platforms := make([]string, 0, len(bins))
	for p := range bins {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, p := range platforms {
		arch := strings.TrimPrefix(p, "linux/")
		img, err := image(bins[p], ca, arch, labels, when)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform:    &v1.Platform{OS: "linux", Architecture: arch},
			Annotations: map[string]string{"org.opencontainers.image.ref.name": *version},
		}})
		file := filepath.Join(*out, "hetsched-"+*version+"-linux-"+arch+".tar")
		if err := tarball.WriteToFile(file, tag, img); err != nil {
			return fmt.Errorf("%s: write %s: %w", p, file, err)
		}
		fmt.Println(file)
	}
	dir := filepath.Join(*out, "oci")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if _, err := layout.Write(dir, idx); err != nil {
		return fmt.Errorf("write the OCI layout: %w", err)
	}
	fmt.Println(dir)
	return nil
}

// creation is --created, else $SOURCE_DATE_EPOCH, else the epoch.
func creation(flagValue string) (time.Time, error) {
	if flagValue != "" {
		t, err := time.Parse(time.RFC3339, flagValue)
		if err != nil {
			return time.Time{}, fmt.Errorf("--created: %w", err)
		}
		return t, nil
	}
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		return time.Unix(s, 0), nil
	}
	return time.Unix(0, 0), nil
}

// image is one platform's image: a single layer (the base files and the
// binary) and its configuration.
func image(bin string, ca []byte, arch string, labels map[string]string, when time.Time) (v1.Image, error) {
	exe, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	if len(exe) < 4 || string(exe[:4]) != "\x7fELF" {
		return nil, fmt.Errorf("%s is not an ELF binary", bin)
	}
	content, err := rootfs(exe, ca, when)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(content)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: when}, CreatedBy: "tools/image: base files and " + binPath}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Created = v1.Time{Time: when}
	cfg.Config.Entrypoint = []string{binPath}
	cfg.Config.Cmd = []string{"--help"}
	cfg.Config.User = user
	cfg.Config.WorkingDir = "/home/nonroot"
	cfg.Config.Env = []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=" + certsPath, "HOME=/home/nonroot"}
	cfg.Config.Labels = labels
	cfg.Config.ExposedPorts = map[string]struct{}{"7070/tcp": {}}
	return mutate.ConfigFile(img, cfg)
}

// rootfs is the layer's tar: /etc/passwd and /etc/group (root and
// nonroot 65532), the CA bundle, a home for nonroot, /tmp, and the binary.
func rootfs(exe, ca []byte, when time.Time) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	dir := func(name string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: uid, Gid: uid, ModTime: when, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: when, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	steps := []func() error{
		func() error { return dir("etc/", 0o755, 0) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return dir("etc/ssl/", 0o755, 0) },
		func() error { return dir("etc/ssl/certs/", 0o755, 0) },
		func() error { return file(strings.TrimPrefix(certsPath, "/"), 0o644, ca) },
		func() error { return dir("home/", 0o755, 0) },
		func() error { return dir("home/nonroot/", 0o700, 65532) },
		func() error { return dir("tmp/", 0o1777, 0) },
		func() error { return dir("usr/", 0o755, 0) },
		func() error { return dir("usr/local/", 0o755, 0) },
		func() error { return dir("usr/local/bin/", 0o755, 0) },
		func() error { return file(strings.TrimPrefix(binPath, "/"), 0o755, exe) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
