package leaseflood

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// What a flood writes (Config.Object).
const (
	// ObjectLease: Update of a node Lease's renewTime, as the kubelet
	// renews its Lease every renew interval.
	ObjectLease = "lease"
	// ObjectNodeStatus: the kubelet's node status update: Get of its
	// Node from the API server's cache, then a strategic merge PATCH of
	// nodes/status moving every condition's lastHeartbeatTime.
	ObjectNodeStatus = "node-status"
)

// Objects are the values Config.Object takes.
var Objects = []string{ObjectLease, ObjectNodeStatus}

// nodeWorker updates its Nodes' status in turn until ctx ends.
type nodeWorker struct {
	client    kubernetes.Interface
	via       int
	nodes     []string
	latencies []time.Duration
	errors    int64
}

func (w *nodeWorker) result() ([]time.Duration, int64, int64, int) {
	return w.latencies, 0, w.errors, w.via
}

// run does what the kubelet's tryUpdateNodeStatus does on its first
// try: Get with resourceVersion "0" (served from the watch cache), move
// the conditions' heartbeat, PATCH nodes/status with the two-way
// strategic merge patch from the Node it got. The PATCH's latency is
// recorded (a mutating call of the SLO); both calls' cost is the server's.
func (w *nodeWorker) run(ctx context.Context, measuring *atomic.Bool) {
	nodes := w.client.CoreV1().Nodes()
	for i := 0; ctx.Err() == nil; i = (i + 1) % len(w.nodes) {
		old, err := nodes.Get(ctx, w.nodes[i], metav1.GetOptions{ResourceVersion: "0"})
		if err == nil {
			var patch []byte
			if patch, err = HeartbeatPatch(old, time.Now()); err == nil {
				start := time.Now()
				_, err = nodes.Patch(ctx, w.nodes[i], types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
				if err == nil && measuring.Load() && ctx.Err() == nil {
					w.latencies = append(w.latencies, time.Since(start))
				}
			}
		}
		if err != nil && ctx.Err() == nil && measuring.Load() {
			w.errors++
		}
	}
}

// HeartbeatPatch is the kubelet's status patch when nothing but the
// heartbeat changed: every condition's lastHeartbeatTime set to now, spec
// left as it was (component-helpers' PatchNodeStatus builds it the same
// way).
func HeartbeatPatch(old *corev1.Node, now time.Time) ([]byte, error) {
	updated := old.DeepCopy()
	for i := range updated.Status.Conditions {
		updated.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(now)
	}
	oldJSON, err := json.Marshal(old)
	if err != nil {
		return nil, err
	}
	newJSON, err := json.Marshal(updated)
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, corev1.Node{})
}

// createNodes makes c.Leases Nodes as kubelets register them (or takes
// the existing ones).
func createNodes(ctx context.Context, cfg *rest.Config, c Config) ([]string, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if err := RegisterNodes(ctx, client, 0, c.Leases, c.Workers); err != nil {
		return nil, err
	}
	names := make([]string, c.Leases)
	for i := range names {
		names[i] = ObjectName(i)
	}
	return names, nil
}

// RegisterNodes creates Nodes from to to-1 (ObjectName, NewNode) from
// workers goroutines, status included as a kubelet's Create carries it;
// a Node that exists already is taken as it is.
func RegisterNodes(ctx context.Context, client kubernetes.Interface, from, to, workers int) error {
	return RegisterNodesAs(ctx, client, from, to, workers, func(i int) *corev1.Node { return NewNode(ObjectName(i), i, time.Now()) })
}

// RegisterNodesAs is RegisterNodes with node i's object made by node(i).
func RegisterNodesAs(ctx context.Context, client kubernetes.Interface, from, to, workers int, node func(i int) *corev1.Node) error {
	err := InParallel(to-from, workers, func(k int) error {
		_, err := client.CoreV1().Nodes().Create(ctx, node(from+k), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("creating Nodes: %w", err)
	}
	return nil
}

// NewNode is a Node as a kubelet registers it: its labels and
// annotations, capacity, the four conditions, addresses, node info and a
// short image list (real nodes list up to 50 images; the object's size
// is what the cost of encoding and patching it follows).
func NewNode(name string, i int, now time.Time) *corev1.Node {
	t := metav1.NewTime(now)
	condition := func(typ corev1.NodeConditionType, status corev1.ConditionStatus, reason, message string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: status, LastHeartbeatTime: t, LastTransitionTime: t, Reason: reason, Message: message}
	}
	resources := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		"hugepages-1Gi": resource.MustParse("0"), "hugepages-2Mi": resource.MustParse("0"),
	}
	var images []corev1.ContainerImage
	for k := 0; k < 10; k++ {
		images = append(images, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("registry.example/team/app-%d@sha256:%064x", k, k), fmt.Sprintf("registry.example/team/app-%d:v1.%d.0", k, k)},
			SizeBytes: int64(20+k) << 20,
		})
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", "k1m.dev/bench": "node-status"},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
		},
		Status: corev1.NodeStatus{
			Capacity: resources, Allocatable: resources,
			Conditions: []corev1.NodeCondition{
				condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				condition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				condition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				condition(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("fd00:10::%x", i+1)}, {Type: corev1.NodeHostName, Address: name}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{MachineID: fmt.Sprintf("%032x", i), SystemUUID: fmt.Sprintf("%032x", i), BootID: fmt.Sprintf("%032x", i+1),
				KernelVersion: "6.1.0-18-amd64", OSImage: "Debian GNU/Linux 12 (bookworm)", ContainerRuntimeVersion: "containerd://1.7.24",
				KubeletVersion: "v1.32.5", KubeProxyVersion: "v1.32.5", OperatingSystem: "linux", Architecture: "amd64"},
			Images: images,
		},
	}
}
