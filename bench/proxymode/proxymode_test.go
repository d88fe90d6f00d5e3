package proxymode

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k1m.dev/k1m/bench/apimetrics"
	benchstats "k1m.dev/k1m/bench/stats"
)

func p99Of(p99 time.Duration) benchstats.Latency { return benchstats.Latency{P99: p99} }

func TestValidateNamesEachFlag(t *testing.T) {
	if err := (Config{Steps: []int{1000, 10000}, ChangeRate: 10, Window: 30 * time.Second}).Validate(); err != nil {
		t.Fatal(err)
	}
	err := Config{Steps: []int{0}, ChangeRate: -1, Window: 0}.Validate()
	want := "--proxy-services 0: want ascending positive Service counts, e.g. 1000,10000\n" +
		"--proxy-change-rate -1: want changes a second above 0, e.g. 10\n--proxy-window 0s: want at least 1s, e.g. 30s"
	if fmt.Sprint(err) != want {
		t.Errorf("Validate() =\n%v\nwant\n%s", err, want)
	}
}

func TestNewSliceIsAServicesTwoReadyEndpoints(t *testing.T) {
	changed := time.Date(2026, 11, 25, 12, 0, 0, 5, time.UTC)
	got := NewSlice(70000, 3, changed)
	ready, port, name := true, int32(80), "http"
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "svc-70000-1", Namespace: Namespace,
			Labels:      map[string]string{"kubernetes.io/service-name": "svc-70000", "endpointslice.kubernetes.io/managed-by": "k1m-bench"},
			Annotations: map[string]string{corev1.EndpointsLastChangeTriggerTime: "2026-11-25T12:00:00.000000005Z"}},
		AddressType: discoveryv1.AddressTypeIPv6,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"fd00:30::3:111:7001"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
			{Addresses: []string{"fd00:30::3:111:7002"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NewSlice =\n%+v\nwant\n%+v", got, want)
	}
}

const before = `# TYPE kubeproxy_network_programming_duration_seconds histogram
kubeproxy_network_programming_duration_seconds_bucket{le="0.5"} 0
kubeproxy_network_programming_duration_seconds_bucket{le="1"} 0
kubeproxy_network_programming_duration_seconds_bucket{le="2"} 0
kubeproxy_network_programming_duration_seconds_bucket{le="+Inf"} 0
kubeproxy_network_programming_duration_seconds_sum 0
kubeproxy_network_programming_duration_seconds_count 0
# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="0.1"} 5
kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="+Inf"} 5
kubeproxy_sync_proxy_rules_duration_seconds_sum 0.1
kubeproxy_sync_proxy_rules_duration_seconds_count 5
`

const after = `# TYPE kubeproxy_network_programming_duration_seconds histogram
kubeproxy_network_programming_duration_seconds_bucket{le="0.5"} 0
kubeproxy_network_programming_duration_seconds_bucket{le="1"} 100
kubeproxy_network_programming_duration_seconds_bucket{le="2"} 100
kubeproxy_network_programming_duration_seconds_bucket{le="+Inf"} 100
kubeproxy_network_programming_duration_seconds_sum 80
kubeproxy_network_programming_duration_seconds_count 100
# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="0.1"} 25
kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="+Inf"} 25
kubeproxy_sync_proxy_rules_duration_seconds_sum 1
kubeproxy_sync_proxy_rules_duration_seconds_count 25
`

func TestFillReadsTheWindowFromKubeProxysHistograms(t *testing.T) {
	b, err := apimetrics.Parse(before)
	if err != nil {
		t.Fatal(err)
	}
	a, err := apimetrics.Parse(after)
	if err != nil {
		t.Fatal(err)
	}
	var s Step
	s.fill(b, a)
	// 100 programmings in (0.5, 1]: p50 0.75 s, p99 0.995 s; 20 syncs
	// within 100 ms.
	if s.Programming.Count != 100 || s.Programming.P50 != 750*time.Millisecond || s.Programming.P99 != 995*time.Millisecond ||
		s.Syncs != 20 || s.SyncP99 != 99*time.Millisecond {
		t.Errorf("fill = %+v", s)
	}
}

func TestMarkdownGivesTheModesRatios(t *testing.T) {
	r := Result{Config: Config{Steps: []int{1000}, ChangeRate: 10, Window: 30 * time.Second}, Steps: []Step{
		{Mode: "iptables", Round: 1, Services: 1000, Changes: 300, Window: 30 * time.Second, ProxyCores: 0.2,
			Programming: p99Of(2 * time.Second), SyncP99: 400 * time.Millisecond},
		{Mode: "nftables", Round: 1, Services: 1000, Changes: 300, Window: 30 * time.Second, ProxyCores: 0.1,
			Programming: p99Of(time.Second), SyncP99: 100 * time.Millisecond},
	}}
	want := "1000 Services, nftables / iptables: programming p99 x0.50, sync p99 x0.25, CPU per change x0.50."
	if md := r.Markdown(); !strings.Contains(md, want+"\n") {
		t.Errorf("Markdown:\n%s\nwant the line %q", md, want)
	}
}
