package netpol

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// sync writes a node's rules once, rewrites nothing unchanged, and
// deletes the rules of a node left without any.
func TestPublisherSync(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	p := &Publisher{Client: client}
	c := base()
	c.Policies = []*networkingv1.NetworkPolicy{policy("prod", "deny", networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: web}, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}})}
	if err := p.sync(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
	list, err := client.CoreV1().ConfigMaps(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var published []*corev1.ConfigMap
	for i := range list.Items {
		names = append(names, list.Items[i].Name)
		published = append(published, &list.Items[i])
	}
	if !reflect.DeepEqual(names, []string{"n1", "n2"}) {
		t.Fatalf("rules published for %v, want n1 and n2 (the web pods' nodes)", names)
	}
	rules, err := DecodeRules(published[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []PodRules{{Namespace: "prod", Name: "web-1", IPs: addrs("fddf:1::10"), IngressIsolated: true}}
	if !reflect.DeepEqual(rules, want) {
		t.Errorf("n1's rules %+v, want %+v", rules, want)
	}

	client.ClearActions()
	if err := p.sync(ctx, c, published); err != nil {
		t.Fatal(err)
	}
	if a := client.Actions(); len(a) != 0 {
		t.Errorf("an unchanged cluster wrote %v", a)
	}

	c.Policies = nil
	if err := p.sync(ctx, c, published); err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, a := range client.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok {
			deleted = append(deleted, d.GetName())
		}
	}
	if !reflect.DeepEqual(deleted, []string{"n1", "n2"}) && !reflect.DeepEqual(deleted, []string{"n2", "n1"}) {
		t.Errorf("without policies deleted %v, want n1 and n2", deleted)
	}
}

// The enforcer loads no rules first, then its node's published rules,
// and no rules again once they are deleted.
func TestEnforcer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	scripts := make(chan string, 10)
	e := &Enforcer{Client: client, Node: "n1", Apply: func(_ context.Context, s string) error { scripts <- s; return nil }}
	go e.Run(ctx)
	next := func(what string) string {
		t.Helper()
		select {
		case s := <-scripts:
			return s
		case <-time.After(10 * time.Second):
			t.Fatalf("no script loaded: %s", what)
			return ""
		}
	}
	if got := next("at start"); got != Render(nil) {
		t.Fatalf("at start loaded:\n%s\nwant no rules", got)
	}
	rules := []PodRules{{Namespace: "prod", Name: "web-1", IPs: addrs("fddf:1::10"), IngressIsolated: true}}
	data, err := Encode(rules)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: Namespace}, Data: map[string]string{RulesKey: string(data)}}
	if _, err := client.CoreV1().ConfigMaps(Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := next("after the rules' publication"); got != Render(rules) {
		t.Errorf("loaded:\n%s\nwant:\n%s", got, Render(rules))
	}
	if err := client.CoreV1().ConfigMaps(Namespace).Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := next("after the rules' deletion"); got != Render(nil) {
		t.Errorf("after deletion loaded:\n%s\nwant no rules", got)
	}
}

// A node's rules come back from their published form whole, each distinct
// peer list written once.
func TestEncodeDecode(t *testing.T) {
	rules := renderedCase()
	shared := prefixes("fddf:9::1/128", "fddf:9::2/128")
	rules = append(rules, PodRules{Namespace: "prod", Name: "web-3", IPs: addrs("fddf:1::30"), IngressIsolated: true,
		Ingress: []Rule{{Peers: shared}, {Peers: prefixes("fddf:2::20/128", "fddf:5::/64"), Ports: []Port{{Protocol: tcp, Port: 8080}}}}})
	data, err := Encode(rules)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rules) {
		t.Errorf("decoded:\n%+v\nwant\n%+v", got, rules)
	}
	if n := strings.Count(string(data), "fddf:5::/64"); n != 1 {
		t.Errorf("a peer list shared by two rules is written %d times: %s", n, data)
	}
}

// A pod's change reaches only the nodes whose rules name it: a new peer
// pod rewrites the rules of the node of the one pod that allows it, and a
// pod no policy names rewrites nothing.
func TestPodChangeRewritesOnlyTheNodesNamingIt(t *testing.T) {
	ctx := context.Background()
	fakeClient := fake.NewClientset()
	p := &Publisher{Client: fakeClient}
	c := base()
	c.Pods[0].Labels = map[string]string{"app": "web", "name": "web-1"}
	c.Policies = []*networkingv1.NetworkPolicy{policy("prod", "web-1", networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"name": "web-1"}},
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: client}}}}},
	})}
	published := func() []*corev1.ConfigMap {
		list, err := fakeClient.CoreV1().ConfigMaps(Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []*corev1.ConfigMap
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		return out
	}
	writes := func() []string {
		var names []string
		for _, a := range fakeClient.Actions() {
			switch a := a.(type) {
			case k8stesting.DeleteAction:
				names = append(names, "delete "+a.GetName())
			case k8stesting.CreateAction: // and updates, which have an object too
				names = append(names, a.GetVerb()+" "+a.GetObject().(*corev1.ConfigMap).Name)
			}
		}
		fakeClient.ClearActions()
		return names
	}
	if err := p.sync(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
	if got := writes(); !reflect.DeepEqual(got, []string{"create n1"}) {
		t.Fatalf("first sync wrote %v, want n1's rules only", got)
	}
	c.Pods = append(c.Pods, pod("dev", "batch", "n4", "fddf:4::1", map[string]string{"app": "batch"}))
	if err := p.sync(ctx, c, published()); err != nil {
		t.Fatal(err)
	}
	if got := writes(); len(got) != 0 {
		t.Errorf("a pod no policy names wrote %v", got)
	}
	c.Pods = append(c.Pods, pod("prod", "client-2", "n4", "fddf:4::2", client))
	if err := p.sync(ctx, c, published()); err != nil {
		t.Fatal(err)
	}
	if got := writes(); !reflect.DeepEqual(got, []string{"update n1"}) {
		t.Errorf("a new peer of web-1 wrote %v, want n1's rules only", got)
	}
}

// An enforcer that starts (an agent's restart) loads its node's published
// rules first, never an empty table: no window without policies.
func TestEnforcerStartsFromItsPublishedRules(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rules := []PodRules{{Namespace: "prod", Name: "web-1", IPs: addrs("fddf:1::10"), IngressIsolated: true}}
	data, err := Encode(rules)
	if err != nil {
		t.Fatal(err)
	}
	fakeClient := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: Namespace}, Data: map[string]string{RulesKey: string(data)}})
	scripts := make(chan string, 10)
	go (&Enforcer{Client: fakeClient, Node: "n1", Apply: func(_ context.Context, s string) error { scripts <- s; return nil }}).Run(ctx)
	select {
	case got := <-scripts:
		if got != Render(rules) {
			t.Errorf("first load:\n%s\nwant the published rules:\n%s", got, Render(rules))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no script loaded within 10 s of the start")
	}
}
