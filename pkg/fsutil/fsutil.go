// Package fsutil writes files so that a crash never leaves a half-written
// one: certificates, keys, the join token, kubeconfigs and node configs.
package fsutil

import (
	"io"
	"os"
	"path/filepath"
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
