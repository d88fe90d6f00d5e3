package cli

import (
	"reflect"
	"testing"

	"k1m.dev/k1m/pkg/constants"
)

func TestMigrationPartitions(t *testing.T) {
	got, err := migrationPartitions([]string{"nodes", "pods"})
	pods, _ := constants.StorePartitionNamed("pods")
	nodes, _ := constants.StorePartitionNamed("nodes")
	if err != nil || !reflect.DeepEqual(got, []constants.StorePartition{pods, nodes}) {
		t.Errorf("nodes,pods: %+v, %v; want pods, nodes in the table's order", got, err)
	}
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, "--etcd-partitions: none given: name every partition the cluster is to have, e.g. --etcd-partitions=pods,nodes"},
		{[]string{"pod"}, `--etcd-partitions: "pod" is not a resource k1m partitions: want some of pods, nodes, endpointslices, configmaps, secrets, comma separated, e.g. pods,nodes`},
		{[]string{"pods", "pods"}, "--etcd-partitions=pods,pods: a partition is given twice"},
	} {
		if _, err := migrationPartitions(tc.names); err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v, want %q", tc.names, err, tc.want)
		}
	}
}
