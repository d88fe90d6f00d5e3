package storebytes

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Config is the store scenario's size and the sizing it predicts.
type Config struct {
	Agents            int           // agents besides the server's own node
	PodsPerNode       int           // pods of the workload a node runs
	PodsPerDeployment int           // each Deployment with its Service
	Idle              time.Duration // window over which revisions are counted
	// SizingPodsPerNode and SizingNodes are the clusters the model sizes.
	SizingPodsPerNode int
	SizingNodes       []int
}

// Defaults of the scenario.
const (
	DefaultAgents            = 2
	DefaultPodsPerNode       = 10
	DefaultPodsPerDeployment = 10
	// DefaultIdle covers one node status report period (the kubelet's
	// nodeStatusReportFrequency, 5 minutes): each Node is rewritten once.
	DefaultIdle              = 5 * time.Minute
	DefaultSizingPodsPerNode = 30
)

// DefaultSizingNodes are the cluster sizes the sizing table gives.
var DefaultSizingNodes = []int{1000, 10000, 100000}

// CompactionInterval is how often kube-apiserver compacts each store
// (its --etcd-compaction-interval, which k1m leaves at upstream's 5m):
// the revisions written within it are kept besides the live ones.
const CompactionInterval = 5 * time.Minute

// Validate names the flag at fault.
func (c Config) Validate() error {
	var errs []error
	if c.Agents < 0 {
		errs = append(errs, fmt.Errorf("--store-agents %d: want 0 or more, e.g. %d", c.Agents, DefaultAgents))
	}
	if c.PodsPerNode < 1 {
		errs = append(errs, fmt.Errorf("--store-pods-per-node %d: want at least 1, e.g. %d", c.PodsPerNode, DefaultPodsPerNode))
	}
	if c.PodsPerDeployment < 1 || (c.Agents >= 0 && c.PodsPerNode >= 1 && c.Pods()%c.PodsPerDeployment != 0) {
		errs = append(errs, fmt.Errorf("--store-pods-per-deployment %d: want a divisor of the workload's %d pods (nodes x --store-pods-per-node), e.g. %d",
			c.PodsPerDeployment, c.Pods(), DefaultPodsPerDeployment))
	}
	if c.Idle < 10*time.Second {
		errs = append(errs, fmt.Errorf("--store-idle %v: want at least 10s, e.g. %v", c.Idle, DefaultIdle))
	}
	return errors.Join(errs...)
}

// Pods is the workload's size.
func (c Config) Pods() int { return (c.Agents + 1) * c.PodsPerNode }

// Store is one etcd group's measurement.
type Store struct {
	Store string
	Quota int64 // its member's --quota-backend-bytes
	// Revisions were written over Idle with the cluster at rest; Written
	// are those under /registry/, by kind and class.
	Revisions int64
	Idle      time.Duration
	Written   []Kind
	// Before is the file before compaction, After after compacting to the
	// newest revision and defragmenting: the live objects alone.
	Before, After File
}

// Result is one measured cluster.
type Result struct {
	Config Config
	Nodes  int // Ready nodes measured
	Pods   int // the workload's pods, all running
	Kinds  []Kind
	Stores []Store
}

// Sum adds up the kinds of a store and class ("" for any).
func (r *Result) Sum(store string, class Class) (n int, bytes, noManagedFields int64) {
	return sum(r.Kinds, store, class)
}

func sum(kinds []Kind, store string, class Class) (n int, bytes, noManagedFields int64) {
	for _, k := range kinds {
		if (store == "" || k.Store == store) && (class == "" || k.Class == class) {
			n += k.Count
			bytes += k.Bytes()
			noManagedFields += k.KeyBytes + k.NoManagedFieldsBytes
		}
	}
	return n, bytes, noManagedFields
}

// Costs are what a store holds per node, per pod and for the rest.
type Costs struct {
	PerNode, PerPod, Other float64 // live bytes: keys and values
	// ...NoManagedFields are the same without metadata.managedFields.
	PerNodeNoManagedFields, PerPodNoManagedFields, OtherNoManagedFields float64
	// History... are the bytes of the revisions written at rest within a
	// compaction interval, by a node's objects, a pod's, and the rest.
	HistoryPerNode, HistoryPerPod, HistoryOther float64
	// Overhead is the database file after defragmentation over the live
	// keys and values: bbolt's pages and each revision's own fields.
	Overhead float64
}

// Costs of a store, from the measured cluster.
func (r *Result) Costs(store Store) Costs {
	var c Costs
	_, nodeBytes, nodeNoMF := r.Sum(store.Store, PerNode)
	_, podBytes, podNoMF := r.Sum(store.Store, PerPod)
	_, otherBytes, otherNoMF := r.Sum(store.Store, Other)
	_, live, _ := r.Sum(store.Store, "")
	c.PerNode, c.PerNodeNoManagedFields = per(nodeBytes, r.Nodes), per(nodeNoMF, r.Nodes)
	c.PerPod, c.PerPodNoManagedFields = per(podBytes, r.Pods), per(podNoMF, r.Pods)
	c.Other, c.OtherNoManagedFields = float64(otherBytes), float64(otherNoMF)
	intervals := CompactionInterval.Seconds() / store.Idle.Seconds()
	_, nodeWritten, _ := sum(store.Written, store.Store, PerNode)
	_, podWritten, _ := sum(store.Written, store.Store, PerPod)
	_, otherWritten, _ := sum(store.Written, store.Store, Other)
	c.HistoryPerNode = per(nodeWritten, r.Nodes) * intervals
	c.HistoryPerPod = per(podWritten, r.Pods) * intervals
	c.HistoryOther = float64(otherWritten) * intervals
	c.Overhead = per(store.After.Size, int(live))
	return c
}

func per(total int64, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(total) / float64(n)
}

// Estimate is a store's size in a cluster of Nodes nodes.
type Estimate struct {
	Store           string
	Nodes, Pods     int
	Live            int64 // keys and values
	NoManagedFields int64 // the same without managedFields
	History         int64 // revisions kept between compactions at rest
	File            int64 // (live + history) x overhead
	Quota           int64
	// MaxNodes is the largest cluster of the same shape whose file stays
	// within the quota.
	MaxNodes int
}

// Estimates size every store at each of the config's node counts.
func (r *Result) Estimates() []Estimate {
	var out []Estimate
	for _, s := range r.Stores {
		c := r.Costs(s)
		pods := float64(r.Config.SizingPodsPerNode)
		liveNode := c.PerNode + pods*c.PerPod
		historyNode := c.HistoryPerNode + pods*c.HistoryPerPod
		maxNodes := 0
		if liveNode+historyNode > 0 && c.Overhead > 0 {
			maxNodes = int(math.Floor((float64(s.Quota)/c.Overhead - c.Other - c.HistoryOther) / (liveNode + historyNode)))
		}
		for _, n := range r.Config.SizingNodes {
			live := c.Other + float64(n)*liveNode
			history := c.HistoryOther + float64(n)*historyNode
			out = append(out, Estimate{Store: s.Store, Nodes: n, Pods: n * r.Config.SizingPodsPerNode, Quota: s.Quota, MaxNodes: maxNodes,
				Live: int64(live), History: int64(history), File: int64((live + history) * c.Overhead),
				NoManagedFields: int64(c.OtherNoManagedFields + float64(n)*(c.PerNodeNoManagedFields+pods*c.PerPodNoManagedFields))})
		}
	}
	return out
}
