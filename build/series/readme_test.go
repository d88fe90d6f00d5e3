package series

import (
	"reflect"
	"testing"
)

func TestCheckReadmeTable(t *testing.T) {
	patches := []Patch{{Name: "0001-watch-cache-hashmap-store.patch"}, {Name: "0002-ipv6-only-defaults.patch"}, {Name: "0003-new-one.patch"}}
	readme := []byte("# k1m\n\n" + ReadmeTableHeader + "\n|---|-------|---|\n" +
		"| 1 | watch cache hashmap store | one |\n| 2 | IPv6-only defaults | two |\n\nmore text\n")
	got := CheckReadmeTable(readme, patches)
	want := []string{`README.md's patch table has no row 3 for 0003-new-one.patch: add "| 3 | new one | ... |"`}
	if len(got) != 1 || got[0].Error() != want[0] {
		t.Errorf("a missing row: %v, want %v", got, want)
	}
	if errs := CheckReadmeTable(readme, patches[:2]); len(errs) != 0 {
		t.Errorf("a matching table: %v", errs)
	}
	var msgs []string
	for _, e := range CheckReadmeTable(readme, []Patch{{Name: "0001-watch-cache-btree.patch"}}) {
		msgs = append(msgs, e.Error())
	}
	want = []string{
		`README.md's patch table row 1 is "1 | watch cache hashmap store", want "1 | watch cache btree" (0001-watch-cache-btree.patch)`,
		"README.md's patch table row 2 (IPv6-only defaults) names no patch of patches/series",
	}
	if !reflect.DeepEqual(msgs, want) {
		t.Errorf("a renamed patch and a row too many:\n got %q\nwant %q", msgs, want)
	}
	if errs := CheckReadmeTable([]byte("no table"), patches); len(errs) != 1 {
		t.Errorf("no table: %v", errs)
	}
}
