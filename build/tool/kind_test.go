package tool

import (
	"reflect"
	"testing"
)

func TestStaleTagsKeepTheCurrentAndLatest(t *testing.T) {
	tags := []string{"v1.32.5_k1m.884c8fa02914", "latest", "<none>", "v1.32.5_k1m.f169c2481578", "v1.32.5_k1m.a3dcc4c7d093.dirty"}
	got := staleTags(tags, "v1.32.5_k1m.f169c2481578", "latest")
	want := []string{"v1.32.5_k1m.884c8fa02914", "v1.32.5_k1m.a3dcc4c7d093.dirty"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("staleTags = %v, want %v", got, want)
	}
}
