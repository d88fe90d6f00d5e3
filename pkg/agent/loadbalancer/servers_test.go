package loadbalancer

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// Addresses no test dials: nothing connects through these balancers.
const (
	s1 = "[fddf:4035:b520::1:1]:6443"
	s2 = "[fddf:4035:b520::1:2]:6443"
	s3 = "[fddf:4035:b520::1:3]:6443"
	s4 = "[fddf:4035:b520::1:4]:6443"
)

// step is one change and the list (and saved file) it must leave.
type step struct {
	what  string
	do    func(*LoadBalancer)
	want  []string
	saved string
}

func runSteps(t *testing.T, lb *LoadBalancer, stateFile string, steps []step) {
	t.Helper()
	for _, s := range steps {
		s.do(lb)
		if got := lb.Servers(); !reflect.DeepEqual(got, s.want) {
			t.Errorf("%s: list %q, want %q", s.what, got, s.want)
		}
		if data, _ := os.ReadFile(stateFile); string(data) != s.saved {
			t.Errorf("%s: saved %q, want %q", s.what, data, s.saved)
		}
	}
}

func update(addrs ...string) func(*LoadBalancer) { return func(lb *LoadBalancer) { lb.Update(addrs) } }
func removed(addrs ...string) func(*LoadBalancer) {
	return func(lb *LoadBalancer) { lb.SetRemoved(addrs) }
}

// The list keeps every server seen and forgets only removed ones; it is
// saved at each change.
func TestListKeepsEveryServerSeenAndForgetsOnlyRemovedOnes(t *testing.T) {
	stateFile := filepath.Join(t.TempDir(), "apiservers.json")
	lb, _ := start(t, Config{Server: "https://" + s1, NodeName: "node-1", StateFile: stateFile})
	runSteps(t, lb, stateFile, []step{
		{"at start", func(*LoadBalancer) {}, []string{s1}, ""},
		// --server alone is replaced by the first endpoints: it may be a
		// name in front of the servers.
		{"first endpoints", update(s2, s3), []string{s2, s3}, `{"servers":["` + s2 + `","` + s3 + `"]}` + "\n"},
		{"a server missing from the endpoints", update(s2), []string{s2, s3}, `{"servers":["` + s2 + `","` + s3 + `"]}` + "\n"},
		{"the endpoints empty", update(), []string{s2, s3}, `{"servers":["` + s2 + `","` + s3 + `"]}` + "\n"},
		{"a server joins", update(s4), []string{s2, s3, s4}, `{"servers":["` + s2 + `","` + s3 + `","` + s4 + `"]}` + "\n"},
		{"s3 removed", removed(s3), []string{s2, s4}, `{"servers":["` + s2 + `","` + s4 + `"]}` + "\n"},
		{"the endpoints still name s3", update(s3, s4), []string{s2, s4}, `{"servers":["` + s2 + `","` + s4 + `"]}` + "\n"},
		// s3 joined again (its address left the removed list): the
		// endpoints last seen name it, so it is back at once.
		{"s3 no longer removed", removed(), []string{s2, s3, s4}, `{"servers":["` + s2 + `","` + s3 + `","` + s4 + `"]}` + "\n"},
		{"every server removed", removed(s2, s3, s4), []string{}, `{"servers":[]}` + "\n"},
	})
	// With every listed server removed, --server is what is left to try.
	lb.mu.Lock()
	order := slices.Clone(lb.order)
	lb.mu.Unlock()
	if want := []string{s1}; !reflect.DeepEqual(order, want) {
		t.Errorf("order %q, want %q", order, want)
	}
}

// A list saved by an earlier start (the same file format as before
// agents kept every server) is the list to grow, not --server alone.
func TestSavedListGrowsAndSurvivesARestart(t *testing.T) {
	stateFile := filepath.Join(t.TempDir(), "apiservers.json")
	if err := os.WriteFile(stateFile, []byte(`{"servers":["`+s1+`","`+s2+`"]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lb, _ := start(t, Config{Server: "https://" + s4, NodeName: "node-1", StateFile: stateFile})
	runSteps(t, lb, stateFile, []step{
		{"at start", func(*LoadBalancer) {}, []string{s1, s2}, `{"servers":["` + s1 + `","` + s2 + `"]}` + "\n"},
		{"endpoints of one other server", update(s3), []string{s1, s2, s3}, `{"servers":["` + s1 + `","` + s2 + `","` + s3 + `"]}` + "\n"},
	})
	lb.Close()
	again, _ := start(t, Config{Server: "https://" + s4, NodeName: "node-1", StateFile: stateFile})
	if got, want := again.Servers(), []string{s1, s2, s3}; !reflect.DeepEqual(got, want) {
		t.Errorf("after a restart: %q, want %q", got, want)
	}
}
