package server

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/serverbundle"
)

func TestPhaseTokenCreatesOnlyWhatIsNew(t *testing.T) {
	const hash = "0123456789012345678901234567890123456789012345678901234567890123"
	kept := pki.Token{CAHash: hash, Secret: "kepttt.0123456789abcdef"}
	for _, c := range []struct {
		name      string
		file      *pki.Token
		flag      string
		secret    string // "" : a new random one
		create    bool
		replacing string
	}{
		{name: "first start", create: true},
		{name: "restart", file: &kept, secret: kept.Secret},
		{name: "--token on the first start", flag: "flagtk.0123456789abcdef", secret: "flagtk.0123456789abcdef", create: true},
		{name: "--token as kept", file: &kept, flag: kept.Secret, secret: kept.Secret},
		{name: "--token replacing the kept one", file: &kept, flag: "flagtk.0123456789abcdef", secret: "flagtk.0123456789abcdef", create: true, replacing: "kepttt"},
	} {
		dir := t.TempDir()
		if c.file != nil {
			os.WriteFile(TokenFile(dir), []byte(c.file.String()+"\n"), 0o600)
		}
		s := &Server{cfg: &config.CompletedServer{Server: config.Server{DataDir: dir, Token: c.flag}}, out: io.Discard}
		got, err := s.phaseToken()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got.create != c.create || got.replace != c.replacing || (c.secret != "" && got.Secret != c.secret) || pki.CheckSecret(got.Secret) != nil {
			t.Errorf("%s: got %+v (secret %s), want create=%v replace=%q secret %q", c.name, got, got.Secret, c.create, c.replacing, c.secret)
		}
	}
}

func TestDefaultAuditPolicySkipsHeartbeatsOnly(t *testing.T) {
	p, err := policy.LoadPolicyFromBytes([]byte(defaultAuditPolicy))
	if err != nil {
		t.Fatal(err)
	}
	eval := policy.NewPolicyRuleEvaluator(p)
	node := &user.DefaultInfo{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	admin := &user.DefaultInfo{Name: "k1m-admin", Groups: []string{"system:masters"}}
	lease := func(u user.Info, verb, ns string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: "coordination.k8s.io", APIVersion: "v1", Resource: "leases", Namespace: ns, Name: "n1", ResourceRequest: true}
	}
	for _, c := range []struct {
		name  string
		attrs authorizer.AttributesRecord
		want  string
	}{
		{"a node renewing its Lease", lease(node, "update", "kube-node-lease"), "None"},
		{"a node reading its Lease", lease(node, "get", "kube-node-lease"), "None"},
		{"an admin deleting a node Lease", lease(admin, "delete", "kube-node-lease"), "Metadata"},
		{"a node writing a Lease elsewhere", lease(node, "update", "default"), "Metadata"},
		{"reading a Secret", authorizer.AttributesRecord{User: admin, Verb: "get", Resource: "secrets", Namespace: "default", APIVersion: "v1", ResourceRequest: true}, "Metadata"},
		{"a health probe", authorizer.AttributesRecord{User: admin, Verb: "get", Path: "/readyz"}, "None"},
	} {
		if got := string(eval.EvaluatePolicyRule(c.attrs).Level); got != c.want {
			t.Errorf("%s: level %s, want %s", c.name, got, c.want)
		}
	}
}

// The seal comes from DATA-DIR/server-token, else a joining server's
// --token; DATA-DIR/token never holds it.
func TestPhaseTokenSeal(t *testing.T) {
	const hash = "0123456789012345678901234567890123456789012345678901234567890123"
	seal, _ := pki.NewSeal()
	joining := pki.Token{CAHash: hash, Secret: "kepttt.0123456789abcdef", Seal: seal}
	dir := t.TempDir()
	s := &Server{cfg: &config.CompletedServer{Server: config.Server{DataDir: dir, JoinServer: "https://[fddf:4035:b520::1:1]:6443"}, JoinToken: joining}, out: io.Discard}
	got, err := s.phaseToken()
	if err != nil || got.seal != seal || got.Token != joining.JoinToken() {
		t.Fatalf("joining: %+v, %v", got, err)
	}
	if err := s.writeTokenFiles(got); err != nil {
		t.Fatal(err)
	}
	tokenFile, _ := os.ReadFile(TokenFile(dir))
	serverFile, _ := os.ReadFile(ServerTokenFile(dir))
	if string(tokenFile) != joining.JoinToken().String()+"\n" || string(serverFile) != joining.String()+"\n" {
		t.Errorf("token %q, server-token %q", tokenFile, serverFile)
	}
	restart := &Server{cfg: &config.CompletedServer{Server: config.Server{DataDir: dir}}, out: io.Discard}
	if got, err := restart.phaseToken(); err != nil || got.seal != seal {
		t.Errorf("restart without --token: %+v, %v", got, err)
	}
	os.WriteFile(ServerTokenFile(dir), []byte(joining.JoinToken().String()), 0o600)
	if _, err := restart.phaseToken(); err == nil {
		t.Error("a server-token without a seal was accepted")
	}
}

// After k1m token rotate on another server: the new join token is
// written, and a seal the cluster no longer publishes is forgotten.
func TestFollowTokens(t *testing.T) {
	const hash = "0123456789012345678901234567890123456789012345678901234567890123"
	ctx := context.Background()
	seal, _ := pki.NewSeal()
	other, _ := pki.NewSeal()
	dir := t.TempDir()
	s := &Server{cfg: &config.CompletedServer{Server: config.Server{DataDir: dir}}, out: io.Discard}
	was := serverToken{Token: pki.Token{CAHash: hash, Secret: "oldtkn.0123456789abcdef"}, seal: seal}
	s.writeTokenFiles(was)
	client := fake.NewSimpleClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: join.ServerBootstrapName},
		Data: map[string]string{"bundle." + serverbundle.SealID(seal): "sealed"}})
	join.CreateToken(ctx, client, pki.Token{Secret: "newtkn.0123456789abcdef"}, 0, join.ServerTokenDescription)
	got, err := s.followTokensOnce(ctx, client, was)
	if err != nil || got.Secret != "newtkn.0123456789abcdef" || got.seal != seal {
		t.Fatalf("a rotated join token: %+v, %v", got, err)
	}
	if data, _ := os.ReadFile(ServerTokenFile(dir)); !strings.Contains(string(data), "::newtkn.0123456789abcdef::"+seal) {
		t.Errorf("server-token %q", data)
	}
	join.ReplaceBundle(ctx, client, serverbundle.SealID(other), []byte("sealed"))
	got, err = s.followTokensOnce(ctx, client, got)
	if _, statErr := os.Stat(ServerTokenFile(dir)); err != nil || got.seal != "" || !os.IsNotExist(statErr) {
		t.Errorf("a rotated seal: %+v, %v, server-token %v", got, err, statErr)
	}
}

// k1m token rotate run on this server's own data directory: the server,
// still running with the old seal, adopts the new server token the command
// wrote instead of deleting it as a rotation elsewhere.
func TestFollowTokensKeepsARotationOnThisServer(t *testing.T) {
	const hash = "0123456789012345678901234567890123456789012345678901234567890123"
	ctx := context.Background()
	seal, _ := pki.NewSeal()
	rotated, _ := pki.NewSeal()
	dir := t.TempDir()
	s := &Server{cfg: &config.CompletedServer{Server: config.Server{DataDir: dir}}, out: io.Discard}
	was := serverToken{Token: pki.Token{CAHash: hash, Secret: "oldtkn.0123456789abcdef"}, seal: seal}
	now := serverToken{Token: pki.Token{CAHash: hash, Secret: "newtkn.0123456789abcdef"}, seal: rotated}
	s.writeTokenFiles(now) // what k1m token rotate writes
	client := fake.NewSimpleClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: join.ServerBootstrapName},
		Data: map[string]string{"bundle." + serverbundle.SealID(rotated): "sealed"}})
	join.CreateToken(ctx, client, pki.Token{Secret: "newtkn.0123456789abcdef"}, 0, join.ServerTokenDescription)
	got, err := s.followTokensOnce(ctx, client, was)
	if err != nil || got.Token != now.Token || got.seal != rotated {
		t.Fatalf("after a rotation here: %+v, %v; want %+v", got, err, now)
	}
	want := now.JoinToken()
	want.Seal = rotated
	if data, _ := os.ReadFile(ServerTokenFile(dir)); string(data) != want.String()+"\n" {
		t.Errorf("server-token %q, want %q", data, want.String()+"\n")
	}
}
