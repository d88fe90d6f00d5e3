package main

import "testing"

func TestHasNonIdentifierName(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want bool
	}{
		{[]string{"PATH=/bin", "HOME=/", "_x1=2", "KUBERNETES_SERVICE_HOST=fd00::1"}, false},
		{[]string{"PATH=/bin", "data-1=value-1"}, true},
		{[]string{"p-data-1=value-1"}, true},
		{[]string{"1ABC=x"}, true},
		{[]string{"a.b=x"}, true},
		{[]string{"=x"}, true},
		{nil, false},
	} {
		if got := hasNonIdentifierName(c.env); got != c.want {
			t.Errorf("hasNonIdentifierName(%q) = %v, want %v", c.env, got, c.want)
		}
	}
}
