package datadir

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestAdminKubeconfig(t *testing.T) {
	if DefaultAdminKubeconfig != "/var/lib/k1m/server/admin.kubeconfig" {
		t.Fatalf("DefaultAdminKubeconfig = %q", DefaultAdminKubeconfig)
	}
}

// The Makefile and the shell glue cannot import Go: they spell the admin
// kubeconfig path out, and this test holds them to the constant. (The
// local cluster harness is Go, test/localcluster, and uses the constants
// themselves: hack/cluster.sh only runs it.)
func TestShellGlueAgreesOnTheAdminKubeconfig(t *testing.T) {
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^KUBECONFIG_K1M\s*\?=\s*(\S+)$`).FindSubmatch(makefile)
	if m == nil || string(m[1]) != DefaultAdminKubeconfig {
		t.Errorf("Makefile KUBECONFIG_K1M = %q, want %q", m, DefaultAdminKubeconfig)
	}
	for _, script := range []string{"../../hack/conformance-test.sh"} {
		data, err := os.ReadFile(script)
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range regexp.MustCompile(`[\w$(){}"/-]*/[\w.-]*\.kubeconfig`).FindAllString(string(data), -1) {
			if filepath.Base(path) != adminKubeconfigName {
				t.Errorf("%s names kubeconfig %s, want the server's %s", script, path, adminKubeconfigName)
			}
		}
	}
}

// docs/server.md's table of the data directory is Layout, row for row.
func TestDocsTable(t *testing.T) {
	data, err := os.ReadFile("../../docs/server.md")
	if err != nil {
		t.Fatal(err)
	}
	want := "| path | what |\n|------|------|\n"
	for _, e := range Layout {
		want += "| `" + e.Name + "` | " + e.What + " |\n"
	}
	_, after, found := strings.Cut(string(data), "\n## The data directory\n")
	if !found {
		t.Fatal("docs/server.md has no section The data directory")
	}
	start := strings.Index(after, "| path | what |")
	if start < 0 {
		t.Fatal("docs/server.md's section The data directory has no table")
	}
	table := after[start:]
	if end := strings.Index(table, "\n\n"); end >= 0 {
		table = table[:end+1]
	}
	if table != want {
		t.Errorf("docs/server.md's data directory table:\n%s\nwant (pkg/datadir.Layout):\n%s", table, want)
	}
}

// Every entry of Layout is one of Server's paths, and each path Server
// names at the top of the directory is in Layout.
func TestLayoutNamesEveryPath(t *testing.T) {
	d := Server("/d")
	paths := []string{d.Etcd(), d.NoFsyncEtcd(), filepath.Dir(d.EtcdPartition("pods")), d.LegacyNoFsyncEtcd(), d.EtcdSockets(), d.EtcdMembers(), d.Datastore(),
		d.TLS(), d.Token(), d.ServerToken(), d.AdminKubeconfig(), d.SuperAdminKubeconfig(), filepath.Dir(d.Kubeconfig("x")),
		d.SchedulerConfig(), d.AuditPolicy(), d.MultiServer(), d.Incarnation(), d.ClusterReset(), d.NodeName(), d.Snapshots(), d.Agent()}
	var names []string
	for _, e := range Layout {
		names = append(names, "/d/"+strings.TrimSuffix(e.Name, "/"))
	}
	if !slices.Equal(paths, names) {
		t.Errorf("Server's paths %q, Layout %q", paths, names)
	}
	for _, p := range []string{d.SecretsKeySet(), d.EncryptionConfig()} {
		if filepath.Dir(p) != d.TLS() {
			t.Errorf("%s lies outside %s", p, d.TLS())
		}
	}
}
