package cache_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"regent.dev/regent/policyserver/lifecycle/cache"
	"regent.dev/regent/policyserver/lifecycle/signing"
)

// rewrite copies a transfer stream, letting edit change each file (or drop it: nil) and add
// files at the end.
func rewrite(t *testing.T, stream []byte, edit func(name string, b []byte) []byte, extra map[string][]byte) []byte {
	t.Helper()
	var out bytes.Buffer
	tr, tw := tar.NewReader(bytes.NewReader(stream)), tar.NewWriter(&out)
	write := func(name string, b []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write(b)
	}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		if b = edit(h.Name, b); b != nil {
			write(h.Name, b)
		}
	}
	for name, b := range extra {
		write(name, b)
	}
	_ = tw.Close()
	return out.Bytes()
}

func TestTransfer_AnEntrySentIsReceivedVerifiedAndOpens_ASpoiledOneIsRefusedAndNothingIsKept(t *testing.T) {
	signer, verifier := keys(t)
	leader := cache.Cache{Root: t.TempDir(), Version: "v1"}
	key, err := leader.Build(context.Background(), regoSource(t), signer, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	if err := leader.WriteEntry(&stream, key, verifier); err != nil {
		t.Fatal(err)
	}
	keep := func(_ string, b []byte) []byte { return b }

	spoiled := map[string]struct {
		stream []byte
		want   error
	}{
		"compiled code changed": {rewrite(t, stream.Bytes(), func(name string, b []byte) []byte {
			if strings.Contains(name, "wazero-") && !strings.HasSuffix(name, signing.SignatureSuffix) {
				b[len(b)/2] ^= 0xff
			}
			return b
		}, nil), cache.ErrSignatureInvalid},
		"a signature missing": {rewrite(t, stream.Bytes(), func(name string, b []byte) []byte {
			if name == cache.ModuleFile+signing.SignatureSuffix {
				return nil
			}
			return b
		}, nil), cache.ErrSignatureInvalid},
		"no manifest": {rewrite(t, stream.Bytes(), func(name string, b []byte) []byte {
			return map[bool][]byte{true: nil, false: b}[strings.HasPrefix(name, cache.ManifestFile)]
		}, nil), cache.ErrTransfer},
		"truncated":         {stream.Bytes()[:stream.Len()/2], cache.ErrTransfer},
		"an unsigned extra": {rewrite(t, stream.Bytes(), keep, map[string][]byte{"wazero-x/evil": []byte("code")}), cache.ErrSignatureInvalid},
		"a path outside":    {rewrite(t, stream.Bytes(), keep, map[string][]byte{"../escape": []byte("x")}), cache.ErrTransfer},
	}
	for name, tc := range spoiled {
		replica := cache.Cache{Root: t.TempDir(), Version: "v1"}
		if err := replica.Receive(key, bytes.NewReader(tc.stream), verifier, 1<<30); !errors.Is(err, tc.want) {
			t.Errorf("%s: Receive = %v, want %v", name, err, tc.want)
		}
		if replica.Has(key) {
			t.Errorf("%s: the refused entry was kept", name)
		}
	}

	replica := cache.Cache{Root: t.TempDir(), Version: "v1"}
	if err := replica.Receive(key, bytes.NewReader(stream.Bytes()), verifier, int64(stream.Len()-1)); !errors.Is(err, cache.ErrTransfer) || replica.Has(key) {
		t.Errorf("over the size bound: %v, kept %v", err, replica.Has(key))
	}
	_, otherVerifier := keys(t)
	if err := replica.Receive(key, bytes.NewReader(stream.Bytes()), otherVerifier, 1<<30); !errors.Is(err, cache.ErrSignatureInvalid) {
		t.Errorf("signed by another CA: %v", err)
	}
	if err := replica.Receive(key, bytes.NewReader(stream.Bytes()), verifier, 1<<30); err != nil {
		t.Fatal(err)
	}
	opened, err := replica.Open(key, verifier, t.TempDir())
	if err != nil || cache.Key(opened.Wasm) != key {
		t.Fatalf("received entry: %v", err)
	}
	if other := cache.Key([]byte("another module")); replica.Receive(other, bytes.NewReader(stream.Bytes()), verifier, 1<<30) == nil {
		t.Error("an entry received under another module's key was accepted")
	}
}
