package pull

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// MaxModuleBytes bounds a module: the largest Kubewarden policies are a few tens of MiB.
const MaxModuleBytes = 256 << 20

// WasmLayerMediaType is the layer of a Kubewarden policy artifact that holds the module.
const WasmLayerMediaType types.MediaType = "application/vnd.wasm.content.layer.v1+wasm"

// Options configure pulls.
type Options struct {
	// CAs, when set, are the only roots trusted by https:// and registry pulls (the system
	// roots otherwise).
	CAs *x509.CertPool
	// InsecureRegistries lets registry:// pulls use plain http for every registry (localhost
	// and private addresses may always, as go-containerregistry decides).
	InsecureRegistries bool
	// Timeout bounds one pull (default 2 minutes).
	Timeout time.Duration
}

// Module is what a pull got.
type Module struct {
	// Source is the module reference as the policy wrote it.
	Source string
	Bytes  []byte
	// Digest is "sha256:<hex>" of Bytes (for a registry artifact, its layer digest).
	Digest string
	// Path is the module's file name, whose extension tells a .rego or a Gatekeeper template
	// from a .wasm module.
	Path string
}

// Fetch pulls the module at ref.
func Fetch(ctx context.Context, ref string, opts Options) (Module, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	var (
		b    []byte
		path = ref
		err  error
	)
	switch scheme, rest, _ := strings.Cut(ref, "://"); scheme {
	case "registry":
		b, err = fromRegistry(ctx, rest, opts)
		path = rest
	case "https":
		b, err = fromHTTPS(ctx, ref, opts)
	case "file":
		path = rest
		b, err = readFile(rest)
	default:
		if strings.Contains(ref, "://") {
			return Module{}, fmt.Errorf("pull %s: unsupported scheme %q (want registry, https or file)", ref, scheme)
		}
		b, err = readFile(ref)
	}
	if err != nil {
		return Module{}, fmt.Errorf("pull %s: %w", ref, err)
	}
	sum := sha256.Sum256(b)
	return Module{Source: ref, Bytes: b, Digest: "sha256:" + hex.EncodeToString(sum[:]), Path: path}, nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBounded(f)
}

func readBounded(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxModuleBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxModuleBytes {
		return nil, fmt.Errorf("module is larger than %d bytes", MaxModuleBytes)
	}
	return b, nil
}

func transport(opts Options) http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if opts.CAs != nil {
		t.TLSClientConfig = &tls.Config{RootCAs: opts.CAs, MinVersion: tls.VersionTLS12}
	}
	return t
}

func fromHTTPS(ctx context.Context, url string, opts Options) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: transport(opts)}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET: %s", resp.Status)
	}
	return readBounded(resp.Body)
}

// fromRegistry reads a Kubewarden policy artifact: the layer with the wasm media type, or the
// only layer of an artifact that names none.
func fromRegistry(ctx context.Context, ref string, opts Options) ([]byte, error) {
	var nameOpts []name.Option
	if opts.InsecureRegistries {
		nameOpts = append(nameOpts, name.Insecure)
	}
	r, err := name.ParseReference(ref, nameOpts...)
	if err != nil {
		return nil, err
	}
	img, err := remote.Image(r, remote.WithContext(ctx), remote.WithTransport(transport(opts)))
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	var pick int = -1
	for i, l := range m.Layers {
		if l.MediaType == WasmLayerMediaType {
			pick = i
			break
		}
	}
	if pick < 0 && len(m.Layers) == 1 {
		pick = 0
	}
	if pick < 0 {
		return nil, fmt.Errorf("artifact has %d layers and none of media type %s", len(m.Layers), WasmLayerMediaType)
	}
	l, err := img.LayerByDigest(m.Layers[pick].Digest)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed() // the blob as stored: for a wasm layer, the module itself
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := readBounded(rc)
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(b); "sha256:"+hex.EncodeToString(sum[:]) != m.Layers[pick].Digest.String() {
		return nil, fmt.Errorf("layer %s: content does not match its digest", m.Layers[pick].Digest)
	}
	return b, nil
}
