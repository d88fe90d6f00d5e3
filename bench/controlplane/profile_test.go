package controlplane

import (
	"testing"

	"github.com/google/pprof/profile"
)

func TestInUseBytesSumsInUseSpace(t *testing.T) {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "alloc_objects"}, {Type: "alloc_space"}, {Type: "inuse_objects"}, {Type: "inuse_space"}},
		Sample: []*profile.Sample{
			{Value: []int64{10, 1000, 2, 200}},
			{Value: []int64{5, 5000, 5, 5000}},
		},
	}
	if got, err := InUseBytes(p); err != nil || got != 5200 {
		t.Errorf("InUseBytes = %d, %v; want 5200", got, err)
	}
	cpu := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples"}, {Type: "cpu"}}}
	if got, err := InUseBytes(cpu); err == nil {
		t.Errorf("InUseBytes of a CPU profile = %d, want an error", got)
	}
}
