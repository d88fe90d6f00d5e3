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

	"k8s.io/client-go/rest"

	"k1m.dev/k1m/pkg/bench/cpuprofile"
)

// ProfilePath is where Profile writes the CPU profile of one process.
func ProfilePath(dir, process string) string {
	return filepath.Join(dir, process+".cpu.pprof")
}

// Profile captures CPU profiles of kube-apiserver (its --profiling is on:
// upstream's default, which the benchmark keeps) and of every etcd member
// (started with --pprof) over window, at the same time, into dir. It
// returns the processes profiled.
func (cp *ControlPlane) Profile(ctx context.Context, window time.Duration, dir string) ([]string, error) {
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
			return cpuprofile.Capture(ctx, apiClient, cp.Config.Host+"/debug/pprof/profile", window, ProfilePath(dir, "kube-apiserver"))
		},
		"etcd": func() error {
			return cpuprofile.Capture(ctx, etcdClient, EtcdURL(DurableEtcdPort)+"/debug/pprof/profile", window, ProfilePath(dir, "etcd"))
		},
	}
	if cp.Ephemeral != nil {
		targets["etcd-ephemeral"] = func() error {
			return cpuprofile.Capture(ctx, etcdClient, EtcdURL(EphemeralEtcdPort)+"/debug/pprof/profile", window, ProfilePath(dir, "etcd-ephemeral"))
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
