package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/approver"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/flavor"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/kubeconfig"
)

// RemoveOptions name the server that runs a removal (its data directory
// and etcd ports) and the server to remove.
type RemoveOptions struct {
	DataDir                   string
	EtcdPort, NoFsyncEtcdPort int
	Name                      string
}

// RemoveServer takes a server out of its cluster, from another server: its
// durable etcd member first (refused, with nothing changed, when the
// members left could not keep a quorum), then its no-fsync member, its
// records, its Node and its node's client certificate requests. A server removed this way joins again only with
// an empty data directory (k1m server --server ... on a fresh one).
func RemoveServer(ctx context.Context, o RemoveOptions, out io.Writer) error {
	client, err := adminClient(o.DataDir)
	if err != nil {
		return err
	}
	external, err := ReadDatastore(o.DataDir)
	if err != nil {
		return err
	}
	tls := EtcdClientTLS(o.DataDir)
	peerHosts, err := serverPeerHosts(ctx, client, o, tls, len(external.Durable) > 0)
	if err != nil {
		return err
	}
	if len(external.Durable) > 0 {
		fmt.Fprintf(out, "the durable store is the external etcd at %s: no member of it to remove\n", strings.Join(external.Durable, ","))
		for _, name := range slices.Sorted(maps.Keys(external.Partitions)) {
			fmt.Fprintf(out, "the %s partition is the external etcd at %s: no member of it to remove\n", name, strings.Join(external.Partitions[name], ","))
		}
		if err := requireKnownServer(ctx, client, o.Name, etcd.ErrNoSuchMember); err != nil {
			return err
		}
	} else if err := removeDurableMember(ctx, client, o, tls, peerHosts, out); err != nil {
		return err
	}
	switch {
	case len(external.NoFsync) > 0:
		fmt.Fprintf(out, "Events and Leases are in the external etcd at %s: no member of it to remove\n", strings.Join(external.NoFsync, ","))
	case !flavor.SeparateNoFsyncStore:
		// The stock build keeps Events and Leases in the durable etcd.
	default:
		removeNoFsyncMember(ctx, o, tls, peerHosts, out)
	}
	records, recordsTLS := []string{DurableEtcdURL(o.EtcdPort)}, tls
	if len(external.Durable) > 0 {
		records, recordsTLS = external.Durable, external.TLS
	}
	cli, err := etcd.NewClient(records, recordsTLS)
	if err != nil {
		return err
	}
	defer cli.Close()
	if err := etcd.ForgetNoFsync(ctx, cli, o.Name); err != nil {
		return err
	}
	if len(external.Durable) == 0 {
		if err := removePartitionMembers(ctx, cli, o, tls, peerHosts, out); err != nil {
			return err
		}
	}
	return forgetServerObjects(ctx, client, o, out)
}

// removeDurableMember removes the server's member of the servers'
// durable etcd (refused when the rest would lose quorum); a server
// without one must at least have published itself.
func removeDurableMember(ctx context.Context, client kubernetes.Interface, o RemoveOptions, tls etcd.TLS, peerHosts []string, out io.Writer) error {
	err := etcd.Remove(ctx, []string{DurableEtcdURL(o.EtcdPort)}, tls, o.Name, peerHosts)
	switch {
	case errors.Is(err, etcd.ErrNoSuchMember):
		if err := requireKnownServer(ctx, client, o.Name, err); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s has no etcd member (an API-server-only server, --disable-etcd)\n", o.Name)
	case err != nil:
		return fmt.Errorf("durable etcd: %w", err)
	default:
		fmt.Fprintf(out, "removed %s from the durable etcd\n", o.Name)
	}
	return nil
}

// requireKnownServer refuses a name no server published: a mistake,
// which why (a missing member) explains.
func requireKnownServer(ctx context.Context, client kubernetes.Interface, name string, why error) error {
	known, err := join.ServerKnown(ctx, client, name)
	if err != nil {
		return err
	}
	if !known {
		return fmt.Errorf("%w, and no server of that name published itself: nothing to remove", why)
	}
	return nil
}

// removeNoFsyncMember removes the server's no-fsync member; its
// members start empty and join again at every start, so a leftover entry
// is replaced then: a failure is a warning.
func removeNoFsyncMember(ctx context.Context, o RemoveOptions, tls etcd.TLS, peerHosts []string, out io.Writer) {
	err := etcd.Remove(ctx, []string{DurableEtcdURL(o.NoFsyncEtcdPort)}, tls, o.Name, peerHosts)
	switch {
	case errors.Is(err, etcd.ErrNoSuchMember):
		fmt.Fprintf(out, "%s had no member in the no-fsync etcd\n", o.Name)
	case err != nil:
		fmt.Fprintf(out, "warning: the no-fsync etcd kept %s's member: %v\n", o.Name, err)
	default:
		fmt.Fprintf(out, "removed %s from the no-fsync etcd\n", o.Name)
	}
}

// removePartitionMembers removes the server's member of every partition
// the durable etcd records, and during a migration of every partition it
// moves to, through this server's own member of each (their membership
// is the durable etcd's, whose quorum check passed) or, for a partition
// this server does not run yet, through its recorded members. It forgets
// the server's records and its claim to seed a partition. A removal that
// fails is an error: running the command again finishes it.
func removePartitionMembers(ctx context.Context, durable *clientv3.Client, o RemoveOptions, tls etcd.TLS, peerHosts []string, out io.Writer) error {
	layout, _, err := etcd.ReadLayout(ctx, durable)
	if err != nil {
		return err
	}
	mig, migrating, err := etcd.ReadMigration(ctx, durable)
	if err != nil {
		return err
	}
	names := slices.Clone(layout.Partitions)
	for _, name := range mig.To {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		p, ok := constants.StorePartitionNamed(name)
		if !ok {
			return fmt.Errorf("the cluster records a partition %q this release does not know", name)
		}
		endpoints := []string{DurableEtcdURL(o.EtcdPort + p.PortOffset)}
		if !slices.Contains(layout.Partitions, name) {
			if endpoints, err = etcd.PartitionMembers(ctx, durable, name, o.Name); err != nil {
				return err
			}
		}
		if len(endpoints) > 0 {
			if err := removePartitionMember(ctx, endpoints, name, o, tls, peerHosts, out); err != nil {
				return err
			}
		}
		if err := etcd.ForgetPartitionMember(ctx, durable, name, o.Name); err != nil {
			return err
		}
		if migrating {
			if err := etcd.ReleaseSeed(ctx, durable, name, o.Name); err != nil {
				return err
			}
		}
	}
	return etcd.ForgetServerLayout(ctx, durable, o.Name)
}

func removePartitionMember(ctx context.Context, endpoints []string, name string, o RemoveOptions, tls etcd.TLS, peerHosts []string, out io.Writer) error {
	err := etcd.Remove(ctx, endpoints, tls, o.Name, peerHosts)
	switch {
	case errors.Is(err, etcd.ErrNoSuchMember):
		fmt.Fprintf(out, "%s had no member in the %s partition\n", o.Name, name)
	case err != nil:
		return fmt.Errorf("the %s partition's etcd: %w (run the removal again to finish it)", name, err)
	default:
		fmt.Fprintf(out, "removed %s from the %s partition\n", o.Name, name)
	}
	return nil
}

// serverPeerHosts are the hosts the server's etcd members take their
// peers at, by which the removal finds a member of it that never started
// (etcd.Remove): its durable member's, read before that is removed, else
// the host of the kube-apiserver URL it published (its durable member
// never started, or the durable store is external).
func serverPeerHosts(ctx context.Context, client kubernetes.Interface, o RemoveOptions, tls etcd.TLS, externalDurable bool) ([]string, error) {
	if !externalDurable {
		cli, err := etcd.NewClient([]string{DurableEtcdURL(o.EtcdPort)}, tls)
		if err != nil {
			return nil, err
		}
		defer cli.Close()
		members, err := etcd.Members(ctx, cli)
		if err != nil {
			return nil, err
		}
		if hosts := etcd.PeerHosts(members, o.Name); len(hosts) > 0 {
			return hosts, nil
		}
	}
	published, err := join.PublishedServers(ctx, client)
	if err != nil {
		return nil, err
	}
	if u, err := url.Parse(published[o.Name]); err == nil && u.Hostname() != "" {
		return []string{u.Hostname()}, nil
	}
	return nil, nil
}

func adminClient(dataDir string) (kubernetes.Interface, error) {
	restCfg, err := kubeconfig.RESTConfig(AdminKubeconfig(dataDir))
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(restCfg)
}

func forgetServerObjects(ctx context.Context, client kubernetes.Interface, o RemoveOptions, out io.Writer) error {
	if err := recordRemoved(ctx, client, o.Name, out); err != nil {
		return err
	}
	// Its name stays a server's: a join token never becomes its node.
	if err := approver.RecordServerName(ctx, client, o.Name); err != nil {
		return err
	}
	if err := join.ForgetServer(ctx, client, o.Name); err != nil {
		return err
	}
	err := client.CoreV1().Nodes().Delete(ctx, o.Name, metav1.DeleteOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("deleting Node %s: %w", o.Name, err)
	default:
		fmt.Fprintf(out, "deleted Node %s\n", o.Name)
	}
	// Its node's join binds the name for an hour: a rejoin under it, with
	// a new key, would be refused until then.
	released, err := approver.ReleaseNodeName(ctx, client, o.Name)
	if err != nil {
		return err
	}
	if len(released) > 0 {
		fmt.Fprintf(out, "deleted the client certificate requests of node %s: %s\n", o.Name, strings.Join(released, ", "))
	}
	fmt.Fprintf(out, "server %s removed; to bring it back, start it with an empty --data-dir and --server, --token\n", o.Name)
	return nil
}

// recordRemoved lists the server's kube-apiserver address among the
// removed servers (k1m-cluster), read before ForgetServer deletes it:
// agents keep every server they have seen until the cluster says it was
// removed (pkg/agent/loadbalancer).
func recordRemoved(ctx context.Context, client kubernetes.Interface, name string, out io.Writer) error {
	published, err := join.PublishedServers(ctx, client)
	if err != nil {
		return err
	}
	apiURL, ok := published[name]
	if !ok {
		return nil
	}
	address, err := join.ServerAddress(apiURL)
	if err != nil {
		return err
	}
	if err := join.RecordRemovedServer(ctx, client, address); err != nil {
		return err
	}
	fmt.Fprintf(out, "agents forget %s (its kube-apiserver at %s)\n", name, address)
	return nil
}
