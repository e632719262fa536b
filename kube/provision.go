package kube

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// LocalStorageClass is the storage class of the local cluster (scripts/kube): claims of it are
// given hostPath volumes on the cluster's one node by RunLocalProvisioner.
const LocalStorageClass = "runtimectl-local"

// LocalVolumeDir is where the local provisioner makes its volumes' folders.
const LocalVolumeDir = "/var/lib/kube-local/volumes"

// RunLocalProvisioner does, until ctx ends, what a storage class's provisioner does on a real
// cluster, for a single-node cluster without one (the local cluster of scripts/kube, which the
// tests and `make kube-up` use): every claim of class that is pending gets a hostPath
// PersistentVolume bound to it, in a folder of its own under dir (root's, 0755, as a
// provisioner makes it; the pod's init container gives it its owner); a volume whose claim was
// deleted is deleted with its folder. It is not for clusters of more than one node: a hostPath
// volume lives on the node that wrote it.
func RunLocalProvisioner(ctx context.Context, cs kubernetes.Interface, class, dir string, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for {
		if err := provisionOnce(ctx, cs, class, dir); err != nil && ctx.Err() == nil {
			log.Warn("local provisioner", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func provisionOnce(ctx context.Context, cs kubernetes.Interface, class, dir string) error {
	claims, err := cs.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list claims: %w", err)
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != class || c.Status.Phase != corev1.ClaimPending || c.Spec.VolumeName != "" {
			continue
		}
		name := "local-" + string(c.UID)
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(path, 0o755); err != nil {
			return err
		}
		size := c.Spec.Resources.Requests[corev1.ResourceStorage]
		if size.IsZero() {
			size = resource.MustParse("1Gi")
		}
		hp := corev1.HostPathDirectory
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"io.runtimectl.local-provisioner": "1"}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
				AccessModes:                   c.Spec.AccessModes,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              class,
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: c.Namespace, Name: c.Name, UID: c.UID},
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &hp}},
			},
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create volume for claim %s/%s: %w", c.Namespace, c.Name, err)
		}
	}
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: "io.runtimectl.local-provisioner=1"})
	if err != nil {
		return fmt.Errorf("list volumes: %w", err)
	}
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		gone := pv.Status.Phase == corev1.VolumeReleased || pv.Status.Phase == corev1.VolumeFailed
		if !gone && pv.Spec.ClaimRef != nil && pv.Status.Phase == corev1.VolumeAvailable {
			// Made for a claim that was deleted before it bound.
			_, err := cs.CoreV1().PersistentVolumeClaims(pv.Spec.ClaimRef.Namespace).Get(ctx, pv.Spec.ClaimRef.Name, metav1.GetOptions{})
			gone = apierrors.IsNotFound(err)
		}
		if !gone {
			continue
		}
		if err := cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete volume %s: %w", pv.Name, err)
		}
		if hp := pv.Spec.HostPath; hp != nil && filepath.Dir(hp.Path) == filepath.Clean(dir) {
			_ = os.RemoveAll(hp.Path)
		}
	}
	return nil
}
