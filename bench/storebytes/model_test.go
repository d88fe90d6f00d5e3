package storebytes

import (
	"reflect"
	"testing"
	"time"
)

func TestEstimatesScaleEachClassAndFindTheLargestClusterThatFits(t *testing.T) {
	r := &Result{
		Config: Config{SizingPodsPerNode: 30, SizingNodes: []int{1000, 100000}},
		Nodes:  2, Pods: 10,
		Kinds: []Kind{
			// 2 nodes: 1,000 B each, 600 of them without managedFields.
			{Store: "durable", Kind: "Node", Class: PerNode, Count: 2, KeyBytes: 100, ValueBytes: 1900, NoManagedFieldsBytes: 1100},
			// 10 pods: 400 B each in all (Pods and their share of the rest).
			{Store: "durable", Kind: "Pod", Class: PerPod, Count: 10, KeyBytes: 500, ValueBytes: 3500, NoManagedFieldsBytes: 2000},
			{Store: "durable", Kind: "ClusterRole", Class: Other, Count: 5, KeyBytes: 1000, ValueBytes: 9000, NoManagedFieldsBytes: 4000},
			{Store: "no-fsync", Kind: "Lease", Class: PerNode, Count: 2, KeyBytes: 100, ValueBytes: 500, NoManagedFieldsBytes: 300},
		},
		Stores: []Store{
			// Written at rest over a minute, 5 a compaction interval: 1,000 B
			// a node (5,000 kept) and 600 B of the rest (3,000 kept).
			{Store: "durable", Quota: 1 << 30, Revisions: 7, Idle: time.Minute, After: File{Size: 32000}, Written: []Kind{
				{Store: "durable", Kind: "Node", Class: PerNode, Count: 2, KeyBytes: 100, ValueBytes: 1900},
				{Store: "durable", Kind: "Endpoints", Class: Other, Count: 5, KeyBytes: 100, ValueBytes: 500}}},
			// 3,600 B a node a minute: 18,000 B kept.
			{Store: "no-fsync", Quota: 1 << 20, Revisions: 24, Idle: time.Minute, After: File{Size: 1200}, Written: []Kind{
				{Store: "no-fsync", Kind: "Lease", Class: PerNode, Count: 24, KeyBytes: 1200, ValueBytes: 6000}}},
		},
	}
	durable := r.Costs(r.Stores[0])
	want := Costs{PerNode: 1000, PerPod: 400, Other: 10000, PerNodeNoManagedFields: 600, PerPodNoManagedFields: 250, OtherNoManagedFields: 5000,
		HistoryPerNode: 5000, HistoryOther: 3000, Overhead: 2}
	if durable != want {
		t.Errorf("Costs(durable) = %+v\nwant %+v", durable, want)
	}
	// durable: a node holds 1,000 + 30 x 400 = 13,000 B live and 5,000 B
	// of history, the rest 10,000 and 3,000 B; the file is twice that.
	// no-fsync: 300 B and 18,000 B a node.
	got := r.Estimates()
	wantEst := []Estimate{
		{Store: "durable", Nodes: 1000, Pods: 30000, Live: 10000 + 13_000_000, NoManagedFields: 5000 + 1000*(600+30*250), History: 3000 + 5_000_000,
			File: 2 * (10000 + 13_000_000 + 3000 + 5_000_000), Quota: 1 << 30, MaxNodes: (1<<30/2 - 13000) / 18000},
		{Store: "durable", Nodes: 100000, Pods: 3000000, Live: 10000 + 1_300_000_000, NoManagedFields: 5000 + 100000*(600+30*250), History: 3000 + 500_000_000,
			File: 2 * (10000 + 1_300_000_000 + 3000 + 500_000_000), Quota: 1 << 30, MaxNodes: (1<<30/2 - 13000) / 18000},
		{Store: "no-fsync", Nodes: 1000, Pods: 30000, Live: 300_000, NoManagedFields: 200_000, History: 18_000_000,
			File: 2 * (300_000 + 18_000_000), Quota: 1 << 20, MaxNodes: (1 << 20 / 2) / 18300},
		{Store: "no-fsync", Nodes: 100000, Pods: 3000000, Live: 30_000_000, NoManagedFields: 20_000_000, History: 1_800_000_000,
			File: 2 * (30_000_000 + 1_800_000_000), Quota: 1 << 20, MaxNodes: (1 << 20 / 2) / 18300},
	}
	if !reflect.DeepEqual(got, wantEst) {
		t.Errorf("Estimates() =\n%+v\nwant\n%+v", got, wantEst)
	}
}

func TestConfigValidateNamesEveryFlag(t *testing.T) {
	bad := Config{Agents: -1, PodsPerNode: 0, PodsPerDeployment: 0, Idle: time.Second}
	want := "--store-agents -1: want 0 or more, e.g. 2\n--store-pods-per-node 0: want at least 1, e.g. 10\n" +
		"--store-pods-per-deployment 0: want a divisor of the workload's 0 pods (nodes x --store-pods-per-node), e.g. 10\n--store-idle 1s: want at least 10s, e.g. 5m0s"
	if err := bad.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate() = %v\nwant %s", err, want)
	}
	good := Config{Agents: 2, PodsPerNode: 10, PodsPerDeployment: 10, Idle: time.Minute}
	if err := good.Validate(); err != nil {
		t.Errorf("Validate() of %+v = %v", good, err)
	}
}
