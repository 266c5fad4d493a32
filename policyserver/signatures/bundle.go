package signatures

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// RekorBundle is cosign's dev.sigstore.cosign/bundle annotation: the Rekor log's promise that it
// integrated an entry at IntegratedTime, signed with the log's key (the SignedEntryTimestamp).
type RekorBundle struct {
	SignedEntryTimestamp []byte       `json:"SignedEntryTimestamp"`
	Payload              RekorPayload `json:"Payload"`
}

// RekorPayload is what the SignedEntryTimestamp signs: the entry's canonical body (base64), when
// and where it was logged, and the log's id (hex of the SHA-256 of its public key).
type RekorPayload struct {
	Body           string `json:"body"`
	IntegratedTime int64  `json:"integratedTime"`
	LogID          string `json:"logID"`
	LogIndex       int64  `json:"logIndex"`
}

// Canonical is the payload as Rekor signed it: RFC 8785 JSON, which for these four fields (keys
// in this order, a base64 and a hex string, two integers) is what encoding/json writes.
func (p RekorPayload) Canonical() []byte {
	b, _ := json.Marshal(p) // strings and integers: cannot fail
	return b
}

// hashedRekord is the part of a Rekor hashedrekord v0.0.1 entry that binds it to a signature.
type hashedRekord struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Data struct {
			Hash struct {
				Algorithm string `json:"algorithm"`
				Value     string `json:"value"`
			} `json:"hash"`
		} `json:"data"`
		Signature struct {
			Content   []byte `json:"content"`
			PublicKey struct {
				Content []byte `json:"content"`
			} `json:"publicKey"`
		} `json:"signature"`
	} `json:"spec"`
}

// signedAt checks sig's Rekor bundle against the trust root and returns when the log integrated
// the signature. The bundle must be of this very signature: its entry names the signature, the
// hash of the payload and the key (or certificate of the key) that verifies it, so a bundle
// taken from another signature cannot lend this one its time.
func (t *TrustRoot) signedAt(sig Signature, key crypto.PublicKey) (time.Time, error) {
	if sig.Bundle == "" {
		return time.Time{}, errors.New("it has no Rekor bundle (dev.sigstore.cosign/bundle), so when it was made, and whether the certificate was valid then, cannot be checked")
	}
	var b RekorBundle
	if err := json.Unmarshal([]byte(sig.Bundle), &b); err != nil {
		return time.Time{}, fmt.Errorf("its Rekor bundle is not readable: %v", err)
	}
	body, err := base64.StdEncoding.DecodeString(b.Payload.Body)
	if err != nil {
		return time.Time{}, fmt.Errorf("its Rekor bundle's body is not base64: %v", err)
	}
	id, err := hex.DecodeString(b.Payload.LogID)
	if err != nil {
		return time.Time{}, fmt.Errorf("its Rekor bundle's logID is not hex: %v", err)
	}
	logID := hex.EncodeToString(id)
	log, ok := t.rekorLog(logID)
	if !ok {
		return time.Time{}, fmt.Errorf("its Rekor bundle is from log %s, which the trust root does not list", logID)
	}
	at := time.Unix(b.Payload.IntegratedTime, 0)
	if (!log.ValidityPeriodStart.IsZero() && at.Before(log.ValidityPeriodStart)) || (!log.ValidityPeriodEnd.IsZero() && at.After(log.ValidityPeriodEnd)) {
		return time.Time{}, fmt.Errorf("its Rekor bundle says %s, when the trust root did not trust log %s", at.UTC().Format(time.RFC3339), logID)
	}
	hash := log.SignatureHashFunc
	if hash == 0 {
		hash = crypto.SHA256
	}
	v, err := signature.LoadVerifier(log.PublicKey, hash)
	if err != nil {
		return time.Time{}, fmt.Errorf("the trust root's key of Rekor log %s: %v", logID, err)
	}
	canonical := RekorPayload{Body: base64.StdEncoding.EncodeToString(body), IntegratedTime: b.Payload.IntegratedTime, LogID: logID, LogIndex: b.Payload.LogIndex}.Canonical()
	if err := v.VerifySignature(bytes.NewReader(b.SignedEntryTimestamp), bytes.NewReader(canonical)); err != nil {
		return time.Time{}, fmt.Errorf("its Rekor bundle's SignedEntryTimestamp does not verify with the key of log %s", logID)
	}
	if err := entryBindsTo(body, sig, key); err != nil {
		return time.Time{}, fmt.Errorf("its Rekor bundle is not of this signature: %v", err)
	}
	return at, nil
}

// entryBindsTo checks that a Rekor hashedrekord entry records sig: the same signature bytes, the
// SHA-256 of its payload, and key.
func entryBindsTo(body []byte, sig Signature, key crypto.PublicKey) error {
	var e hashedRekord
	if err := json.Unmarshal(body, &e); err != nil {
		return fmt.Errorf("entry body: %v", err)
	}
	if e.Kind != "hashedrekord" || e.APIVersion != "0.0.1" {
		return fmt.Errorf("the entry is a %s %s, not a hashedrekord 0.0.1", e.Kind, e.APIVersion)
	}
	if !bytes.Equal(e.Spec.Signature.Content, sig.Signature) {
		return errors.New("the entry records another signature")
	}
	sum := sha256.Sum256(sig.Payload)
	if e.Spec.Data.Hash.Algorithm != "sha256" || e.Spec.Data.Hash.Value != hex.EncodeToString(sum[:]) {
		return errors.New("the entry records the hash of another payload")
	}
	logged, err := entryKey(e.Spec.Signature.PublicKey.Content)
	if err != nil {
		return err
	}
	if err := cryptoutils.EqualKeys(logged, key); err != nil {
		return errors.New("the entry records another key")
	}
	return nil
}

// entryKey reads the key a hashedrekord entry records: a PEM certificate or public key.
func entryKey(pemBytes []byte) (crypto.PublicKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("the entry's public key is not PEM")
	}
	if block.Type == "CERTIFICATE" {
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("the entry's certificate: %v", err)
		}
		return c.PublicKey, nil
	}
	k, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("the entry's public key: %v", err)
	}
	return k, nil
}
