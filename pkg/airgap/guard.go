package airgap

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/distribution/reference"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Refs reads the image names a docker-format archive holds (the RepoTags
// of its manifest.json), the format `make images` writes.
func Refs(archive string) ([]string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("image archive %s has no manifest.json: not a docker-format archive", archive)
		}
		if err != nil {
			return nil, fmt.Errorf("reading image archive %s: %w", archive, err)
		}
		if filepath.Clean(h.Name) != "manifest.json" {
			continue
		}
		var manifest []struct{ RepoTags []string }
		if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
			return nil, fmt.Errorf("image archive %s: manifest.json: %w", archive, err)
		}
		var refs []string
		for _, m := range manifest {
			for _, tag := range m.RepoTags {
				// containerd lists the normalised name
				// (busybox:1 is docker.io/library/busybox:1).
				named, err := reference.ParseDockerRef(tag)
				if err != nil {
					return nil, fmt.Errorf("image archive %s: image name %q: %w", archive, tag, err)
				}
				refs = append(refs, named.String())
			}
		}
		if len(refs) == 0 {
			return nil, fmt.Errorf("image archive %s names no image (manifest.json has no RepoTags)", archive)
		}
		sort.Strings(refs)
		return refs, nil
	}
}

// missing lists the archives (sorted) one of whose images containerd
// does not have.
func missing(refsByArchive map[string][]string, have map[string]bool) []string {
	var out []string
	for archive, refs := range refsByArchive {
		for _, r := range refs {
			if !have[r] {
				out = append(out, archive)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// Guard puts back, every interval until ctx ends, the images of dir that
// containerd lost. The kubelet's image garbage collection deletes unused
// images once the disk passes its high threshold, and containerd 1.6
// cannot pin them; on a node that never pulls, an image it lost is one it
// can no longer run. report is told each re-import and each failure.
func Guard(ctx context.Context, address, dir string, interval time.Duration, report func(string)) {
	paths, err := Archives(dir)
	if err != nil {
		report(err.Error())
		return
	}
	refsByArchive := map[string][]string{}
	var all []string
	for _, p := range paths {
		refs, err := Refs(p)
		if err != nil {
			// An archive ctr imports but whose names this cannot read
			// (an OCI layout, say) is left unguarded; the others are not.
			report(fmt.Sprintf("%v: not guarded against image garbage collection", err))
			continue
		}
		refsByArchive[p] = refs
		all = append(all, refs...)
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		have, err := Listed(ctx, address, all...)
		if err != nil {
			report(err.Error())
			return
		}
		for _, p := range missing(refsByArchive, have) {
			if err := importArchive(ctx, address, p); err != nil {
				report(err.Error())
				continue
			}
			report(fmt.Sprintf("re-imported %s (%s): containerd had lost it, most likely to the kubelet's image garbage collection on a full disk", p, strings.Join(refsByArchive[p], ", ")))
		}
	}, interval)
}
