package agent

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/component-base/featuregate"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubeletscheme "k8s.io/kubernetes/pkg/kubelet/apis/config/scheme"
	"k8s.io/kubernetes/pkg/kubelet/apis/config/validation"
	"sigs.k8s.io/yaml"

	utilfeature "k8s.io/apiserver/pkg/util/feature"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/flavor"
	"k1m.dev/k1m/pkg/join"
)

// The file the agent writes is read back the way the kubelet reads it:
// strictly (an unknown or duplicate field fails), defaulted, converted to
// the internal type and validated by the kubelet's own validation.
func TestKubeletConfigFileIsWhatTheKubeletAccepts(t *testing.T) {
	s := join.Settings{RenewInterval: 30 * time.Second, LeaseDurationSeconds: 120, ClusterDomain: "cluster.local.", ClusterDNS: "fddf:4035:b510::a"}
	p := config.NewAgentPaths("/d", "/r")
	path := filepath.Join(t.TempDir(), "kubelet-config.yaml")
	if err := writeKubeletConfig(path, kubeletConfig(p, s, "/k1m/n1", "unix:///run/c.sock", "/d/pod-logs", 6<<30)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, codecs, err := kubeletscheme.NewSchemeAndCodecs(serializer.EnableStrict)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := runtime.Decode(codecs.UniversalDecoder(), data)
	if err != nil {
		t.Fatalf("the kubelet's strict decoder refuses the file: %v\n%s", err, data)
	}
	got, ok := obj.(*kubeletconfig.KubeletConfiguration)
	if !ok {
		t.Fatalf("decoded a %T", obj)
	}
	// The renew interval is a field of the patched kubelet's type only
	// (patch 0003): read from the file as written, in both flavours.
	var fields map[string]any
	if err := yaml.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	wantRenew := map[string]any{"k1m": "30s", "stock": nil}[flavor.Name]
	if fields["nodeLeaseRenewInterval"] != wantRenew {
		t.Errorf("nodeLeaseRenewInterval %#v in the %s flavour, want %#v", fields["nodeLeaseRenewInterval"], flavor.Name, wantRenew)
	}
	if err := validation.ValidateKubeletConfiguration(got, utilfeature.DefaultFeatureGate.(featuregate.FeatureGate)); err != nil {
		t.Errorf("the kubelet's validation refuses the file: %v", err)
	}
	for _, c := range []struct {
		field     string
		got, want any
	}{
		{"nodeLeaseDurationSeconds", got.NodeLeaseDurationSeconds, int32(120)},
		{"clusterDNS", got.ClusterDNS, []string{"fddf:4035:b510::a"}},
		{"clusterDomain", got.ClusterDomain, "cluster.local"},
		{"address", got.Address, "::"},
		{"healthzBindAddress", got.HealthzBindAddress, "::1"},
		{"cgroupDriver", got.CgroupDriver, "cgroupfs"},
		{"cgroupRoot", got.CgroupRoot, "/k1m/n1"},
		{"containerRuntimeEndpoint", got.ContainerRuntimeEndpoint, "unix:///run/c.sock"},
		{"podLogsDir", got.PodLogsDir, "/d/pod-logs"},
		{"authentication.anonymous.enabled", got.Authentication.Anonymous.Enabled, false},
		{"authentication.webhook.enabled", got.Authentication.Webhook.Enabled, true},
		{"authentication.x509.clientCAFile", got.Authentication.X509.ClientCAFile, "/d/ca.crt"},
		{"authorization.mode", got.Authorization.Mode, kubeletconfig.KubeletAuthorizationModeWebhook},
		{"rotateCertificates", got.RotateCertificates, true},
		{"serverTLSBootstrap", got.ServerTLSBootstrap, true},
		{"failSwapOn", got.FailSwapOn, false},
		{"kubeReserved", got.KubeReserved, map[string]string{"memory": "6442450944"}},
		{"imageGCHighThresholdPercent", got.ImageGCHighThresholdPercent, int32(85)},
		{"imageGCLowThresholdPercent", got.ImageGCLowThresholdPercent, int32(80)},
		{"evictionHard", got.EvictionHard, map[string]string{"memory.available": "100Mi", "nodefs.available": "5%", "imagefs.available": "5%", "nodefs.inodesFree": "5%"}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.field, c.got, c.want)
		}
	}
}

func TestKubeletAndProxyArgs(t *testing.T) {
	p := config.NewAgentPaths("/d", "/r")
	want := []string{"--config=/d/kubelet-config.yaml", "--kubeconfig=/d/kubelet.kubeconfig", "--cert-dir=/d/kubelet-pki",
		"--root-dir=/d/kubelet", "--hostname-override=n1", "--node-ip=fddf:4035:b520::11"}
	if got := kubeletArgs(p, "n1", "fddf:4035:b520::11", false); !slices.Equal(got, want) {
		t.Errorf("restart: kubelet args\n got %q\nwant %q", got, want)
	}
	if got := kubeletArgs(p, "n1", "fddf:4035:b520::11", true); !slices.Equal(got, append(want, "--bootstrap-kubeconfig=/d/bootstrap.kubeconfig")) {
		t.Errorf("join: kubelet args %q", got)
	}
	wantProxy := []string{"--kubeconfig=/d/kubelet.kubeconfig", "--hostname-override=n1", "--proxy-mode=iptables", "--cluster-cidr=fddf:4035:b500::/44",
		"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
		"--healthz-bind-address=[::1]:10256", "--metrics-bind-address=[::1]:10249"}
	if got := proxyArgs(p, "n1", "iptables", "fddf:4035:b500::/44"); !slices.Equal(got, wantProxy) {
		t.Errorf("kube-proxy args\n got %q\nwant %q", got, wantProxy)
	}
}

func TestNodeLabelsArg(t *testing.T) {
	got := nodeLabelsArg(map[string]string{"topology.kubernetes.io/zone": "zone-a", "example.com/rack": "r1", "tier": ""})
	if want := []string{"--node-labels=example.com/rack=r1,tier=,topology.kubernetes.io/zone=zone-a"}; !slices.Equal(got, want) {
		t.Errorf("nodeLabelsArg = %q, want %q", got, want)
	}
	if got := nodeLabelsArg(nil); got != nil {
		t.Errorf("nodeLabelsArg of no labels = %q, want none", got)
	}
}
