package tool

import (
	"fmt"
	"os"
	"path/filepath"
)

// CacheDir is where k1m-build keeps, across clones of the tree, what it
// makes from pinned inputs and names by them (the Debian trees the test
// images are made of): K1M_CACHE_DIR, else k1m under the user's cache
// directory (XDG_CACHE_HOME, else ~/.cache). Go's module and build caches
// keep the rest; hack/earlier-release.sh keeps the earlier release here.
func CacheDir() (string, error) {
	if dir := os.Getenv("K1M_CACHE_DIR"); dir != "" {
		if !filepath.IsAbs(dir) {
			return "", fmt.Errorf("K1M_CACHE_DIR=%s: want an absolute path", dir)
		}
		return dir, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for k1m-build (%v): set K1M_CACHE_DIR", err)
	}
	return filepath.Join(dir, "k1m"), nil
}
