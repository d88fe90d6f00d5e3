// Package fsutil writes files so that a crash never leaves a half-written
// one (certificates, keys, the join token, kubeconfigs and node configs),
// and copies trees out of the read-only module cache.
package fsutil

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// WriteFile writes atomically: a synced temporary file in the same
// directory renamed into place. Missing parent directories are created
// (0700: they may hold secrets).
func WriteFile(path string, data []byte, mode os.FileMode) error {
	return WriteFileFrom(path, mode, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFileFrom is WriteFile for content too big to hold in memory (image
// archives): write streams it into the temporary file.
func WriteFileFrom(path string, mode os.FileMode, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// CopyTree copies the directories and regular files under src into dst
// (other entries are skipped), each file with the mode modeOf gives its
// path relative to src. Copies of the read-only module cache come out
// writable this way.
func CopyTree(src, dst string, modeOf func(rel string) os.FileMode) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		mode := modeOf(rel)
		if err := os.WriteFile(target, data, mode); err != nil {
			return err
		}
		return os.Chmod(target, mode) // WriteFile's mode passes the umask
	})
}

// RemoveIfPresent removes path and tells whether it was there: a file
// already gone is no error (a credential deleted at an earlier start).
func RemoveIfPresent(path string) (bool, error) {
	err := os.Remove(path)
	switch {
	case os.IsNotExist(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// RemoveIfExists removes path; a file already gone is no error.
func RemoveIfExists(path string) error {
	_, err := RemoveIfPresent(path)
	return err
}

// Exists tells whether path can be stat'ed (a file of any kind is there).
func Exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Within tells whether path is dir or lies inside it. Both are absolute,
// or both relative to the same directory.
func Within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
