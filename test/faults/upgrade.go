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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/podnet"
	"k1m.dev/k1m/pkg/poll"
	"k1m.dev/k1m/test/clustercheck"
	"k1m.dev/k1m/test/database"
	"k1m.dev/k1m/test/localcluster"
)

// upgrade is docs/operations.md's rolling upgrade, twice, with a
// replicated database on the cluster through the second: the cluster runs
// the earlier release (Options.FromK1M, which packages no component);
// each server in turn is stopped and started on the release in between
// (Options.ViaK1M, which packages them) and its node waited for, then
// each agent. The cluster gains the components, and its nodes their zone
// labels. The database (test/database) starts on it, one member a zone,
// and takes writes. The same rolling upgrade then moves every process to
// this tree's binary; the database keeps every acknowledged write through
// it, a member's pod deletion and its node's restart. After, every
// process runs the new binary, every server records the new release and
// the components still serve. With Options.Partitions, the upgraded
// cluster then moves those resources into partitions (migrateToPartitions).
func upgrade(ctx context.Context, f *Fixture) error {
	if f.opts.FromK1M == "" || f.opts.ViaK1M == "" {
		return fmt.Errorf("the upgrade scenario needs the cluster started from an earlier release and a release in between (UPGRADE_FROM and UPGRADE_VIA; make upgrade-test builds them)")
	}
	if err := f.rollTo(ctx, f.opts.ViaK1M); err != nil {
		return err
	}
	// The database needs the volumes only: it starts while metrics-server
	// does, which checkGainedComponents then waits for.
	if err := f.waitGained(ctx, false); err != nil {
		return err
	}
	db, written, err := f.startDatabase(ctx)
	if err != nil {
		return err
	}
	if err := f.checkGainedComponents(ctx); err != nil {
		return err
	}
	if err := f.rollTo(ctx, f.opts.K1M); err != nil {
		return err
	}
	if err := f.checkGainedComponents(ctx); err != nil {
		return err
	}
	if len(f.opts.Partitions) > 0 {
		if err := f.migrateToPartitions(ctx); err != nil {
			return err
		}
	}
	if err := databaseKeepsItsWrites(ctx, db, written); err != nil {
		return fmt.Errorf("the replicated database: %w", err)
	}
	// The fault scenarios after this one run without it.
	return db.Delete(ctx)
}

// rollTo restarts each server in turn on k1m, waiting for its node Ready
// (as the rolling scenario does), then each agent; then it wants every
// process on k1m and every server recording its release.
func (f *Fixture) rollTo(ctx context.Context, k1m string) error {
	release, err := releaseOf(ctx, k1m)
	if err != nil {
		return err
	}
	f.logf("rolling upgrade to %s", release)
	f.H.UseK1M(k1m)
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
	if err := f.checkUpgraded(ctx, k1m, release); err != nil {
		return err
	}
	return f.checkRoutesPublished(ctx)
}

// checkRoutesPublished waits for every node's pod route published: its
// range via its address, bound to its Node (pkg/podnet). A node without
// one has pods no other node reaches.
func (f *Fixture) checkRoutesPublished(ctx context.Context) error {
	return poll.Until(ctx, time.Second, time.Minute, "every node's pod route published, via its own address", func(ctx context.Context) error {
		client := f.Client(1)
		for _, name := range f.NodeNames() {
			node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cm, err := client.CoreV1().ConfigMaps(podnet.RoutesNamespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("node %s (pod range %v): %w", name, node.Spec.PodCIDRs, err)
			}
			via, uid, ok := podnet.BoundAddress(cm)
			if want := internalIP(node); !ok || uid != node.UID || via.String() != want {
				return fmt.Errorf("node %s's route %v is bound to %s (Node %s), want its address %s (Node %s)", name, cm.Data, via, uid, want, node.UID)
			}
		}
		return nil
	})
}

// internalIP is a Node's InternalIP, "" without one.
func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// startDatabase imports the database's image into every node, waits for
// the nodes' zone labels, starts the database and writes to it.
func (f *Fixture) startDatabase(ctx context.Context) (*database.DB, []string, error) {
	if err := f.H.ImportArchive(ctx, f.opts.DatabaseImage); err != nil {
		return nil, nil, err
	}
	admin := f.H.Server(1).AdminKubeconfig()
	db := &database.DB{H: f.H, Client: f.Client(1), K1M: f.opts.K1M, Admin: admin, Logf: f.logf}
	if err := db.WaitZoneLabels(ctx); err != nil {
		return nil, nil, err
	}
	if err := db.Start(ctx); err != nil {
		return nil, nil, err
	}
	zones, err := db.Zones(ctx)
	if err != nil {
		return nil, nil, err
	}
	f.logf("database: %d members on persistent volumes, in zones %v", database.Replicas, zones)
	written, err := db.Write(ctx, "before-upgrade")
	if err != nil {
		return nil, nil, err
	}
	return db, written, db.ReadEverywhere(ctx, written)
}

// databaseKeepsItsWrites wants the writes before the upgrade read back
// through every member after it, after a member's pod is deleted and
// after its node restarts; then new writes.
func databaseKeepsItsWrites(ctx context.Context, db *database.DB, written []string) error {
	if err := db.WaitReady(ctx); err != nil {
		return err
	}
	if err := db.ReadEverywhere(ctx, written); err != nil {
		return err
	}
	if err := db.DeletePod(ctx, 1); err != nil {
		return err
	}
	if err := db.ReadEverywhere(ctx, written); err != nil {
		return err
	}
	if err := db.RestartNodeOf(ctx, 2); err != nil {
		return err
	}
	after, err := db.Write(ctx, "after-upgrade")
	if err != nil {
		return err
	}
	return db.ReadEverywhere(ctx, append(written, after...))
}

// checkGainedComponents wants what the new release packages and the
// earlier did not: the default StorageClass with its provisioner, and
// metrics-server behind an available Metrics API.
func (f *Fixture) checkGainedComponents(ctx context.Context) error {
	return f.waitGained(ctx, true)
}

// waitGained waits for the default StorageClass and its provisioner
// available and, withMetrics, metrics-server and the Metrics API.
func (f *Fixture) waitGained(ctx context.Context, withMetrics bool) error {
	type deployment struct{ namespace, name string }
	want := []deployment{{"local-path-storage", "local-path-provisioner"}}
	what, has := "the upgraded cluster's default StorageClass and local-path provisioner", "the local-path provisioner"
	if withMetrics {
		want = append(want, deployment{"kube-system", "metrics-server"})
		what, has = what+", metrics-server and the Metrics API", has+" and metrics-server"
	}
	return poll.Until(ctx, time.Second, 3*time.Minute, what, func(ctx context.Context) error {
		client := f.Client(1)
		class, err := client.StorageV1().StorageClasses().Get(ctx, clustercheck.DefaultStorageClass, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if class.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" {
			return fmt.Errorf("StorageClass %s is not the default: annotations %v", class.Name, class.Annotations)
		}
		for _, d := range want {
			deploy, err := client.AppsV1().Deployments(d.namespace).Get(ctx, d.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if deploy.Status.AvailableReplicas < 1 {
				return fmt.Errorf("Deployment %s/%s: %d of %d replicas available", d.namespace, d.name, deploy.Status.AvailableReplicas, deploy.Status.Replicas)
			}
		}
		if withMetrics {
			if data, err := client.CoreV1().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes").DoRaw(ctx); err != nil {
				return fmt.Errorf("the Metrics API: %v: %s", err, data)
			}
		}
		f.logf("the upgraded cluster runs %s behind StorageClass %s", has, class.Name)
		return nil
	})
}

// checkUpgraded wants every server and agent process to run the binary
// k1m and k1m-cluster to record its release for every server.
func (f *Fixture) checkUpgraded(ctx context.Context, k1m, release string) error {
	want, err := filepath.EvalSymlinks(k1m)
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
