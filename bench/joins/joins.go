// Package joins measures the join path at scale: simulated nodes join a
// running server with one join token the way a kubelet bootstraps. Each
// makes a key, asks with the token for its client certificate (a CSR of
// signer kubernetes.io/kube-apiserver-client-kubelet for
// system:node:NAME), and waits on a watch of that CSR until it is
// approved (k1m's approver, pkg/approver) and signed
// (kube-controller-manager's signer). Workers join at once, each node
// with its own client, as separate machines would.
//
// What a join costs the control plane: one CSR create and one watch by
// the node; the approver's Node GET and approval update; the signer's
// status update. Nothing here is per existing node: the approver decides
// from its informer cache.
package joins

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/flowcontrol"

	"k1m.dev/k1m/bench/stats"
)

// Defaults: 1,000 joins (the figure: a few minutes at most), 50
// at a time (a rack's worth of machines booting together).
const (
	DefaultJoins   = 1000
	DefaultWorkers = 50
	// JoinTimeout bounds one node's wait for its certificate.
	JoinTimeout = 5 * time.Minute
)

// Config is one run's size.
type Config struct {
	Joins   int
	Workers int
}

// Validate names the flag at fault.
func (c Config) Validate() error {
	var errs []error
	if c.Joins < 1 {
		errs = append(errs, fmt.Errorf("--joins %d: want at least 1, e.g. %d", c.Joins, DefaultJoins))
	}
	if c.Workers < 1 {
		errs = append(errs, fmt.Errorf("--joins-workers %d: want at least 1, e.g. %d", c.Workers, DefaultWorkers))
	}
	return errors.Join(errs...)
}

// Trial is one run of Config.Joins joins against one server.
type Trial struct {
	Flavour string
	Round   int
	Joins   int // certificates obtained
	Failed  int
	// Errors are the first few failures, for the summary.
	Errors  []string
	Elapsed time.Duration
	// Latency is each join's, from its CSR create to its certificate.
	Latency stats.Latency
}

// PerSecond is the joins completed per second over the run.
func (t Trial) PerSecond() float64 { return stats.Rate(int64(t.Joins), t.Elapsed) }

// Bootstrap is a client of the server as a joining node is, before it
// has a certificate: the server's address and CA from admin, and the
// join token (ID.SECRET) as its bearer token; no client-side rate limit
// (each simulated node is its own client, as a machine would be).
func Bootstrap(admin *rest.Config, token string) *rest.Config {
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = token
	cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	cfg.Timeout = 30 * time.Second
	return cfg
}

// Run joins cfg.Joins nodes named PREFIX-N through bootstrap,
// cfg.Workers at a time, and reports each join's time to its
// certificate; progress every 10 s to progress.
func Run(ctx context.Context, cfg Config, bootstrap *rest.Config, prefix string, progress func(done, failed int)) (Trial, error) {
	if err := cfg.Validate(); err != nil {
		return Trial{}, err
	}
	names := make(chan string)
	var mu sync.Mutex
	var latencies []time.Duration
	var errs []string
	record := func(d time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err.Error())
			return
		}
		latencies = append(latencies, d)
	}
	began := time.Now()
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				record(Join(ctx, bootstrap, name))
			}
		}()
	}
	stop := reportEvery(10*time.Second, func() {
		mu.Lock()
		defer mu.Unlock()
		progress(len(latencies), len(errs))
	})
	for i := 1; i <= cfg.Joins && ctx.Err() == nil; i++ {
		names <- fmt.Sprintf("%s-%d", prefix, i)
	}
	close(names)
	wg.Wait()
	stop()
	t := Trial{Joins: len(latencies), Failed: len(errs), Elapsed: time.Since(began), Latency: stats.Summarize(latencies)}
	sort.Strings(errs)
	t.Errors = errs[:min(3, len(errs))]
	return t, ctx.Err()
}

// Join is one node's join: its own client, key and CSR; the time from
// the CSR's create to its certificate.
func Join(ctx context.Context, bootstrap *rest.Config, node string) (time.Duration, error) {
	client, err := kubernetes.NewForConfig(rest.CopyConfig(bootstrap))
	if err != nil {
		return 0, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return 0, err
	}
	request, err := clientRequest(key, node)
	if err != nil {
		return 0, err
	}
	began := time.Now()
	usages := []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth}
	name, uid, err := csr.RequestCertificate(client, request, "", certv1.KubeAPIServerClientKubeletSignerName, nil, usages, key)
	if err != nil {
		return 0, fmt.Errorf("node %s: creating its CSR: %w", node, err)
	}
	wctx, cancel := context.WithTimeout(ctx, JoinTimeout)
	defer cancel()
	certPEM, err := csr.WaitForCertificate(wctx, client, name, uid)
	if err != nil {
		return 0, fmt.Errorf("node %s: CSR %s: %w", node, name, err)
	}
	if err := checkIssued(certPEM, node); err != nil {
		return 0, err
	}
	return time.Since(began), nil
}

// clientRequest is a kubelet's client certificate request for node, as
// the kubelet makes it (CN system:node:NODE, O system:nodes).
func clientRequest(key *ecdsa.PrivateKey, node string) ([]byte, error) {
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// checkIssued wants the certificate issued for node.
func checkIssued(certPEM []byte, node string) error {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return fmt.Errorf("node %s: the issued certificate is not PEM", node)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("node %s: %w", node, err)
	}
	if want := "system:node:" + node; cert.Subject.CommonName != want {
		return fmt.Errorf("node %s: issued for %q, want %q", node, cert.Subject.CommonName, want)
	}
	return nil
}

// reportEvery calls fn every interval until the returned stop is called.
func reportEvery(interval time.Duration, fn func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case <-ticker.C:
				fn()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// Line is a trial's one-line summary.
func (t Trial) Line() string {
	s := fmt.Sprintf("%d joins in %s: %.1f joins/s; to the certificate p50 %s, p99 %s, max %s", t.Joins, t.Elapsed.Round(100*time.Millisecond),
		t.PerSecond(), t.Latency.P50.Round(time.Millisecond), t.Latency.P99.Round(time.Millisecond), t.Latency.Max.Round(time.Millisecond))
	if t.Failed > 0 {
		s += fmt.Sprintf("; %d failed, e.g. %s", t.Failed, strings.Join(t.Errors, "; "))
	}
	return s
}

// Result is the scenario's trials, each flavour's fresh server per round.
type Result struct {
	Config Config
	Trials []Trial
}

// CSVHeader and CSVRows are the trials as raw data (joins.csv).
func (r *Result) CSVHeader() []string {
	return []string{"flavour", "round", "joins", "failed", "workers", "elapsed_s", "joins_per_s", "p50_ms", "p90_ms", "p99_ms", "max_ms"}
}

func (r *Result) CSVRows() [][]string {
	ms := func(d time.Duration) string { return stats.CSVFloat(float64(d) / float64(time.Millisecond)) }
	var rows [][]string
	for _, t := range r.Trials {
		rows = append(rows, []string{t.Flavour, fmt.Sprint(t.Round), fmt.Sprint(t.Joins), fmt.Sprint(t.Failed), fmt.Sprint(r.Config.Workers),
			stats.CSVFloat(t.Elapsed.Seconds()), stats.CSVFloat(t.PerSecond()), ms(t.Latency.P50), ms(t.Latency.P90), ms(t.Latency.P99), ms(t.Latency.Max)})
	}
	return rows
}

// Markdown is the summary's section: every trial, then each flavour's
// median rate and p99 and the ratio k1m/stock.
func (r *Result) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Joins: %d simulated nodes join one fresh `k1m server`, %d at a time\n\n", r.Config.Joins, r.Config.Workers)
	b.WriteString("Each node: a key, a kubelet client CSR with the join token, a watch until it is approved (k1m's approver) and signed (kube-controller-manager).\n\n")
	b.WriteString("| build | round | joined | failed | took | joins/s | p50 | p99 | max |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, t := range r.Trials {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %.1f | %s | %s | %s |\n", t.Flavour, t.Round, t.Joins, t.Failed, t.Elapsed.Round(100*time.Millisecond),
			t.PerSecond(), t.Latency.P50.Round(time.Millisecond), t.Latency.P99.Round(time.Millisecond), t.Latency.Max.Round(time.Millisecond))
	}
	rate := func(flavour string) float64 {
		var v []float64
		for _, t := range r.Trials {
			if t.Flavour == flavour {
				v = append(v, t.PerSecond())
			}
		}
		return stats.Median(v)
	}
	k, s := rate("k1m"), rate("stock")
	if k > 0 && s > 0 {
		fmt.Fprintf(&b, "\nMedian joins/s: k1m %.1f, stock %.1f (x%.2f).\n", k, s, stats.Ratio(k, s))
	}
	for _, t := range r.Trials {
		for _, e := range t.Errors {
			fmt.Fprintf(&b, "\n- %s round %d failure: %s", t.Flavour, t.Round, e)
		}
	}
	b.WriteString("\n")
	return b.String()
}
