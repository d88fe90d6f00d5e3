package server

import (
	"reflect"
	"testing"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/join"
)

// The cluster's Secrets keys are a ConfigMap: a server reads them from
// the etcd that holds ConfigMaps, the configmaps partition when there is
// one (the durable etcd then has no such key, and a server reading it
// there would make keys of its own).
func TestSecretsKeysAreReadWhereConfigMapsAre(t *testing.T) {
	running := func(partition string, port int) *etcd.Running {
		return &etcd.Running{Member: etcd.Member{Name: "s1", Host: "::1", Port: port, Partition: partition}}
	}
	partition := func(name string, url string) partitionStore {
		p, ok := constants.StorePartitionNamed(name)
		if !ok {
			t.Fatalf("no partition %q", name)
		}
		return partitionStore{partition: p, urls: []string{url}}
	}
	tls := etcd.TLS{CAFile: "ca.crt", CertFile: "client.crt", KeyFile: "client.key"}
	for _, tc := range []struct {
		name       string
		local      etcds
		stores     etcdStores
		wantMember *etcd.Member
		wantURLs   []string
	}{
		{
			name:       "own durable member, no partitions",
			local:      etcds{durable: running("", 2379)},
			stores:     etcdStores{durable: []string{"unix:///run/durable"}, tls: tls},
			wantMember: &etcd.Member{Name: "s1", Host: "::1", Port: 2379},
		},
		{
			name:       "own members, configmaps partitioned",
			local:      etcds{durable: running("", 2379), partitions: []*etcd.Running{running("pods", 2383), running("configmaps", 2389)}},
			wantMember: &etcd.Member{Name: "s1", Host: "::1", Port: 2389, Partition: "configmaps"},
		},
		{
			name:       "own members, other resources partitioned",
			local:      etcds{durable: running("", 2379), partitions: []*etcd.Running{running("pods", 2383), running("secrets", 2391)}},
			wantMember: &etcd.Member{Name: "s1", Host: "::1", Port: 2379},
		},
		{
			name:     "API server only, configmaps partitioned",
			stores:   etcdStores{durable: []string{"https://[fd01::1]:2379"}, partitions: []partitionStore{partition("nodes", "https://[fd01::1]:2385"), partition("configmaps", "https://[fd01::1]:2389")}, tls: tls},
			wantURLs: []string{"https://[fd01::1]:2389"},
		},
		{
			name:     "API server only, no configmaps partition",
			stores:   etcdStores{durable: []string{"https://[fd01::1]:2379"}, partitions: []partitionStore{partition("pods", "https://[fd01::1]:2383")}, tls: tls},
			wantURLs: []string{"https://[fd01::1]:2379"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := memberOfKey(join.SecretsKeysKey, tc.local); !reflect.DeepEqual(got, tc.wantMember) {
				t.Errorf("memberOfKey = %+v, want %+v", got, tc.wantMember)
			}
			urls, gotTLS := storeOfKey(join.SecretsKeysKey, tc.local, tc.stores)
			if !reflect.DeepEqual(urls, tc.wantURLs) {
				t.Errorf("storeOfKey endpoints = %q, want %q", urls, tc.wantURLs)
			}
			if tc.wantURLs != nil && gotTLS != tls {
				t.Errorf("storeOfKey TLS = %+v, want kube-apiserver's %+v", gotTLS, tls)
			}
		})
	}
}
