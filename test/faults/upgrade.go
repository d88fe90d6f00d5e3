package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/poll"
	"k1m.dev/k1m/test/clustercheck"
	"k1m.dev/k1m/test/localcluster"
)

// upgrade is docs/operations.md's rolling upgrade: the cluster runs the
// earlier release (Options.FromK1M); each server in turn is stopped and
// started on this tree's binary and its node waited for, then each agent.
// After, every process runs the new binary and every server records the
// new release.
func upgrade(ctx context.Context, f *Fixture) error {
	if f.opts.FromK1M == "" {
		return fmt.Errorf("the upgrade scenario needs the cluster started from an earlier release (UPGRADE_FROM; make upgrade-test builds it)")
	}
	f.H.UseK1M(f.opts.K1M)
	// The servers one at a time, as the rolling scenario restarts them.
	if err := rolling(ctx, f); err != nil {
		return err
	}
	for a := 1; a <= Nodes-Servers; a++ {
		f.logf("restart agent %d", a)
		if err := f.H.RestartAgent(ctx, a); err != nil {
			return err
		}
		if err := f.waitNodeReady(ctx, f.H.Agent(a).Name, nodeReadyTimeout); err != nil {
			return err
		}
	}
	if err := f.checkUpgraded(ctx); err != nil {
		return err
	}
	return f.checkGainedComponents(ctx)
}

// checkGainedComponents wants what the new release packages and the
// earlier did not: the default StorageClass with its provisioner, and
// metrics-server behind an available Metrics API.
func (f *Fixture) checkGainedComponents(ctx context.Context) error {
	return poll.Until(ctx, time.Second, 3*time.Minute, "the upgraded cluster's default StorageClass, local-path provisioner and Metrics API available", func(ctx context.Context) error {
		client := f.Client(1)
		class, err := client.StorageV1().StorageClasses().Get(ctx, clustercheck.DefaultStorageClass, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if class.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" {
			return fmt.Errorf("StorageClass %s is not the default: annotations %v", class.Name, class.Annotations)
		}
		for _, d := range []struct{ namespace, name string }{{"local-path-storage", "local-path-provisioner"}, {"kube-system", "metrics-server"}} {
			deploy, err := client.AppsV1().Deployments(d.namespace).Get(ctx, d.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if deploy.Status.AvailableReplicas < 1 {
				return fmt.Errorf("Deployment %s/%s: %d of %d replicas available", d.namespace, d.name, deploy.Status.AvailableReplicas, deploy.Status.Replicas)
			}
		}
		if data, err := client.CoreV1().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes").DoRaw(ctx); err != nil {
			return fmt.Errorf("the Metrics API: %v: %s", err, data)
		}
		f.logf("the upgraded cluster runs the local-path provisioner behind StorageClass %s, and metrics-server", class.Name)
		return nil
	})
}

// checkUpgraded wants every server and agent process to run the new
// binary and k1m-cluster to record the new release for every server.
func (f *Fixture) checkUpgraded(ctx context.Context) error {
	want, err := filepath.EvalSymlinks(f.opts.K1M)
	if err != nil {
		return err
	}
	plan := f.H.Plan()
	for _, n := range append(append([]localcluster.Node{}, plan.Servers...), plan.Agents...) {
		pid, err := localcluster.ReadPid(n.PidFile)
		if err != nil {
			return err
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			return fmt.Errorf("%s: %w", n.Label(), err)
		}
		if exe != want {
			return fmt.Errorf("%s runs %s after the upgrade, want %s", n.Label(), exe, want)
		}
	}
	release, err := releaseOf(ctx, f.opts.K1M)
	if err != nil {
		return err
	}
	versions, err := join.ReadServerVersions(ctx, f.Client(1))
	if err != nil {
		return err
	}
	wantVersions := map[string]string{}
	for i := 1; i <= Servers; i++ {
		wantVersions[fmt.Sprintf("[%s]:6443", f.H.Server(i).Addr)] = release
	}
	if !reflect.DeepEqual(versions, wantVersions) {
		return fmt.Errorf("k1m-cluster records the servers' releases %v after the upgrade, want %v", versions, wantVersions)
	}
	f.logf("every server and agent runs %s (%s)", release, want)
	return nil
}

// releaseOf is the release the k1m binary at path reports
// (v1.32.5+k1m.COMMIT).
func releaseOf(ctx context.Context, path string) (string, error) {
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "Kubernetes "), nil
}
