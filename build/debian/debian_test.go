package debian

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const status = `Package: iptables
Status: install ok installed
Depends: libip4tc2 (= 1.8.9-2), libxtables12 (>= 1.8.9), netbase | netbase-alt, libc6:any (>= 2.34)

Package: libip4tc2
Status: install ok installed
Pre-Depends: libc6 (>= 2.14)

Package: libxtables12
Status: install ok installed
Depends: libc6

Package: libc6
Status: install ok installed
Depends: libgcc-s1

Package: libgcc-s1
Status: install ok installed
Depends: gcc-12-base

Package: gcc-12-base
Status: install ok installed

Package: netbase
Status: install ok installed

Package: nftables
Status: deinstall ok config-files
Depends: libnftables1

Package: conntrack
Status: install ok installed
Depends: libnetfilter-conntrack3

Package: libnfct
Status: install ok installed
Provides: libnetfilter-conntrack3

`

func fakeRoot(t *testing.T) string {
	root := t.TempDir()
	write := func(path, data string) {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("var/lib/dpkg/status", status)
	write("var/lib/dpkg/info/iptables.list", "/.\n/usr\n/usr/sbin\n/usr/sbin/xtables-nft-multi\n/usr/sbin/iptables-nft\n/usr/share/gone\n")
	write("var/lib/dpkg/info/libc6:amd64.list", "/.\n/lib/x86_64-linux-gnu/libc.so.6\n")
	if err := os.Symlink("usr/lib", filepath.Join(root, "lib")); err != nil { // merged /usr
		t.Fatal(err)
	}
	write("usr/sbin/xtables-nft-multi", "ELF")
	write("usr/lib/x86_64-linux-gnu/libc.so.6", "ELF")
	if err := os.Symlink("xtables-nft-multi", filepath.Join(root, "usr/sbin/iptables-nft")); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestClosureFollowsDependsAndProvides(t *testing.T) {
	root := fakeRoot(t)
	got, err := Closure(root, []string{"iptables", "conntrack"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"conntrack", "gcc-12-base", "iptables", "libc6", "libgcc-s1", "libip4tc2", "libnfct", "libxtables12", "netbase"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("closure %v, want %v", got, want)
	}
	if _, err := Closure(root, []string{"nftables"}); err == nil {
		t.Error("a package that is not installed (config-files only) was accepted")
	}
}

func TestFilesReadsDpkgLists(t *testing.T) {
	root := fakeRoot(t)
	files, links, err := Files(root, []string{"iptables", "libc6"})
	if err != nil {
		t.Fatal(err)
	}
	wantFiles := map[string]string{
		"/usr/sbin/xtables-nft-multi":         filepath.Join(root, "usr/sbin/xtables-nft-multi"),
		"/usr/lib/x86_64-linux-gnu/libc.so.6": filepath.Join(root, "usr/lib/x86_64-linux-gnu/libc.so.6"),
	}
	if !reflect.DeepEqual(files, wantFiles) {
		t.Errorf("files %v, want %v", files, wantFiles)
	}
	if !reflect.DeepEqual(links, map[string]string{"/usr/sbin/iptables-nft": "xtables-nft-multi"}) {
		t.Errorf("symlinks %v", links)
	}
	if _, _, err := Files(root, []string{"netbase"}); err == nil {
		t.Error("a package without a dpkg list was accepted")
	}
}

func TestKeyChangesWithThePackages(t *testing.T) {
	if Key([]string{"a", "b"}) == Key([]string{"a", "c"}) {
		t.Error("different package lists share a key")
	}
}
