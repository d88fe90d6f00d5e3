// Package database runs what large clusters run, end to end: a
// replicated, stateful database (etcd, from the image the conformance
// images build) as a 3-replica StatefulSet with a persistent volume per
// replica, one replica per zone, on a running harness cluster whose nodes
// carry zone labels (ZONES). Its writes must survive a replica's pod
// deletion and its node's agent or server restart. hack/conformance-test.sh
// runs it on its cluster after the conformance runs.
package database

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"

	"k1m.dev/k1m/pkg/airgap"
	"k1m.dev/k1m/pkg/testutil"
	"k1m.dev/k1m/test/clustercheck"
	"k1m.dev/k1m/test/localcluster"
)

const (
	namespace = "database"
	name      = "etcd"
	replicas  = 3
	// image is built by make conformance-images (build/e2eimages) and
	// imported by hack/cluster.sh import.
	image = "k1m.local/etcd:3.5.16-0"
	keys  = 20
)

// db is the database and the cluster it runs on.
type db struct {
	h      *localcluster.Cluster
	client kubernetes.Interface
	k1m    string
	admin  string
}

func (d *db) kubectl(args ...string) (string, error) {
	out, err := exec.Command(d.k1m, append([]string{"kubectl", "--kubeconfig", d.admin}, args...)...).CombinedOutput()
	return string(out), err
}

func TestReplicatedDatabase(t *testing.T) {
	if os.Getenv("K1M_DATABASE_TEST") == "" {
		t.Skip("K1M_DATABASE_TEST unset: hack/conformance-test.sh runs this on its cluster (ZONES=3, the conformance images imported)")
	}
	opts, err := localcluster.OptionsFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Zones != replicas {
		t.Fatalf("ZONES=%d: this test wants %d zones, a replica in each", opts.Zones, replicas)
	}
	h, err := localcluster.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	admin := h.Server(1).AdminKubeconfig()
	cfg, err := testutil.RESTConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	d := &db{h: h, client: kubernetes.NewForConfigOrDie(cfg), k1m: opts.K1M, admin: admin}
	ctx, cancel := testutil.Budget(t, 10*time.Minute)
	defer cancel()
	d.start(ctx, t)
	defer d.client.CoreV1().Namespaces().Delete(context.Background(), namespace, metav1.DeleteOptions{})
	zones := d.zones(ctx, t)
	t.Logf("replicas in zones %v", zones)
	written := d.write(ctx, t, "before")
	d.readEverywhere(ctx, t, written)

	d.deletePod(ctx, t, 1)
	d.readEverywhere(ctx, t, written)

	d.restartNodeOf(ctx, t, 2)
	d.readEverywhere(ctx, t, append(written, d.write(ctx, t, "after")...))
}

// start creates the namespace, the headless Service, the StatefulSet and
// a client pod, and waits for every member ready.
func (d *db) start(ctx context.Context, t *testing.T) {
	if _, err := d.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "client", Port: 2379}, {Name: "peer", Port: 2380}}},
	}
	if _, err := d.client.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.AppsV1().StatefulSets(namespace).Create(ctx, statefulSet(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: namespace},
		Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "sh", Image: airgap.BusyboxImage, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"}}}},
	}
	if _, err := d.client.CoreV1().Pods(namespace).Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d.waitReady(ctx, t)
}

func statefulSet() *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	n := int32(replicas)
	peers := make([]string, replicas)
	for i := range peers {
		peers[i] = fmt.Sprintf("%s-%d=http://%s-%d.%s.%s.svc.cluster.local:2380", name, i, name, i, name, namespace)
	}
	self := "$(POD_NAME)." + name + "." + namespace + ".svc.cluster.local"
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &n, ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: labels},
			// The members find each other at start: all at once.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					// One member per zone, and only on zoned nodes.
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: localcluster.ZoneLabel,
						WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
					Affinity: &corev1.Affinity{
						PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: localcluster.ZoneLabel}}},
					},
					Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					TerminationGracePeriodSeconds: new(int64),
					Containers: []corev1.Container{{
						Name: "etcd", Image: image, ImagePullPolicy: corev1.PullNever,
						Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
						Command: []string{"/usr/local/bin/etcd", "--name=$(POD_NAME)", "--data-dir=/var/lib/etcd/data",
							"--listen-client-urls=http://[::]:2379", "--advertise-client-urls=http://" + self + ":2379",
							"--listen-peer-urls=http://[::]:2380", "--initial-advertise-peer-urls=http://" + self + ":2380",
							"--initial-cluster=" + strings.Join(peers, ","), "--initial-cluster-state=new", "--initial-cluster-token=" + namespace},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(2379)}},
							PeriodSeconds: 2},
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
					}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("256Mi")}}},
			}},
		},
	}
}

// waitReady waits for every member Ready on a bound volume and the client
// running.
func (d *db) waitReady(ctx context.Context, t *testing.T) {
	testutil.Eventually(t, 4*time.Minute, fmt.Sprintf("%d etcd members ready, each on its bound volume, and the client running", replicas), func() error {
		pods, err := d.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, p := range pods.Items {
			switch {
			case p.Name == "client" && p.Status.Phase != corev1.PodRunning:
				return fmt.Errorf("the client pod is %s", p.Status.Phase)
			case p.Name != "client" && !podReady(&p):
				return fmt.Errorf("member %s on %q is %s, not ready", p.Name, p.Spec.NodeName, p.Status.Phase)
			case p.Name != "client":
				ready++
			}
		}
		if ready != replicas {
			return fmt.Errorf("%d members ready", ready)
		}
		for i := range replicas {
			claim, err := d.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, fmt.Sprintf("data-%s-%d", name, i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if claim.Status.Phase != corev1.ClaimBound || *claim.Spec.StorageClassName != clustercheck.DefaultStorageClass {
				return fmt.Errorf("claim %s is %s on %v", claim.Name, claim.Status.Phase, *claim.Spec.StorageClassName)
			}
		}
		return nil
	})
}

func podReady(p *corev1.Pod) bool { return p.DeletionTimestamp == nil && podutils.IsPodReady(p) }

// zones wants the members in distinct zones and returns them by member.
func (d *db) zones(ctx context.Context, t *testing.T) []string {
	var zones []string
	for i := range replicas {
		node, err := d.client.CoreV1().Nodes().Get(ctx, d.member(ctx, t, i).Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		zones = append(zones, node.Labels[localcluster.ZoneLabel])
	}
	distinct := slices.Clone(zones)
	slices.Sort(distinct)
	if distinct = slices.Compact(distinct); len(distinct) != replicas || slices.Contains(distinct, "") {
		t.Fatalf("members in zones %v, want one in each of %d zones", zones, replicas)
	}
	return zones
}

func (d *db) member(ctx context.Context, t *testing.T, i int) *corev1.Pod {
	pod, err := d.client.CoreV1().Pods(namespace).Get(ctx, fmt.Sprintf("%s-%d", name, i), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// gateway sends a request to etcd's JSON gateway at member i from the
// client pod (busybox nc: it cannot resolve names, so by pod IP) and
// returns the response body.
func (d *db) gateway(ctx context.Context, i int, path string, body any) ([]byte, error) {
	pod, err := d.client.CoreV1().Pods(namespace).Get(ctx, fmt.Sprintf("%s-%d", name, i), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	request := fmt.Sprintf("POST %s HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(data), data)
	// nc half-closes the connection when its stdin ends, which etcd's
	// gateway takes for a cancelled request, and ends only with its
	// stdin: the stdin stays open a second, time for the answer (a slower
	// one is a 408, and the caller tries again).
	out, err := d.kubectl("exec", "-n", namespace, "client", "--", "sh", "-c", `{ printf '%s' "$0"; sleep 1; } | nc -w 5 "$1" 2379`, request, pod.Status.PodIP)
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %v: %s", path, pod.Name, err, out)
	}
	_, response, ok := strings.Cut(out, "\r\n\r\n")
	if !ok || !strings.HasPrefix(out, "HTTP/1.0 200") {
		return nil, fmt.Errorf("%s at %s: %s", path, pod.Name, out)
	}
	return []byte(response), nil
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// write puts keys keys through member 0 in one transaction, acknowledged
// once a majority committed it, and returns them.
func (d *db) write(ctx context.Context, t *testing.T, prefix string) []string {
	var written []string
	var puts []map[string]map[string]string
	for k := range keys {
		key := fmt.Sprintf("/k1m/%s/%02d", prefix, k)
		puts = append(puts, map[string]map[string]string{"requestPut": {"key": b64(key), "value": b64("value of " + key)}})
		written = append(written, key)
	}
	testutil.Eventually(t, time.Minute, fmt.Sprintf("writing %d keys under /k1m/%s/", keys, prefix), func() error {
		_, err := d.gateway(ctx, 0, "/v3/kv/txn", map[string]any{"success": puts})
		return err
	})
	return written
}

// readEverywhere wants every written key, with its value, from every
// member (linearizable reads: each goes through the leader).
func (d *db) readEverywhere(ctx context.Context, t *testing.T, written []string) {
	for i := range replicas {
		testutil.Eventually(t, 2*time.Minute, fmt.Sprintf("the %d acknowledged keys read through member %d", len(written), i), func() error {
			body, err := d.gateway(ctx, i, "/v3/kv/range", map[string]string{"key": b64("/k1m/"), "range_end": b64("/k1m0")})
			if err != nil {
				return err
			}
			var res struct {
				Kvs []struct{ Key, Value string }
			}
			if err := json.Unmarshal(body, &res); err != nil {
				return fmt.Errorf("%v: %s", err, body)
			}
			got := map[string]string{}
			for _, kv := range res.Kvs {
				k, _ := base64.StdEncoding.DecodeString(kv.Key)
				v, _ := base64.StdEncoding.DecodeString(kv.Value)
				got[string(k)] = string(v)
			}
			for _, key := range written {
				if got[key] != "value of "+key {
					return fmt.Errorf("key %s: %q; %d keys read", key, got[key], len(got))
				}
			}
			return nil
		})
	}
}

// deletePod deletes member i's pod and waits for the members ready again
// on their volumes.
func (d *db) deletePod(ctx context.Context, t *testing.T, i int) {
	old := d.member(ctx, t, i)
	if err := d.client.CoreV1().Pods(namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, old.Name+" replaced", func() error {
		p, err := d.client.CoreV1().Pods(namespace).Get(ctx, old.Name, metav1.GetOptions{})
		if err != nil {
			return err // NotFound until the StatefulSet makes it again
		}
		if p.UID == old.UID {
			return fmt.Errorf("%s is the pod deleted", p.Name)
		}
		return nil
	})
	if node := d.member(ctx, t, i).Spec.NodeName; node != "" && node != old.Spec.NodeName {
		t.Errorf("%s came back on %s, its volume is on %s", old.Name, node, old.Spec.NodeName)
	}
	d.waitReady(ctx, t)
}

// restartNodeOf restarts the k1m process of a member's node (the first
// member on an agent's node, else member i's server, killed and started
// again), waits for the node's Lease renewed, then the members ready.
func (d *db) restartNodeOf(ctx context.Context, t *testing.T, i int) {
	plan := d.h.Plan()
	// An agent's node if a member runs on one: an agent restarts in
	// seconds, a server takes its etcds with it.
	for m := range replicas {
		if n := d.member(ctx, t, m).Spec.NodeName; slices.ContainsFunc(plan.Agents, func(a localcluster.Node) bool { return a.Name == n }) {
			i = m
			break
		}
	}
	node := d.member(ctx, t, i).Spec.NodeName
	restarted := time.Now()
	switch {
	case slices.ContainsFunc(plan.Agents, func(n localcluster.Node) bool { return n.Name == node }):
		a := slices.IndexFunc(plan.Agents, func(n localcluster.Node) bool { return n.Name == node }) + 1
		t.Logf("restarting agent %d (%s), the node of member %d", a, node, i)
		if err := d.h.RestartAgent(ctx, a); err != nil {
			t.Fatal(err)
		}
	default:
		s := slices.IndexFunc(plan.Servers, func(n localcluster.Node) bool { return n.Name == node }) + 1
		if s == 0 {
			t.Fatalf("member %d runs on %s, which is no node of the harness's plan", i, node)
		}
		t.Logf("restarting server %d (%s), the node of member %d", s, node, i)
		if err := d.h.RestartServer(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	clustercheck.LeaseRenewedSince(ctx, t, d.client, node, restarted)
	d.waitReady(ctx, t)
}
