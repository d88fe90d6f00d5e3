package cli

import (
	"bytes"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/etcd"
)

func TestPrintSnapshots(t *testing.T) {
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	printSnapshots(&out, []etcd.SnapshotInfo{
		{Name: "on-demand-n1-1795435200", Size: 2129952, CreatedAt: at, Revision: 4711, K1mVersion: "v1.32.5-k1m.1"},
		{Name: "copied-in", Size: 20512, CreatedAt: at.Add(time.Hour)},
	})
	want := "NAME                     SIZE     CREATED               REVISION  K1M VERSION\n" +
		"on-demand-n1-1795435200  2129952  2026-11-23T12:00:00Z  4711      v1.32.5-k1m.1\n" +
		"copied-in                20512    2026-11-23T13:00:00Z  -         - (no NAME.json)\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
