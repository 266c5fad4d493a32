package admissionpolicy

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
)

// The signed cache needs no ReadWriteMany storage: by default each replica keeps it in an
// emptyDir, with a storage class in a ReadWriteOnce claim of its own, and only on request in one
// ReadWriteMany claim every replica shares.
func TestPolicyServer_CacheVolumeModes(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config, func(o *Options) { o.WebhookURL, o.CABundle = nil, nil })
	ctx := context.Background()
	create := func(name string, spec kubewardenv1.PolicyServerSpec) *kubewardenv1.PolicyServer {
		spec.Image, spec.Replicas = "regent:dev", 2
		ps := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
		if err := c.Create(ctx, ps); err != nil {
			t.Fatal(err)
		}
		return ps
	}
	statefulSet := func(ps string, ok func(*appsv1.StatefulSet) bool) *appsv1.StatefulSet {
		sts := &appsv1.StatefulSet{}
		eventually(t, "StatefulSet of "+ps, func() bool {
			return c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: serverObjectName(ps)}, sts) == nil && ok(sts)
		})
		return sts
	}
	anySTS := func(*appsv1.StatefulSet) bool { return true }
	claim := func(ps string) (*corev1.PersistentVolumeClaim, error) {
		pvc := &corev1.PersistentVolumeClaim{}
		return pvc, c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: cacheClaimName(ps)}, pvc)
	}
	cacheVolumeOf := func(sts *appsv1.StatefulSet) *corev1.Volume {
		for i, v := range sts.Spec.Template.Spec.Volumes {
			if v.Name == cacheVolume {
				return &sts.Spec.Template.Spec.Volumes[i]
			}
		}
		return nil
	}

	// Default: an emptyDir per replica, no claim at all.
	create("ephemeral", kubewardenv1.PolicyServerSpec{})
	sts := statefulSet("ephemeral", anySTS)
	if v := cacheVolumeOf(sts); v == nil || v.EmptyDir == nil || len(sts.Spec.VolumeClaimTemplates) != 0 {
		t.Errorf("default cache: volume %+v, claim templates %v; want an emptyDir", v, sts.Spec.VolumeClaimTemplates)
	}
	assertPod(t, sts, "--signed-cache=/cache")
	if _, err := claim("ephemeral"); !apierrors.IsNotFound(err) {
		t.Errorf("default cache has a claim (%v)", err)
	}

	// A storage class: a ReadWriteOnce claim template, one volume per replica.
	rwo := create("own-volumes", kubewardenv1.PolicyServerSpec{CacheStorageClassName: ptr.To("standard")})
	sts = statefulSet("own-volumes", anySTS)
	if v := cacheVolumeOf(sts); v != nil {
		t.Errorf("per-replica cache also has a pod volume %+v", v)
	}
	if tpl := sts.Spec.VolumeClaimTemplates; len(tpl) != 1 || tpl[0].Name != cacheVolume || ptr.Deref(tpl[0].Spec.StorageClassName, "") != "standard" ||
		!slices.Equal(tpl[0].Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
		t.Errorf("claim templates = %+v, want one ReadWriteOnce %q of class standard", tpl, cacheVolume)
	}
	assertPod(t, sts, "--signed-cache=/cache")

	// ReadWriteMany: one shared claim, mounted by every replica.
	create("shared", kubewardenv1.PolicyServerSpec{CacheStorageClassName: ptr.To("nfs"), CacheAccessMode: corev1.ReadWriteMany})
	sts = statefulSet("shared", anySTS)
	var pvc *corev1.PersistentVolumeClaim
	eventually(t, "shared claim", func() bool {
		var err error
		pvc, err = claim("shared")
		return err == nil
	})
	if !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}) || ptr.Deref(pvc.Spec.StorageClassName, "") != "nfs" {
		t.Errorf("shared claim = %+v", pvc.Spec)
	}
	if v := cacheVolumeOf(sts); v == nil || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != pvc.Name || len(sts.Spec.VolumeClaimTemplates) != 0 {
		t.Errorf("shared cache volume %+v, claim templates %v", v, sts.Spec.VolumeClaimTemplates)
	}
	assertPod(t, sts, "--shared-cache=/cache")

	// The apiserver refuses to change claim templates: moving the per-replica cache to a shared
	// one replaces the StatefulSet (its pods orphaned, then adopted) rather than failing forever.
	before := statefulSet("own-volumes", anySTS).UID
	update(t, c, rwo, func() { rwo.Spec.CacheAccessMode = corev1.ReadWriteMany })
	sts = statefulSet("own-volumes", func(s *appsv1.StatefulSet) bool { return s.UID != before && len(s.Spec.VolumeClaimTemplates) == 0 })
	assertPod(t, sts, "--shared-cache=/cache")
	eventually(t, "the shared claim of own-volumes", func() bool { _, err := claim("own-volumes"); return err == nil })

	// Anything else is refused by the CRD.
	bad := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev", CacheAccessMode: corev1.ReadOnlyMany}}
	if err := c.Create(ctx, bad); !apierrors.IsInvalid(err) {
		t.Errorf("cacheAccessMode ReadOnlyMany: %v, want Invalid", err)
	}
}

// assertPod checks what a policy server pod needs to run as a real pod: the cache flag, the pod
// IP it advertises to other replicas, probes, a token, a restricted security context, and
// writable emptyDirs for everything but the cache.
func assertPod(t *testing.T, sts *appsv1.StatefulSet, cacheFlag string) {
	t.Helper()
	pod := sts.Spec.Template.Spec
	ctr := pod.Containers[0]
	for _, arg := range []string{cacheFlag, "--advertise-address=$(POD_IP)", "--cache-dir=/var/lib/regent/private", "--replica-from-hostname"} {
		if !slices.Contains(ctr.Args, arg) {
			t.Errorf("%s: args %v lack %s", sts.Name, ctr.Args, arg)
		}
	}
	if len(ctr.Env) != 1 || ctr.Env[0].Name != "POD_IP" || ctr.Env[0].ValueFrom == nil || ctr.Env[0].ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("%s: env %+v, want POD_IP from status.podIP", sts.Name, ctr.Env)
	}
	for name, p := range map[string]*corev1.Probe{"startup": ctr.StartupProbe, "readiness": ctr.ReadinessProbe, "liveness": ctr.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS || p.HTTPGet.Port.IntValue() != ServicePort {
			t.Errorf("%s: %s probe %+v, want HTTPS on %d", sts.Name, name, p, ServicePort)
		}
	}
	if !ptr.Deref(pod.AutomountServiceAccountToken, false) || !ptr.Deref(pod.SecurityContext.RunAsNonRoot, false) ||
		ptr.Deref(pod.SecurityContext.FSGroup, 0) == 0 || !ptr.Deref(ctr.SecurityContext.ReadOnlyRootFilesystem, false) ||
		ptr.Deref(ctr.SecurityContext.AllowPrivilegeEscalation, true) {
		t.Errorf("%s: pod security %+v / %+v, token %v", sts.Name, pod.SecurityContext, ctr.SecurityContext, pod.AutomountServiceAccountToken)
	}
	mounts := map[string]string{}
	for _, m := range ctr.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	for _, path := range []string{"/cache", "/tls", "/var/lib/regent", "/tmp"} {
		if mounts[path] == "" {
			t.Errorf("%s: nothing mounted at %s (%v)", sts.Name, path, mounts)
		}
	}

	// Without a shared folder a replica fetches from the leader at its pod IP, and authenticates
	// it by the serving CA bundle and the Service's name.
	peerArgs := []string{"--peer-ca-file=/serving-ca/ca-bundle.crt", "--peer-server-name=" + sts.Name + "." + sts.Namespace + ".svc"}
	bundle := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
		cm := v.ConfigMap
		return v.Name == mounts["/serving-ca"] && cm != nil && cm.Name == sts.Name+"-ca-bundle" && ptr.Deref(cm.Optional, false) &&
			len(cm.Items) == 1 && cm.Items[0].Key == "ca-bundle.crt"
	})
	if cacheFlag == "--signed-cache=/cache" {
		for _, arg := range peerArgs {
			if !slices.Contains(ctr.Args, arg) {
				t.Errorf("%s: args %v lack %s", sts.Name, ctr.Args, arg)
			}
		}
		if !bundle {
			t.Errorf("%s: the serving CA bundle is not mounted at /serving-ca from the optional ConfigMap %s-ca-bundle: %v, %+v", sts.Name, sts.Name, mounts, pod.Volumes)
		}
	} else if slices.ContainsFunc(ctr.Args, func(a string) bool { return strings.HasPrefix(a, "--peer-") }) || bundle {
		t.Errorf("%s: a shared folder needs no leader authentication, args %v", sts.Name, ctr.Args)
	}
}
