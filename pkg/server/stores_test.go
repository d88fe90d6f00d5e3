package server

import (
	"reflect"
	"testing"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/etcd"
)

// kube-apiserver reaches its stores over the local sockets only when
// every store is this server's own member with a socket.
func TestSocketStores(t *testing.T) {
	durable := &etcd.Member{Host: "::1", Port: 2379, LocalSocket: "/d/etcd-sockets/durable.sock"}
	noFsync := &etcd.Member{Host: "::1", Port: 2381, LocalSocket: "/d/etcd-sockets/no-fsync.sock"}
	noSocket := &etcd.Member{Host: "::1", Port: 2381}
	pods, _ := constants.StorePartitionNamed("pods")
	nodes, _ := constants.StorePartitionNamed("nodes")
	for _, c := range []struct {
		what             string
		durable, noFsync *etcd.Member
		want             etcdStores
		ok               bool
		partitions       []*etcd.Running
	}{
		{"both own members with sockets", durable, noFsync,
			etcdStores{durable: []string{"unix:///d/etcd-sockets/durable.sock"}, noFsync: []string{"unix:///d/etcd-sockets/no-fsync.sock"}}, true, nil},
		{"one store (the stock build)", durable, nil, etcdStores{durable: []string{"unix:///d/etcd-sockets/durable.sock"}}, true, nil},
		{"the no-fsync member without a socket", durable, noSocket, etcdStores{}, false, nil},
		{"no durable member (an external store)", nil, noFsync, etcdStores{}, false, nil},
		{"a durable member without a socket", &etcd.Member{Host: "::1", Port: 2379}, noFsync, etcdStores{}, false, nil},
		{"partitions with sockets", durable, noFsync, etcdStores{durable: []string{"unix:///d/etcd-sockets/durable.sock"}, noFsync: []string{"unix:///d/etcd-sockets/no-fsync.sock"},
			partitions: []partitionStore{{pods, []string{"unix:///d/etcd-sockets/pods.sock"}}, {nodes, []string{"unix:///d/etcd-sockets/nodes.sock"}}}}, true,
			[]*etcd.Running{{Member: etcd.Member{Partition: "pods", LocalSocket: "/d/etcd-sockets/pods.sock"}}, {Member: etcd.Member{Partition: "nodes", LocalSocket: "/d/etcd-sockets/nodes.sock"}}}},
		{"a partition without a socket", durable, noFsync, etcdStores{}, false, []*etcd.Running{{Member: etcd.Member{Partition: "pods", Host: "::1", Port: 2383}}}},
	} {
		got, ok := socketStores(c.durable, c.noFsync, c.partitions)
		if ok != c.ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: socketStores = %+v, %v; want %+v, %v", c.what, got, ok, c.want, c.ok)
		}
	}
}

func TestMemberOfNone(t *testing.T) {
	if memberOf(nil) != nil || noFsyncMemberOf(nil) != nil {
		t.Error("a member of no running etcd")
	}
	var none etcds
	if none.durableErr() != nil || none.noFsyncErr() != nil {
		t.Error("an API-server-only server's etcds report errors on a channel: want none (nil never fires)")
	}
	none.stop() // nothing to stop: no panic
}
