package kwoknodes

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestJudge(t *testing.T) {
	cases := []struct {
		name       string
		step       Step
		held       bool
		reasonPart string
	}{
		{"held", Step{Nodes: 1000, MutatingP99: 0.05, LeaseWriteRate: 99}, true, ""},
		{"slow", Step{Nodes: 1000, MutatingP99: 1.2, LeaseWriteRate: 100}, false, "p99"},
		{"not ready", Step{Nodes: 1000, MutatingP99: 0.05, LeaseWriteRate: 100, NotReady: 3}, false, "3 nodes NotReady"},
		// 20,000 nodes at 10 s need 2,000 writes/s; 474/s means kwok fell behind.
		{"renewals missing", Step{Nodes: 20000, MutatingP99: 0.02, LeaseWriteRate: 474}, false, "474 of 2000"},
		{"nothing measured", Step{Nodes: 1000, MutatingP99: math.NaN(), LeaseWriteRate: 100}, false, "no mutating"},
	}
	for _, tc := range cases {
		step := tc.step
		judge(&step, time.Second, 10*time.Second)
		if step.Held != tc.held || !strings.Contains(step.Reason, tc.reasonPart) {
			t.Errorf("%s: held %v reason %q; want held %v, reason containing %q", tc.name, step.Held, step.Reason, tc.held, tc.reasonPart)
		}
	}
}

func TestNewNodeIsKwoksAndUnschedulable(t *testing.T) {
	n := NewNode("kwok-node-0000001")
	if n.Annotations[Annotation] != "fake" || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Effect != "NoSchedule" {
		t.Errorf("node %+v: want kwok's annotation and a NoSchedule taint", n.ObjectMeta)
	}
}
