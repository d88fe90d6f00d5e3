package cpuprofile

import (
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

func TestClassify(t *testing.T) {
	const (
		serve   = "net/http.HandlerFunc.ServeHTTP"
		apf     = "k8s.io/apiserver/pkg/util/flowcontrol.(*configController).Handle"
		update  = "k8s.io/apiserver/pkg/endpoints/handlers.UpdateResource.func1"
		http2   = "golang.org/x/net/http2.(*serverConn).runHandler"
		decode  = "k8s.io/apimachinery/pkg/runtime/serializer/protobuf.(*Serializer).Decode"
		malloc  = "runtime.mallocgc"
		smdJSON = "sigs.k8s.io/structured-merge-diff/v4/fieldpath.(*Set).FromJSON"
	)
	cases := []struct {
		name  string
		stack []string // leaf first
		want  string
	}{
		{"managed fields claim the JSON parsing they do", []string{"encoding/json.Unmarshal", smdJSON, "k8s.io/apimachinery/pkg/util/managedfields/internal.DecodeManagedFields", update, serve, apf, serve, http2}, ManagedFields},
		{"an inner handler's work is not priority-and-fairness's", []string{malloc, "k8s.io/apiserver/pkg/registry/generic/registry.(*Store).Update", update, serve, apf, serve, http2}, RequestHandling},
		{"priority-and-fairness's own work", []string{"k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/queueset.(*queueSet).StartRequest", apf, serve, http2}, Flowcontrol},
		{"decoding the request body", []string{decode, update, serve, http2}, Codec},
		{"re-decoding an etcd watch event", []string{decode, "k8s.io/apiserver/pkg/storage/etcd3.decodeObj", "k8s.io/apiserver/pkg/storage/etcd3.(*watchChan).transform", "k8s.io/apiserver/pkg/storage/etcd3.(*watchChan).processEvent"}, WatchDecode},
		{"the etcd client under the store", []string{"syscall.Syscall", "internal/poll.(*FD).Write", "crypto/tls.(*Conn).Write", "google.golang.org/grpc/internal/transport.(*http2Client).Write", "go.etcd.io/etcd/client/v3.(*kv).Do", "k8s.io/apiserver/pkg/storage/etcd3.(*store).GuaranteedUpdate", update, serve}, EtcdClient},
		{"an assist is GC wherever it happens", []string{"runtime.scanobject", "runtime.gcAssistAlloc", malloc, smdJSON, update, serve}, GC},
		{"background marking", []string{"runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker"}, GC},
		{"response writing is TLS", []string{"crypto/aes.gcmAesEnc", "crypto/tls.(*Conn).Write", "golang.org/x/net/http2.(*serverConn).writeFrame"}, TLSHTTP2},
		{"etcd WAL inside k1m server", []string{"syscall.Syscall", "go.etcd.io/etcd/server/v3/wal.(*WAL).sync", "go.etcd.io/etcd/server/v3/etcdserver.(*raftNode).start.func1"}, EtcdWAL},
		{"etcd bbolt", []string{"go.etcd.io/bbolt.(*Tx).Commit", "go.etcd.io/etcd/server/v3/mvcc/backend.(*batchTx).commit"}, EtcdBolt},
		{"etcd raft", []string{"go.etcd.io/etcd/raft/v3.(*raft).Step", "go.etcd.io/etcd/server/v3/etcdserver.(*raftNode).start.func1"}, EtcdRaft},
		{"in-process kubelet", []string{malloc, "k8s.io/kubernetes/pkg/kubelet/stats.(*Provider).ListPodStats"}, Kubelet},
		{"informers of in-process controllers", []string{decode, "k8s.io/client-go/tools/cache.(*Reflector).watch"}, Controllers},
		{"runtime", []string{"runtime.futex", "runtime.findRunnable", "runtime.schedule"}, Other},
	}
	for _, c := range cases {
		if got := Classify(c.stack); got != c.want {
			t.Errorf("%s: Classify = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestBreakdown(t *testing.T) {
	fn := func(id uint64, name string) *profile.Location {
		return &profile.Location{ID: id, Line: []profile.Line{{Function: &profile.Function{ID: id, Name: name}}}}
	}
	gc, tls := fn(1, "runtime.gcBgMarkWorker"), fn(2, "crypto/tls.(*Conn).Write")
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{gc}, Value: []int64{3, 30e6}},
			{Location: []*profile.Location{tls}, Value: []int64{1, 10e6}},
		},
	}
	shares, total, err := breakdown(p)
	if err != nil {
		t.Fatal(err)
	}
	if total != 40*time.Millisecond {
		t.Errorf("total %v, want 40ms", total)
	}
	if len(shares) != len(Names())+1 {
		t.Fatalf("%d shares, want every category and Other (%d)", len(shares), len(Names())+1)
	}
	want := []Share{{GC, 30 * time.Millisecond, 0.75}, {TLSHTTP2, 10 * time.Millisecond, 0.25}}
	for i, w := range want {
		if shares[i] != w {
			t.Errorf("share %d = %+v, want %+v", i, shares[i], w)
		}
	}
}
