package artifact

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"regent.dev/regent/policyserver/lifecycle/pull"
)

// ConfigMediaType is the config of a wasm policy artifact.
const ConfigMediaType types.MediaType = "application/vnd.wasm.config.v1+json"

// titleAnnotation names the module's file, as ORAS and Kubewarden's tools record it.
const titleAnnotation = "org.opencontainers.image.title"

// Options configure registry access.
type Options struct {
	// Insecure allows plain http to any registry (localhost always may).
	Insecure bool
	// Transport, when set, carries the requests (tests, custom roots).
	Transport http.RoundTripper
}

func (o Options) reference(ref string) (name.Reference, error) {
	var opts []name.Option
	if o.Insecure {
		opts = append(opts, name.Insecure)
	}
	return name.ParseReference(ref, opts...)
}

func (o Options) remote(ctx context.Context) []remote.Option {
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if o.Transport != nil {
		opts = append(opts, remote.WithTransport(o.Transport))
	}
	return opts
}

// Image is the policy artifact of a wasm module; title names the module's file.
func Image(module []byte, title string) (v1.Image, error) {
	if len(module) < 8 || string(module[:4]) != "\x00asm" {
		return nil, fmt.Errorf("%s is not a WebAssembly module: a registry artifact must be one (build Rego with `opa build -t wasm`)", title)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), ConfigMediaType)
	img, err := mutate.ConfigFile(img, &v1.ConfigFile{Architecture: "wasm", OS: "wasip1"})
	if err != nil {
		return nil, err
	}
	add := mutate.Addendum{Layer: static.NewLayer(module, pull.WasmLayerMediaType)}
	if title != "" {
		add.Annotations = map[string]string{titleAnnotation: title}
	}
	return mutate.Append(img, add)
}

// Push writes module to ref (registry/repository:tag, no scheme) and returns the digest it is
// stored under, the reference to pin and sign.
func Push(ctx context.Context, module []byte, title, ref string, opts Options) (name.Digest, error) {
	r, err := opts.reference(ref)
	if err != nil {
		return name.Digest{}, fmt.Errorf("reference %s: %w", ref, err)
	}
	img, err := Image(module, title)
	if err != nil {
		return name.Digest{}, err
	}
	if err := remote.Write(r, img, opts.remote(ctx)...); err != nil {
		return name.Digest{}, fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return r.Context().Digest(d.String()), nil
}

// Pull gets the module at ref as a policy server would (see lifecycle/pull).
func Pull(ctx context.Context, ref string, opts Options) (pull.Module, error) {
	return pull.Fetch(ctx, "registry://"+ref, pull.Options{InsecureRegistries: opts.Insecure})
}

// Resolve returns the digest ref names now (a tag's current manifest), so that what is verified
// is what is then pulled.
func Resolve(ctx context.Context, ref string, opts Options) (name.Digest, error) {
	r, err := opts.reference(ref)
	if err != nil {
		return name.Digest{}, fmt.Errorf("reference %s: %w", ref, err)
	}
	if d, ok := r.(name.Digest); ok {
		return d, nil
	}
	desc, err := remote.Head(r, opts.remote(ctx)...)
	if err != nil {
		return name.Digest{}, fmt.Errorf("resolve %s: %w", ref, err)
	}
	return r.Context().Digest(desc.Digest.String()), nil
}
