// Command regent-image builds a container image from a static binary with package image, no
// container engine: `make image` runs it on the `regent` binary; the test fleet runs it on its
// helper binaries. It prints the image's manifest digest (what `crane push` of the layout pushes)
// and its config digest (the image ID containerd and Docker show).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"regent.dev/regent/image"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "regent-image:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	var s image.Spec
	var ref, tarballFile, layoutDir, entrypoint, created string
	fs := flag.NewFlagSet("regent-image", flag.ContinueOnError)
	fs.StringVar(&s.Binary, "binary", "", "static executable to put in the image (required)")
	fs.StringVar(&s.Path, "path", "", "where the binary lands in the image (default /usr/local/bin/<name>)")
	fs.StringVar(&entrypoint, "entrypoint", "", "comma-separated entrypoint (default: the binary)")
	fs.StringVar(&ref, "ref", "", "image reference with a tag, e.g. ghcr.io/regent-dev/regent:v0.1.0 (required)")
	fs.StringVar(&s.Version, "version", "", "org.opencontainers.image.version label")
	fs.StringVar(&s.Revision, "revision", "", "org.opencontainers.image.revision label")
	fs.StringVar(&s.Source, "source", "", "org.opencontainers.image.source label")
	fs.StringVar(&s.Architecture, "arch", "", "image architecture (default: this machine's)")
	fs.BoolVar(&s.NoCACertificates, "no-ca-certificates", false, "leave the CA bundle out")
	fs.StringVar(&created, "created", os.Getenv("SOURCE_DATE_EPOCH"), "Unix seconds of every timestamp in the image (default $SOURCE_DATE_EPOCH)")
	fs.StringVar(&tarballFile, "tarball", "", "write a docker-save archive here (ctr images import, docker load)")
	fs.StringVar(&layoutDir, "layout", "", "write an OCI image layout here (crane push)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if ref == "" || (tarballFile == "" && layoutDir == "") {
		return errors.New("--ref and one of --tarball, --layout are required")
	}
	if created == "" {
		return errors.New("no --created and no SOURCE_DATE_EPOCH: the image's timestamps must come from the source, e.g. SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)")
	}
	secs, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		return fmt.Errorf("--created %q: want Unix seconds: %w", created, err)
	}
	s.Created = time.Unix(secs, 0)
	if entrypoint != "" {
		s.Entrypoint = strings.Split(entrypoint, ",")
	}
	img, err := image.Build(s)
	if err != nil {
		return err
	}
	if tarballFile != "" {
		if err := image.WriteTarball(tarballFile, ref, img); err != nil {
			return err
		}
	}
	if layoutDir != "" {
		if err := image.WriteLayout(layoutDir, ref, img); err != nil {
			return err
		}
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	id, err := img.ConfigName()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n  digest: %s\n  config: %s\n", ref, digest, id)
	return err
}
