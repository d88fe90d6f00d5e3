// Package dnsload measures what one CoreDNS replica answers, the figure
// k1m's CoreDNS sizing is chosen from. On a fresh one-server cluster
// CoreDNS is scaled to one replica, then queried through the kube-dns
// Service at rising rates, each for a window, as pods query it: a name
// of the cluster (NOERROR) and a miss of a pod's search path (NXDOMAIN)
// in turn, over UDP from several sockets. Each step reads the answers in
// time, their latency, and the CoreDNS process's CPU.
package dnsload

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/bench/stats"
	"k1m.dev/k1m/pkg/poll"
)

// Defaults: rates up to past what two cores answer, 10 s each.
var DefaultRates = []int{1000, 2000, 5000, 10000, 20000, 40000}

const (
	DefaultWindow = 10 * time.Second
	// DefaultSockets are the client's UDP sockets (a node's pods each
	// have their own).
	DefaultSockets = 16
	// MaxLost is the share of queries a step may leave unanswered (or
	// answered with an error) and still be held.
	MaxLost = 0.001
	// ReadyTimeout bounds the wait for CoreDNS at one replica.
	ReadyTimeout = 3 * time.Minute

	// maxPerSocket keeps a socket's 65,536 query ids from coming round
	// within AnswerTimeout.
	maxPerSocket = 60000

	namespace  = "kube-system"
	deployment = "coredns"
	service    = "kube-dns"
	selector   = "k8s-app=kube-dns"
	process    = "coredns"
)

// Config is the scenario's size.
type Config struct {
	Rates   []int // queries a second, ascending
	Window  time.Duration
	Sockets int
}

// Validate names the flag at fault.
func (c Config) Validate() error {
	errs := []error{stats.CheckAscending("--dns-rates", "query rates", "1000,10000", c.Rates)}
	if c.Window < time.Second {
		errs = append(errs, fmt.Errorf("--dns-window %v: want at least 1s, e.g. %v", c.Window, DefaultWindow))
	}
	if c.Sockets < 1 {
		errs = append(errs, fmt.Errorf("--dns-sockets %d: want at least 1, e.g. %d", c.Sockets, DefaultSockets))
	} else if n := len(c.Rates); n > 0 && c.Rates[n-1] > maxPerSocket*c.Sockets {
		// A socket's 16-bit query ids must not come round within
		// AnswerTimeout, or answers are matched to the wrong query.
		errs = append(errs, fmt.Errorf("--dns-rates up to %d over --dns-sockets %d: want at most %d queries a second per socket, e.g. --dns-sockets %d",
			c.Rates[n-1], c.Sockets, maxPerSocket, (c.Rates[n-1]+maxPerSocket-1)/maxPerSocket))
	}
	return errors.Join(errs...)
}

// Step is one rate's window.
type Step struct {
	Round        int
	Rate         int // offered, queries a second
	Window       time.Duration
	Reading      Reading
	Elapsed      time.Duration // the window and the wait for its last answers
	CoreDNSCores float64
	CPUPerQuery  time.Duration // CoreDNS's, per query answered
	BenchCores   float64       // the client's (this process)
	Exited       bool          // CoreDNS's process was gone after the window
	Held         bool          // at most MaxLost of the queries lost or failed, and CoreDNS still running
}

// AnsweredPerSecond is the answers in time over the window.
func (s Step) AnsweredPerSecond() float64 {
	return stats.Rate(s.Reading.Answered, s.Window)
}

// LostShare is the queries lost or failed, of those sent.
func (s Step) LostShare() float64 {
	if s.Reading.Sent == 0 {
		return 0
	}
	return float64(s.Reading.Lost()+s.Reading.Failed) / float64(s.Reading.Sent)
}

// Line is a step's one-line summary.
func (s Step) Line() string {
	if s.Exited {
		return fmt.Sprintf("%d queries/s offered: %d sent, %d answered; CoreDNS's process exited under the load (not held)", s.Rate, s.Reading.Sent, s.Reading.Answered)
	}
	return fmt.Sprintf("%d queries/s offered: %d sent, %d answered, %d failed, %d lost (%.3f%%), p50 %v / p99 %v, CoreDNS %.2f cores (%v per query), client %.2f cores",
		s.Rate, s.Reading.Sent, s.Reading.Answered, s.Reading.Failed, s.Reading.Lost(), 100*s.LostShare(),
		s.Reading.Latency.P50.Round(time.Microsecond), s.Reading.Latency.P99.Round(time.Microsecond),
		s.CoreDNSCores, s.CPUPerQuery.Round(time.Microsecond), s.BenchCores)
}

// Env is the cluster a run measures.
type Env struct {
	Client        kubernetes.Interface
	ClusterDomain string // e.g. cluster.local
	Progress      func(string)
}

// Names are the queries, in turn: a Service of the cluster, and the miss
// a pod's search path makes first for it (ndots 5: "kubernetes.default"
// is tried in the pod's namespace before as it is).
func Names(domain string) []string {
	return []string{"kubernetes.default.svc." + domain + ".", "kubernetes.default.default.svc." + domain + "."}
}

// Run measures every rate of cfg, ending after the first not held.
func Run(ctx context.Context, cfg Config, env Env) ([]Step, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	env.Progress("scaling CoreDNS to one replica")
	pid, err := oneReplica(ctx, env.Client)
	if err != nil {
		return nil, err
	}
	svc, err := env.Client.CoreV1().Services(namespace).Get(ctx, service, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the %s Service: %w", service, err)
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return nil, fmt.Errorf("the %s Service's address %q: %w", service, svc.Spec.ClusterIP, err)
	}
	server := netip.AddrPortFrom(ip, 53)
	names := Names(env.ClusterDomain)
	// A warm-up fills CoreDNS's cache, as a running cluster's is.
	if _, err := Flood(ctx, server, names, 100, time.Second, cfg.Sockets); err != nil {
		return nil, err
	}
	var steps []Step
	for _, rate := range cfg.Rates {
		s, err := step(ctx, cfg, server, names, pid, rate)
		if err != nil {
			return steps, fmt.Errorf("%d queries/s: %w", rate, err)
		}
		env.Progress(s.Line())
		steps = append(steps, s)
		if !s.Held {
			break
		}
	}
	return steps, nil
}

func step(ctx context.Context, cfg Config, server netip.AddrPort, names []string, pid, rate int) (Step, error) {
	s := Step{Rate: rate, Window: cfg.Window}
	cpu0, err := proc.ReadUsage(pid)
	if err != nil {
		return s, fmt.Errorf("CoreDNS's CPU: %w", err)
	}
	self0, err := proc.SelfCPU()
	if err != nil {
		return s, err
	}
	start := time.Now()
	if s.Reading, err = Flood(ctx, server, names, float64(rate), cfg.Window, cfg.Sockets); err != nil {
		return s, err
	}
	s.Elapsed = time.Since(start)
	cpu1, err := proc.ReadUsage(pid)
	if errors.Is(err, fs.ErrNotExist) {
		// Its container exited under the load: the rate is past what
		// it takes.
		s.Exited = true
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("CoreDNS's CPU: %w", err)
	}
	self1, err := proc.SelfCPU()
	if err != nil {
		return s, err
	}
	// Over the window: the wait for the last answers after it is idle.
	used := cpu1.Sub(cpu0).CPU
	s.CoreDNSCores = used.Seconds() / s.Window.Seconds()
	s.BenchCores = (self1 - self0).Seconds() / s.Window.Seconds()
	if s.Reading.Answered > 0 {
		s.CPUPerQuery = used / time.Duration(s.Reading.Answered)
	}
	s.Held = s.LostShare() <= MaxLost
	return s, nil
}

// oneReplica scales CoreDNS to one replica and waits until one pod of it
// runs ready and one CoreDNS process is left, returning its PID.
func oneReplica(ctx context.Context, client kubernetes.Interface) (int, error) {
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: deployment, Namespace: namespace}, Spec: autoscalingv1.ScaleSpec{Replicas: 1}}
	if _, err := client.AppsV1().Deployments(namespace).UpdateScale(ctx, deployment, scale, metav1.UpdateOptions{}); err != nil {
		return 0, fmt.Errorf("scaling %s/%s to 1: %w", namespace, deployment, err)
	}
	var pid int
	err := poll.Until(ctx, time.Second, ReadyTimeout, "CoreDNS at one ready replica and one process", func(ctx context.Context) error {
		pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || !ready(pods.Items[0]) {
			return fmt.Errorf("%d CoreDNS pods, want one ready", len(pods.Items))
		}
		pids, err := proc.Named(process)
		if err != nil {
			return err
		}
		if len(pids) != 1 {
			return fmt.Errorf("%d %s processes %v, want one", len(pids), process, pids)
		}
		pid = pids[0]
		return nil
	})
	return pid, err
}

func ready(p corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
