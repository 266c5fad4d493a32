package propagator

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/templates"
)

// backupLabel marks the key Secret for OCM's hub backup, as OCM's propagator does: without its
// key a restored hub's replicas would no longer decrypt on their clusters.
const backupLabel = "cluster.open-cluster-management.io/backup"

// clusterKey returns cluster's AES-256 key from the Secret policy-encryption-key in the cluster
// namespace, creating the Secret with a new key when there is none. The Secret is read from the
// apiserver, not the cache: the hub is allowed that one Secret by name, never a list of them.
func (r *Reconciler) clusterKey(ctx context.Context, cluster string) ([]byte, error) {
	key := client.ObjectKey{Namespace: cluster, Name: templates.EncryptionKeySecret}
	secret := &corev1.Secret{}
	err := r.apiReader().Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		k, genErr := templates.NewKey()
		if genErr != nil {
			return nil, genErr
		}
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace,
				Labels:      map[string]string{backupLabel: "policy"},
				Annotations: map[string]string{templates.LastRotatedAnnotation: r.clock().Now().UTC().Format(time.RFC3339)}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{"key": k},
		}
		err = r.Client.Create(ctx, secret)
		if apierrors.IsAlreadyExists(err) {
			// Another worker made it first: use theirs.
			err = r.apiReader().Get(ctx, key, secret)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the encryption key Secret %s/%s: %w", key.Namespace, key.Name, err)
	}
	k := secret.Data["key"]
	if len(k) != templates.KeySize {
		return nil, fmt.Errorf("the encryption key Secret %s/%s: data.key is %d bytes, want an AES-256 key of %d", key.Namespace, key.Name, len(k), templates.KeySize)
	}
	return k, nil
}

func (r *Reconciler) clock() clock.PassiveClock {
	if r.Clock != nil {
		return r.Clock
	}
	return clock.RealClock{}
}

func (r *Reconciler) apiReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// replicaEncryption is what encrypts one replica's values, made on first use: a replica whose
// templates copy no Secret needs neither the cluster's key nor an IV.
type replicaEncryption struct {
	r       *Reconciler
	ctx     context.Context
	cluster string
	// existing is the replica as it is: its IV is kept, so unchanged inputs encrypt to the same
	// text and the replica is not rewritten.
	existing *CachedReplica
	enc      *templates.Encryption
	// calls counts the values encrypted, so each template that encrypted one is annotated.
	calls int
}

func (e *replicaEncryption) protect(value string) (string, error) {
	e.calls++
	if e.enc == nil {
		key, err := e.r.clusterKey(e.ctx, e.cluster)
		if err != nil {
			return "", err
		}
		iv, err := e.iv()
		if err != nil {
			return "", err
		}
		e.enc = &templates.Encryption{Key: key, IV: iv}
	}
	return e.enc.Encrypt(value)
}

func (e *replicaEncryption) iv() ([]byte, error) {
	if e.existing != nil {
		if iv, err := templates.ParseIV(e.existing.annotations[templates.IVAnnotation]); err == nil {
			return iv, nil
		}
	}
	return templates.NewIV()
}

// ivAnnotation is the IVAnnotation value once something was encrypted, "" otherwise.
func (e *replicaEncryption) ivAnnotation() string {
	if e == nil || e.enc == nil {
		return ""
	}
	return base64.StdEncoding.EncodeToString(e.enc.IV)
}

// annotateIV sets IVAnnotation on a resolved policy template, where the managed cluster's
// controller (Regent's or OCM's config-policy-controller) reads it to decrypt.
func annotateIV(raw []byte, iv string) ([]byte, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("the resolved template is not a JSON object: %w", err)
	}
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
		md["annotations"] = ann
	}
	ann[templates.IVAnnotation] = iv
	return json.Marshal(obj)
}
