package kindimage

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"k1m.dev/k1m/pkg/config"
)

// kindConfig is the part of manifests/kind/cluster.yaml k1m relies on.
type kindConfig struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Name       string `json:"name"`
	Networking struct {
		IPFamily      string `json:"ipFamily"`
		PodSubnet     string `json:"podSubnet"`
		ServiceSubnet string `json:"serviceSubnet"`
	} `json:"networking"`
	Nodes []struct {
		Role string `json:"role"`
	} `json:"nodes"`
	KubeadmConfigPatches []string `json:"kubeadmConfigPatches"`
}

type kubeadmPatch struct {
	Kind      string `json:"kind"`
	APIServer struct {
		ExtraArgs map[string]string `json:"extraArgs"`
	} `json:"apiServer"`
	ControllerManager struct {
		ExtraArgs map[string]string `json:"extraArgs"`
	} `json:"controllerManager"`
	NodeLeaseDurationSeconds int32  `json:"nodeLeaseDurationSeconds"`
	NodeLeaseRenewInterval   string `json:"nodeLeaseRenewInterval"`
}

func TestKindClusterConfigIsConsistent(t *testing.T) {
	raw, err := os.ReadFile("../../manifests/kind/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg kindConfig
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Networking.IPFamily != "ipv6" {
		t.Errorf("ipFamily %q, want ipv6", cfg.Networking.IPFamily)
	}
	roles := map[string]int{}
	for _, n := range cfg.Nodes {
		roles[n.Role]++
	}
	if roles["control-plane"] != 1 || roles["worker"] != 2 {
		t.Errorf("nodes %v, want one control plane (one no-fsync etcd) and two workers", roles)
	}
	var cluster, kubelet kubeadmPatch
	for _, p := range cfg.KubeadmConfigPatches {
		var k kubeadmPatch
		if err := yaml.Unmarshal([]byte(p), &k); err != nil {
			t.Fatal(err)
		}
		switch k.Kind {
		case "ClusterConfiguration":
			cluster = k
		case "KubeletConfiguration":
			kubelet = k
		}
	}
	if got := cluster.APIServer.ExtraArgs["etcd-servers-overrides"]; got != EtcdOverrides() {
		t.Errorf("etcd-servers-overrides %q, want %q (the node image's no-fsync etcd)", got, EtcdOverrides())
	}
	renew, err := time.ParseDuration(kubelet.NodeLeaseRenewInterval)
	if err != nil {
		t.Fatalf("nodeLeaseRenewInterval: %v", err)
	}
	profile, err := config.LeaseProfileFor(renew)
	if err != nil {
		t.Fatal(err)
	}
	if kubelet.NodeLeaseDurationSeconds != profile.LeaseDurationSeconds() {
		t.Errorf("nodeLeaseDurationSeconds %d, want %d for a %s renew interval", kubelet.NodeLeaseDurationSeconds, profile.LeaseDurationSeconds(), renew)
	}
	kcm := cluster.ControllerManager.ExtraArgs
	if kcm["node-lease-duration"] != profile.LeaseDuration.String() || kcm["node-monitor-grace-period"] != profile.GracePeriod.String() {
		t.Errorf("controller-manager %v, want node-lease-duration %s and node-monitor-grace-period %s", kcm, profile.LeaseDuration, profile.GracePeriod)
	}
}

func TestNoFsyncEtcdPodServesTheOverrideURL(t *testing.T) {
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(NoFsyncEtcdPod()), &pod); err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	want := []string{"etcd", "--name=nofsync", "--data-dir=/var/lib/etcd-nofsync", "--unsafe-no-fsync=true",
		"--listen-client-urls=https://[::1]:2479", "--advertise-client-urls=https://[::1]:2479",
		"--listen-peer-urls=http://[::1]:2480", "--initial-advertise-peer-urls=http://[::1]:2480", "--initial-cluster=nofsync=http://[::1]:2480",
		"--listen-metrics-urls=http://[::1]:2481", "--client-cert-auth=true",
		"--cert-file=/etc/kubernetes/pki/etcd/server.crt", "--key-file=/etc/kubernetes/pki/etcd/server.key",
		"--trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt", "--snapshot-count=10000"}
	if !slices.Equal(c.Command, want) {
		t.Errorf("etcd command\n got %q\nwant %q", c.Command, want)
	}
	if c.Image != EtcdImage || !pod.Spec.HostNetwork {
		t.Errorf("image %s hostNetwork %v", c.Image, pod.Spec.HostNetwork)
	}
	if got, want := EtcdOverrides(), "/events#https://[::1]:2479,coordination.k8s.io/leases#https://[::1]:2479"; got != want {
		t.Errorf("overrides %s, want %s", got, want)
	}
}

func TestCNIManifestIsKindPatchable(t *testing.T) {
	m := CNIManifest("k1m.local/k1m-cni:v1.32.5_k1m.x")
	if !strings.Contains(m, "would you kindly patch this file") {
		t.Error("kind adds CONTROL_PLANE_ENDPOINT only to a manifest carrying its marker")
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(m)), 4096)
	var ds *appsv1.DaemonSet
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			break
		}
		if obj["kind"] == "DaemonSet" {
			raw, _ := json.Marshal(obj)
			ds = &appsv1.DaemonSet{}
			if err := json.Unmarshal(raw, ds); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ds == nil {
		t.Fatal("no DaemonSet in the manifest")
	}
	c := ds.Spec.Template.Spec.Containers[0]
	if c.Image != "k1m.local/k1m-cni:v1.32.5_k1m.x" || len(c.Env) == 0 || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("container %+v", c)
	}
	if !ds.Spec.Template.Spec.HostNetwork {
		t.Error("k1m-cni must run in the node's network namespace")
	}
}

func TestKindBaseSpecAddsTheHookAndDropsRlimits(t *testing.T) {
	out, err := kindBaseSpec([]byte(`{"ociVersion":"1.0.2","process":{"rlimits":[{"type":"RLIMIT_NOFILE"}],"cwd":"/"},"hooks":{"createContainer":[{"path":"/x"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Process map[string]any `json:"process"`
		Hooks   struct {
			CreateContainer []struct{ Path string } `json:"createContainer"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(out, &spec); err != nil {
		t.Fatal(err)
	}
	if _, ok := spec.Process["rlimits"]; ok || spec.Process["cwd"] != "/" {
		t.Errorf("process %v", spec.Process)
	}
	h := spec.Hooks.CreateContainer
	if len(h) != 2 || h[0].Path != "/x" || h[1].Path != "/kind/bin/mount-product-files.sh" {
		t.Errorf("createContainer hooks %v", h)
	}
}

func TestContainerdConfigRestrictsOOMScoreAndUsesSystemd(t *testing.T) {
	for _, want := range []string{"restrict_oom_score_adj = true", "SystemdCgroup = true", `sandbox_image = "registry.k8s.io/pause:3.10"`, `snapshotter = "overlayfs"`} {
		if !strings.Contains(ContainerdConfig, want) {
			t.Errorf("containerd config lacks %s", want)
		}
	}
}

func TestTagAndInputsHash(t *testing.T) {
	if got := NodeRef("v1.32.5+k1m.abc"); got != "k1m.local/kind-node:v1.32.5_k1m.abc" {
		t.Errorf("NodeRef = %s", got)
	}
	dir := t.TempDir()
	for _, f := range []string{"kubelet", "kubeadm", "kubectl", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "cni", "etcd", "crictl", "pause.tar", "coredns.tar", "local-path-provisioner.tar", "busybox.tar", "metrics-server.tar"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	in := Inputs{KindDir: "/mod/sigs.k8s.io/kind@v0.27.0"}
	n := Node{Version: "v1.32.5+k1m.abc", Bin: dir, CNI: filepath.Join(dir, "cni"), Etcd: filepath.Join(dir, "etcd"), Crictl: filepath.Join(dir, "crictl"), ImageDir: dir}
	first, err := in.InputsHash(n)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := in.InputsHash(n); again != first {
		t.Error("the same inputs hash differently")
	}
	if err := os.WriteFile(filepath.Join(dir, "kube-proxy"), []byte("rebuilt binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if changed, _ := in.InputsHash(n); changed == first {
		t.Error("a rebuilt kube-proxy left the hash unchanged: the stale image would be kept")
	}
	n.Version = "v1.32.5+k1m.def"
	if changed, _ := in.InputsHash(n); changed == first {
		t.Error("a new version left the hash unchanged")
	}
	os.Remove(filepath.Join(dir, "etcd"))
	if _, err := in.InputsHash(n); err == nil {
		t.Error("a missing input was not reported")
	}
}

// A prepared base tree and its layer in the shared Base directory are used
// as they are, whatever the work directory: a fresh clone's build runs no
// debootstrap. Without Base, both live in Work.
func TestBaseTreeAndLayerFromTheSharedDirectory(t *testing.T) {
	for _, c := range []struct{ name, base string }{{"shared", t.TempDir()}, {"work only", ""}} {
		t.Run(c.name, func(t *testing.T) {
			work := t.TempDir()
			in := Inputs{KindDir: "/nonexistent/kind@v0.27.0", Work: work, Base: c.base, Log: new(bytes.Buffer)}
			dir := c.base
			if dir == "" {
				dir = work
			}
			root := filepath.Join(dir, "kind-base-"+in.BaseKey())
			layer := filepath.Join(dir, "layers", "kind-base-"+in.BaseKey()+".tar")
			for path, data := range map[string]string{root + ".prepared": "", layer: "layer", layer + ".diffid": "sha256:abc\n"} {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := in.BaseRoot()
			if err != nil || got != root {
				t.Fatalf("BaseRoot() = %q, %v; want %q", got, err, root)
			}
			if id, err := in.BaseDiffID(); err != nil || id != "sha256:abc" {
				t.Fatalf("BaseDiffID() = %q, %v; want sha256:abc from %s", id, err, layer+".diffid")
			}
		})
	}
}
