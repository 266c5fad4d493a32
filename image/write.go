package image

import (
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// WriteTarball writes img as a `docker save` archive tagged ref: the format `ctr images import`
// and `docker load` read, which names the image from manifest.json's RepoTags (so ref must be a
// tag, not a digest).
func WriteTarball(file, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image tarball reference: %w", err)
	}
	if err := tarball.WriteToFile(file, tag, img); err != nil {
		return fmt.Errorf("image tarball %s: %w", file, err)
	}
	return nil
}

// WriteLayout writes img as an OCI image layout in dir, replacing what was there, annotated with
// ref (org.opencontainers.image.ref.name) so `crane push dir <registry>/<name>:<tag>` and
// containerd find it by name.
func WriteLayout(dir, ref string, img v1.Image) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("image layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref,
		"io.containerd.image.name":          ref,
	})); err != nil {
		return fmt.Errorf("image layout %s: %w", dir, err)
	}
	return nil
}
