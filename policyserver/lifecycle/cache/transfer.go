package cache

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"regent.dev/regent/policyserver/lifecycle/signing"
)

// An entry travels between replicas that share no volume as a tar stream of its files, each
// followed by its signature (<file>.sig), exactly the layout of its directory.

// ErrTransfer: a received stream is not a well-formed entry (truncated, oversized, a name
// outside the entry); like ErrSignatureInvalid, nothing of it is kept.
var ErrTransfer = errors.New("cache entry transfer refused")

// Has tells whether an entry for key is in this cache (not whether it verifies).
func (c Cache) Has(key string) bool {
	if validKey(key) != nil {
		return false
	}
	_, err := os.Stat(filepath.Join(c.Dir(key), ManifestFile))
	return err == nil
}

// Remove deletes the entry for key, so that the next look for it fetches or builds it again.
func (c Cache) Remove(key string) error {
	if err := validKey(key); err != nil {
		return err
	}
	return os.RemoveAll(c.Dir(key))
}

// WriteEntry verifies the entry for key as Open does and writes the bytes it verified, with
// their signatures, to w. What it sends was checked after it was read, so an entry tampered
// with on this replica's disk is refused here (ErrSignatureInvalid) rather than sent.
func (c Cache) WriteEntry(w io.Writer, key string, v *signing.Verifier) error {
	_, files, sigs, err := c.readVerified(key, v)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for rel := range files {
		names = append(names, rel)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, rel := range names {
		for _, f := range []struct {
			name string
			b    []byte
		}{{rel, files[rel]}, {rel + signing.SignatureSuffix, sigs[rel]}} {
			if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.b)), Typeflag: tar.TypeReg}); err != nil {
				return err
			}
			if _, err := tw.Write(f.b); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// Receive reads an entry for key that WriteEntry wrote, at most maxBytes of it, verifies it in
// memory as Open verifies an entry on disk, and only then publishes it in this cache (staged and
// renamed, as Build publishes). A truncated, oversized or malformed stream wraps ErrTransfer; a
// tampered or foreign one ErrSignatureInvalid; either way nothing is written.
func (c Cache) Receive(key string, r io.Reader, v *signing.Verifier, maxBytes int64) error {
	if err := validKey(key); err != nil {
		return err
	}
	limited := &io.LimitedReader{R: r, N: maxBytes + 1}
	tr := tar.NewReader(limited)
	received := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrTransfer, err)
		}
		if h.Typeflag != tar.TypeReg || !fs.ValidPath(h.Name) || received[h.Name] != nil {
			return fmt.Errorf("%w: %q is not a file of an entry", ErrTransfer, h.Name)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrTransfer, h.Name, err)
		}
		received[h.Name] = b
	}
	if limited.N <= 0 {
		return fmt.Errorf("%w: larger than %d bytes", ErrTransfer, maxBytes)
	}
	read := func(rel string) ([]byte, []byte, error) {
		content, ok := received[rel]
		if !ok {
			return nil, nil, fmt.Errorf("%s: %w", rel, fs.ErrNotExist)
		}
		sig, ok := received[rel+signing.SignatureSuffix]
		if !ok {
			return nil, nil, fmt.Errorf("%s: %w: no signature", rel, signing.ErrBadSignature)
		}
		return content, sig, nil
	}
	_, files, err := c.verifyEntry(key, v, read)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: no %s", ErrTransfer, ManifestFile)
	}
	if err != nil {
		return err
	}
	sigs := make(map[string][]byte, len(files))
	for rel := range files {
		sigs[rel] = received[rel+signing.SignatureSuffix]
	}
	for name := range received {
		if base := strings.TrimSuffix(name, signing.SignatureSuffix); files[base] == nil {
			return fmt.Errorf("%w: %s is not in the signed manifest", ErrSignatureInvalid, name)
		}
	}
	return c.publish(key, files, sigs)
}
