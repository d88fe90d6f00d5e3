package etcdflood

import (
	"bytes"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

func TestLeaseValueIsWhatTheAPIServerStores(t *testing.T) {
	value, err := LeaseValue("node-0000042")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(value, []byte("k8s\x00")) {
		t.Errorf("value does not start with the k8s protobuf envelope: %q", value[:8])
	}
	if len(value) < 200 || len(value) > 1000 {
		t.Errorf("value is %d bytes; a node Lease with managed fields is a few hundred", len(value))
	}
	obj, err := runtime.Decode(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), value)
	if err != nil {
		t.Fatal(err)
	}
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok || lease.Name != "node-0000042" || *lease.Spec.HolderIdentity != "node-0000042" {
		t.Errorf("decoded %T %+v, want the node Lease", obj, obj)
	}
}

func TestConfigValidateNamesTheFlag(t *testing.T) {
	good := Config{Keys: 10, Clients: 2, Workers: 4, Duration: time.Second}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := map[string]Config{
		"--etcd-keys":    {Keys: 0, Clients: 2, Workers: 4, Duration: time.Second},
		"--etcd-clients": {Keys: 10, Clients: 5, Workers: 4, Duration: time.Second},
		"--duration":     {Keys: 10, Clients: 2, Workers: 4},
	}
	for flag, c := range bad {
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("Validate(%+v) = %v; want an error naming %s", c, err, flag)
		}
	}
}
