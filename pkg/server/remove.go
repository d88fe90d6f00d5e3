package server

import (
	"context"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/kubeconfig"
)

// RemoveOptions name the server that runs a removal (its data directory
// and etcd ports) and the server to remove.
type RemoveOptions struct {
	DataDir                     string
	EtcdPort, EphemeralEtcdPort int
	Name                        string
}

// RemoveServer takes a server out of its cluster, from another server: its
// durable etcd member first (refused, with nothing changed, when the
// members left could not keep a quorum), then its no-fsync member, its
// records, and its Node. A server removed this way joins again only with
// an empty data directory (k1m server --server ... on a fresh one).
func RemoveServer(ctx context.Context, o RemoveOptions, out io.Writer) error {
	client, err := adminClient(o.DataDir)
	if err != nil {
		return err
	}
	tls := EtcdClientTLS(o.DataDir)
	err = etcd.Remove(ctx, []string{DurableEtcdURL(o.EtcdPort)}, tls, o.Name)
	switch {
	case errors.Is(err, etcd.ErrNoSuchMember):
		// An API-server-only server has a record but no member; a name
		// with neither is a mistake.
		known, knownErr := join.ServerKnown(ctx, client, o.Name)
		if knownErr != nil {
			return knownErr
		}
		if !known {
			return fmt.Errorf("%w, and no server of that name published itself: nothing to remove", err)
		}
		fmt.Fprintf(out, "%s has no etcd member (an API-server-only server, --disable-etcd)\n", o.Name)
	case err != nil:
		return fmt.Errorf("durable etcd: %w", err)
	default:
		fmt.Fprintf(out, "removed %s from the durable etcd\n", o.Name)
	}
	err = etcd.Remove(ctx, []string{DurableEtcdURL(o.EphemeralEtcdPort)}, tls, o.Name)
	switch {
	case errors.Is(err, etcd.ErrNoSuchMember):
		fmt.Fprintf(out, "%s had no member in the no-fsync etcd\n", o.Name)
	case err != nil:
		// Its members start empty and join again at every start: a
		// leftover entry is replaced then; say so, and go on.
		fmt.Fprintf(out, "warning: the no-fsync etcd kept %s's member: %v\n", o.Name, err)
	default:
		fmt.Fprintf(out, "removed %s from the no-fsync etcd\n", o.Name)
	}
	cli, err := etcd.NewClient([]string{DurableEtcdURL(o.EtcdPort)}, tls)
	if err != nil {
		return err
	}
	defer cli.Close()
	if err := etcd.ForgetEphemeral(ctx, cli, o.Name); err != nil {
		return err
	}
	return forgetServerObjects(ctx, client, o, out)
}

func adminClient(dataDir string) (kubernetes.Interface, error) {
	restCfg, err := kubeconfig.RESTConfig(AdminKubeconfig(dataDir))
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(restCfg)
}

func forgetServerObjects(ctx context.Context, client kubernetes.Interface, o RemoveOptions, out io.Writer) error {
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
	fmt.Fprintf(out, "server %s removed; to bring it back, start it with an empty --data-dir and --server, --token\n", o.Name)
	return nil
}
