package cpuprofile

import "strings"

// Category is one cost of the breakdown and the function-name prefixes
// whose frames it claims.
type Category struct {
	Name     string
	Patterns []string
}

// Category names the tests and the docs refer to.
const (
	GC              = "GC (marking, assists, sweeping)"
	ManagedFields   = "managed fields"
	Admission       = "admission"
	Validation      = "validation"
	Authentication  = "authentication"
	Authorization   = "authorization (Node, RBAC)"
	Flowcontrol     = "priority and fairness"
	WatchCache      = "watch cache ingest and fan-out"
	WatchDecode     = "decoding etcd watch events"
	EtcdClient      = "etcd client and gRPC"
	EtcdWAL         = "etcd: WAL"
	EtcdBolt        = "etcd: bbolt"
	EtcdWatch       = "etcd: watch"
	EtcdRaft        = "etcd: raft and apply"
	Kubelet         = "in-process kubelet"
	Controllers     = "in-process controllers and scheduler"
	Codec           = "decoding, encoding and conversion"
	TLSHTTP2        = "TLS and HTTP/2"
	RequestHandling = "request handling (other)"
	Other           = "other (Go runtime, idle loops)"
	handlerBoundary = "net/http.HandlerFunc.ServeHTTP"
)

// Categories that say what the work was for, leaf-most frame first: a
// sample is the first of these a frame matches, walking from the leaf to
// the first HTTP handler boundary (the filters of kube-apiserver call the
// rest of the chain through net/http.HandlerFunc, so work of an inner
// handler is not claimed by an outer filter such as priority-and-fairness).
// Within one frame the first matching category wins.
var Categories = []Category{
	{ManagedFields, []string{"k8s.io/apimachinery/pkg/util/managedfields", "sigs.k8s.io/structured-merge-diff", "k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager"}},
	{Admission, []string{"k8s.io/apiserver/pkg/admission", "k8s.io/kubernetes/plugin/pkg/admission", "k8s.io/pod-security-admission"}},
	{Validation, []string{"k8s.io/kubernetes/pkg/apis/coordination/validation", "k8s.io/kubernetes/pkg/apis/core/validation", "k8s.io/apimachinery/pkg/api/validation", "k8s.io/apimachinery/pkg/util/validation", "k8s.io/apimachinery/pkg/apis/meta/v1/validation"}},
	{Authentication, []string{"k8s.io/apiserver/pkg/authentication", "k8s.io/apiserver/plugin/pkg/authenticator", "k8s.io/kubernetes/pkg/serviceaccount"}},
	{Authorization, []string{"k8s.io/apiserver/pkg/authorization", "k8s.io/kubernetes/plugin/pkg/auth/authorizer", "k8s.io/kubernetes/pkg/auth/nodeidentifier"}},
	{Flowcontrol, []string{"k8s.io/apiserver/pkg/util/flowcontrol"}},
	{WatchCache, []string{"k8s.io/apiserver/pkg/storage/cacher"}},
	{EtcdClient, []string{"go.etcd.io/etcd/client", "google.golang.org/grpc", "k8s.io/apiserver/pkg/storage/etcd3"}},
	{EtcdWAL, []string{"go.etcd.io/etcd/server/v3/wal", "go.etcd.io/etcd/server/v3/storage/wal"}},
	{EtcdBolt, []string{"go.etcd.io/bbolt", "go.etcd.io/etcd/server/v3/mvcc/backend", "go.etcd.io/etcd/server/v3/storage/backend"}},
	{EtcdWatch, []string{"go.etcd.io/etcd/server/v3/mvcc.(*watchableStore)", "go.etcd.io/etcd/server/v3/mvcc.(*watchStream)", "go.etcd.io/etcd/server/v3/mvcc.(*watcherGroup)", "go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc.(*serverWatchStream)"}},
	{EtcdRaft, []string{"go.etcd.io/raft", "go.etcd.io/etcd/raft", "go.etcd.io/etcd/server"}},
	{Kubelet, []string{"k8s.io/kubernetes/pkg/kubelet", "k8s.io/kubelet", "github.com/google/cadvisor", "k8s.io/cri-client"}},
	{Controllers, []string{"k8s.io/kubernetes/pkg/controller", "k8s.io/controller-manager", "k8s.io/kubernetes/pkg/scheduler", "k8s.io/kubernetes/pkg/proxy", "k8s.io/client-go/tools/cache"}},
}

// Mechanisms are tried when no Category claimed the sample: how the work
// was done rather than what for.
var Mechanisms = []Category{
	{Codec, []string{"k8s.io/apimachinery/pkg/runtime", "k8s.io/apimachinery/pkg/conversion", "k8s.io/api/", "k8s.io/kubernetes/pkg/apis/", "github.com/gogo/protobuf", "encoding/json", "sigs.k8s.io/json", "google.golang.org/protobuf"}},
	{TLSHTTP2, []string{"crypto/", "vendor/golang.org/x/crypto", "golang.org/x/net/http2", "net/http.", "net.", "internal/poll.", "syscall."}},
}

// watchDecodeFrames claim a sample wherever they are in its stack: the
// goroutines that turn etcd watch events into objects for the watch cache.
var watchDecodeFrames = []string{"k8s.io/apiserver/pkg/storage/etcd3.(*watchChan)"}

// gcFrames claim a sample wherever they are in its stack: the collector's
// own goroutines and the marking or sweeping an allocation was made to do.
var gcFrames = []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcMarkDone", "runtime.gcMarkTermination", "runtime.sweepone", "runtime.deductSweepCredit"}

// Names are the categories and mechanisms, in the order the docs list them.
func Names() []string {
	names := []string{GC, WatchDecode}
	for _, c := range append(append([]Category{}, Categories...), Mechanisms...) {
		names = append(names, c.Name)
	}
	return append(names, RequestHandling)
}

// Classify names the category of one sample; fns is its stack, leaf first.
func Classify(fns []string) string {
	for _, fn := range fns {
		if matchesAny(fn, gcFrames) {
			return GC
		}
	}
	for _, fn := range fns {
		if matchesAny(fn, watchDecodeFrames) {
			return WatchDecode
		}
	}
	window := fns
	for i, fn := range fns {
		if fn == handlerBoundary {
			window = fns[:i]
			break
		}
	}
	if c := firstMatch(window, Categories); c != "" {
		return c
	}
	if c := firstMatch(window, Mechanisms); c != "" {
		return c
	}
	if len(window) < len(fns) {
		return RequestHandling
	}
	return Other
}

func firstMatch(fns []string, cats []Category) string {
	for _, fn := range fns {
		for _, c := range cats {
			if matchesAny(fn, c.Patterns) {
				return c.Name
			}
		}
	}
	return ""
}

func matchesAny(fn string, patterns []string) bool {
	for _, p := range patterns {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}
