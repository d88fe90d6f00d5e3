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

// writeResults turns go-runner's tarballs (e2e.log, junit_01.xml, ...), one
// per phase, into Sonobuoy's layout: plugins/e2e/results/global/*,
// plugins/e2e/sonobuoy_results.yaml, meta/, serverversion.json,
// resources/cluster/. It writes the tarball and summary.txt into Out.
func (r Runner) writeResults(ctx context.Context, raws []string, phases []Phase, start time.Time) (Outcome, error) {
	files, err := mergePhases(raws, phases)
	if err != nil {
		return Outcome{}, err
	}
	junit := files["junit_01.xml"]
	res, err := ParseJUnit(bytes.NewReader(junit), "results/global/junit_01.xml")
	if err != nil {
		return Outcome{}, err
	}
	entries := map[string][]byte{}
	for name, data := range files {
		entries[path.Join(resultsDir, name)] = data
	}
	if entries[resultsYAML], err = yaml.Marshal(res.Tree); err != nil {
		return Outcome{}, err
	}
	if err := r.addClusterInfo(ctx, entries, phases, start); err != nil {
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
	for _, raw := range raws {
		if err := os.Remove(raw); err != nil {
			return out, err
		}
	}
	return out, nil
}

// mergePhases reads each phase's go-runner tarball and makes one set of
// result files: the junit reports merged (mergeJUnit), the e2e logs one
// after the other under a line naming the phase, any other file kept under
// its own name or, from a later phase, prefixed with the phase's name.
func mergePhases(raws []string, phases []Phase) (map[string][]byte, error) {
	merged := map[string][]byte{}
	var reports [][]byte
	var log bytes.Buffer
	for i, raw := range raws {
		files, err := readTarGz(raw)
		if err != nil {
			return nil, fmt.Errorf("reading go-runner's results %s: %w", raw, err)
		}
		junit, ok := files["junit_01.xml"]
		if !ok {
			return nil, fmt.Errorf("go-runner's results hold no junit_01.xml (files: %v): see e2e.log in %s", keys(files), raw)
		}
		reports = append(reports, junit)
		if len(raws) > 1 {
			m := phases[i].Mode
			fmt.Fprintf(&log, "k1m-conformance: phase %d of %d, %s: focus %q, skip %q, label filter %q\n", i+1, len(raws), phases[i].Name, m.Focus, m.Skip, m.LabelFilter)
		}
		log.Write(files["e2e.log"])
		for name, data := range files {
			if name == "junit_01.xml" || name == "e2e.log" || name == "e2e.tar.gz" || name == "done" {
				continue // merged above, or go-runner's own hand-off files
			}
			if _, taken := merged[name]; taken {
				name = phases[i].Name + "-" + name
			}
			merged[name] = data
		}
	}
	junit, err := mergeJUnit(reports)
	if err != nil {
		return nil, err
	}
	merged["junit_01.xml"], merged["e2e.log"] = junit, log.Bytes()
	return merged, nil
}

// addClusterInfo adds what Sonobuoy records of the cluster and the run.
func (r Runner) addClusterInfo(ctx context.Context, entries map[string][]byte, phases []Phase, start time.Time) error {
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
		"Phases":   phaseConfig(phases),
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

// phaseConfig is what meta/config.json records of each ginkgo run.
func phaseConfig(phases []Phase) []map[string]any {
	out := make([]map[string]any, len(phases))
	for i, ph := range phases {
		out[i] = map[string]any{"Name": ph.Name, "E2EFocus": ph.Mode.Focus, "E2ESkip": ph.Mode.Skip, "Parallel": ph.Mode.Parallel, "Procs": ph.Mode.Procs, "LabelFilter": ph.Mode.LabelFilter}
	}
	return out
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
