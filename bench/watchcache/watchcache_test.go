package watchcache

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	out := `goos: linux
BenchmarkK1mWatchCacheStore/store=hashmap/objects=10000/op=Update-2         	  500000	      2197 ns/op	     640 B/op	       5 allocs/op
BenchmarkK1mWatchCacheStore/store=btree/objects=100000/op=List-2             	     400	   1597844 ns/op	 1605632 B/op	       1 allocs/op
BenchmarkK1mWatchCacheStore/store=btree/objects=100000/op=Get                	   20000	       465.9 ns/op
PASS
`
	got, err := Parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{"hashmap", 10000, "Update", 500000, 2197, 640, 5},
		{"btree", 100000, "List", 400, 1597844, 1605632, 1},
		{"btree", 100000, "Get", 20000, 465.9, 0, 0},
	}
	if len(got) != len(want) {
		t.Fatalf("Parse returned %d results, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("result %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
