package proc

import (
	"fmt"
	"testing"
)

func TestSumOwn(t *testing.T) {
	members := []Member{{PID: 1, Name: "k1m server", Own: true}, {PID: 2, Name: "k1m kube-controller-manager", Own: true},
		{PID: 3, Name: "containerd"}, {PID: 4, Name: "k1m kube-scheduler", Own: true}}
	usage := map[int]Usage{1: {CPU: 10, RSS: 100, GCs: 1}, 2: {CPU: 3, RSS: 30}, 3: {CPU: 1000, RSS: 1000}}
	read := func(pid int) (Usage, error) {
		u, ok := usage[pid]
		if !ok {
			return Usage{}, fmt.Errorf("pid %d: gone", pid)
		}
		return u, nil
	}
	got, err := sumOwn(1, members, read)
	if want := (Usage{CPU: 13, RSS: 130, PeakRSS: 0, GCs: 1}); err != nil || got != want {
		t.Errorf("sumOwn = %+v, %v; want %+v (containerd left out, the ended scheduler skipped)", got, err, want)
	}
	delete(usage, 1)
	if _, err := sumOwn(1, members, read); err == nil {
		t.Error("sumOwn with the root gone: no error")
	}
}
