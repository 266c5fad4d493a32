package admissionpolicy

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/policyserver/signatures"
)

// Where a policy server pod keeps things. The signed cache is the volume "cache"; the private
// compilation cache (with the leader's beside it) and /tmp are emptyDirs, so the root
// filesystem stays read-only.
const (
	cacheVolume = "cache"
	cacheMount  = "/cache"
	workMount   = "/var/lib/regent"
	// policyServerUID is the image's non-root user (the image package's NonRootUID); the
	// pod's fsGroup, so the user can write a freshly provisioned cache volume.
	policyServerUID = 65532
)

// cacheSize is what the module cache claims, or an emptyDir may hold; precompiled modules are a
// few MB each.
var cacheSize = resource.MustParse("1Gi")

// sharedCache: the PolicyServer asks for one ReadWriteMany claim every replica mounts.
func sharedCache(ps *kubewardenv1.PolicyServer) bool {
	return ps.Spec.CacheAccessMode == corev1.ReadWriteMany
}

// applyCacheClaim keeps the shared claim of a ReadWriteMany cache, and removes one a
// PolicyServer no longer asks for (replicas still mounting it keep it until they are replaced:
// the claim is protected while in use).
func (r *policyServerReconciler) applyCacheClaim(ctx context.Context, ps *kubewardenv1.PolicyServer, labels map[string]string) error {
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: r.meta(cacheClaimName(ps.Name), labels)}
	if !sharedCache(ps) {
		err := r.nsReader.Get(ctx, client.ObjectKeyFromObject(claim), claim)
		if apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(claim, ps)) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read cache claim: %w", err)
		}
		if err := r.client.Delete(ctx, claim); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete the shared cache claim no longer used: %w", err)
		}
		return nil
	}
	return r.ensure(ctx, ps, claim, func(o client.Object) {
		c := o.(*corev1.PersistentVolumeClaim)
		if !c.CreationTimestamp.IsZero() {
			return // a claim's spec is immutable once bound
		}
		c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
		c.Spec.StorageClassName = ps.Spec.CacheStorageClassName
		c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: cacheSize}
	})
}

// cacheClaimTemplates is the per-replica ReadWriteOnce claim of a cache with a storage class,
// none otherwise.
func cacheClaimTemplates(ps *kubewardenv1.PolicyServer, labels map[string]string) []corev1.PersistentVolumeClaim {
	if sharedCache(ps) || ps.Spec.CacheStorageClassName == nil {
		return nil
	}
	return []corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: cacheVolume, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ps.Spec.CacheStorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: cacheSize}},
		},
	}}
}

// replaceForClaims deletes the StatefulSet when its claim templates are not the ones wanted:
// the apiserver refuses to change them. The pods are orphaned, not deleted, so they keep
// serving until the StatefulSet created next adopts and replaces them one by one.
func (r *policyServerReconciler) replaceForClaims(ctx context.Context, name string, claims []corev1.PersistentVolumeClaim) error {
	existing := &appsv1.StatefulSet{}
	err := r.nsReader.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: name}, existing)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read StatefulSet %s: %w", name, err)
	}
	if sameClaims(existing.Spec.VolumeClaimTemplates, claims) {
		return nil
	}
	if err := r.client.Delete(ctx, existing, client.PropagationPolicy(metav1.DeletePropagationOrphan)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("replace StatefulSet %s for its new cache claims: %w", name, err)
	}
	return fmt.Errorf("StatefulSet %s deleted, its pods kept, to change its cache claims; it is created again next", name)
}

// sameClaims compares what the controller sets in claim templates (the apiserver defaults more).
func sameClaims(have, want []corev1.PersistentVolumeClaim) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range have {
		h, w := have[i], want[i]
		if h.Name != w.Name || !equality.Semantic.DeepEqual(h.Spec.AccessModes, w.Spec.AccessModes) ||
			ptr.Deref(h.Spec.StorageClassName, "") != ptr.Deref(w.Spec.StorageClassName, "") {
			return false
		}
	}
	return true
}

// policyServerArgs are the arguments of `regent policy-server --lifecycle` in a pod playing
// role: a replica takes its number from the pod's hostname (<statefulset>-<n>); the address
// other processes fetch cache entries from is the pod IP.
func policyServerArgs(ps *kubewardenv1.PolicyServer, namespace, role string) []string {
	cacheFlag := "--signed-cache=" + cacheMount
	if sharedCache(ps) {
		cacheFlag = "--shared-cache=" + cacheMount
	}
	args := []string{"policy-server", "--lifecycle", "--role=" + role,
		"--policy-server=" + ps.Name, "--namespace=" + namespace}
	if role == "replica" {
		args = append(args, "--replica-from-hostname")
	}
	if ps.Spec.VerificationConfig != "" {
		args = append(args, "--verification-config="+verificationMount+"/"+signatures.ConfigMapKey)
	}
	if ps.Spec.SigstoreTrustConfig != "" {
		args = append(args, "--sigstore-trust-config="+sigstoreTrustMount+"/"+signatures.TrustConfigMapKey)
	}
	if !sharedCache(ps) {
		// Replicas fetch signed entries from the leader at its pod IP: they authenticate it by
		// the serving CA and the Service's name its certificate is issued for.
		args = append(args, "--peer-ca-file="+servingCAMount+"/"+caBundleKey, "--peer-server-name="+servingHosts(ps.Name, namespace, nil)[0])
	}
	return append(args, cacheFlag, "--cache-dir="+workMount+"/private",
		"--advertise-address=$(POD_IP)",
		fmt.Sprintf("--addr=:%d", ServicePort), fmt.Sprintf("--metrics-bind-address=:%d", MetricsPort),
		"--cert-file=/tls/tls.crt", "--key-file=/tls/tls.key")
}

// statefulSetPod runs `regent policy-server --lifecycle --role=replica` (policyServerArgs):
// the signed cache is the shared claim, the replica's own claim, or an emptyDir.
// It runs as the image's non-root user with a read-only root filesystem (Pod Security
// "restricted"), on the ServiceAccount token the replica reads the API with. What the
// PolicyServer's Kubewarden fields ask (labels, annotations, env, security contexts,
// scheduling, imagePullSecret) is applied over it (applyUserSettings).
func statefulSetPod(ps *kubewardenv1.PolicyServer, namespace string, labels map[string]string) corev1.PodTemplateSpec {
	https := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/livez", Port: intstr.FromInt32(ServicePort), Scheme: corev1.URISchemeHTTPS}}
	volumes := []corev1.Volume{
		{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: servingSecretName(ps.Name)}}},
		{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	switch {
	case sharedCache(ps):
		volumes = append(volumes, corev1.Volume{Name: cacheVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: cacheClaimName(ps.Name)}}})
	case ps.Spec.CacheStorageClassName == nil:
		volumes = append(volumes, corev1.Volume{Name: cacheVolume, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(cacheSize.DeepCopy())}}})
	default:
		// The StatefulSet's claim template "cache" gives each replica its own volume.
	}
	if !sharedCache(ps) {
		// The serving CA bundle, which certrotation keeps current through CA rotations. Optional,
		// so a bundle not written yet delays no pod: a replica then compiles what the leader
		// cannot be authenticated to send, and says why on the revision.
		volumes = append(volumes, corev1.Volume{Name: servingCAVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: caBundleName(ps.Name)}, Optional: ptr.To(true),
			Items: []corev1.KeyToPath{{Key: caBundleKey, Path: caBundleKey}}}}})
	}
	if ps.Spec.VerificationConfig != "" {
		// Kubewarden's layout: the ConfigMap, in the policy server's namespace, holds the
		// configuration under the key verification-config. Optional, so that a missing one
		// does not hold the pod in ContainerCreating: the server then trusts no module and
		// says why on every revision.
		volumes = append(volumes, corev1.Volume{Name: verificationVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ps.Spec.VerificationConfig}, Optional: ptr.To(true),
			Items: []corev1.KeyToPath{{Key: signatures.ConfigMapKey, Path: signatures.ConfigMapKey}}}}})
	}
	if ps.Spec.SigstoreTrustConfig != "" {
		// Kubewarden's layout too: the ClientTrustConfig JSON under sigstore-trust-config.
		// Optional for the same reason: a missing one makes keyless signatures untrusted, with
		// the reason on every revision, rather than a pod that never starts.
		volumes = append(volumes, corev1.Volume{Name: sigstoreTrustVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ps.Spec.SigstoreTrustConfig}, Optional: ptr.To(true),
			Items: []corev1.KeyToPath{{Key: signatures.TrustConfigMapKey, Path: signatures.TrustConfigMapKey}}}}})
	}
	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: workloadLabels(ps, labels)},
		Spec: corev1.PodSpec{
			ServiceAccountName: serviceAccountOf(ps),
			// The replica reads revisions and Leases with this token: mounted whatever the
			// ServiceAccount says.
			AutomountServiceAccountToken: ptr.To(true),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](policyServerUID), RunAsGroup: ptr.To[int64](policyServerUID),
				FSGroup:        ptr.To[int64](policyServerUID),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "policy-server", Image: ps.Spec.Image,
				Command: []string{"regent"},
				Args:    policyServerArgs(ps, namespace, "replica"),
				Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}}},
				Ports: []corev1.ContainerPort{
					{Name: "https", ContainerPort: ServicePort, Protocol: corev1.ProtocolTCP},
					{Name: "metrics", ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP},
				},
				Resources: podResources(ps),
				// The listener starts once the replica has read its revisions from the API:
				// the startup probe gives that (and a slow apiserver) up to two minutes before
				// liveness may restart the container.
				StartupProbe: &corev1.Probe{ProbeHandler: https, PeriodSeconds: 2, FailureThreshold: 60},
				// Ready once every revision a webhook calls is loaded (a newer one that fails is a
				// condition on its revision, never unreadiness), so the Service only sends requests
				// to a replica that can answer for every generation a webhook names.
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/readyz", Port: intstr.FromInt32(ServicePort), Scheme: corev1.URISchemeHTTPS}}, PeriodSeconds: 5},
				LivenessProbe: &corev1.Probe{ProbeHandler: https},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: cacheVolume, MountPath: cacheMount},
					{Name: "tls", MountPath: "/tls", ReadOnly: true},
					{Name: "work", MountPath: workMount},
					{Name: "tmp", MountPath: "/tmp"},
				},
			}},
			Volumes: volumes,
		},
	}
	if !sharedCache(ps) {
		c := &pod.Spec.Containers[0]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: servingCAVolume, MountPath: servingCAMount, ReadOnly: true})
	}
	if ps.Spec.VerificationConfig != "" {
		c := &pod.Spec.Containers[0]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: verificationVolume, MountPath: verificationMount, ReadOnly: true})
	}
	if ps.Spec.SigstoreTrustConfig != "" {
		c := &pod.Spec.Containers[0]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: sigstoreTrustVolume, MountPath: sigstoreTrustMount, ReadOnly: true})
	}
	applyUserSettings(ps, &pod)
	return pod
}

// servingCAVolume holds the serving CA bundle ConfigMap, at servingCAMount.
const (
	servingCAVolume = "serving-ca"
	servingCAMount  = "/serving-ca"
)

// verificationVolume holds a PolicyServer's verificationConfig ConfigMap, at verificationMount.
const (
	verificationVolume = "verification"
	verificationMount  = "/verification"
)

// sigstoreTrustVolume holds a PolicyServer's sigstoreTrustConfig ConfigMap, at
// sigstoreTrustMount (Kubewarden's path).
const (
	sigstoreTrustVolume = "sigstore-trust-config"
	sigstoreTrustMount  = "/sigstore-trust"
)

// replaceStalePods deletes, one at a time and only while every other replica is Ready, a pod
// whose cache volume is not what the StatefulSet's template now asks for (after a change of
// cacheStorageClassName or cacheAccessMode). The StatefulSet that adopts such a pod cannot
// replace it by itself: it tries to give the running pod its claim, the apiserver forbids
// changing a pod's volumes, and it retries that forever. Seen on a real node (test/realnode).
func (r *policyServerReconciler) replaceStalePods(ctx context.Context, ps *kubewardenv1.PolicyServer, selector map[string]string) error {
	pods := &corev1.PodList{}
	if err := r.nsReader.List(ctx, pods, client.InNamespace(r.namespace), client.MatchingLabels(selector)); err != nil {
		return fmt.Errorf("list policy server pods: %w", err)
	}
	var stale *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case !p.DeletionTimestamp.IsZero():
			return nil // one replacement at a time
		case !cacheVolumeMatches(ps, p):
			if stale == nil {
				stale = p
			}
		case !podReady(p):
			return nil // the StatefulSet's own pods come up first
		}
	}
	if stale == nil {
		return nil
	}
	uid := stale.UID
	if err := r.client.Delete(ctx, stale, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("replace pod %s for its new cache volume: %w", stale.Name, err)
	}
	r.recorder.Eventf(ps, nil, corev1.EventTypeNormal, "ReplicaReplaced", "ReplaceReplica",
		"pod %s deleted so the StatefulSet recreates it with the cache volume the PolicyServer now asks for", stale.Name)
	return nil
}

// cacheVolumeMatches says whether pod's cache volume is the one statefulSetPod and
// cacheClaimTemplates give a replica of ps now.
func cacheVolumeMatches(ps *kubewardenv1.PolicyServer, pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name != cacheVolume {
			continue
		}
		switch {
		case sharedCache(ps):
			return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == cacheClaimName(ps.Name)
		case ps.Spec.CacheStorageClassName == nil:
			return v.EmptyDir != nil
		default:
			return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == cacheVolume+"-"+pod.Name
		}
	}
	return false
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
