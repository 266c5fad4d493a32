package fleet

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodeStorageClass is the default StorageClass of a real node's cluster: pre-made hostPath
// volumes under the node's folder (removed with it), offering ReadWriteOnce and ReadWriteMany
// (one node: every pod that mounts one runs beside the others).
const NodeStorageClass = "regent-node-local"

// nodeVolumes is how many volumes a node offers; claims beyond stay Pending.
const nodeVolumes = 6

func (n *Node) createVolumes(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(n.cluster.Config)
	if err != nil {
		return err
	}
	binding := storagev1.VolumeBindingImmediate
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: NodeStorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: &binding,
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("storage class: %w", err)
	}
	hostPathType := corev1.HostPathDirectory
	for i := range nodeVolumes {
		dir := n.path("volumes", fmt.Sprintf("pv%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		// Images run as a non-root user, and a hostPath volume is not chowned to fsGroup.
		if err := os.Chmod(dir, 0o777); err != nil {
			return err
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-pv%d", n.Name, i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              NodeStorageClass,
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: dir, Type: &hostPathType}},
			},
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("volume %s: %w", pv.Name, err)
		}
	}
	return nil
}
