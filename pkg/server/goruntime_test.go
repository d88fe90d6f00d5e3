package server

import (
	"slices"
	"testing"
)

func TestWithGoDebug(t *testing.T) {
	for _, c := range []struct {
		name      string
		environ   []string
		want      []string
		wantAdded bool
	}{
		{"no GODEBUG", []string{"PATH=/bin"}, []string{"PATH=/bin", "GODEBUG=adaptivestackstart=1"}, true},
		{"empty GODEBUG", []string{"GODEBUG=", "PATH=/bin"}, []string{"GODEBUG=adaptivestackstart=1", "PATH=/bin"}, true},
		{"other settings kept", []string{"GODEBUG=gctrace=1,madvdontneed=1"}, []string{"GODEBUG=gctrace=1,madvdontneed=1,adaptivestackstart=1"}, true},
		{"the operator's value stays", []string{"GODEBUG=adaptivestackstart=0"}, []string{"GODEBUG=adaptivestackstart=0"}, false},
		{"a longer name is another setting", []string{"GODEBUG=xadaptivestackstart=0"}, []string{"GODEBUG=xadaptivestackstart=0,adaptivestackstart=1"}, true},
	} {
		got, added := withGoDebug(c.environ, stackStartSetting)
		if !slices.Equal(got, c.want) || added != c.wantAdded {
			t.Errorf("%s: %q %v, want %q %v", c.name, got, added, c.want, c.wantAdded)
		}
	}
}
