package pull

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// DefaultMaxModuleBytes bounds a module unless Options say otherwise: the largest Kubewarden
// policies are a few tens of MiB.
const DefaultMaxModuleBytes = 64 << 20

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
	// FileRoots are the directories file:// references and plain paths may read from (symbolic
	// links included, which must stay inside). None: the pod's files are not modules, and
	// every file pull is refused.
	FileRoots []string
	// AllowPrivateRedirects lets https:// and registry pulls follow a redirect to a loopback,
	// private, link-local or unspecified address. Refused by default: a policy author's server
	// could otherwise point the policy server at cloud metadata or internal services.
	AllowPrivateRedirects bool
	// Timeout bounds one pull, the budget of each revision (default 2 minutes).
	Timeout time.Duration
	// MaxBytes bounds a module (default DefaultMaxModuleBytes).
	MaxBytes int64
	// Verifier, when set, must accept the manifest digest of a registry artifact before its
	// module is read (the module read is the one of that manifest, so what was verified is what
	// loads), and modules from https:// or files are refused: they carry no signature. Set from a
	// PolicyServer's verificationConfig.
	Verifier Verifier
}

// Verifier checks the signatures of the registry artifact at digest, reaching the registry with
// opts.
type Verifier interface {
	Verify(ctx context.Context, digest name.Digest, opts ...remote.Option) error
}

// ErrUnsignedSource: a signature is required but the module comes from where none can be.
var ErrUnsignedSource = errors.New("signature verification is required and only registry:// modules carry signatures")

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxModuleBytes
	}
	return o
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

// Fetch pulls the module at ref. A ref ending in @sha256:<hex> is pinned: for a registry, the
// artifact's manifest digest (go-containerregistry checks what it gets against it); for https://
// and files, the module's own digest, checked here. A module that does not match is an error.
func Fetch(ctx context.Context, ref string, opts Options) (Module, error) {
	opts = opts.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	var (
		b        []byte
		location string
		pin      string
		err      error
	)
	if scheme, _, _ := strings.Cut(ref, "://"); opts.Verifier != nil && scheme != "registry" {
		return Module{}, fmt.Errorf("pull %s: %w", ref, ErrUnsignedSource)
	}
	switch scheme, rest, _ := strings.Cut(ref, "://"); scheme {
	case "registry":
		b, err = fromRegistry(ctx, rest, opts)
		location, _, _ = strings.Cut(rest, "@") // the digest is no part of the file's name
	case "https":
		location, pin = splitPin(ref)
		b, err = fromHTTPS(ctx, location, opts)
	case "file":
		location, pin = splitPin(rest)
		b, err = readFile(location, opts)
	default:
		if strings.Contains(ref, "://") {
			return Module{}, fmt.Errorf("pull %s: unsupported scheme %q (want registry, https or file)", ref, scheme)
		}
		location, pin = splitPin(ref)
		b, err = readFile(location, opts)
	}
	if err != nil {
		return Module{}, fmt.Errorf("pull %s: %w", ref, err)
	}
	sum := sha256.Sum256(b)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if pin != "" && digest != pin {
		return Module{}, fmt.Errorf("pull %s: %w: the module is %s", ref, ErrPinMismatch, digest)
	}
	return Module{Source: ref, Bytes: b, Digest: digest, Path: location}, nil
}

// ErrPinMismatch: a pinned module's bytes are not the ones its reference names.
var ErrPinMismatch = errors.New("module does not match its pinned digest")

// splitPin cuts a trailing @sha256:<64 hex> off a URL or path.
func splitPin(ref string) (location, pin string) {
	i := strings.LastIndex(ref, "@sha256:")
	if i < 0 {
		return ref, ""
	}
	hexPart := ref[i+len("@sha256:"):]
	if _, err := hex.DecodeString(hexPart); err != nil || len(hexPart) != 64 {
		return ref, ""
	}
	return ref[:i], "sha256:" + strings.ToLower(hexPart)
}

// readFile reads a module from one of the operator's FileRoots, through os.Root, so neither
// "..", nor a symbolic link, nor a FIFO or device leads anywhere else.
func readFile(path string, opts Options) ([]byte, error) {
	if len(opts.FileRoots) == 0 {
		return nil, fmt.Errorf("%w: this policy server reads no module from its files (no --pull-file-root)", ErrFileNotAllowed)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	for _, root := range opts.FileRoots {
		root, err := filepath.Abs(root)
		if err != nil {
			continue
		}
		rel, err := filepath.Rel(root, abs)
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		f, err := os.OpenInRoot(root, rel)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file", path)
		}
		return readBounded(f, opts.MaxBytes)
	}
	return nil, fmt.Errorf("%w: %s is outside the directories allowed (%s)", ErrFileNotAllowed, path, strings.Join(opts.FileRoots, ", "))
}

// ErrFileNotAllowed: a file pull outside the operator's FileRoots.
var ErrFileNotAllowed = errors.New("file not allowed")

func readBounded(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("module is larger than %d bytes", max)
	}
	return b, nil
}

func transport(opts Options) *http.Transport {
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
	// Every request after the first is a redirect, the same host's included.
	var sent atomic.Int32
	guard := newRedirectGuard(req.URL, opts, func(*http.Request) bool { return sent.Add(1) == 1 })
	c := &http.Client{Transport: guard, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET: %s", resp.Status)
	}
	if resp.ContentLength > opts.MaxBytes {
		return nil, fmt.Errorf("module is larger than %d bytes (%d announced)", opts.MaxBytes, resp.ContentLength)
	}
	return readBounded(resp.Body, opts.MaxBytes)
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
	origin := &url.URL{Scheme: r.Context().Scheme(), Host: r.Context().RegistryStr()}
	rt := newRedirectGuard(origin, opts, func(req *http.Request) bool { return req.URL.Host == origin.Host })
	// Credentials come from the Docker config go-containerregistry finds ($DOCKER_CONFIG): a
	// PolicyServer's imagePullSecret is mounted there, as Kubewarden does; none is anonymous.
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(rt), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	img, err := remote.Image(r, ropts...)
	if err != nil {
		return nil, err
	}
	if opts.Verifier != nil {
		// The manifest just read is the one whose layer is read below: verifying its digest
		// verifies the module, whatever the tag points to by then.
		d, err := img.Digest()
		if err != nil {
			return nil, err
		}
		if err := opts.Verifier.Verify(ctx, r.Context().Digest(d.String()), ropts...); err != nil {
			return nil, err
		}
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
	if m.Layers[pick].Size > opts.MaxBytes {
		return nil, fmt.Errorf("module is larger than %d bytes (layer of %d)", opts.MaxBytes, m.Layers[pick].Size)
	}
	b, err := readBounded(rc, opts.MaxBytes)
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(b); "sha256:"+hex.EncodeToString(sum[:]) != m.Layers[pick].Digest.String() {
		return nil, fmt.Errorf("layer %s: content does not match its digest", m.Layers[pick].Digest)
	}
	return b, nil
}
