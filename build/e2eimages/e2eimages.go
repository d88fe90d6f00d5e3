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
	// Busybox images are Debian's busybox-static and its applet links,
	// with Debian's bash-static as sh (see BusyboxShell).
	Busybox
)

// Image is one test image: the names e2e.test asks for and how to make it.
type Image struct {
	Name string   // under Registry (or EtcdRegistry), without tag
	Tags []string // every tag the 1.32 e2e manifest names for it
	Kind Kind
	// Registry overrides Registry.
	Registry string
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

// Set is every image the [Conformance] specs of 1.32 use, found from the
// imageutils references of the e2e files that hold [Conformance] specs.
// How each differs from upstream's: docs/conformance.md.
var Set = []Image{
	{Name: "agnhost", Tags: []string{"2.53"}, Kind: Debian},
	{Name: "busybox", Tags: []string{"1.36.1-1", "1.29-2"}, Kind: Busybox},
	{Name: "httpd", Tags: []string{"2.4.38-4", "2.4.39-4"}, Kind: Debian},
	{Name: "nginx", Tags: []string{"1.14-4", "1.15-4"}, Kind: Debian},
	{Name: "jessie-dnsutils", Tags: []string{"1.7"}, Kind: Debian},
	{Name: "nautilus", Tags: []string{"1.7"}, Kind: Debian},
	{Name: "kitten", Tags: []string{"1.7"}, Kind: Debian},
	{Name: "nonroot", Tags: []string{"1.4"}, Kind: Debian},
	{Name: "nonewprivs", Tags: []string{"1.3"}, Kind: Scratch},
	{Name: "sample-apiserver", Tags: []string{"1.29.2"}, Kind: Scratch},
	{Name: "etcd", Tags: []string{"3.5.16-0"}, Kind: Scratch, Registry: EtcdRegistry},
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
