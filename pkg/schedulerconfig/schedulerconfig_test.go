package schedulerconfig

import (
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedulerconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"k8s.io/utils/ptr"

	"k1m.dev/k1m/pkg/componentargs"
)

// readBack reads the file as kube-scheduler reads its --config: strictly
// (an unknown or duplicate field fails), defaulted, converted to the
// internal type, then validated by the scheduler's own validation.
func readBack(t *testing.T, path string) *schedulerconfig.KubeSchedulerConfiguration {
	t.Helper()
	got, err := options.LoadConfigFromFile(klog.Background(), path)
	if err != nil {
		t.Fatalf("kube-scheduler refuses the file: %v", err)
	}
	if err := validation.ValidateKubeSchedulerConfiguration(got); err != nil {
		t.Fatalf("kube-scheduler's validation refuses the file: %v", err)
	}
	return got
}

func TestTheFileIsWhatTheSchedulerReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kube-scheduler.yaml")
	if err := Write(path, Build(Settings{Kubeconfig: "/d/scheduler.kubeconfig", QPS: 500, PercentageOfNodesToScore: 3})); err != nil {
		t.Fatal(err)
	}
	got := readBack(t, path)
	for _, c := range []struct {
		field     string
		got, want any
	}{
		{"clientConnection.kubeconfig", got.ClientConnection.Kubeconfig, "/d/scheduler.kubeconfig"},
		{"clientConnection.qps", got.ClientConnection.QPS, float32(500)},
		{"clientConnection.burst", got.ClientConnection.Burst, int32(1000)},
		{"clientConnection.contentType", got.ClientConnection.ContentType, "application/vnd.kubernetes.protobuf"},
		{"percentageOfNodesToScore", got.PercentageOfNodesToScore, ptr.To(int32(3))},
		{"enableProfiling", got.EnableProfiling, false},
		{"enableContentionProfiling", got.EnableContentionProfiling, false},
		// Leader election comes from the --leader-elect flag, which
		// kube-scheduler honours beside a file; its defaults otherwise.
		{"leaderElection.leaderElect", got.LeaderElection.LeaderElect, true},
		{"leaderElection.resourceName", got.LeaderElection.ResourceName, "kube-scheduler"},
		{"profiles", len(got.Profiles), 1},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.field, c.got, c.want)
		}
	}
}

// At 0 the file leaves the scheduler's own defaults: client-go's rate and
// the adaptive share of nodes (0 in the internal type).
func TestZeroLeavesUpstreamsDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kube-scheduler.yaml")
	if err := Write(path, Build(Settings{Kubeconfig: "/k"})); err != nil {
		t.Fatal(err)
	}
	got := readBack(t, path)
	want := struct {
		QPS     float32
		Burst   int32
		Percent int32
	}{50, 100, 0}
	if g := (struct {
		QPS     float32
		Burst   int32
		Percent int32
	}{got.ClientConnection.QPS, got.ClientConnection.Burst, ptr.Deref(got.PercentageOfNodesToScore, -1)}); g != want {
		t.Errorf("qps, burst, percentage = %+v, want %+v", g, want)
	}
}

// The deprecated flags kube-scheduler ignores beside a file land in the
// file; the rest stay flags, in their order.
func TestApplyPutsIgnoredFlagsIntoTheFile(t *testing.T) {
	c := Build(Settings{Kubeconfig: "/k", QPS: 500})
	flags, err := Apply(c, []componentargs.Arg{
		{Name: "v", Value: "2"},
		{Name: "kube-api-qps", Value: "1000"},
		{Name: "kube-api-burst", Value: "3000"},
		{Name: "kube-api-content-type", Value: "application/json"},
		{Name: "profiling", Value: "true"},
		{Name: "contention-profiling", Value: "true"},
		{Name: "leader-elect-lease-duration", Value: "30s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantFlags := []componentargs.Arg{{Name: "v", Value: "2"}, {Name: "leader-elect-lease-duration", Value: "30s"}}
	if !reflect.DeepEqual(flags, wantFlags) {
		t.Errorf("flags = %+v, want %+v", flags, wantFlags)
	}
	path := filepath.Join(t.TempDir(), "kube-scheduler.yaml")
	if err := Write(path, c); err != nil {
		t.Fatal(err)
	}
	got := readBack(t, path)
	type fields struct {
		QPS                  float32
		Burst                int32
		ContentType          string
		Profiling, Contended bool
	}
	want := fields{1000, 3000, "application/json", true, true}
	if g := (fields{got.ClientConnection.QPS, got.ClientConnection.Burst, got.ClientConnection.ContentType, got.EnableProfiling, got.EnableContentionProfiling}); g != want {
		t.Errorf("file = %+v, want %+v", g, want)
	}
}

// Every bad value is reported, naming the flag, and nothing is applied.
func TestApplyRefusesBadValuesAndChangesNothing(t *testing.T) {
	c := Build(Settings{Kubeconfig: "/k", QPS: 500})
	before := c.DeepCopy()
	_, err := Apply(c, []componentargs.Arg{
		{Name: "profiling", Value: "true"},
		{Name: "kube-api-qps", Value: "fast"},
		{Name: "kube-api-burst", Value: "-1"},
		{Name: "contention-profiling", Value: "yes"},
	})
	want := `--kube-scheduler-arg "kube-api-qps=fast": want requests a second, a number of at least 0, e.g. kube-api-qps=500
--kube-scheduler-arg "kube-api-burst=-1": want a whole number of requests of at least 0, e.g. kube-api-burst=1000
--kube-scheduler-arg "contention-profiling=yes": want true or false, e.g. contention-profiling=true`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want\n%s", err, want)
	}
	if !reflect.DeepEqual(c, before) {
		t.Errorf("a refused Apply changed the configuration: %+v, was %+v", c, before)
	}
}
