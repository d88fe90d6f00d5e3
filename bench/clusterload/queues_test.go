package clusterload

import (
	"reflect"
	"testing"
	"time"

	"k1m.dev/k1m/bench/apimetrics"
)

func parse(t *testing.T, text string) apimetrics.Snapshot {
	t.Helper()
	s, err := apimetrics.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const queuesBefore = `# TYPE workqueue_adds_total counter
workqueue_adds_total{name="deployment"} 10
workqueue_adds_total{name="node"} 100
# TYPE workqueue_queue_duration_seconds histogram
workqueue_queue_duration_seconds_bucket{name="deployment",le="0.001"} 10
workqueue_queue_duration_seconds_bucket{name="deployment",le="1"} 10
workqueue_queue_duration_seconds_bucket{name="deployment",le="+Inf"} 10
workqueue_queue_duration_seconds_sum{name="deployment"} 0
workqueue_queue_duration_seconds_count{name="deployment"} 10
`

// 100 deployment keys in 10 s, all waiting under a millisecond; 5 node
// keys (under one a second: left out).
const queuesAfter = `# TYPE workqueue_adds_total counter
workqueue_adds_total{name="deployment"} 110
workqueue_adds_total{name="node"} 105
# TYPE workqueue_queue_duration_seconds histogram
workqueue_queue_duration_seconds_bucket{name="deployment",le="0.001"} 110
workqueue_queue_duration_seconds_bucket{name="deployment",le="1"} 110
workqueue_queue_duration_seconds_bucket{name="deployment",le="+Inf"} 110
workqueue_queue_duration_seconds_sum{name="deployment"} 0
workqueue_queue_duration_seconds_count{name="deployment"} 110
`

func TestQueuesAreTheBusyOnesOverTheWindow(t *testing.T) {
	got := queues(parse(t, queuesBefore), parse(t, queuesAfter), 10*time.Second)
	want := []Queue{{Name: "deployment", AddsPerSecond: 10, Wait: 990 * time.Microsecond}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("queues = %+v, want %+v", got, want)
	}
}

const levelsBefore = `# TYPE apiserver_flowcontrol_dispatched_requests_total counter
apiserver_flowcontrol_dispatched_requests_total{flow_schema="system-nodes",priority_level="system"} 50
apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 7
`

// 200 requests of level system in 10 s, all with no wait (le 0.005: the
// p99 is interpolated in the first bucket); 3 of workload-low refused.
const levelsAfter = `# TYPE apiserver_flowcontrol_dispatched_requests_total counter
apiserver_flowcontrol_dispatched_requests_total{flow_schema="system-nodes",priority_level="system"} 150
apiserver_flowcontrol_dispatched_requests_total{flow_schema="kube-system-service-accounts",priority_level="system"} 100
apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 7
# TYPE apiserver_flowcontrol_rejected_requests_total counter
apiserver_flowcontrol_rejected_requests_total{flow_schema="service-accounts",priority_level="workload-low",reason="queue-full"} 3
# TYPE apiserver_flowcontrol_request_wait_duration_seconds histogram
apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute="true",flow_schema="system-nodes",priority_level="system",le="0.005"} 200
apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute="true",flow_schema="system-nodes",priority_level="system",le="+Inf"} 200
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="system-nodes",priority_level="system"} 0
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="system-nodes",priority_level="system"} 200
`

func TestPriorityLevelsCountDispatchesAndRefusals(t *testing.T) {
	got := priorityLevels(parse(t, levelsBefore), parse(t, levelsAfter), 10*time.Second)
	want := []PriorityLevel{
		{Name: "system", DispatchedPerSecond: 20, Wait: 4950 * time.Microsecond},
		{Name: "workload-low", Rejected: 3},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("priorityLevels = %+v, want %+v", got, want)
	}
}

func TestQueueCSVIsARowPerQueueAndLevel(t *testing.T) {
	r := Result{Steps: []Step{{Flavour: "k1m", Round: 1, Nodes: 500,
		Queues:         []Queue{{Name: "deployment", AddsPerSecond: 19, Wait: 539 * time.Millisecond, Work: 813 * time.Millisecond}},
		PriorityLevels: []PriorityLevel{{Name: "global-default", DispatchedPerSecond: 291, Wait: 5 * time.Millisecond}}}}}
	want := [][]string{
		{"flavour", "round", "nodes", "what", "name", "per_s", "wait_p99_ms", "sync_p99_ms", "rejected"},
		{"k1m", "1", "500", "queue", "deployment", "19", "539", "813", ""},
		{"k1m", "1", "500", "priority_level", "global-default", "291", "5", "", "0"},
	}
	if got := r.QueueCSV(); !reflect.DeepEqual(got, want) {
		t.Errorf("QueueCSV() =\n%q\nwant\n%q", got, want)
	}
}
