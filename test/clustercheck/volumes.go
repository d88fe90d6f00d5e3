package clustercheck

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k1m.dev/k1m/pkg/testutil"
)

// DefaultStorageClass is the StorageClass a claim without one gets on
// every k1m cluster (manifests/local-storage.yaml).
const DefaultStorageClass = "local-path"

// Volumes is a StatefulSet whose every replica has a claim of its own on
// the default StorageClass, one replica per node: what a replicated
// database's chart deploys. Each replica writes a line of its own to its
// volume once; the checks want it back after whatever happened between.
type Volumes struct {
	c         Cluster
	Namespace string
	Name      string
	Replicas  int
	image     string
	// written is each pod's line, by pod name, as first read.
	written map[string]string
}

// volumeMount is where each replica's volume is mounted.
const volumeMount = "/data"

// StartVolumes creates namespace ns and the StatefulSet in it (image: a
// busybox, never pulled), then waits as Check does and records what each
// replica wrote.
func StartVolumes(ctx context.Context, t *testing.T, c Cluster, ns, image string, replicas int) *Volumes {
	t.Helper()
	v := &Volumes{c: c, Namespace: ns, Name: "data", Replicas: replicas, image: image}
	client := c.Client()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.AppsV1().StatefulSets(ns).Create(ctx, v.statefulSet(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v.written = v.Check(ctx, t)
	return v
}

func (v *Volumes) statefulSet() *appsv1.StatefulSet {
	labels := map[string]string{"app": v.Name}
	replicas := int32(v.Replicas)
	// The line holds the pod's name and the time it was first written: a
	// replica that lost its volume writes another.
	script := `[ -s ` + volumeMount + `/line ] || echo "$HOSTNAME $(date +%s%N)" > ` + volumeMount + `/line; exec sleep 86400`
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: v.Name, Namespace: v.Namespace},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &replicas,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			ServiceName:         v.Name,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					// One replica per node, as a database spreads its own.
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: corev1.LabelHostname,
						}},
					}},
					Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					TerminationGracePeriodSeconds: new(int64),
					Containers: []corev1.Container{{
						Name: "db", Image: v.image, ImagePullPolicy: corev1.PullNever, Command: []string{"sh", "-c", script},
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: volumeMount}},
					}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
				},
			}},
		},
	}
}

// Check waits for every replica running on the node its volume is pinned
// to, each claim bound on the default StorageClass, and returns what each
// replica's volume holds. After StartVolumes it also wants the lines
// first written: no replica lost its data.
func (v *Volumes) Check(ctx context.Context, t *testing.T) map[string]string {
	t.Helper()
	var lines map[string]string
	testutil.Eventually(t, 3*time.Minute, fmt.Sprintf("%d replicas of %s/%s running, each on the node its bound volume is pinned to", v.Replicas, v.Namespace, v.Name), func() error {
		var err error
		lines, err = v.check(ctx)
		return err
	})
	if v.written != nil && !maps.Equal(lines, v.written) {
		t.Fatalf("the replicas' volumes hold %v, want what they first wrote, %v", lines, v.written)
	}
	return lines
}

func (v *Volumes) check(ctx context.Context) (map[string]string, error) {
	client := v.c.Client()
	lines := map[string]string{}
	for i := range v.Replicas {
		name := fmt.Sprintf("%s-%d", v.Name, i)
		pod, err := client.CoreV1().Pods(v.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
			return nil, fmt.Errorf("pod %s on %q is %s%s", name, pod.Spec.NodeName, pod.Status.Phase, unscheduled(pod))
		}
		claim, err := client.CoreV1().PersistentVolumeClaims(v.Namespace).Get(ctx, "data-"+name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if claim.Status.Phase != corev1.ClaimBound || claim.Spec.StorageClassName == nil || *claim.Spec.StorageClassName != DefaultStorageClass {
			return nil, fmt.Errorf("claim %s is %s on class %v, want Bound on %s", claim.Name, claim.Status.Phase, claim.Spec.StorageClassName, DefaultStorageClass)
		}
		pv, err := client.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if nodes := PinnedNodes(pv); !slices.Equal(nodes, []string{pod.Spec.NodeName}) {
			return nil, fmt.Errorf("volume %s of pod %s is pinned to %v, the pod runs on %s", pv.Name, name, nodes, pod.Spec.NodeName)
		}
		out, err := v.c.Kubectl("exec", "-n", v.Namespace, name, "--", "cat", volumeMount+"/line")
		if err != nil {
			return nil, fmt.Errorf("reading %s's volume: %v: %s", name, err, out)
		}
		line := strings.TrimSpace(out)
		if !strings.HasPrefix(line, name+" ") {
			return nil, fmt.Errorf("%s's volume holds %q, want a line %s wrote", name, line, name)
		}
		lines[name] = line
	}
	return lines, nil
}

// unscheduled says why the scheduler has not placed pod, if it has not.
func unscheduled(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			return " (not scheduled: " + c.Message + ")"
		}
	}
	return ""
}

// PinnedNodes are the nodes a volume's node affinity allows
// (kubernetes.io/hostname In ...).
func PinnedNodes(pv *corev1.PersistentVolume) []string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	var nodes []string
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn {
				nodes = append(nodes, e.Values...)
			}
		}
	}
	return nodes
}

// Node is the node replica i runs on.
func (v *Volumes) Node(ctx context.Context, t *testing.T, i int) string {
	t.Helper()
	pod, err := v.c.Client().CoreV1().Pods(v.Namespace).Get(ctx, fmt.Sprintf("%s-%d", v.Name, i), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod.Spec.NodeName
}

// DeletePod deletes replica i's pod and waits for the StatefulSet to
// bring it back, as Check.
func (v *Volumes) DeletePod(ctx context.Context, t *testing.T, i int) {
	t.Helper()
	name := fmt.Sprintf("%s-%d", v.Name, i)
	old, err := v.c.Client().CoreV1().Pods(v.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.c.Client().CoreV1().Pods(v.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "pod "+name+" replaced", func() error {
		pod, err := v.c.Client().CoreV1().Pods(v.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.UID == old.UID {
			return fmt.Errorf("pod %s is still the one deleted", name)
		}
		return nil
	})
	v.Check(ctx, t)
}

// VolumePaths are the directories of the replicas' volumes on their
// nodes, by volume name.
func (v *Volumes) VolumePaths(ctx context.Context, t *testing.T) map[string]string {
	t.Helper()
	paths := map[string]string{}
	for i := range v.Replicas {
		claim, err := v.c.Client().CoreV1().PersistentVolumeClaims(v.Namespace).Get(ctx, fmt.Sprintf("data-%s-%d", v.Name, i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pv, err := v.c.Client().CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case pv.Spec.HostPath != nil:
			paths[pv.Name] = pv.Spec.HostPath.Path
		case pv.Spec.Local != nil:
			paths[pv.Name] = pv.Spec.Local.Path
		default:
			t.Fatalf("volume %s is neither hostPath nor local: %+v", pv.Name, pv.Spec.PersistentVolumeSource)
		}
	}
	return paths
}

// Delete deletes the StatefulSet, then its claims, and waits for their
// volumes to be deleted (reclaimPolicy Delete: the provisioner removes
// each directory first).
func (v *Volumes) Delete(ctx context.Context, t *testing.T) {
	t.Helper()
	client := v.c.Client()
	volumes := v.VolumePaths(ctx, t)
	if err := client.AppsV1().StatefulSets(v.Namespace).Delete(ctx, v.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "the pods of "+v.Name+" gone", func() error {
		pods, err := client.CoreV1().Pods(v.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + v.Name})
		if err != nil || len(pods.Items) > 0 {
			return fmt.Errorf("%v pods left: %v", podCount(pods), err)
		}
		return nil
	})
	for i := range v.Replicas {
		err := client.CoreV1().PersistentVolumeClaims(v.Namespace).Delete(ctx, fmt.Sprintf("data-%s-%d", v.Name, i), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 2*time.Minute, "the deleted claims' volumes deleted", func() error {
		for name := range volumes {
			pv, err := client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				return fmt.Errorf("volume %s is %s", name, pv.Status.Phase)
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	})
}

func podCount(pods *corev1.PodList) int {
	if pods == nil {
		return 0
	}
	return len(pods.Items)
}
