package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file or directory of a layer, owned by root unless uid/gid say otherwise.
type entry struct {
	name     string
	dir      bool
	mode     int64
	uid, gid int
	data     []byte
}

// layer writes entries, in the order given, into an uncompressed tar whose headers carry only
// what the entries say and modTime: the bytes depend on nothing of the build machine. The format
// is left for archive/tar to pick, which then rounds modTime to the second and writes no access or
// change time.
func layer(entries []entry, modTime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: modTime,
			Typeflag: tar.TypeReg, Size: int64(len(e.data)),
		}
		if e.dir {
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.name, err)
		}
		if !e.dir {
			if _, err := tw.Write(e.data); err != nil {
				return nil, fmt.Errorf("layer entry %s: %w", e.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
