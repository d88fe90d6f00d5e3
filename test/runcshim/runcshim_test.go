package runcshim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestSpecFileOfCreateRunAndExec(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--root", "/r", "--log", "l", "create", "--bundle", "/b/1", "--pid-file", "p", "id"}, "/b/1/config.json"},
		{[]string{"run", "-b", "/b/2", "id"}, "/b/2/config.json"},
		{[]string{"create", "--bundle=/b/3", "id"}, "/b/3/config.json"},
		{[]string{"create", "id"}, "config.json"},
		{[]string{"--root", "/r", "exec", "--process", "/tmp/runc-process1", "--detach", "id"}, "/tmp/runc-process1"},
		{[]string{"exec", "--process=/tmp/p3", "id"}, "/tmp/p3"},
		{[]string{"exec", "id", "sh"}, ""},
		{[]string{"--root", "/r", "start", "id"}, ""},
		{[]string{"delete", "--force", "id"}, ""},
	} {
		if got := SpecFile(c.args); got != c.want {
			t.Errorf("SpecFile(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}

func TestDropCapabilityFromAnExecProcess(t *testing.T) {
	in := `{"args":["cat","/kind/version"],"capabilities":{"bounding":["CAP_SYS_RESOURCE","CAP_SYS_ADMIN"],"effective":["CAP_SYS_RESOURCE"]},"cwd":"/"}`
	out, changed, err := DropCapability([]byte(in), Capability)
	if err != nil || !changed {
		t.Fatalf("changed=%v err=%v", changed, err)
	}
	want := `{"args":["cat","/kind/version"],"capabilities":{"bounding":["CAP_SYS_ADMIN"],"effective":[]},"cwd":"/"}`
	if string(out) != want {
		t.Errorf("process after drop:\n%s\nwant\n%s", out, want)
	}
}

func TestDropCapabilityKeepsEverythingElse(t *testing.T) {
	in := `{"ociVersion":"1.0.2","process":{"args":["/sbin/init"],"capabilities":{` +
		`"bounding":["CAP_CHOWN","CAP_SYS_RESOURCE","CAP_NET_ADMIN"],"effective":["CAP_SYS_RESOURCE"],` +
		`"permitted":["CAP_CHOWN","CAP_SYS_RESOURCE"]}},"root":{"path":"rootfs"}}`
	out, changed, err := DropCapability([]byte(in), Capability)
	if err != nil || !changed {
		t.Fatalf("changed=%v err=%v", changed, err)
	}
	var spec struct {
		OCIVersion string `json:"ociVersion"`
		Process    struct {
			Args         []string            `json:"args"`
			Capabilities map[string][]string `json:"capabilities"`
		} `json:"process"`
		Root struct{ Path string } `json:"root"`
	}
	if err := json.Unmarshal(out, &spec); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"bounding": {"CAP_CHOWN", "CAP_NET_ADMIN"}, "effective": {}, "permitted": {"CAP_CHOWN"}}
	if !reflect.DeepEqual(spec.Process.Capabilities, want) {
		t.Errorf("capabilities %v, want %v", spec.Process.Capabilities, want)
	}
	if spec.OCIVersion != "1.0.2" || spec.Root.Path != "rootfs" || spec.Process.Args[0] != "/sbin/init" {
		t.Errorf("other fields changed: %s", out)
	}
}

func TestDropCapabilityLeavesAConfigWithoutItAlone(t *testing.T) {
	in := `{"process":{"capabilities":{"bounding":["CAP_CHOWN"]}}}`
	out, changed, err := DropCapability([]byte(in), Capability)
	if err != nil || changed || string(out) != in {
		t.Fatalf("out=%s changed=%v err=%v", out, changed, err)
	}
	if _, _, err := DropCapability([]byte("{"), Capability); err == nil {
		t.Error("a broken config.json was accepted")
	}
}

func TestRewriteInPlace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(`{"process":{"capabilities":{"bounding":["CAP_SYS_RESOURCE","CAP_SYS_ADMIN"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Rewrite(path); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if string(raw) != `{"process":{"capabilities":{"bounding":["CAP_SYS_ADMIN"]}}}` {
		t.Errorf("config.json after rewrite: %s", raw)
	}
}
