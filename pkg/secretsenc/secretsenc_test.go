package secretsenc

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/server/options/encryptionconfig"
	"k8s.io/apiserver/pkg/storage/value"
)

func TestKeyIsMadeOnceAndKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets-encryption.key")
	first, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != KeySize {
		t.Fatalf("key of %d bytes", len(first))
	}
	info, _ := os.Stat(path)
	if info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", info.Mode().Perm())
	}
	again, err := LoadOrCreateKey(path)
	if err != nil || !bytes.Equal(first, again) {
		t.Fatalf("the key changed across starts (%v)", err)
	}
}

func TestBadKeyFilesAreRefusedByName(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	good := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	short := write("short", base64.StdEncoding.EncodeToString([]byte("sixteen bytes!!!"))+"\n", 0o600)
	open := write("open", good, 0o644)
	text := write("text", "not base64 at all!", 0o600)
	for path, want := range map[string]string{
		short: "the Secrets encryption key " + short + " holds 16 bytes: want 32 (AES-256), base64-encoded",
		open:  "the Secrets encryption key " + open + " has mode 0644: want 0600, readable by root alone (chmod 600 " + open + ")",
		text:  "the Secrets encryption key " + text + " is not base64: want 32 random bytes, base64-encoded",
	} {
		before, _ := os.ReadFile(path)
		_, err := LoadOrCreateKey(path)
		if err == nil || err.Error() != want {
			t.Errorf("got %v\nwant %s", err, want)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
			t.Errorf("%s was rewritten", path)
		}
	}
}

// kube-apiserver's own loader reads the configuration, and its
// transformer encrypts with our key and reads both forms.
func TestConfigIsWhatKubeAPIServerLoads(t *testing.T) {
	key := bytes.Repeat([]byte{1}, KeySize)
	ctx := context.Background()
	secrets := schema.GroupResource{Resource: "secrets"}
	encrypted := map[bool][]byte{}
	for _, on := range []bool{true, false} {
		data, err := Config(key, on)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "encryption-config.yaml")
		os.WriteFile(path, data, 0o600)
		cfg, err := encryptionconfig.LoadEncryptionConfig(ctx, path, false, "test")
		if err != nil {
			t.Fatalf("encrypt=%v: kube-apiserver refuses the configuration: %v\n%s", on, err, data)
		}
		tr := cfg.Transformers[secrets]
		if tr == nil {
			t.Fatalf("encrypt=%v: no transformer for secrets", on)
		}
		out, err := tr.TransformToStorage(ctx, []byte("plain secret value"), value.DefaultContext("/registry/secrets/default/x"))
		if err != nil {
			t.Fatal(err)
		}
		encrypted[on] = out
		// Each configuration reads what the other wrote.
		for _, stored := range [][]byte{[]byte("plain secret value"), encrypted[true]} {
			if stored == nil {
				continue
			}
			got, _, err := tr.TransformFromStorage(ctx, stored, value.DefaultContext("/registry/secrets/default/x"))
			if err != nil || string(got) != "plain secret value" {
				t.Errorf("encrypt=%v cannot read %q: %v", on, stored[:10], err)
			}
		}
	}
	if !bytes.HasPrefix(encrypted[true], []byte(Prefix)) || bytes.Contains(encrypted[true], []byte("plain secret value")) {
		t.Errorf("encrypt=true wrote %q", encrypted[true])
	}
	if string(encrypted[false]) != "plain secret value" {
		t.Errorf("encrypt=false wrote %q, want plaintext", encrypted[false])
	}
}
