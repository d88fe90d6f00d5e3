package agent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/join"
)

// TestWatchSettingsSendsTheFirstLeaseChange: read errors and changes
// outside the lease profile are ignored; the first new profile is sent.
func TestWatchSettingsSendsTheFirstLeaseChange(t *testing.T) {
	running := join.Settings{RenewInterval: 10 * time.Second, LeaseDurationSeconds: 40, ClusterDomain: "cluster.local"}
	next := join.Settings{RenewInterval: 5 * time.Second, LeaseDurationSeconds: 20, ClusterDomain: "cluster.local"}
	otherDNS := running
	otherDNS.ClusterDNS = "fddf::a"
	replies := []func() (join.Settings, error){
		func() (join.Settings, error) { return join.Settings{}, errors.New("connection refused") },
		func() (join.Settings, error) { return running, nil },
		func() (join.Settings, error) { return otherDNS, nil },
		func() (join.Settings, error) { return next, nil },
	}
	var calls atomic.Int32
	read := func(context.Context) (join.Settings, error) {
		i := int(calls.Add(1)) - 1
		if i >= len(replies) {
			t.Error("read again after the change was sent")
			return next, nil
		}
		return replies[i]()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	select {
	case got := <-watchSettings(ctx, read, running, 5*time.Millisecond):
		if !reflect.DeepEqual(got, next) {
			t.Errorf("sent %+v, want %+v", got, next)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no change sent")
	}
	time.Sleep(30 * time.Millisecond)
	if n := calls.Load(); n != 4 {
		t.Errorf("read %d times, want 4 (none after the change)", n)
	}
}

// TestForgetTokenFile: a node that resumes on its own certificate deletes
// a token file a reinstall wrote again; none there is fine.
func TestForgetTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "join-token")
	if err := os.WriteFile(path, []byte("K1M...\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := forgetTokenFile(path, &out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("token file still there: %v", err)
	}
	if want := "k1m agent: deleted --token-file " + path + "\n"; out.String() != want {
		t.Errorf("said %q, want %q", out.String(), want)
	}
	out.Reset()
	if err := forgetTokenFile(path, &out); err != nil || out.Len() != 0 {
		t.Errorf("again: %v, said %q; want nothing", err, out.String())
	}
}
