package tool

import (
	"fmt"
	"io"
	"path/filepath"

	"k1m.dev/k1m/build/apply"
	"k1m.dev/k1m/build/devtree"
)

func (p project) devtree(dir string, cont bool) error {
	patches, err := p.series()
	if err != nil {
		return err
	}
	if cont {
		return devtree.Continue(dir, patches, p.log)
	}
	mods, err := apply.TouchedModules(p.root, patches)
	if err != nil {
		return err
	}
	if err := devtree.Create(dir, mods, patches, p.log); err != nil {
		return err
	}
	fmt.Fprintf(p.log, "k1m-build: %s holds the pristine modules and one commit per patch; edit with git, then k1m-build export --dir %s\n", dir, dir)
	return nil
}

func (p project) export(dir string, stdout io.Writer) error {
	names, err := devtree.Export(dir, filepath.Join(p.root, "patches"))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "k1m-build: wrote %d patches and patches/series from %s; run make verify\n", len(names), dir)
	return nil
}
