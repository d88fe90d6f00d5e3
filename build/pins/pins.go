// Package pins reads build/versions.env, the one file that pins every version
// k1m builds from.
package pins

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Pins maps a pin name (KUBERNETES_VERSION) to its value (v1.32.5).
type Pins map[string]string

var lineRE = regexp.MustCompile(`^([A-Z][A-Z0-9_]*)=(\S+)$`)

// Load reads a versions file: KEY=value lines, # comments and blank lines.
func Load(path string) (Pins, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := Pins{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := lineRE.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("%s:%d: %q is not of the form NAME=value (NAME in capitals, value without spaces)", path, n, line)
		}
		if _, dup := p[m[1]]; dup {
			return nil, fmt.Errorf("%s:%d: %s is pinned twice", path, n, m[1])
		}
		p[m[1]] = m[2]
	}
	return p, sc.Err()
}

// Get returns a pin or an error naming the missing pin and the file.
func (p Pins) Get(name string) (string, error) {
	v, ok := p[name]
	if !ok {
		return "", fmt.Errorf("build/versions.env does not pin %s: add a line %s=<version>", name, name)
	}
	return v, nil
}

// ModuleVersion returns the version k1m pins for a Go module path, and
// whether it pins one: k8s.io/kubernetes and its staging modules, etcd,
// CoreDNS, automemlimit.
func (p Pins) ModuleVersion(module string) (string, bool) {
	key := ""
	switch {
	case module == "k8s.io/kubernetes":
		key = "KUBERNETES_VERSION"
	case module == "k8s.io/code-generator":
		key = "CODE_GENERATOR_VERSION"
	case strings.HasPrefix(module, "k8s.io/") && StagingModules[strings.TrimPrefix(module, "k8s.io/")]:
		key = "KUBERNETES_STAGING_VERSION"
	case strings.HasPrefix(module, "go.etcd.io/etcd/"):
		key = "ETCD_VERSION"
	case module == "github.com/coredns/coredns":
		key = "COREDNS_VERSION"
	case module == "github.com/KimMachineGun/automemlimit":
		key = "AUTOMEMLIMIT_VERSION"
	default:
		return "", false
	}
	v, ok := p[key]
	if ok && key == "ETCD_VERSION" && strings.HasSuffix(module, "/v2") {
		v = etcdV2Version(v)
	}
	return v, ok
}

// etcdV2Version maps an etcd release to the version of its /v2 modules:
// etcd v3.5.16 publishes go.etcd.io/etcd/client/v2 as v2.305.16.
func etcdV2Version(v3 string) string {
	var major, minor, patch int
	if _, err := fmt.Sscanf(v3, "v%d.%d.%d", &major, &minor, &patch); err != nil || major != 3 {
		return v3
	}
	return fmt.Sprintf("v2.3%02d.%d", minor, patch)
}

// StagingModules are the k8s.io modules published from kubernetes/staging;
// each is pinned at KUBERNETES_STAGING_VERSION.
var StagingModules = map[string]bool{
	"api": true, "apiextensions-apiserver": true, "apimachinery": true, "apiserver": true,
	"cli-runtime": true, "client-go": true, "cloud-provider": true, "cluster-bootstrap": true,
	"code-generator": true, "component-base": true, "component-helpers": true,
	"controller-manager": true, "cri-api": true, "cri-client": true, "csi-translation-lib": true,
	"dynamic-resource-allocation": true, "endpointslice": true, "externaljwt": true, "kms": true,
	"kube-aggregator": true, "kube-controller-manager": true, "kube-proxy": true,
	"kube-scheduler": true, "kubectl": true, "kubelet": true, "metrics": true, "mount-utils": true,
	"pod-security-admission": true, "sample-apiserver": true, "sample-cli-plugin": true,
	"sample-controller": true,
}
