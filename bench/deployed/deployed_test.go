package deployed

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/proc"
)

func TestGroupSumsByNameAndDropsWhatEnded(t *testing.T) {
	members := []proc.Member{
		{PID: 10, Name: "k1m server", Own: true},
		{PID: 11, Name: "k1m kube-apiserver", Own: true},
		{PID: 12, Name: "containerd-shim-runc-v2"},
		{PID: 13, Name: "containerd-shim-runc-v2"},
		{PID: 14, Name: "coredns"}, // ended before the second read
	}
	at := func(cpu ...time.Duration) map[int]proc.Usage {
		m := map[int]proc.Usage{}
		for i, c := range cpu {
			m[10+i] = proc.Usage{CPU: c, RSS: int64(i+1) << 20}
		}
		return m
	}
	before := at(1*time.Second, 2*time.Second, 0, 0, 0)
	after := at(3*time.Second, 7*time.Second, 100*time.Millisecond, 200*time.Millisecond)
	got := Group(members, before, after)
	want := []Process{
		{Name: "k1m server", Count: 1, Own: true, Usage: proc.Usage{CPU: 2 * time.Second, RSS: 1 << 20}},
		{Name: "k1m kube-apiserver", Count: 1, Own: true, Usage: proc.Usage{CPU: 5 * time.Second, RSS: 2 << 20}},
		{Name: "containerd-shim-runc-v2", Count: 2, Usage: proc.Usage{CPU: 300 * time.Millisecond, RSS: 7 << 20}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("group =\n %+v\nwant\n %+v", got, want)
	}
}

func TestPerRenewalFiguresCountTheControlPlaneOnly(t *testing.T) {
	f := Flood{
		Flavour: Stock, Round: 1, Object: leaseflood.ObjectLease,
		Result: leaseflood.Result{Updates: 1000, Rate: 100, Elapsed: 10 * time.Second},
		Processes: []Process{
			{Name: "k1m server", Count: 1, Own: true, Usage: proc.Usage{CPU: 300 * time.Millisecond}},
			{Name: "k1m kube-apiserver", Count: 1, Own: true, Usage: proc.Usage{CPU: 700 * time.Millisecond}},
			{Name: "containerd", Count: 1, Usage: proc.Usage{CPU: 500 * time.Millisecond}},
		},
		Idle:        []Process{{Name: "k1m server", Own: true, Usage: proc.Usage{CPU: time.Second}}, {Name: "containerd", Usage: proc.Usage{CPU: time.Second}}},
		IdleElapsed: 10 * time.Second,
		LoadGen:     proc.Usage{CPU: 500 * time.Millisecond},
	}
	checks := []struct {
		what      string
		got, want float64
	}{
		{"CPUPerRenewal", f.CPUPerRenewal(), 0.001},
		{"ProcessPerRenewal(kube-apiserver)", f.ProcessPerRenewal("k1m kube-apiserver"), 0.0007},
		{"LoadGenPerRenewal", f.LoadGenPerRenewal(), 0.0005},
		{"CoresBusy", f.CoresBusy(), 0.2},
		{"IdleCores", f.IdleCores(), 0.1},
	}
	for _, c := range checks {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if v := f.ProcessPerRenewal("k1m kube-scheduler"); !math.IsNaN(v) {
		t.Errorf("ProcessPerRenewal of a process the flood did not have = %v, want NaN", v)
	}
	r := &Result{Floods: []Flood{f}}
	rows := r.CSVRows()
	wantLast := []string{"stock", "1", "lease", "control plane", "", "true", "1000", "0.1", "0", "100", "0", "0", "0", "0", "500", "0.2", "10"}
	if len(rows) != 4 || !reflect.DeepEqual(rows[3], wantLast) {
		t.Errorf("CSVRows: %d rows, last %q; want 4, last %q", len(rows), rows[len(rows)-1], wantLast)
	}
	for _, row := range rows {
		if len(row) != len(r.CSVHeader()) {
			t.Errorf("CSV row %q has %d columns, header %d", row, len(row), len(r.CSVHeader()))
		}
	}
}

func TestValidateNamesEachFlag(t *testing.T) {
	images := t.TempDir()
	err := Options{K1M: "/nonexistent/k1m", StockK1M: "/nonexistent/stock-k1m", ImagesDir: images, DataRoot: "relative", Nodes: 0}.Validate()
	want := strings.Join([]string{
		`--k1m "/nonexistent/k1m": not an executable file (make build writes it)`,
		`--stock-k1m "/nonexistent/stock-k1m": not an executable file (make build-stock writes it)`,
		`--images-dir "` + images + `": no image archive (*.tar) there (make images writes them to _output/images)`,
		`--deployed-data-root "relative": want an absolute directory other than /, e.g. /var/lib/k1m-bench-deployed`,
		`--deployed-nodes 0: want at least 1, e.g. 2000`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("Validate = %v\nwant %s", err, want)
	}
}
