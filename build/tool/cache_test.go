package tool

import (
	"path/filepath"
	"testing"
)

func TestCacheDir(t *testing.T) {
	for _, c := range []struct {
		cacheDir, xdg, home string
		want                string
		wantErr             bool
	}{
		{cacheDir: "/var/cache/k1m", xdg: "/x", home: "/h", want: "/var/cache/k1m"},
		{cacheDir: "relative/k1m", wantErr: true},
		{xdg: "/x", home: "/h", want: "/x/k1m"},
		{home: "/h", want: filepath.Join("/h", ".cache", "k1m")},
	} {
		t.Setenv("K1M_CACHE_DIR", c.cacheDir)
		t.Setenv("XDG_CACHE_HOME", c.xdg)
		t.Setenv("HOME", c.home)
		got, err := CacheDir()
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("K1M_CACHE_DIR=%q XDG_CACHE_HOME=%q HOME=%q: CacheDir() = %q, %v; want %q (error: %v)", c.cacheDir, c.xdg, c.home, got, err, c.want, c.wantErr)
		}
	}
}
