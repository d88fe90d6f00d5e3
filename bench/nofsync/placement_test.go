//go:build linux

package nofsync

// TestMeasureNoFsyncPlacement measures where the no-fsync member's data
// directory is best kept: on disk (wiped at every start, today's default)
// or on a tmpfs (under /run). It never runs by default; run it, as root,
// with
//
//	K1M_NOFSYNC_MEASURE=1 GOWORK=off go test ./bench/nofsync \
//	    -run TestMeasureNoFsyncPlacement -v -timeout 30m
//
// The member is started by pkg/etcd's Start, with the Member the server
// gives its no-fsync etcd (NoFsync, default quota, TLS with client
// certificates on ::1), in a child process (this test binary run again), so
// that its CPU time and memory are its own, apart from the load's; they,
// the load's CPU and the machine's are read with bench/proc.
//
// The load is kubelets' node Lease renewals as kube-apiserver writes them:
// a Lease of a realistic size (a coordination.k8s.io/v1 Lease with a
// kubelet's owner reference and managedFields, protobuf-encoded), keys
// /registry/leases/kube-node-lease/NODE, written with OptimisticPut (a Txn
// comparing the key's mod revision, as GuaranteedUpdate does) by many
// concurrent workers over one client connection, each renewing its own
// keys round-robin, while one watch with previous values (kube-apiserver's
// watch cache) reads every change.
//
// Phase 1 alternates disk, tmpfs, disk, tmpfs... rounds: preload, warm up
// (longer than the kernel's 30 s dirty expiry, so that writeback is under
// way on disk), then a measured window. Phase 2 churns on given placements
// with kube-apiserver's compaction (every interval it compacts to the
// revision it saw one interval earlier), counting the interval in updates
// rather than minutes, and reports the store's size before and after every
// compaction, then after a final compaction and defragmentation.
//
// Knobs (environment): K1M_NOFSYNC_KEYS (10000), K1M_NOFSYNC_VALUE_BYTES
// (0: the encoded Lease), K1M_NOFSYNC_WORKERS (64), K1M_NOFSYNC_ROUNDS
// (2 per placement), K1M_NOFSYNC_RATE (0: as fast as etcd takes them;
// else phase 1's updates/s over all workers, e.g. 1000 for 10,000 nodes
// renewing every 10 s; phase 2 is never paced), K1M_NOFSYNC_WARMUP (35s),
// K1M_NOFSYNC_WINDOW (30s), K1M_NOFSYNC_WATCH (1), K1M_NOFSYNC_DISK_DIR
// (/var/tmp), K1M_NOFSYNC_TMPFS_DIR (empty: mount a fresh tmpfs under
// /run, else /dev/shm), K1M_NOFSYNC_CHURN (tmpfs,disk: placements of phase 2, comma
// separated, "none" to skip), K1M_NOFSYNC_CHURN_INTERVAL (300000 updates:
// 10,000 nodes renewing every 10 s for 5 minutes), K1M_NOFSYNC_CHURN_CYCLES
// (5), K1M_NOFSYNC_CHILD_ENV (GOGC=800 and GOMEMLIMIT at 90% of memory, as
// the k1m binary tunes itself; "none" for Go's defaults).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/pki"
)

const (
	nfmEnv      = "K1M_NOFSYNC_MEASURE"
	nfmChildEnv = "K1M_NOFSYNC_MEASURE_CHILD"
	nfmReady    = "K1M-NOFSYNC-MEASURE-READY"
	nfmPrefix   = "/registry/leases/kube-node-lease/"
)

func TestMeasureNoFsyncPlacement(t *testing.T) {
	if spec := os.Getenv(nfmChildEnv); spec != "" {
		nfmChild(t, spec)
		return
	}
	if os.Getenv(nfmEnv) != "1" {
		t.Skipf("a measurement of several minutes: set %s=1 to run it", nfmEnv)
	}
	p := nfmParams(t)
	base, err := os.MkdirTemp(p.diskDir, "k1m-nofsync-measure-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	serverTLS, clientTLS := certs(t, filepath.Join(base, "tls"))
	tmpfs, tmpfsNote := nfmTmpfs(t, p.tmpfsDir)
	placements := map[string]string{"disk": filepath.Join(base, "data"), "tmpfs": tmpfs}

	lease := nfmLease(t, "k1m-node-00000")
	valueBytes := len(lease)
	if p.valueBytes > 0 {
		valueBytes = p.valueBytes
	}
	t.Logf("setup: %d keys %s*, values %d bytes (a kubelet's node Lease encoded as kube-apiserver stores it: %d bytes), %d workers on one client connection, watch with previous values: %v, rate %d/s (0: unlimited), warm-up %s, window %s",
		p.keys, nfmPrefix, valueBytes, len(lease), p.workers, p.watch, p.rate, p.warmup, p.window)
	t.Logf("setup: disk %s (%s), tmpfs %s (%s), child env %q, %d cores", placements["disk"], nfmFSType(base), tmpfs, tmpfsNote, p.childEnv, goruntime.NumCPU())
	t.Logf("setup: vm.dirty_ratio %s%%, dirty_background_ratio %s%%, dirty_expire %s cs, dirty_writeback %s cs",
		nfmSysctl("vm/dirty_ratio"), nfmSysctl("vm/dirty_background_ratio"), nfmSysctl("vm/dirty_expire_centisecs"), nfmSysctl("vm/dirty_writeback_centisecs"))

	h := &nfmHarness{t: t, p: p, base: base, serverTLS: serverTLS, clientTLS: clientTLS, valueBytes: valueBytes}
	var results []nfmRound
	for i := 0; i < p.rounds; i++ {
		for _, name := range []string{"disk", "tmpfs"} {
			r := h.round(name, placements[name], fmt.Sprintf("%s-%d", name, i+1))
			results = append(results, r)
		}
	}
	h.summarize(results)
	for _, name := range p.churn {
		dir, ok := placements[name]
		if !ok {
			t.Errorf("K1M_NOFSYNC_CHURN: no placement %q (disk, tmpfs)", name)
			continue
		}
		h.churn(name, dir)
	}
}

type nfmParameters struct {
	keys, valueBytes, workers, rounds int
	rate                              int // updates/s over all workers; 0: as fast as etcd takes them
	warmup, window                    time.Duration
	watch                             bool
	diskDir, tmpfsDir                 string
	churn                             []string
	churnInterval, churnCycles        int
	childEnv                          []string
}

func nfmParams(t *testing.T) nfmParameters {
	num := func(name string, def int) int {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return n
		}
		return def
	}
	dur := func(name string, def time.Duration) time.Duration {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return d
		}
		return def
	}
	str := func(name, def string) string {
		if v, ok := os.LookupEnv(name); ok {
			return v
		}
		return def
	}
	p := nfmParameters{
		keys: num("K1M_NOFSYNC_KEYS", 10000), valueBytes: num("K1M_NOFSYNC_VALUE_BYTES", 0),
		workers: num("K1M_NOFSYNC_WORKERS", 64), rounds: num("K1M_NOFSYNC_ROUNDS", 2), rate: num("K1M_NOFSYNC_RATE", 0),
		warmup: dur("K1M_NOFSYNC_WARMUP", 35*time.Second), window: dur("K1M_NOFSYNC_WINDOW", 30*time.Second),
		watch:   str("K1M_NOFSYNC_WATCH", "1") == "1",
		diskDir: str("K1M_NOFSYNC_DISK_DIR", "/var/tmp"), tmpfsDir: str("K1M_NOFSYNC_TMPFS_DIR", ""),
		churnInterval: num("K1M_NOFSYNC_CHURN_INTERVAL", 300000), churnCycles: num("K1M_NOFSYNC_CHURN_CYCLES", 5),
	}
	if c := str("K1M_NOFSYNC_CHURN", "tmpfs,disk"); c != "none" && c != "" {
		p.churn = strings.Split(c, ",")
	}
	switch e := str("K1M_NOFSYNC_CHILD_ENV", ""); e {
	case "none":
	case "":
		p.childEnv = []string{"GOGC=800", "GOMEMLIMIT=" + strconv.FormatInt(proc.ReadMeminfo()["MemTotal"]*9/10, 10)}
	default:
		p.childEnv = strings.Fields(e)
	}
	if p.workers < 1 || p.keys < p.workers {
		t.Fatalf("need at least one worker and one key per worker (%d keys, %d workers)", p.keys, p.workers)
	}
	return p
}

// nfmTmpfs returns the tmpfs directory: the one given, or a fresh tmpfs
// mounted under /run (the default placement the issue asks about), or, if
// mounting is refused, a directory in /dev/shm.
func nfmTmpfs(t *testing.T, given string) (string, string) {
	if given != "" {
		dir, err := os.MkdirTemp(given, "k1m-nofsync-measure-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir, "given, " + nfmFSType(dir)
	}
	// Not /run/k1m*: k1m's cleanup unmounts every mount point whose path
	// starts with /run/k1m, and an integration run beside this one would.
	dir, err := os.MkdirTemp("/run", "nofsync-measure-")
	if err == nil {
		if err = unix.Mount("tmpfs", dir, "tmpfs", 0, "size=8g,mode=0700"); err == nil {
			t.Cleanup(func() {
				unix.Unmount(dir, unix.MNT_DETACH)
				os.Remove(dir)
			})
			return dir, "fresh tmpfs mount, size=8g"
		}
		os.Remove(dir)
	}
	dir, err2 := os.MkdirTemp("/dev/shm", "k1m-nofsync-measure-")
	if err2 != nil {
		t.Fatalf("no tmpfs: mount under /run: %v; /dev/shm: %v", err, err2)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir, fmt.Sprintf("/dev/shm, mounting under /run failed: %v", err)
}

// nfmLease is a kubelet's node Lease as kube-apiserver stores it in etcd:
// the protobuf envelope of a coordination.k8s.io/v1 Lease with the Node
// owner reference and the kubelet's managedFields entry.
func nfmLease(t *testing.T, node string) []byte {
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 23, 12, 0, 0, 123456000, time.UTC)
	nodeUID := types.UID("6f1c0d2e-8a4b-4c47-9d0e-3b2a1f5e7c90")
	duration := int32(40)
	holder := node
	renew := metav1.NewMicroTime(now)
	ctrl := true
	fields := `{"f:metadata":{"f:ownerReferences":{".":{},"k:{\"uid\":\"` + string(nodeUID) + `\"}":{}}},"f:spec":{"f:holderIdentity":{},"f:leaseDurationSeconds":{},"f:renewTime":{}}}`
	lease := &coordinationv1.Lease{
		TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{
			Name: node, Namespace: "kube-node-lease", UID: "0b7c9a3e-5d41-4f6a-8e2b-7c1d9f0a4b36",
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: nodeUID, Controller: &ctrl}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "coordination.k8s.io/v1", Time: &metav1.Time{Time: now}, FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &duration, RenewTime: &renew},
	}
	var b strings.Builder
	if err := protobuf.NewSerializer(scheme, scheme).Encode(lease, &b); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

// nfmChild runs the member described by spec until its stdin closes.
func nfmChild(t *testing.T, spec string) {
	var m etcd.Member
	if err := json.Unmarshal([]byte(spec), &m); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	r, err := etcd.Start(ctx, m)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if !r.NoFsync() {
		t.Fatal("the member runs with fsync")
	}
	fmt.Fprintf(os.Stdout, "%s %d\n", nfmReady, os.Getpid())
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	select {
	case <-done:
	case err := <-r.Err():
		t.Errorf("etcd: %v", err)
	}
	r.Stop()
}

type nfmHarness struct {
	t                    *testing.T
	p                    nfmParameters
	base                 string
	serverTLS, clientTLS etcd.TLS
	valueBytes           int
}

// nfmMember is a started child member and its client.
type nfmMember struct {
	m       etcd.Member
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	pid     int
	cli     *kubernetes.Client
	log     string
	startup time.Duration
}

func (h *nfmHarness) start(name, dir string) *nfmMember {
	t := h.t
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := etcd.DiscardData(dir); err != nil { // what the server does at every start
		t.Fatal(err)
	}
	m := etcd.Member{Name: "nofsync", DataDir: dir, Host: "::1", Port: freePortPair(t), NoFsync: true, TLS: h.serverTLS}
	spec, _ := json.Marshal(m)
	logPath := filepath.Join(h.base, name+".etcd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMeasureNoFsyncPlacement$", "-test.count=1", "-test.timeout=0")
	cmd.Env = append(append(os.Environ(), h.p.childEnv...), nfmChildEnv+"="+string(spec))
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	pid := 0
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == nfmReady {
			pid, _ = strconv.Atoi(f[1])
			break
		}
		fmt.Fprintln(logFile, sc.Text())
	}
	if pid == 0 {
		cmd.Wait()
		log, _ := os.ReadFile(logPath)
		t.Fatalf("the etcd child did not start: %s", log)
	}
	startup := time.Since(began)
	go io.Copy(io.Discard, stdout)
	tlsCfg, err := transport.TLSInfo{CertFile: h.clientTLS.CertFile, KeyFile: h.clientTLS.KeyFile, TrustedCAFile: h.clientTLS.CAFile}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := kubernetes.New(clientv3.Config{Endpoints: []string{m.ClientURL()}, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return &nfmMember{m: m, cmd: cmd, stdin: stdin, pid: pid, cli: cli, log: logPath, startup: startup}
}

func (n *nfmMember) stop(t *testing.T) {
	n.cli.Close()
	n.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- n.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			log, _ := os.ReadFile(n.log)
			t.Errorf("etcd child: %v\n%s", err, log)
		}
	case <-time.After(time.Minute):
		n.cmd.Process.Kill()
		<-done
		t.Errorf("etcd child did not stop in a minute: killed")
	}
}

// slowApplies counts etcd's "apply request took too long" warnings.
func (n *nfmMember) slowApplies() int {
	data, _ := os.ReadFile(n.log)
	return strings.Count(string(data), "apply request took too long")
}

// nfmLoad is the renewal load: workers renewing their keys round-robin,
// and the watch.
type nfmLoad struct {
	updates   atomic.Int64
	conflicts atomic.Int64
	errors    atomic.Int64
	events    atomic.Int64
	measuring atomic.Bool
	lat       [][]time.Duration
	firstErr  atomic.Value
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

func (h *nfmHarness) load(n *nfmMember, rate int) *nfmLoad {
	t := h.t
	ctx, cancel := context.WithCancel(context.Background())
	l := &nfmLoad{cancel: cancel, lat: make([][]time.Duration, h.p.workers)}
	if h.p.watch {
		wch := n.cli.Watch(clientv3.WithRequireLeader(ctx), nfmPrefix, clientv3.WithPrefix(), clientv3.WithPrevKV())
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for resp := range wch {
				l.events.Add(int64(len(resp.Events)))
			}
		}()
	}
	kv := n.cli.Kubernetes
	values := h.values()
	// Preload: every key created (expected revision 0), as kubelets do.
	revs := make([]int64, h.p.keys)
	var pre sync.WaitGroup
	began := time.Now()
	for w := 0; w < h.p.workers; w++ {
		pre.Add(1)
		go func(w int) {
			defer pre.Done()
			for k := w; k < h.p.keys; k += h.p.workers {
				resp, err := kv.OptimisticPut(ctx, nfmKey(k), values[k], 0, kubernetes.PutOptions{GetOnFailure: true})
				if err != nil || !resp.Succeeded {
					l.firstErr.CompareAndSwap(nil, fmt.Sprintf("preload %s: %v (succeeded %v)", nfmKey(k), err, err == nil && resp.Succeeded))
					return
				}
				revs[k] = resp.Revision
			}
		}(w)
	}
	pre.Wait()
	if e := l.firstErr.Load(); e != nil {
		t.Fatal(e)
	}
	t.Logf("  preloaded %d keys in %s", h.p.keys, time.Since(began).Round(time.Millisecond))
	for w := 0; w < h.p.workers; w++ {
		l.wg.Add(1)
		go func(w int) {
			defer l.wg.Done()
			var every time.Duration // each worker's share of K1M_NOFSYNC_RATE
			if rate > 0 {
				every = time.Duration(float64(time.Second) * float64(h.p.workers) / float64(rate))
			}
			next := time.Now().Add(time.Duration(w) * every / time.Duration(h.p.workers))
			for {
				for k := w; k < h.p.keys; k += h.p.workers {
					if ctx.Err() != nil {
						return
					}
					if every > 0 {
						time.Sleep(time.Until(next))
						next = next.Add(every)
					}
					t0 := time.Now()
					resp, err := kv.OptimisticPut(ctx, nfmKey(k), values[k], revs[k], kubernetes.PutOptions{GetOnFailure: true})
					d := time.Since(t0)
					switch {
					case err != nil:
						if ctx.Err() == nil {
							l.errors.Add(1)
							l.firstErr.CompareAndSwap(nil, err.Error())
						}
						continue
					case !resp.Succeeded:
						l.conflicts.Add(1)
						if resp.KV != nil {
							revs[k] = resp.KV.ModRevision
						}
						continue
					}
					revs[k] = resp.Revision
					l.updates.Add(1)
					if l.measuring.Load() {
						l.lat[w] = append(l.lat[w], d)
					}
				}
			}
		}(w)
	}
	return l
}

func (l *nfmLoad) stop() {
	l.cancel()
	l.wg.Wait()
}

// values are the keys' values: each node's encoded Lease, or random bytes
// of K1M_NOFSYNC_VALUE_BYTES.
func (h *nfmHarness) values() [][]byte {
	out := make([][]byte, h.p.keys)
	for k := range out {
		if h.p.valueBytes > 0 {
			out[k] = make([]byte, h.p.valueBytes)
			for i := range out[k] {
				out[k][i] = byte(k*31 + i*7)
			}
			continue
		}
		out[k] = nfmLease(h.t, fmt.Sprintf("k1m-node-%05d", k))
	}
	return out
}

func nfmKey(k int) string { return fmt.Sprintf("%sk1m-node-%05d", nfmPrefix, k) }

// nfmRound is one measured round.
type nfmRound struct {
	name, placement                   string
	startup, wipe                     time.Duration
	updates                           int64
	secs                              float64
	p50, p99, p999, max               time.Duration
	etcdWrites                        int64   // bytes etcd dirtied in the page cache of a backed file system in the window (/proc/PID/io write_bytes)
	etcdCPU, loadCPU, busyCPU, iowait float64 // seconds in the window
	dirtyMax, dirtyMean               int64
	wbMax, wbMean                     int64
	devWritten                        int64 // bytes written to the disk's device in the window
	sizes                             nfmSizes
	memDelta                          int64 // Shmem growth (tmpfs) or Cached growth (disk) since before the start
	conflicts, errors, events         int64
	slowApplies                       int
}

func (h *nfmHarness) round(placement, dir, name string) nfmRound {
	t := h.t
	syscall.Sync() // every round starts with no dirty pages of another
	before := proc.ReadMeminfo()
	t.Logf("round %s: %s (%s)", name, dir, nfmFSType(dir))
	n := h.start(name, dir)
	l := h.load(n, h.p.rate)
	dev := proc.BlockDevice(dir)
	sampler := nfmSample(dev)
	time.Sleep(h.p.warmup)

	u0, c0 := l.updates.Load(), nfmRead(n.pid, dev)
	sampler.mark()
	l.measuring.Store(true)
	t0 := time.Now()
	time.Sleep(h.p.window)
	l.measuring.Store(false)
	secs := time.Since(t0).Seconds()
	u1, c1 := l.updates.Load(), nfmRead(n.pid, dev)
	win := sampler.window()
	l.stop()
	sampler.stop()
	if e := l.firstErr.Load(); e != nil {
		t.Errorf("round %s: first error: %v", name, e)
	}
	r := nfmRound{name: name, placement: placement, startup: n.startup, updates: u1 - u0, secs: secs,
		etcdCPU: c1.etcdCPU - c0.etcdCPU, loadCPU: c1.loadCPU - c0.loadCPU, busyCPU: c1.busyCPU - c0.busyCPU, iowait: c1.iowait - c0.iowait,
		dirtyMax: win.dirtyMax, dirtyMean: win.dirtyMean, wbMax: win.wbMax, wbMean: win.wbMean, devWritten: c1.devWritten - c0.devWritten, etcdWrites: c1.etcdWrites - c0.etcdWrites,
		conflicts: l.conflicts.Load(), errors: l.errors.Load(), events: l.events.Load()}
	var all []time.Duration
	for _, w := range l.lat {
		all = append(all, w...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) > 0 {
		r.p50, r.p99, r.p999, r.max = all[len(all)/2], all[len(all)*99/100], all[len(all)*999/1000], all[len(all)-1]
	}
	r.sizes = h.sizes(n, dir)
	after := proc.ReadMeminfo()
	if placement == "tmpfs" {
		r.memDelta = after["Shmem"] - before["Shmem"]
	} else {
		r.memDelta = after["Cached"] - after["Shmem"] - (before["Cached"] - before["Shmem"])
	}
	t.Logf("  writeback over the round (every 5 s: Dirty / Writeback MiB, device MiB written since the start): %s", sampler.trace())
	n.stop(t)
	r.slowApplies = n.slowApplies()
	began := time.Now()
	if err := etcd.DiscardData(dir); err != nil {
		t.Error(err)
	}
	r.wipe = time.Since(began)
	t.Logf("  %s", r)
	if got := nfmFSType(dir); (placement == "tmpfs") != (got == "tmpfs") {
		t.Errorf("round %s: %s is on %s after the round, not the %s placement: the round is void", name, dir, got, placement)
	}
	return r
}

// nfmCounters are what a round reads when its window opens and closes:
// counters since the start of etcd, of this process, of the machine.
type nfmCounters struct {
	etcdCPU, loadCPU, busyCPU, iowait float64 // seconds
	etcdWrites                        int64   // /proc/PID/io write_bytes of etcd
	devWritten                        int64   // bytes written to the disk's device
}

// nfmRead reads the counters of the etcd child pid and of device dev.
func nfmRead(pid int, dev string) nfmCounters {
	etcdUsage, _ := proc.ReadUsage(pid)
	writes, _ := proc.ReadWriteBytes(pid)
	self, _ := proc.SelfCPU()
	devWritten := proc.DeviceWritten(dev)
	busy, iowait, _ := proc.ReadMachineCPU()
	return nfmCounters{etcdCPU: etcdUsage.CPU.Seconds(), loadCPU: self.Seconds(), busyCPU: busy.Seconds(), iowait: iowait.Seconds(),
		etcdWrites: writes, devWritten: devWritten}
}

func (r nfmRound) rate() float64 { return float64(r.updates) / r.secs }

// others is the CPU (cores) the rest of the machine used in the window:
// the kernel's writeback threads, and whatever else runs there.
func (r nfmRound) others() float64 { return (r.busyCPU - r.etcdCPU - r.loadCPU) / r.secs }

func (r nfmRound) String() string {
	k := float64(r.updates) / 1000
	return fmt.Sprintf("%.0f updates/s, p50 %s p99 %s p99.9 %s max %s; CPU s per 1,000 updates: etcd %.3f, load %.3f, machine busy %.3f (iowait %.3f), others %.2f cores; "+
		"Dirty max %s mean %s, Writeback max %s mean %s, etcd's own writes to a backed file system %.0f B/update, device written %s (%.0f B/update, every process); %s; memory growth %s; startup %s, wipe %s; "+
		"conflicts %d, errors %d, watch events %d, slow-apply warnings %d",
		r.rate(), r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.p999.Round(10*time.Microsecond), r.max.Round(time.Millisecond),
		r.etcdCPU/k, r.loadCPU/k, r.busyCPU/k, r.iowait/k, r.others(),
		nfmMiB(r.dirtyMax), nfmMiB(r.dirtyMean), nfmMiB(r.wbMax), nfmMiB(r.wbMean), float64(r.etcdWrites)/float64(r.updates), nfmMiB(r.devWritten), float64(r.devWritten)/float64(r.updates),
		r.sizes, nfmMiB(r.memDelta), r.startup.Round(time.Millisecond), r.wipe.Round(time.Microsecond),
		r.conflicts, r.errors, r.events, r.slowApplies)
}

func (h *nfmHarness) summarize(rs []nfmRound) {
	t := h.t
	t.Logf("| round | updates/s | p50 | p99 | p99.9 | max | etcd CPU s/1k | load CPU s/1k | machine busy s/1k | others' CPU s/s | Dirty max | Writeback max | etcd writes/update | device written/update | bbolt file (in use) | WAL | member/ | memory growth (tmpfs: Shmem; disk: page cache) |")
	t.Logf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		k := float64(r.updates) / 1000
		t.Logf("| %s | %.0f | %.2f ms | %.2f ms | %.2f ms | %.0f ms | %.3f | %.3f | %.3f | %.2f | %s | %s | %.0f B | %.0f B | %s (%s) | %s | %s | %s |",
			r.name, r.rate(), nfmMs(r.p50), nfmMs(r.p99), nfmMs(r.p999), nfmMs(r.max), r.etcdCPU/k, r.loadCPU/k, r.busyCPU/k, r.others(),
			nfmMiB(r.dirtyMax), nfmMiB(r.wbMax), float64(r.etcdWrites)/float64(r.updates), float64(r.devWritten)/float64(r.updates),
			nfmMiB(r.sizes.dbFile), nfmMiB(r.sizes.dbInUse), nfmMiB(r.sizes.wal), nfmMiB(r.sizes.member), nfmMiB(r.memDelta))
	}
	// disk/tmpfs ratios, pairing rounds in the order they ran.
	var disk, tmpfs []nfmRound
	for _, r := range rs {
		if r.placement == "disk" {
			disk = append(disk, r)
		} else {
			tmpfs = append(tmpfs, r)
		}
	}
	for i := 0; i < len(disk) && i < len(tmpfs); i++ {
		d, m := disk[i], tmpfs[i]
		dk, mk := float64(d.updates)/1000, float64(m.updates)/1000
		t.Logf("ratio disk/tmpfs, pair %d: updates/s %.3f, p50 %.3f, p99 %.3f, p99.9 %.3f, etcd CPU/update %.3f, machine busy/update %.3f",
			i+1, d.rate()/m.rate(), nfmMs(d.p50)/nfmMs(m.p50), nfmMs(d.p99)/nfmMs(m.p99), nfmMs(d.p999)/nfmMs(m.p999), (d.etcdCPU/dk)/(m.etcdCPU/mk), (d.busyCPU/dk)/(m.busyCPU/mk))
	}
}

// churn runs the renewal load with kube-apiserver's compaction, counted in
// updates, and reports the store's size around every compaction.
func (h *nfmHarness) churn(placement, dir string) {
	t := h.t
	syscall.Sync()
	before := proc.ReadMeminfo()
	name := "churn-" + placement
	t.Logf("%s: %d cycles of %d updates, each ended by kube-apiserver's compaction (to the revision of the previous one)", name, h.p.churnCycles, h.p.churnInterval)
	t.Logf("%s: %s (%s)", name, dir, nfmFSType(dir))
	n := h.start(name, dir)
	l := h.load(n, 0)
	ctx := context.Background()
	mem := func() int64 {
		m := proc.ReadMeminfo()
		if placement == "tmpfs" {
			return m["Shmem"] - before["Shmem"]
		}
		return m["Cached"] - m["Shmem"] - (before["Cached"] - before["Shmem"])
	}
	t.Logf("| %s | updates | revision | compacted to | bbolt file before → after (in use before → after) | WAL | member/ | memory growth (tmpfs: Shmem; disk: page cache) | etcd RSS (anon/file/shmem) |", name)
	t.Logf("|---|---|---|---|---|---|---|---|---|")
	var prevRev int64
	began := time.Now()
	for c := 1; c <= h.p.churnCycles; c++ {
		target := int64(c * h.p.churnInterval)
		for l.updates.Load() < target {
			if e := l.firstErr.Load(); e != nil {
				t.Fatalf("%s: %v", name, e)
			}
			time.Sleep(50 * time.Millisecond)
		}
		pre := h.sizes(n, dir)
		st, err := n.cli.Status(ctx, n.m.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		rev := st.Header.Revision
		compacted := "none (first)"
		if prevRev > 0 {
			if _, err := n.cli.Compact(ctx, prevRev, clientv3.WithCompactPhysical()); err != nil {
				t.Fatal(err)
			}
			compacted = strconv.FormatInt(prevRev, 10)
		}
		prevRev = rev
		post := h.sizes(n, dir)
		t.Logf("| %d | %d | %d | %s | %s → %s (%s → %s) | %s | %s | %s | %s |", c, l.updates.Load(), rev, compacted,
			nfmMiB(pre.dbFile), nfmMiB(post.dbFile), nfmMiB(pre.dbInUse), nfmMiB(post.dbInUse), nfmMiB(post.wal), nfmMiB(post.member), nfmMiB(mem()), post.rss)
	}
	secs := time.Since(began).Seconds()
	total := l.updates.Load()
	l.stop()
	t.Logf("%s: %d updates in %.0f s (%.0f/s), %d WAL files", name, total, secs, float64(total)/secs, h.sizes(n, dir).walFiles)
	st, err := n.cli.Status(ctx, n.m.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.cli.Compact(ctx, st.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	if _, err := n.cli.Defragment(ctx, n.m.ClientURL()); err != nil {
		t.Fatal(err)
	}
	defrag := time.Since(began)
	s := h.sizes(n, dir)
	t.Logf("%s: after compacting everything and defragmenting (%s): %s; memory growth %s", name, defrag.Round(time.Millisecond), s, nfmMiB(mem()))
	n.stop(t)
	t.Logf("%s: after the member stopped: memory growth %s; slow-apply warnings %d", name, nfmMiB(mem()), n.slowApplies())
	began = time.Now()
	if err := etcd.DiscardData(dir); err != nil {
		t.Error(err)
	}
	t.Logf("%s: wipe %s; memory growth after it %s", name, time.Since(began).Round(time.Microsecond), nfmMiB(mem()))
	if got := nfmFSType(dir); (placement == "tmpfs") != (got == "tmpfs") {
		t.Errorf("%s: %s is on %s after the churn, not the %s placement: the churn is void", name, dir, got, placement)
	}
}

// nfmSizes is the store's size: etcd's view of its database and the files.
type nfmSizes struct {
	dbSize, dbInUse     int64 // etcd's Status
	dbFile, dbApparent  int64 // member/snap/db, allocated and apparent
	wal, walFiles       int64 // member/wal, allocated, and its file count
	snaps, member, fsed int64 // member/snap/*.snap; member/ allocated; a tmpfs's used bytes (-1: not a tmpfs)
	rss                 string
}

func (s nfmSizes) String() string {
	fs := ""
	if s.fsed >= 0 {
		fs = ", tmpfs used " + nfmMiB(s.fsed)
	}
	return fmt.Sprintf("bbolt %s (etcd: size %s, in use %s), WAL %s in %d files, snapshots %s, member/ %s%s, etcd RSS %s",
		nfmMiB(s.dbFile), nfmMiB(s.dbSize), nfmMiB(s.dbInUse), nfmMiB(s.wal), s.walFiles, nfmMiB(s.snaps), nfmMiB(s.member), fs, s.rss)
}

func (h *nfmHarness) sizes(n *nfmMember, dir string) nfmSizes {
	var s nfmSizes
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if st, err := n.cli.Status(ctx, n.m.ClientURL()); err == nil {
		s.dbSize, s.dbInUse = st.DbSize, st.DbSizeInUse
	} else {
		h.t.Errorf("status: %v", err)
	}
	member := filepath.Join(dir, "member")
	filepath.Walk(member, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		alloc := info.Sys().(*syscall.Stat_t).Blocks * 512
		s.member += alloc
		switch rel, _ := filepath.Rel(member, path); {
		case rel == filepath.Join("snap", "db"):
			s.dbFile, s.dbApparent = alloc, info.Size()
		case strings.HasPrefix(rel, "wal"+string(filepath.Separator)):
			s.wal += alloc
			s.walFiles++
		case strings.HasSuffix(rel, ".snap"):
			s.snaps += alloc
		}
		return nil
	})
	s.fsed = -1
	if st := (unix.Statfs_t{}); unix.Statfs(dir, &st) == nil && st.Type == unix.TMPFS_MAGIC {
		s.fsed = int64(st.Blocks-st.Bfree) * int64(st.Bsize)
	}
	s.rss = nfmRSS(n.pid)
	return s
}

// nfmRSS is the process's resident memory: total (anonymous, file, shmem).
func nfmRSS(pid int) string {
	r, err := proc.ReadResident(pid)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%s (%s/%s/%s)", nfmMiB(r.Total), nfmMiB(r.Anon), nfmMiB(r.File), nfmMiB(r.Shmem))
}

// nfmSampler reads Dirty and Writeback every 500 ms.
type nfmSampler struct {
	mu         sync.Mutex
	dev        string
	dev0       int64
	samples    []nfmSampleAt
	from       int
	done       chan struct{}
	stopped    sync.WaitGroup
	began      time.Time
	traceEvery time.Duration
}

type nfmSampleAt struct {
	at                time.Duration
	dirty, wb, devOut int64
}

func nfmSample(dev string) *nfmSampler {
	s := &nfmSampler{dev: dev, dev0: proc.DeviceWritten(dev), done: make(chan struct{}), began: time.Now(), traceEvery: 5 * time.Second}
	s.stopped.Add(1)
	go func() {
		defer s.stopped.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			m := proc.ReadMeminfo()
			s.mu.Lock()
			s.samples = append(s.samples, nfmSampleAt{at: time.Since(s.began), dirty: m["Dirty"], wb: m["Writeback"], devOut: proc.DeviceWritten(s.dev) - s.dev0})
			s.mu.Unlock()
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *nfmSampler) mark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.from = len(s.samples)
}

type nfmWindow struct{ dirtyMax, dirtyMean, wbMax, wbMean int64 }

func (s *nfmSampler) window() nfmWindow {
	s.mu.Lock()
	defer s.mu.Unlock()
	var w nfmWindow
	in := s.samples[s.from:]
	for _, x := range in {
		w.dirtyMax = max(w.dirtyMax, x.dirty)
		w.wbMax = max(w.wbMax, x.wb)
		w.dirtyMean += x.dirty
		w.wbMean += x.wb
	}
	if len(in) > 0 {
		w.dirtyMean /= int64(len(in))
		w.wbMean /= int64(len(in))
	}
	return w
}

func (s *nfmSampler) stop() {
	close(s.done)
	s.stopped.Wait()
}

func (s *nfmSampler) trace() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	next := time.Duration(0)
	for _, x := range s.samples {
		if x.at < next {
			continue
		}
		fmt.Fprintf(&b, " %.0fs:%.0f/%.0f/%.0f", x.at.Seconds(), float64(x.dirty)/(1<<20), float64(x.wb)/(1<<20), float64(x.devOut)/(1<<20))
		next += s.traceEvery
	}
	return b.String()
}

// nfmFSType names the file system of dir, or of its nearest existing parent.
func nfmFSType(dir string) string {
	var st unix.Statfs_t
	for p := filepath.Clean(dir); unix.Statfs(p, &st) != nil; p = filepath.Dir(p) {
		if p == filepath.Dir(p) {
			return "?"
		}
	}
	switch st.Type {
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	}
	return fmt.Sprintf("fs type %#x", st.Type)
}

func nfmSysctl(name string) string {
	data, _ := os.ReadFile("/proc/sys/" + name)
	return strings.TrimSpace(string(data))
}

func nfmMiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func nfmMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// freePortPair is a client port on ::1 whose next port (the peer's) is
// free too.
func freePortPair(t *testing.T) int {
	t.Helper()
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "[::1]:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if l2, err := net.Listen("tcp", net.JoinHostPort("::1", strconv.Itoa(port+1))); err == nil {
			l2.Close()
			return port
		}
	}
	t.Fatal("no free port pair on ::1")
	return 0
}

// certs issues the member's serving certificate and a client certificate
// (kube-apiserver's) from a CA in dir, as the server's are.
func certs(t *testing.T, dir string) (server, client etcd.TLS) {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(dir, "etcd-ca", "k1m-etcd-ca")
	if err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey, err := ca.LoadOrIssue(dir, pki.Leaf{Name: "etcd-server", CommonName: "etcd", Server: true, Client: true,
		DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv6loopback, net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	cliCert, cliKey, err := ca.LoadOrIssue(dir, pki.Leaf{Name: "apiserver-etcd-client", CommonName: "kube-apiserver", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "etcd-ca.crt")
	return etcd.TLS{CertFile: srvCert, KeyFile: srvKey, CAFile: caFile}, etcd.TLS{CertFile: cliCert, KeyFile: cliKey, CAFile: caFile}
}
