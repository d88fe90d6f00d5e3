package constants

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

func TestEtcdServersOverrides(t *testing.T) {
	got := EtcdServersOverrides("https://[::1]:2381")
	want := "/events#https://[::1]:2381,coordination.k8s.io/leases#https://[::1]:2381"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

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
			if filepath.Base(path) != AdminKubeconfigName {
				t.Errorf("%s names kubeconfig %s, want the server's %s", script, path, AdminKubeconfigName)
			}
		}
	}
}
