package integration

import (
	"context"
	"fmt"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/poll"
	"k1m.dev/k1m/pkg/secretsenc"
	"k1m.dev/k1m/pkg/server"
	"k1m.dev/k1m/pkg/testutil"
)

// secretsNamespace holds the Secrets of testSecretsEncryption.
const secretsNamespace = "k1m-secrets-enc"

// testSecretsEncryption follows docs/operations.md on the running
// cluster: encryption turned on (prepare, then each server restarted with
// --secrets-encryption), then the key rotated (prepare, each server
// restarted, rotate, each server restarted). After each step a Secret
// written through every server is read through every server, and etcd
// holds it encrypted with the cluster's write key; during the rotation's
// second round, Secrets written through a server already on the new key
// read through those not yet restarted.
func (m *multiCluster) testSecretsEncryption(ctx context.Context, t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretsNamespace}}
	if _, err := m.client(1).CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m.secretsEncrypt(ctx, t, "prepare")
	m.h.AddServerArgs("--secrets-encryption")
	m.restartEach(ctx, t, nil)
	first := m.clusterWriteKey(t)
	m.requireSecretsEverywhere(ctx, t, "on", first)

	m.secretsEncrypt(ctx, t, "prepare")
	m.restartEach(ctx, t, nil)
	m.secretsEncrypt(ctx, t, "rotate")
	m.restartEach(ctx, t, func(restarted int) {
		// Server 1 writes with the new key; the others, not restarted
		// since rotate, read it (they have read with it since prepare).
		if restarted == 1 {
			m.requireSecretsEverywhere(ctx, t, "mid-rotation", "")
		}
	})
	second := m.clusterWriteKey(t)
	if second == first {
		t.Fatalf("the write key is still %s after the rotation", first)
	}
	m.requireSecretsEverywhere(ctx, t, "rotated", second)
	// Written before the rotation, read after it.
	if err := m.requireSecretsRead(ctx, m.clients, []string{"on-through-1", "on-through-2", "on-through-3"}); err != nil {
		t.Error(err)
	}
}

func (m *multiCluster) secretsEncrypt(ctx context.Context, t *testing.T, verb string) {
	t.Helper()
	s1 := m.h.Server(1)
	out, err := exec.CommandContext(ctx, m.k1m, "secrets-encrypt", verb, "--data-dir", s1.DataDir, "--kubeconfig", s1.AdminKubeconfig()).CombinedOutput()
	if err != nil {
		t.Fatalf("k1m secrets-encrypt %s: %v\n%s", verb, err, out)
	}
	t.Logf("k1m secrets-encrypt %s: %s", verb, strings.TrimSpace(string(out)))
}

// restartEach restarts the servers one at a time (SIGTERM, start, ready),
// calling after(i) once server i is back.
func (m *multiCluster) restartEach(ctx context.Context, t *testing.T, after func(int)) {
	t.Helper()
	for i := 1; i <= multiServers; i++ {
		must(t, fmt.Sprintf("stop-server %d", i), m.h.StopServer(ctx, i))
		must(t, fmt.Sprintf("start-server %d", i), m.h.StartServer(ctx, i))
		if after != nil {
			after(i)
		}
	}
	m.requireMembers(ctx, t)
}

// clusterWriteKey is the write key every server runs with (they must
// agree: each records what it applied).
func (m *multiCluster) clusterWriteKey(t *testing.T) string {
	t.Helper()
	var write string
	for i := 1; i <= multiServers; i++ {
		dir := m.h.Server(i).DataDir
		set, err := secretsenc.LoadKeySet(server.SecretsKeySetFile(dir), server.SecretsKeyFile(dir))
		if err != nil || set.Empty() {
			t.Fatalf("server %d's key set: %+v, %v", i, set, err)
		}
		if i > 1 && set.Write != write {
			t.Fatalf("server %d writes with %s, server 1 with %s", i, set.Write, write)
		}
		write = set.Write
	}
	return write
}

// requireSecretsEverywhere writes Secret tag-through-i through each server
// i, reads each through every server, and, when writeKey is set, checks
// etcd holds each encrypted with it.
func (m *multiCluster) requireSecretsEverywhere(ctx context.Context, t *testing.T, tag, writeKey string) {
	t.Helper()
	var names []string
	for i := 1; i <= multiServers; i++ {
		name := fmt.Sprintf("%s-through-%d", tag, i)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: secretsNamespace}, StringData: map[string]string{"value": name}}
		err := poll.Until(ctx, 2*time.Second, time.Minute, "writing "+name, func(ctx context.Context) error {
			_, err := m.client(i).CoreV1().Secrets(secretsNamespace).Create(ctx, secret, metav1.CreateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("creating Secret %s through server %d: %v", name, i, err)
		}
		names = append(names, name)
	}
	if err := m.requireSecretsRead(ctx, m.clients, names); err != nil {
		t.Errorf("%s: %v", tag, err)
	}
	if writeKey != "" {
		m.requireStoredEncrypted(ctx, t, names, writeKey)
	}
}

// requireSecretsRead reads each named Secret through each client (a
// quorum read: each server decrypts it itself).
func (m *multiCluster) requireSecretsRead(ctx context.Context, clients []kubernetes.Interface, names []string) error {
	for i, c := range clients {
		for _, name := range names {
			var got map[string][]byte
			err := poll.Until(ctx, 2*time.Second, time.Minute, "reading "+name, func(ctx context.Context) error {
				s, err := c.CoreV1().Secrets(secretsNamespace).Get(ctx, name, metav1.GetOptions{})
				if err == nil {
					got = s.Data
				}
				return err
			})
			if want := map[string][]byte{"value": []byte(name)}; err != nil || !reflect.DeepEqual(got, want) {
				return fmt.Errorf("Secret %s through client %d: %v, data %q; want %q", name, i+1, err, got, want)
			}
		}
	}
	return nil
}

// requireStoredEncrypted reads the Secrets' raw values from server 1's
// durable etcd: each starts with writeKey's prefix and holds no
// plaintext.
func (m *multiCluster) requireStoredEncrypted(ctx context.Context, t *testing.T, names []string, writeKey string) {
	t.Helper()
	s1 := m.h.Server(1)
	cli, err := etcd.NewClient([]string{fmt.Sprintf("https://[%s]:2379", s1.Addr)}, server.EtcdClientTLS(s1.DataDir))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, name := range names {
		var raw string
		testutil.Eventually(t, time.Minute, "reading "+name+" from etcd", func() error {
			resp, err := cli.Get(ctx, "/registry/secrets/"+secretsNamespace+"/"+name)
			if err != nil {
				return err
			}
			if len(resp.Kvs) != 1 {
				return fmt.Errorf("%d keys", len(resp.Kvs))
			}
			raw = string(resp.Kvs[0].Value)
			return nil
		})
		if want := secretsenc.PrefixOf(writeKey); !strings.HasPrefix(raw, want) || strings.Contains(raw, name) {
			t.Errorf("Secret %s in etcd starts %q, want %q and no plaintext", name, raw[:min(len(raw), 48)], want)
		}
	}
}
