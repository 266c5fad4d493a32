package lifecycle

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"regent.dev/regent/policyserver/selfsigned"
)

// The CA bundle is read again when the file is replaced, as kubelet replaces a mounted ConfigMap:
// a rotated CA is trusted, and the one it replaced is not, without a restart.
func TestPeerCheck_TheBundleIsReadAgainWhenTheFileIsReplaced(t *testing.T) {
	const name = "leader.ns.svc"
	oldCA, newCA := leaderCert(t, name), leaderCert(t, name)
	dir := t.TempDir()
	bundle := filepath.Join(dir, "ca.crt")
	replace := func(pem ...[]byte) {
		t.Helper()
		tmp := filepath.Join(dir, "ca.crt.tmp")
		var b []byte
		for _, p := range pem {
			b = append(b, p...)
		}
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, bundle); err != nil {
			t.Fatal(err)
		}
	}
	check := &peerCheck{caFile: bundle, name: name}
	expect := func(step string, leader leaderFiles, trusted bool) {
		t.Helper()
		err := check.verify(tls.ConnectionState{PeerCertificates: []*x509.Certificate{leader.cert}})
		if trusted && err != nil {
			t.Errorf("%s: %v", step, err)
		}
		if !trusted && err == nil {
			t.Errorf("%s: a leader the bundle does not vouch for was trusted", step)
		}
	}

	replace(oldCA.files.CAPEM)
	expect("the old CA's leader", oldCA, true)
	expect("the old CA's leader again (the bundle unchanged)", oldCA, true)
	expect("the new CA's leader before the rotation", newCA, false)
	replace(oldCA.files.CAPEM, newCA.files.CAPEM)
	expect("both CAs in the bundle: the new CA's leader", newCA, true)
	replace(newCA.files.CAPEM)
	expect("after the rotation: the new CA's leader", newCA, true)
	expect("after the rotation: the old CA's leader", oldCA, false)

	other := &peerCheck{caFile: bundle, name: "someone-else.ns.svc"}
	if err := other.verify(tls.ConnectionState{PeerCertificates: []*x509.Certificate{newCA.cert}}); err == nil {
		t.Error("a certificate issued for another name was trusted")
	}
}

type leaderFiles struct {
	files selfsigned.Files
	cert  *x509.Certificate
}

func leaderCert(t *testing.T, host string) leaderFiles {
	t.Helper()
	files, err := selfsigned.Write(t.TempDir(), host)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaderFiles{files: files, cert: cert}
}
