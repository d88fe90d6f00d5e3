package etcd

import (
	"context"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"
)

// TestNoFsyncClusterRejoinsEmptyAndRestartsWhenAllStop: no-fsync members
// start empty every time; one that stops joins the others again and gets
// what they hold; when all stopped, the first to start makes a new cluster
// and the next ones join it.
func TestNoFsyncClusterRejoinsEmptyAndRestartsWhenAllStop(t *testing.T) {
	// Parallel: it waits on its members most of its time (tens of seconds).
	t.Parallel()
	dir := t.TempDir()
	serverTLS, clientTLS := certs(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	durable := Member{Name: "durable", DataDir: filepath.Join(dir, "durable"), Host: "::1", Port: freePortPair(t), TLS: serverTLS}
	rd, err := Start(ctx, durable)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Stop()
	dcli, err := NewClient([]string{durable.ClientURL()}, clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer dcli.Close()

	var ms []Member
	for _, name := range []string{"server-a", "server-b", "server-c"} {
		m := clusterMember(t, dir, name, serverTLS)
		m.NoFsync = true
		ms = append(ms, m)
	}
	start := func(m Member) *NoFsyncMember {
		t.Helper()
		if err := DiscardData(m.DataDir); err != nil {
			t.Fatal(err)
		}
		r, err := StartNoFsync(ctx, dcli, m, clientTLS, logf(t))
		if err != nil {
			t.Fatalf("StartNoFsync %s: %v", m.Name, err)
		}
		return r
	}
	running := make([]*NoFsyncMember, len(ms))
	for i, m := range ms {
		running[i] = start(m)
	}
	defer func() {
		for _, r := range running {
			r.Stop()
		}
	}()
	requireMembers(ctx, t, ms[0], clientTLS, []string{"server-a", "server-b", "server-c"})
	cli, err := NewClient([]string{ms[1].ClientURL()}, clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "/lease", "renewed"); err != nil {
		t.Fatal(err)
	}

	// a stops and starts again, empty: it joins b and c and has the key.
	running[0].Stop()
	running[0] = start(ms[0])
	requireKey(ctx, t, ms[0], clientTLS, "/lease")
	requireMembers(ctx, t, ms[1], clientTLS, []string{"server-a", "server-b", "server-c"})

	// All stop; c starts first: a new cluster of its own; then a joins it.
	for _, r := range running {
		r.Stop()
	}
	running = []*NoFsyncMember{start(ms[2])}
	requireMembers(ctx, t, ms[2], clientTLS, []string{"server-c"})
	running = append(running, start(ms[0]))
	requireMembers(ctx, t, ms[2], clientTLS, []string{"server-a", "server-c"})
	recorded, err := noFsyncMembers(ctx, dcli, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{ms[0].AdvertisedClientURL(), ms[2].AdvertisedClientURL()}; !reflect.DeepEqual(recorded, sortedCopy(want)) {
		t.Errorf("recorded no-fsync members %v, want %v", recorded, want)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}

func requireMembers(ctx context.Context, t *testing.T, m Member, tls TLS, want []string) {
	t.Helper()
	cli, err := NewClient([]string{m.ClientURL()}, tls)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	members, err := Members(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mem := range members {
		got = append(got, mem.Name)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("members seen from %s: %v, want %v", m.Name, got, want)
	}
}
