// Package e2eimages builds, without pulling anything, the images the
// Kubernetes 1.32 conformance specs run (agnhost, busybox, httpd, nginx,
// jessie-dnsutils, sample-apiserver, etcd, ...) under a k1m registry name,
// and the repo-list file (KUBE_TEST_REPO_LIST, Sonobuoy's --e2e-repo-config)
// that points e2e.test at them.
//
// Programs come from the Kubernetes module's test/images sources (agnhost,
// nonewprivs) or their own modules (sample-apiserver, etcd); userland comes
// from Debian bookworm: one debootstrap root file system holding apache2,
// nginx, dnsutils, curl, netcat, iproute2 and iperf is the shared bottom
// layer, and each image adds a small layer of its own on top.
package e2eimages

import "sort"

// Registry is where the test images live; the repo list maps upstream's
// e2e registry to it.
const Registry = "k1m.local/e2e-test-images"

// EtcdRegistry holds the etcd image the aggregator spec's sample-apiserver
// runs beside it.
const EtcdRegistry = "k1m.local"

// RepoList is the KUBE_TEST_REPO_LIST file. Registries it does not name
// keep upstream's value: pause stays registry.k8s.io/pause:3.10, which every
// k1m node already has; the invalid and private registries are meant to
// fail.
func RepoList() string {
	return "# KUBE_TEST_REPO_LIST for e2e.test (Sonobuoy: --e2e-repo-config): the k1m-built test images.\n" +
		"promoterE2eRegistry: " + Registry + "\n" +
		"gcEtcdRegistry: " + EtcdRegistry + "\n"
}

// Kind says how an image is made.
type Kind int

const (
	// Debian images are the shared Debian layer plus a layer of their own.
	Debian Kind = iota
	// Scratch images hold static programs and nothing else.
	Scratch
	// Busybox images are Debian's busybox-static and its applet links.
	Busybox
)

// Image is one test image: the names e2e.test asks for and how to make it.
type Image struct {
	Name string   // under Registry (or EtcdRegistry), without tag
	Tags []string // every tag the 1.32 e2e manifest names for it
	Kind Kind
	// Registry overrides Registry.
	Registry string
	// Upstream says what upstream's image is and how this one differs.
	Upstream string
}

// Refs are the image's full references.
func (i Image) Refs() []string {
	reg := Registry
	if i.Registry != "" {
		reg = i.Registry
	}
	var refs []string
	for _, t := range i.Tags {
		refs = append(refs, reg+"/"+i.Name+":"+t)
	}
	return refs
}

// Set is every image the [Conformance] specs of 1.32 use (found from the
// imageutils references of the files that hold [Conformance] specs, and
// checked against e2e.test --list-images by a test of the built binary).
var Set = []Image{
	{Name: "agnhost", Tags: []string{"2.53"}, Kind: Debian, Upstream: "agnhost from k8s.io/kubernetes test/images/agnhost at v1.32.5, on Debian bookworm instead of Alpine 3.19 (same tools: dig, curl, nc, ip, iperf, bash, and coredns)"},
	{Name: "busybox", Tags: []string{"1.36.1-1", "1.29-2"}, Kind: Busybox, Upstream: "Debian bookworm's busybox-static (1.35) instead of busybox 1.36.1 / 1.29"},
	{Name: "httpd", Tags: []string{"2.4.38-4", "2.4.39-4"}, Kind: Debian, Upstream: "Debian bookworm's apache2 (2.4.6x) laid out like the httpd image (/usr/local/apache2/htdocs, httpd-foreground); both tags are the same image"},
	{Name: "nginx", Tags: []string{"1.14-4", "1.15-4"}, Kind: Debian, Upstream: "Debian bookworm's nginx (1.22) serving /usr/share/nginx/html like the nginx image; both tags are the same image"},
	{Name: "jessie-dnsutils", Tags: []string{"1.7"}, Kind: Debian, Upstream: "Debian bookworm's dnsutils (dig, nslookup) instead of Debian jessie's, plus coredns"},
	{Name: "nautilus", Tags: []string{"1.7"}, Kind: Debian, Upstream: "agnhost test-webserver with test/images/nautilus/html, as upstream (which uses agnhost 2.33)"},
	{Name: "kitten", Tags: []string{"1.7"}, Kind: Debian, Upstream: "agnhost test-webserver with test/images/kitten/html, as upstream (which uses agnhost 2.33)"},
	{Name: "nonroot", Tags: []string{"1.4"}, Kind: Debian, Upstream: "Debian bookworm with USER 1234, as upstream's debian-base image"},
	{Name: "nonewprivs", Tags: []string{"1.3"}, Kind: Scratch, Upstream: "nnp from test/images/nonewprivs, setuid, on an empty base instead of Alpine 3.6"},
	{Name: "sample-apiserver", Tags: []string{"1.29.2"}, Kind: Scratch, Upstream: "built from k8s.io/sample-apiserver v0.32.5 (upstream's 1.29.2 tag is the 1.29 build of the same program), on an empty base"},
	{Name: "etcd", Tags: []string{"3.5.16-0"}, Kind: Scratch, Registry: EtcdRegistry, Upstream: "etcd v3.5.16 from go.etcd.io/etcd/server/v3 (etcdmain), /usr/local/bin/etcd on an empty base instead of distroless"},
}

// Refs lists every reference of Set, sorted.
func Refs() []string {
	var refs []string
	for _, img := range Set {
		refs = append(refs, img.Refs()...)
	}
	sort.Strings(refs)
	return refs
}
