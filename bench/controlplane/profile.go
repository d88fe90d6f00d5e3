package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/pprof/profile"
	"k8s.io/client-go/rest"

	"k1m.dev/k1m/bench/cpuprofile"
)

// CPUProfilePath is where CPUProfile writes the CPU profile of one process.
func CPUProfilePath(dir, process string) string {
	return filepath.Join(dir, process+".cpu.pprof")
}

// CPUProfile captures CPU profiles of kube-apiserver (its --profiling is on:
// upstream's default, which the benchmark keeps) and of every etcd member
// (started with --pprof) over window, at the same time, into dir. It
// returns the processes profiled.
func (cp *ControlPlane) CPUProfile(ctx context.Context, window time.Duration, dir string) ([]string, error) {
	apiClient, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		return nil, err
	}
	etcdClient, err := cp.EtcdTLS.httpClient()
	if err != nil {
		return nil, err
	}
	targets := map[string]func() error{
		"kube-apiserver": func() error {
			return cpuprofile.Capture(ctx, apiClient, cp.Config.Host+"/debug/pprof/profile", window, CPUProfilePath(dir, "kube-apiserver"))
		},
	}
	for name, port := range cp.etcdPorts() {
		targets[name] = func() error {
			return cpuprofile.Capture(ctx, etcdClient, EtcdURL(port)+"/debug/pprof/profile", window, CPUProfilePath(dir, name))
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 0, len(targets))
	var mu sync.Mutex
	var names []string
	for name, capture := range targets {
		names = append(names, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := capture(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return names, errors.Join(errs...)
}

// etcdPorts are the client ports of the running etcd members, by the
// name their profiles are written under.
func (cp *ControlPlane) etcdPorts() map[string]int {
	ports := map[string]int{"etcd": DurableEtcdPort}
	if cp.NoFsync != nil {
		ports["etcd-nofsync"] = NoFsyncEtcdPort
	}
	return ports
}

// httpClient is an HTTPS client of the benchmark's etcd members.
func (t EtcdTLS) httpClient() (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, fmt.Errorf("etcd client certificate: %w", err)
	}
	caPEM, err := os.ReadFile(t.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s: no certificate", t.CA)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return &http.Client{Transport: tr}, nil
}

// LiveHeap is the live heap of kube-apiserver and of the etcd members
// together, in bytes: each one's heap profile taken right after a forced
// GC (/debug/pprof/heap?gc=1), its in-use bytes summed. Unlike RSS, it
// leaves out the headroom GOGC lets the heap grow into.
func (cp *ControlPlane) LiveHeap(ctx context.Context) (apiserver, etcd int64, err error) {
	apiClient, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		return 0, 0, err
	}
	if apiserver, err = fetchInUse(ctx, apiClient, cp.Config.Host+"/debug/pprof/heap?gc=1"); err != nil {
		return 0, 0, err
	}
	etcdClient, err := cp.EtcdTLS.httpClient()
	if err != nil {
		return 0, 0, err
	}
	for _, port := range cp.etcdPorts() {
		n, err := fetchInUse(ctx, etcdClient, EtcdURL(port)+"/debug/pprof/heap?gc=1")
		if err != nil {
			return 0, 0, err
		}
		etcd += n
	}
	return apiserver, etcd, nil
}

func fetchInUse(ctx context.Context, client *http.Client, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("heap profile from %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("heap profile from %s: %s", url, resp.Status)
	}
	p, err := profile.Parse(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("heap profile from %s: %w", url, err)
	}
	n, err := InUseBytes(p)
	if err != nil {
		return 0, fmt.Errorf("heap profile from %s: %w", url, err)
	}
	return n, nil
}

// InUseBytes sums a heap profile's inuse_space samples (the runtime
// writes them scaled up from its sampling already).
func InUseBytes(p *profile.Profile) (int64, error) {
	index := -1
	for i, st := range p.SampleType {
		if st.Type == "inuse_space" {
			index = i
		}
	}
	if index < 0 {
		return 0, errors.New("no inuse_space samples: not a heap profile")
	}
	var sum int64
	for _, s := range p.Sample {
		sum += s.Value[index]
	}
	return sum, nil
}
