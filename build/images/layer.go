package images

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Layer is an uncompressed layer tar on disk and its digest (the diff ID).
type Layer struct {
	Path   string
	DiffID string // hex sha256 of the tar
}

// NewLayer writes a layer tar at path with fill, hashing it as it goes.
func NewLayer(path string, fill func(tw *tar.Writer) error) (Layer, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return Layer{}, err
	}
	f, err := os.Create(path)
	if err != nil {
		return Layer{}, err
	}
	h := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(f, h))
	err = fill(tw)
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return Layer{}, err
	}
	return Layer{Path: path, DiffID: hex.EncodeToString(h.Sum(nil))}, nil
}

// FilesLayer is a layer of files copied from disk (modes kept, setuid
// included; owner root) and symlinks, with their parent directories.
func FilesLayer(files, symlinks map[string]string, path string) (Layer, error) {
	return DirsFilesLayer(nil, files, symlinks, path)
}

// DirsFilesLayer is FilesLayer plus directories with the given modes (such
// as /tmp, 1777), written first.
func DirsFilesLayer(modes map[string]os.FileMode, files, symlinks map[string]string, path string) (Layer, error) {
	return NewLayer(path, func(tw *tar.Writer) error {
		dirs := map[string]bool{}
		for _, name := range sortedKeys(dirNames(modes)) {
			rel := clean(name)
			if err := addParents(tw, rel, dirs); err != nil {
				return err
			}
			hdr := &tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: tarMode(modes[name]), ModTime: epoch}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			dirs[rel] = true
		}
		for _, name := range sortedKeys(files) {
			rel := clean(name)
			if err := addParents(tw, rel, dirs); err != nil {
				return err
			}
			if err := addDiskFile(tw, rel, files[name], tarMode); err != nil {
				return err
			}
		}
		for _, name := range sortedKeys(symlinks) {
			rel := clean(name)
			if err := addParents(tw, rel, dirs); err != nil {
				return err
			}
			hdr := &tar.Header{Typeflag: tar.TypeSymlink, Name: rel, Linkname: symlinks[name], Mode: 0o777, ModTime: epoch}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		}
		return nil
	})
}

func dirNames(modes map[string]os.FileMode) map[string]string {
	names := map[string]string{}
	for name := range modes {
		names[name] = ""
	}
	return names
}

func addParents(tw *tar.Writer, rel string, dirs map[string]bool) error {
	var parents []string
	for d := filepath.Dir(rel); d != "." && d != "/" && !dirs[d]; d = filepath.Dir(d) {
		parents = append(parents, d)
		dirs[d] = true
	}
	for i := len(parents) - 1; i >= 0; i-- {
		hdr := &tar.Header{Typeflag: tar.TypeDir, Name: parents[i] + "/", Mode: 0o755, ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
	}
	return nil
}

// addDiskFile copies the regular file src into the tar as name, with the
// mode mode derives from the file's.
func addDiskFile(tw *tar.Writer, name, src string, mode func(fs.FileMode) int64) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: info.Size(), Mode: mode(info.Mode()), ModTime: epoch}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// tarMode keeps the permission, setuid, setgid and sticky bits.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// emptied are the directories of a root file system whose contents belong
// to the running container, not the image (device nodes, kernel views).
var emptied = map[string]bool{"dev": true, "proc": true, "sys": true, "run": true, "tmp": true}

// DirLayer is a layer holding the tree under root (a root file system such
// as debootstrap makes): owners, modes and hard links kept; device nodes,
// sockets and the contents of /dev, /proc, /sys, /run and /tmp left out.
func DirLayer(root, path string) (Layer, error) {
	return NewLayer(path, func(tw *tar.Writer) error {
		links := map[uint64]string{} // inode -> first name, for hard links
		return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil || rel == "." {
				return err
			}
			if top := strings.SplitN(rel, string(filepath.Separator), 2); len(top) == 2 && emptied[top[0]] {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			return addTreeEntry(tw, p, rel, links)
		})
	})
}

func addTreeEntry(tw *tar.Writer, p, rel string, links map[uint64]string) error {
	info, err := os.Lstat(p)
	if err != nil {
		return err
	}
	mode := info.Mode()
	if mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeSocket|fs.ModeNamedPipe) != 0 {
		return nil
	}
	var target string
	if mode&fs.ModeSymlink != 0 {
		if target, err = os.Readlink(p); err != nil {
			return err
		}
	}
	hdr, err := tar.FileInfoHeader(info, target)
	if err != nil {
		return err
	}
	hdr.Name = filepath.ToSlash(rel)
	if info.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uname, hdr.Gname = "", ""
	hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}
	hdr.Format = tar.FormatPAX
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
		if mode.IsRegular() && st.Nlink > 1 {
			if first, seen := links[st.Ino]; seen {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
				return tw.WriteHeader(hdr)
			}
			links[st.Ino] = hdr.Name
		}
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if !mode.IsRegular() {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}
