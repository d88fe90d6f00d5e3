package approver

import (
	"context"
	"maps"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"k1m.dev/k1m/pkg/join"
)

// testSelf is the approving server's node name in decided.
const testSelf = "k1m-server-1"

// serverBootstrap is k1m-server-bootstrap with data.
func serverBootstrap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: join.ServerBootstrapName}, Data: data}
}

// k1m-server-2 is published; k1m-server-3 was, and was removed (its keys
// deleted, its name in the approver's record).
var testServers = serverBootstrap(map[string]string{
	"server.k1m-server-2":       "https://[fddf:4035:b520::2]:6443",
	"durable-etcd.k1m-server-2": "https://[fddf:4035:b520::2]:2379",
	"bundle.abc":                "sealed",
	serverNamesKey:              `["k1m-server-2","k1m-server-3"]`,
})

// A join token never becomes a server's node, present, removed or the
// approving server's own; a new ordinary name still joins.
func TestJoinTokenNeverTakesAServersName(t *testing.T) {
	const tail = ": a join token cannot take a server's name; a server's own node joins with the server's credentials; choose another --node-name"
	cases := []struct {
		node            string
		want            certv1.RequestConditionType
		reason, message string
	}{
		{"k1m-server-2", certv1.CertificateDenied, ReasonServerName, "node name k1m-server-2 is the name of server k1m-server-2 (present)" + tail},
		{"k1m-server-3", certv1.CertificateDenied, ReasonServerName, "node name k1m-server-3 is the name of server k1m-server-3 (removed)" + tail},
		{testSelf, certv1.CertificateDenied, ReasonServerName, "node name k1m-server-1 is the name of server k1m-server-1 (the approving server)" + tail},
		{"k1m-node-7", certv1.CertificateApproved, ReasonApproved, "new node k1m-node-7 joined with a token of " + group},
	}
	for _, c := range cases {
		got, err := decided(t, []runtime.Object{joinRequest("csr-a", c.node, newKey(t)).csr(t), testServers}, "csr-a")
		if err != nil || got == nil || got.Type != c.want || got.Reason != c.reason || got.Message != c.message {
			t.Errorf("%s: %v\n got %+v\nwant %s %s %q", c.node, err, got, c.want, c.reason, c.message)
		}
	}
}

// When the servers' names cannot be read the join waits: never approved.
func TestJoinWaitsForTheServersNames(t *testing.T) {
	req := joinRequest("csr-a", "k1m-node-7", newKey(t)).csr(t)
	unreadable := serverBootstrap(map[string]string{serverNamesKey: "not JSON"})
	got, err := decided(t, []runtime.Object{req, unreadable}, "csr-a")
	if got != nil || err == nil {
		t.Errorf("an unreadable record: decided %+v, %v; want it left pending with an error", got, err)
	}
	a := withCache(&Approver{Client: fake.NewSimpleClientset(req), BootstrapGroup: group})
	a.servers = nil // the cache is not running
	if err := a.Sync(context.Background(), "csr-a"); err == nil {
		t.Error("no cache of the servers' names: decided; want it left pending with an error")
	}
}

// The running approver records every server name it sees published, so
// that a server removed later (its keys deleted, as join.ForgetServer
// does) keeps its name from join tokens.
func TestRemovedServersNameStaysRefused(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewSimpleClientset(serverBootstrap(map[string]string{"server.k1m-server-2": "https://[fddf:4035:b520::2]:6443", "bundle.abc": "sealed"}))
	a := &Approver{Client: client, BootstrapGroup: group, ControlPlane: testControlPlane, Self: testSelf}
	go a.Run(ctx)
	cms := client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	var cm *corev1.ConfigMap
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cm, _ = cms.Get(ctx, join.ServerBootstrapName, metav1.GetOptions{}); cm.Data[serverNamesKey] != "" {
			break
		}
	}
	if got, want := cm.Data[serverNamesKey], `["k1m-server-2"]`; got != want || cm.Data["bundle.abc"] != "sealed" {
		t.Fatalf("recorded %q (bundle %q), want %q and the bundle kept", got, cm.Data["bundle.abc"], want)
	}
	delete(cm.Data, "server.k1m-server-2") // k1m server remove k1m-server-2
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The CSR informer may run ahead of the ConfigMap's: the join is
	// asked for once the approver's cache shows the removal (its record,
	// written after Run set the cache, is seen above).
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if state, _ := a.serverNameOf("k1m-server-2"); state == "removed" {
			break
		}
	}
	csrs := client.CertificatesV1().CertificateSigningRequests()
	if _, err := csrs.Create(ctx, joinRequest("csr-a", "k1m-server-2", newKey(t)).csr(t), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "node name k1m-server-2 is the name of server k1m-server-2 (removed): a join token cannot take a server's name; a server's own node joins with the server's credentials; choose another --node-name"
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		csr, _ := csrs.Get(ctx, "csr-a", metav1.GetOptions{})
		for _, c := range csr.Status.Conditions {
			if c.Type != certv1.CertificateDenied || c.Reason != ReasonServerName || c.Message != want {
				t.Fatalf("a join under a removed server's name: %+v, want Denied %s %q", c, ReasonServerName, want)
			}
			return
		}
	}
	t.Error("a join under a removed server's name: not decided in 10 s")
}

// k1m server remove records the removed server's name, whether or not an
// approver saw it published, keeping the record's other names and the
// bundle; recording it again changes nothing.
func TestRecordServerName(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset(serverBootstrap(map[string]string{"bundle.abc": "sealed", serverNamesKey: `["k1m-server-2"]`}))
	for range 2 {
		if err := RecordServerName(ctx, client, "k1m-server-9"); err != nil {
			t.Fatal(err)
		}
	}
	cm, _ := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, join.ServerBootstrapName, metav1.GetOptions{})
	want := map[string]string{"bundle.abc": "sealed", serverNamesKey: `["k1m-server-2","k1m-server-9"]`}
	if !maps.Equal(cm.Data, want) {
		t.Errorf("data %v, want %v", cm.Data, want)
	}
}
