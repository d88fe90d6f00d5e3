package faults

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/poll"
	"k1m.dev/k1m/pkg/server"
	"k1m.dev/k1m/pkg/testutil"
)

// migrateToPartitions moves the upgraded cluster's resources into
// Options.Partitions as docs/operations.md says: k1m etcd-partitions
// migrate on server 1, then a rolling restart of the servers with
// --etcd-partitions; the command ends once every server runs them. Pods
// are refused through every server meanwhile and written through every
// server after.
func (f *Fixture) migrateToPartitions(ctx context.Context) error {
	flag := "--etcd-partitions=" + strings.Join(f.opts.Partitions, ",")
	s1 := f.H.Server(1)
	out := &testutil.Buffer{}
	cmd := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+s1.Netns, f.opts.K1M,
		"etcd-partitions", "migrate", flag, "--data-dir", s1.DataDir, "--timeout=20m")
	cmd.Stdout, cmd.Stderr = out, out
	f.logf("k1m etcd-partitions migrate %s on server 1", flag)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	began := time.Now()
	if err := f.podWrites(ctx, true); err != nil {
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("%w; the command printed:\n%s", err, out.String())
	}
	if err := f.migrationRecorded(ctx); err != nil {
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("%w; the command printed:\n%s", err, out.String())
	}
	f.H.AddServerArgs(flag)
	if err := rolling(ctx, f); err != nil {
		return err
	}
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("k1m etcd-partitions migrate: %w:\n%s", err, out.String())
		}
	case <-time.After(5 * time.Minute):
		cmd.Process.Kill()
		return fmt.Errorf("k1m etcd-partitions migrate still running 5 min after the servers' restarts:\n%s", out.String())
	}
	f.logf("migrated in %s (writes refused meanwhile):\n%s", time.Since(began).Round(time.Second), strings.TrimSpace(out.String()))
	return f.podWrites(ctx, false)
}

// migrationRecorded waits until server 1's durable etcd records the
// migration: servers restarted before are refused their new flag.
func (f *Fixture) migrationRecorded(ctx context.Context) error {
	s1 := f.H.Server(1)
	cli, err := etcd.NewClient([]string{fmt.Sprintf("https://[%s]:%d", s1.Addr, durablePort)}, server.EtcdClientTLS(s1.DataDir))
	if err != nil {
		return err
	}
	defer cli.Close()
	// The command waits --settle (65 s) for writes in flight first.
	return poll.Until(ctx, time.Second, 3*time.Minute, "the migration recorded in the durable etcd", func(ctx context.Context) error {
		_, ok, err := etcd.ReadMigration(ctx, cli)
		if err == nil && !ok {
			err = errors.New("none recorded yet")
		}
		return err
	})
}

// podWrites waits until a dry-run Pod create through every server is
// refused by the migration's freeze (refused), or accepted.
func (f *Fixture) podWrites(ctx context.Context, refused bool) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "faults-migration-probe", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "k1m.invalid/probe"}}}}
	want := "accepted"
	if refused {
		want = "refused by " + server.FreezeName
	}
	return poll.Until(ctx, time.Second, 2*time.Minute, "a dry-run Pod create through every server "+want, func(ctx context.Context) error {
		for i := 1; i <= Servers; i++ {
			_, err := f.Client(i).CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			frozen := apierrors.IsForbidden(err) && strings.Contains(err.Error(), server.FreezeName)
			if refused != frozen || (!refused && err != nil) {
				return fmt.Errorf("through server %d: %v", i, err)
			}
		}
		return nil
	})
}
