package image

import (
	"archive/tar"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func testSpec(t *testing.T) Spec {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "regent")
	if err := os.WriteFile(bin, []byte("\x7fELF not really, but bytes all the same"), 0o755); err != nil {
		t.Fatal(err)
	}
	return Spec{
		Binary: bin, Cmd: []string{"--help"}, Version: "v1.2.3", Revision: "0123abc",
		Source: "https://example.com/regent", Created: time.Unix(1700000000, 0), Architecture: "amd64",
	}
}

func digest(t *testing.T, s Spec) v1.Hash {
	t.Helper()
	img, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestBuild_SameInputsSameDigest(t *testing.T) {
	s := testSpec(t)
	first, second := digest(t, s), digest(t, s)
	if first != second {
		t.Fatalf("two builds of the same inputs: %s and %s", first, second)
	}
	// Each input the digest is meant to follow changes it (so the equality above is not vacuous).
	later := s
	later.Created = s.Created.Add(time.Second)
	other := s
	other.Revision = "fedcba9"
	for what, changed := range map[string]Spec{"created": later, "revision": other} {
		if digest(t, changed) == first {
			t.Errorf("changing %s left the digest %s", what, first)
		}
	}
}

func TestBuild_ConfigRunsAsNonRootWithLabels(t *testing.T) {
	img, err := Build(testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want OCI", mt)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cfg.Config.User)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/usr/local/bin/regent"}) || !slices.Equal(cfg.Config.Cmd, []string{"--help"}) {
		t.Errorf("entrypoint %q cmd %q", cfg.Config.Entrypoint, cfg.Config.Cmd)
	}
	want := map[string]string{
		LabelVersion: "v1.2.3", LabelRevision: "0123abc", LabelSource: "https://example.com/regent",
		LabelTitle: "regent", LabelCreated: "2023-11-14T22:13:20Z",
	}
	for k, v := range want {
		if cfg.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cfg.Config.Labels[k], v)
		}
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" || !cfg.Created.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("os/arch/created %s/%s/%s", cfg.OS, cfg.Architecture, cfg.Created)
	}
	for _, h := range cfg.History {
		if !h.Created.Equal(time.Unix(1700000000, 0)) {
			t.Errorf("history %q created %s", h.CreatedBy, h.Created)
		}
	}
}

func TestBuild_FilesystemHasCAsUserAndBinary(t *testing.T) {
	img, err := Build(testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*tar.Header{}
	contents := map[string][]byte{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = hdr
		if contents[hdr.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
		if !hdr.ModTime.Equal(time.Unix(1700000000, 0)) {
			t.Errorf("%s mtime %s", hdr.Name, hdr.ModTime)
		}
	}
	var roots int
	for rest := contents["etc/ssl/certs/ca-certificates.crt"]; ; roots++ {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Fatalf("CA bundle entry %d: %v", roots, err)
		}
	}
	if roots < 100 {
		t.Errorf("CA bundle holds %d roots, want Mozilla's (over 100)", roots)
	}
	if h := files["usr/local/bin/regent"]; h == nil || h.Mode != 0o755 || string(contents[h.Name]) != "\x7fELF not really, but bytes all the same" {
		t.Errorf("binary entry %+v", h)
	}
	if h := files["home/nonroot"]; h == nil || h.Uid != NonRootUID {
		t.Errorf("home entry %+v", h)
	}
	if h := files["tmp"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp entry %+v", h)
	}

	s := testSpec(t)
	s.NoCACertificates = true
	bare, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	tr = tar.NewReader(mutate.Extract(bare))
	for hdr, err := tr.Next(); err == nil; hdr, err = tr.Next() {
		if hdr.Name == "etc/ssl/certs/ca-certificates.crt" {
			t.Error("NoCACertificates image has a CA bundle")
		}
	}
}

// The tarball is what `ctr images import` reads: manifest.json must name the image by its tag, and
// the layout must hold the very manifest whose digest Build reports.
func TestWrite_TarballAndLayoutRoundTrip(t *testing.T) {
	img, err := Build(testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.ConfigName()
	dir := t.TempDir()
	ref := "registry.example/regent:v1.2.3"
	file := filepath.Join(dir, "image.tar")
	if err := WriteTarball(file, ref, img); err != nil {
		t.Fatal(err)
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(file) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{ref}) {
		t.Fatalf("tarball manifest.json %+v, want one image tagged %s", m, ref)
	}
	tag, _ := name.NewTag(ref)
	back, err := tarball.ImageFromPath(file, &tag)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := back.ConfigName(); got != want {
		t.Errorf("tarball config %s, want %s", got, want)
	}
	if err := WriteTarball(file, "registry.example/regent@sha256:"+want.Hex, img); err == nil {
		t.Error("a digest reference was accepted for a tarball ctr names by tag")
	}

	lay := filepath.Join(dir, "oci")
	if err := WriteLayout(lay, ref, img); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(lay)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != d || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != ref {
		t.Fatalf("layout index %+v, want %s named %s", im.Manifests, d, ref)
	}
}

func TestBuild_RefusesMissingInputs(t *testing.T) {
	s := testSpec(t)
	s.Created = time.Time{}
	if _, err := Build(s); err == nil {
		t.Error("built without a Created time")
	}
	s = testSpec(t)
	s.Path = "relative/regent"
	if _, err := Build(s); err == nil {
		t.Error("built with a relative binary path")
	}
}
