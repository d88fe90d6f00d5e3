// Package database runs what large clusters run, end to end: a
// replicated, stateful database (etcd, from the image the conformance
// images build) as a 3-replica StatefulSet with a persistent volume per
// replica, one replica per zone, on a running harness cluster whose nodes
// carry zone labels. Its acknowledged writes must survive a replica's pod
// deletion, its node's restart and a rolling upgrade: the fault
// campaign's upgrade scenario (make upgrade-test) drives it through all
// three.
package database

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"

	"k1m.dev/k1m/pkg/airgap"
	"k1m.dev/k1m/pkg/poll"
	"k1m.dev/k1m/test/clustercheck"
	"k1m.dev/k1m/test/localcluster"
)

const (
	Namespace = "database"
	name      = "etcd"
	// Replicas is the members, one in each zone: the cluster wants at
	// least this many zones.
	Replicas = 3
	// Image is built by make conformance-images (build/e2eimages) into
	// its own archive, ImageArchive under the conformance output.
	Image        = "k1m.local/etcd:3.5.16-0"
	ImageArchive = "database/etcd.tar"
	keys         = 20
)

// DB is the database and the cluster it runs on.
type DB struct {
	H      *localcluster.Cluster
	Client kubernetes.Interface
	// K1M runs kubectl (k1m kubectl) with Admin, an admin kubeconfig.
	K1M, Admin string
	Logf       func(format string, args ...any)
}

func (d *DB) kubectl(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, d.K1M, append([]string{"kubectl", "--kubeconfig", d.Admin}, args...)...).CombinedOutput()
	return string(out), err
}

// Start creates the namespace, the headless Service, the StatefulSet and
// a client pod, and waits for every member ready.
func (d *DB) Start(ctx context.Context) error {
	if _, err := d.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "client", Port: 2379}, {Name: "peer", Port: 2380}}},
	}
	if _, err := d.Client.CoreV1().Services(Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := d.Client.AppsV1().StatefulSets(Namespace).Create(ctx, StatefulSet(), metav1.CreateOptions{}); err != nil {
		return err
	}
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: Namespace},
		Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "sh", Image: airgap.BusyboxImage, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"}}}},
	}
	if _, err := d.Client.CoreV1().Pods(Namespace).Create(ctx, client, metav1.CreateOptions{}); err != nil {
		return err
	}
	return d.WaitReady(ctx)
}

// Delete deletes the namespace and everything in it (the volumes go with
// their claims: reclaimPolicy Delete), without waiting.
func (d *DB) Delete(ctx context.Context) error {
	return d.Client.CoreV1().Namespaces().Delete(ctx, Namespace, metav1.DeleteOptions{})
}

// StatefulSet is the database: Replicas etcd members, one per zone, each
// on a claim of the default StorageClass.
func StatefulSet() *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	n := int32(Replicas)
	peers := make([]string, Replicas)
	for i := range peers {
		peers[i] = fmt.Sprintf("%s-%d=http://%s-%d.%s.%s.svc.cluster.local:2380", name, i, name, i, name, Namespace)
	}
	self := "$(POD_NAME)." + name + "." + Namespace + ".svc.cluster.local"
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
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
						Name: "etcd", Image: Image, ImagePullPolicy: corev1.PullNever,
						Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
						Command: []string{"/usr/local/bin/etcd", "--name=$(POD_NAME)", "--data-dir=/var/lib/etcd/data",
							"--listen-client-urls=http://[::]:2379", "--advertise-client-urls=http://" + self + ":2379",
							"--listen-peer-urls=http://[::]:2380", "--initial-advertise-peer-urls=http://" + self + ":2380",
							"--initial-cluster=" + strings.Join(peers, ","), "--initial-cluster-state=new", "--initial-cluster-token=" + Namespace},
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

// WaitReady waits for every member Ready on a bound volume of the
// default StorageClass and the client running.
func (d *DB) WaitReady(ctx context.Context) error {
	what := fmt.Sprintf("%d etcd members ready, each on its bound volume, and the client running", Replicas)
	return poll.Until(ctx, time.Second, 4*time.Minute, what, func(ctx context.Context) error {
		pods, err := d.Client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
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
		if ready != Replicas {
			return fmt.Errorf("%d members ready", ready)
		}
		for i := range Replicas {
			claim, err := d.Client.CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, fmt.Sprintf("data-%s-%d", name, i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if claim.Status.Phase != corev1.ClaimBound || claim.Spec.StorageClassName == nil || *claim.Spec.StorageClassName != clustercheck.DefaultStorageClass {
				return fmt.Errorf("claim %s is %s on StorageClass %v", claim.Name, claim.Status.Phase, claim.Spec.StorageClassName)
			}
		}
		return nil
	})
}

func podReady(p *corev1.Pod) bool { return p.DeletionTimestamp == nil && podutils.IsPodReady(p) }

// Zones wants the members in distinct zones and returns them by member.
func (d *DB) Zones(ctx context.Context) ([]string, error) {
	var zones []string
	for i := range Replicas {
		member, err := d.member(ctx, i)
		if err != nil {
			return nil, err
		}
		node, err := d.Client.CoreV1().Nodes().Get(ctx, member.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		zones = append(zones, node.Labels[localcluster.ZoneLabel])
	}
	distinct := slices.Clone(zones)
	slices.Sort(distinct)
	if distinct = slices.Compact(distinct); len(distinct) != Replicas || slices.Contains(distinct, "") {
		return nil, fmt.Errorf("members in zones %v, want one in each of %d zones", zones, Replicas)
	}
	return zones, nil
}

func (d *DB) member(ctx context.Context, i int) (*corev1.Pod, error) {
	return d.Client.CoreV1().Pods(Namespace).Get(ctx, fmt.Sprintf("%s-%d", name, i), metav1.GetOptions{})
}

// gateway sends a request to etcd's JSON gateway at member i from the
// client pod (busybox nc: it cannot resolve names, so by pod IP) and
// returns the response body.
func (d *DB) gateway(ctx context.Context, i int, path string, body any) ([]byte, error) {
	pod, err := d.member(ctx, i)
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
	out, err := d.kubectl(ctx, "exec", "-n", Namespace, "client", "--", "sh", "-c", `{ printf '%s' "$0"; sleep 1; } | nc -w 5 "$1" 2379`, request, pod.Status.PodIP)
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

// Write puts keys keys under /k1m/prefix/ through member 0 in one
// transaction, acknowledged once a majority committed it, and returns
// them.
func (d *DB) Write(ctx context.Context, prefix string) ([]string, error) {
	var written []string
	var puts []map[string]map[string]string
	for k := range keys {
		key := fmt.Sprintf("/k1m/%s/%02d", prefix, k)
		puts = append(puts, map[string]map[string]string{"requestPut": {"key": b64(key), "value": b64("value of " + key)}})
		written = append(written, key)
	}
	err := poll.Until(ctx, time.Second, time.Minute, fmt.Sprintf("writing %d keys under /k1m/%s/", keys, prefix), func(ctx context.Context) error {
		_, err := d.gateway(ctx, 0, "/v3/kv/txn", map[string]any{"success": puts})
		return err
	})
	return written, err
}

// ReadEverywhere wants every written key, with its value, from every
// member (linearizable reads: each goes through the leader).
func (d *DB) ReadEverywhere(ctx context.Context, written []string) error {
	for i := range Replicas {
		what := fmt.Sprintf("the %d acknowledged keys read through member %d", len(written), i)
		if err := poll.Until(ctx, time.Second, 2*time.Minute, what, func(ctx context.Context) error {
			return d.readAll(ctx, i, written)
		}); err != nil {
			return err
		}
	}
	d.Logf("database: the %d acknowledged keys read back through each of the %d members", len(written), Replicas)
	return nil
}

func (d *DB) readAll(ctx context.Context, i int, written []string) error {
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
}

// DeletePod deletes member i's pod and waits for it back on its node (its
// volume's) and every member ready again.
func (d *DB) DeletePod(ctx context.Context, i int) error {
	old, err := d.member(ctx, i)
	if err != nil {
		return err
	}
	d.Logf("database: deleting member %d's pod %s on %s", i, old.Name, old.Spec.NodeName)
	if err := d.Client.CoreV1().Pods(Namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := poll.Until(ctx, time.Second, time.Minute, old.Name+" replaced on "+old.Spec.NodeName, func(ctx context.Context) error {
		p, err := d.member(ctx, i)
		switch {
		case err != nil:
			return err // NotFound until the StatefulSet makes it again
		case p.UID == old.UID:
			return fmt.Errorf("%s is the pod deleted", p.Name)
		case p.Spec.NodeName == "":
			return fmt.Errorf("%s is not scheduled", p.Name)
		case p.Spec.NodeName != old.Spec.NodeName:
			return poll.Stop(fmt.Errorf("%s came back on %s, its volume is on %s", old.Name, p.Spec.NodeName, old.Spec.NodeName))
		}
		return nil
	}); err != nil {
		return err
	}
	return d.WaitReady(ctx)
}

// RestartNodeOf restarts the k1m process of a member's node (the first
// member on an agent's node, else member i's server, stopped and started
// again), waits for the node's Lease renewed, then the members ready.
func (d *DB) RestartNodeOf(ctx context.Context, i int) error {
	plan := d.H.Plan()
	nodes := make([]string, Replicas)
	for m := range Replicas {
		p, err := d.member(ctx, m)
		if err != nil {
			return err
		}
		nodes[m] = p.Spec.NodeName
	}
	// An agent's node if a member runs on one: an agent restarts in
	// seconds, a server takes its etcds with it.
	for m, n := range nodes {
		if slices.ContainsFunc(plan.Agents, func(a localcluster.Node) bool { return a.Name == n }) {
			i = m
			break
		}
	}
	node := nodes[i]
	restarted := time.Now()
	if a := slices.IndexFunc(plan.Agents, func(n localcluster.Node) bool { return n.Name == node }) + 1; a != 0 {
		d.Logf("database: restarting agent %d (%s), the node of member %d", a, node, i)
		if err := d.H.RestartAgent(ctx, a); err != nil {
			return err
		}
	} else {
		s := slices.IndexFunc(plan.Servers, func(n localcluster.Node) bool { return n.Name == node }) + 1
		if s == 0 {
			return fmt.Errorf("member %d runs on %s, which is no node of the harness's plan", i, node)
		}
		d.Logf("database: restarting server %d (%s), the node of member %d", s, node, i)
		if err := d.H.RestartServer(ctx, s); err != nil {
			return err
		}
	}
	if err := clustercheck.WaitLeaseRenewed(ctx, d.Client, node, restarted); err != nil {
		return err
	}
	return d.WaitReady(ctx)
}

// WaitZoneLabels waits for every node of the harness's plan to carry its
// zone label: nodes first registered by a release without --node-label
// get it when their kubelet, restarted with the flag, registers again
// (the zone is one of the labels a kubelet keeps in step on an existing
// Node).
func (d *DB) WaitZoneLabels(ctx context.Context) error {
	plan := d.H.Plan()
	nodes := append(append([]localcluster.Node{}, plan.Servers...), plan.Agents...)
	return poll.Until(ctx, time.Second, 2*time.Minute, "every node labelled with its zone", func(ctx context.Context) error {
		for _, n := range nodes {
			node, err := d.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got, want := node.Labels[localcluster.ZoneLabel], plan.Zone(n); got != want {
				return fmt.Errorf("node %s: %s=%q, want %q", n.Name, localcluster.ZoneLabel, got, want)
			}
		}
		return nil
	})
}
