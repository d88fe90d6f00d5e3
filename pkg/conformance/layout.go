package conformance

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Paths inside Sonobuoy's results tarball.
const (
	pluginDir   = "plugins/e2e"
	resultsDir  = pluginDir + "/results/global"
	resultsYAML = pluginDir + "/sonobuoy_results.yaml"
)

// writeResults turns go-runner's tarball (e2e.log, junit_01.xml, ...) into
// Sonobuoy's layout: plugins/e2e/results/global/*, plugins/e2e/
// sonobuoy_results.yaml, meta/, serverversion.json, resources/cluster/.
// It writes the tarball and summary.txt into Out.
func (r Runner) writeResults(ctx context.Context, raw string, start time.Time) (Outcome, error) {
	files, err := readTarGz(raw)
	if err != nil {
		return Outcome{}, fmt.Errorf("reading go-runner's results %s: %w", raw, err)
	}
	junit, ok := files["junit_01.xml"]
	if !ok {
		return Outcome{}, fmt.Errorf("go-runner's results hold no junit_01.xml (files: %v): see e2e.log in %s", keys(files), raw)
	}
	res, err := ParseJUnit(bytes.NewReader(junit), "results/global/junit_01.xml")
	if err != nil {
		return Outcome{}, err
	}
	entries := map[string][]byte{}
	for name, data := range files {
		if name != "e2e.tar.gz" && name != "done" {
			entries[path.Join(resultsDir, name)] = data
		}
	}
	if entries[resultsYAML], err = yaml.Marshal(res.Tree); err != nil {
		return Outcome{}, err
	}
	if err := r.addClusterInfo(ctx, entries, start); err != nil {
		return Outcome{}, err
	}
	name := fmt.Sprintf("%s_sonobuoy_k1m-%s.tar.gz", start.UTC().Format("200601021504"), r.Spec.Mode.Name)
	out := Outcome{Tarball: filepath.Join(r.Out, name), Results: res}
	if err := writeTarGz(out.Tarball, entries); err != nil {
		return out, err
	}
	if err := os.WriteFile(filepath.Join(r.Out, "summary.txt"), []byte(res.Summary()), 0o644); err != nil {
		return out, err
	}
	return out, os.Remove(raw)
}

// addClusterInfo adds what Sonobuoy records of the cluster and the run.
func (r Runner) addClusterInfo(ctx context.Context, entries map[string][]byte, start time.Time) error {
	version, err := r.Client.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("reading the server version: %w", err)
	}
	nodes, err := r.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	config := map[string]any{
		"Plugins":  []map[string]string{{"name": "e2e"}},
		"Mode":     r.Spec.Mode.Name,
		"E2EFocus": r.Spec.Mode.Focus,
		"E2ESkip":  r.Spec.Mode.Skip,
		"Parallel": r.Spec.Mode.Parallel,
		"Image":    r.Spec.Image,
		"RepoList": r.Spec.RepoList,
	}
	info := map[string]any{"start": start.UTC().Format(time.RFC3339), "end": time.Now().UTC().Format(time.RFC3339), "runner": "k1m-conformance"}
	for name, v := range map[string]any{"serverversion.json": version, "resources/cluster/Nodes.json": nodes, "meta/config.json": config, "meta/info.json": info} {
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		entries[name] = data
	}
	return nil
}

func readTarGz(p string) (map[string][]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[path.Clean(hdr.Name)] = data
	}
}

func writeTarGz(p string, entries map[string][]byte) error {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range keys(entries) {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(entries[name])), Mode: 0o644, ModTime: time.Now()}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(entries[name]); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return os.WriteFile(p, buf.Bytes(), 0o644)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
