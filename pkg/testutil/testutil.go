// Package testutil holds what the product packages' tests and the cluster
// tests (test/integration, test/kind) share. Only tests import it.
package testutil

import (
	"context"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/grpclog"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"k1m.dev/k1m/pkg/poll"
)

// Eventually polls f until it returns nil, and fails the test with f's
// last error once timeout has passed. It polls 50 times over timeout,
// every 10 ms to 2 s.
func Eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	interval := min(max(timeout/50, 10*time.Millisecond), 2*time.Second)
	if err := poll.Until(context.Background(), interval, timeout, what, func(context.Context) error { return f() }); err != nil {
		t.Fatal(err)
	}
}

// Nobody is the user id of nobody, the other user the tests act as.
const Nobody = 65534

// DialUnixAsNobody connects to a unix socket from a thread whose file
// system user and group are nobody: changing them from root's drops the
// capabilities that bypass file permissions, so the socket's path is
// checked as for any other user. The thread is never unlocked, so it ends
// with its goroutine and nothing else runs as nobody. Needs root.
func DialUnixAsNobody(path string) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		unix.Setfsgid(Nobody)
		unix.Setfsuid(Nobody)
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	return <-done
}

// TeardownMargin is what Budget leaves before the test binary's own
// deadline (go test -timeout) for taking a cluster down: a test that
// runs out of its budget still tears down, rather than panic with its
// cluster running.
const TeardownMargin = 2 * time.Minute

// Budget is a context that ends after budget, or TeardownMargin before
// go test's -timeout, whichever comes first: a cluster test's share of
// its target's time. It logs the deadline it sets.
func Budget(t *testing.T, budget time.Duration) (context.Context, context.CancelFunc) {
	t.Helper()
	deadline := time.Now().Add(budget)
	if d, ok := t.Deadline(); ok && d.Add(-TeardownMargin).Before(deadline) {
		deadline = d.Add(-TeardownMargin)
	}
	t.Logf("budget: %s, until %s", time.Until(deadline).Round(time.Second), deadline.Format(time.TimeOnly))
	return context.WithDeadline(context.Background(), deadline)
}

// RESTConfig loads a kubeconfig file with its certificate and key read in.
// A client that names its files, as a kubeconfig does, has client-go reload
// them every few seconds; once its cluster's data directory is deleted, it
// logs an error for each reload for the rest of the test binary's run, in
// the middle of other tests' output.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return InlineTLS(cfg)
}

// InlineTLS reads cfg's CA, certificate and key files into it, and drops
// the file names, so that no client reloads them.
func InlineTLS(cfg *rest.Config) (*rest.Config, error) {
	c := rest.CopyConfig(cfg)
	if err := rest.LoadTLSFiles(c); err != nil {
		return nil, err
	}
	c.CAFile, c.CertFile, c.KeyFile = "", "", ""
	return c, nil
}

// QuietGRPC keeps grpc's info and warning lines out of a cluster test's
// output: its etcd clients log one for each reconnect that fails while a
// test has stopped or killed a server, which the server's own log and the
// test's messages already say. Errors still print. Call it from an init
// function, before any client is made.
func QuietGRPC() {
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
}
