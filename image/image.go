package image

import (
	"errors"
	"fmt"
	"os"
	"path"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRootUID is the user and group images run as: distroless's "nonroot", so a restricted Pod
// Security namespace (runAsNonRoot) admits the pods without a runAsUser in every manifest.
const NonRootUID = 65532

// OCI label keys (the image-spec's annotations, used as config labels).
const (
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelSource   = "org.opencontainers.image.source"
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
)

// Spec is what an image is built from.
type Spec struct {
	// Binary is the path of a static executable on the build machine.
	Binary string
	// Path is where the binary lands in the image; /usr/local/bin/<base name of Binary> when empty.
	Path string
	// Entrypoint runs the container; [Path] when empty.
	Entrypoint []string
	// Cmd is the default argument list after Entrypoint.
	Cmd []string
	// Title, Version, Revision and Source become the OCI labels; Title defaults to Path's base.
	Title, Version, Revision, Source string
	// Created is every timestamp in the image: the config's, its history's and the files'. Set it
	// from SOURCE_DATE_EPOCH or the commit time so the digest depends only on the source.
	Created time.Time
	// OS and Architecture default to linux and the architecture this builder runs on.
	OS, Architecture string
	// NoCACertificates leaves out /etc/ssl/certs/ca-certificates.crt (e.g. for a pause image).
	NoCACertificates bool
}

// Build assembles the image Spec describes: OCI media types, a base layer, a binary layer.
func Build(s Spec) (v1.Image, error) {
	if s.Binary == "" {
		return nil, errors.New("image: no binary")
	}
	if s.Created.IsZero() {
		return nil, errors.New("image: no Created time (set SOURCE_DATE_EPOCH or the commit time)")
	}
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, fmt.Errorf("image binary: %w", err)
	}
	if s.Path == "" {
		s.Path = "/usr/local/bin/" + path.Base(s.Binary)
	}
	if !path.IsAbs(s.Path) {
		return nil, fmt.Errorf("image: binary path %q is not absolute", s.Path)
	}
	if len(s.Entrypoint) == 0 {
		s.Entrypoint = []string{s.Path}
	}
	if s.Title == "" {
		s.Title = path.Base(s.Path)
	}
	if s.OS == "" {
		s.OS = "linux"
	}
	if s.Architecture == "" {
		s.Architecture = runtime.GOARCH
	}
	created := s.Created.UTC().Truncate(time.Second)

	base, err := layer(baseEntries(!s.NoCACertificates), created)
	if err != nil {
		return nil, fmt.Errorf("image base layer: %w", err)
	}
	binLayer, err := layer(binaryEntries(s.Path, bin), created)
	if err != nil {
		return nil, fmt.Errorf("image binary layer: %w", err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "regent image: root filesystem", Comment: "CA certificates, nonroot user, /tmp"}},
		mutate.Addendum{Layer: binLayer, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "regent image: " + s.Path}},
	)
	if err != nil {
		return nil, fmt.Errorf("image layers: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Created = v1.Time{Time: created}
	cfg.OS, cfg.Architecture = s.OS, s.Architecture
	cfg.Config.User = fmt.Sprintf("%d:%d", NonRootUID, NonRootUID)
	cfg.Config.WorkingDir = "/"
	cfg.Config.Entrypoint = s.Entrypoint
	cfg.Config.Cmd = s.Cmd
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot"}
	if !s.NoCACertificates {
		cfg.Config.Env = append(cfg.Config.Env, "SSL_CERT_FILE="+caFile)
	}
	cfg.Config.Labels = map[string]string{
		LabelTitle:   s.Title,
		LabelCreated: created.Format(time.RFC3339),
	}
	for k, v := range map[string]string{LabelVersion: s.Version, LabelRevision: s.Revision, LabelSource: s.Source} {
		if v != "" {
			cfg.Config.Labels[k] = v
		}
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	return img, nil
}

// caFile is where Go's crypto/x509 (and most TLS stacks) look for the system roots on Linux.
const caFile = "/etc/ssl/certs/ca-certificates.crt"

func baseEntries(withCA bool) []entry {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootUID, NonRootUID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRootUID)
	entries := []entry{
		{name: "etc/", dir: true, mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "home/", dir: true, mode: 0o755},
		{name: "home/nonroot/", dir: true, mode: 0o700, uid: NonRootUID, gid: NonRootUID},
		// Sticky and world-writable as on any Linux; manifests mount an emptyDir over it when
		// the root filesystem is read-only.
		{name: "tmp/", dir: true, mode: 0o1777},
	}
	if withCA {
		entries = append(entries,
			entry{name: "etc/ssl/", dir: true, mode: 0o755},
			entry{name: "etc/ssl/certs/", dir: true, mode: 0o755},
			entry{name: caFile[1:], mode: 0o644, data: caBundle()},
		)
	}
	return entries
}

// binaryEntries are the binary and each directory above it, so unpacking needs no base layer.
func binaryEntries(binPath string, bin []byte) []entry {
	var dirs []entry
	for d := path.Dir(binPath); d != "/"; d = path.Dir(d) {
		dirs = append([]entry{{name: d[1:] + "/", dir: true, mode: 0o755}}, dirs...)
	}
	return append(dirs, entry{name: binPath[1:], mode: 0o755, data: bin})
}
