package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"regent.dev/regent/fleet"
	"regent.dev/regent/image"
	"regent.dev/regent/version"
)

// Image references the node imports; nothing is pulled (imagePullPolicy IfNotPresent). Regent's
// is the release reference every manifest names, so deploy/hub installs unchanged.
var regentImage = version.Image()

const pauseImage = "regent.dev/pause:e2e"

var (
	// regentBin is the static regent binary the image holds; the test also runs `regent hub`
	// from it on the host.
	regentBin string
	// images are the tarballs the node imports; skipReason says why the node cannot run here.
	images     []string
	skipReason error
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if skipReason = fleet.CheckRealNode(fleet.DefaultBinDir()); skipReason != nil {
		return m.Run() // each test skips or fails with the reason
	}
	dir, err := os.MkdirTemp("", "regent-realnode-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	regentBin = filepath.Join(dir, "regent")
	pauseBin := filepath.Join(dir, "pause")
	for bin, pkg := range map[string]string{regentBin: "regent.dev/regent/cmd/regent", pauseBin: "regent.dev/regent/hack/pause"} {
		// Static: the image has no libc.
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg+":", err)
			return 1
		}
	}
	created := time.Unix(0, 0)
	for _, spec := range []struct {
		ref string
		s   image.Spec
	}{
		{regentImage, image.Spec{Binary: regentBin, Created: created, Version: "e2e"}},
		{pauseImage, image.Spec{Binary: pauseBin, Created: created, Version: "e2e", NoCACertificates: true}},
	} {
		img, err := image.Build(spec.s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "image", spec.ref+":", err)
			return 1
		}
		tarball := filepath.Join(dir, filepath.Base(spec.s.Binary)+".tar")
		if err := image.WriteTarball(tarball, spec.ref, img); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		images = append(images, tarball)
	}
	return m.Run()
}

// requireRealNode skips the test when this machine cannot run a node, or fails it when
// REGENT_REAL_NODE=1 says it must.
func requireRealNode(t *testing.T) {
	t.Helper()
	if skipReason == nil {
		return
	}
	if os.Getenv(fleet.RealNodeEnv) == "1" {
		t.Fatalf("%s=1 but %v", fleet.RealNodeEnv, skipReason)
	}
	t.Skipf("%v (set %s=1 to make this a failure)", skipReason, fleet.RealNodeEnv)
}
