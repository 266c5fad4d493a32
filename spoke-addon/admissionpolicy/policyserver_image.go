package admissionpolicy

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// conditionImageSubstituted on a PolicyServer says whether its pods run an image other than
// spec.image, and which.
const conditionImageSubstituted = "ImageSubstituted"

// Reasons of conditionImageSubstituted.
const (
	reasonKubewardenImage = "KubewardenImage"
	reasonImageAsGiven    = "ImageAsGiven"
)

// servedImage is the image a PolicyServer's pods run. Every Kubewarden PolicyServer names
// Kubewarden's policy-server image, which does not understand the arguments, files and Leases
// Regent's pods are started with and would crash-loop; Regent's own policy server serves the
// same modules (waPC, Rego, WASI) and the same API, so a PolicyServer naming Kubewarden's image
// runs regentImage instead, and the YAML applies unchanged. Any other image is taken as the
// user's choice of Regent image (a mirror, a pinned digest) and run as given.
func servedImage(spec, regentImage string) (image string, substituted bool) {
	if isKubewardenPolicyServer(spec) && regentImage != "" {
		return regentImage, true
	}
	return spec, false
}

// isKubewardenPolicyServer tells whether ref names Kubewarden's policy-server image in any
// registry or mirror: a repository ending in kubewarden/policy-server (ghcr.io, the upstream
// charts) or kubewarden-policy-server (Rancher's registry), at any tag or digest.
func isKubewardenPolicyServer(ref string) bool {
	r, err := name.ParseReference(ref, name.WeakValidation)
	if err != nil {
		return false // not an image reference at all: the pods say so, as with any bad image
	}
	repo := r.Context().RepositoryStr()
	return repo == "kubewarden/policy-server" || strings.HasSuffix(repo, "/kubewarden/policy-server") ||
		repo == "kubewarden-policy-server" || strings.HasSuffix(repo, "/kubewarden-policy-server")
}

// imageCondition says which image the pods of ps run, and why when it is not spec.image.
func imageCondition(ps *kubewardenv1.PolicyServer, image string, substituted bool) metav1.Condition {
	if !substituted {
		return metav1.Condition{Type: conditionImageSubstituted, Status: metav1.ConditionFalse, Reason: reasonImageAsGiven,
			Message: fmt.Sprintf("the policy server pods run spec.image %s", image)}
	}
	return metav1.Condition{Type: conditionImageSubstituted, Status: metav1.ConditionTrue, Reason: reasonKubewardenImage,
		Message: fmt.Sprintf("spec.image %s is Kubewarden's policy server, which cannot run as Regent's policy server "+
			"(it takes none of its arguments and would crash-loop); the pods run Regent's policy server image %s, "+
			"which serves the same policies. Name another image in spec.image to run it as given", ps.Spec.Image, image)}
}
