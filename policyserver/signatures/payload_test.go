package signatures_test

import (
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

func payloadFor(d name.Digest) payload.Cosign { return payload.Cosign{Image: d} }
