package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/poll"
	"k1m.dev/k1m/pkg/secretsenc"
	"k1m.dev/k1m/pkg/serverbundle"
)

// SecretsKeySetFile is where a server keeps the Secrets encryption key set
// it runs with (mode 0600): on several servers, a copy of the cluster's.
func SecretsKeySetFile(dataDir string) string {
	return datadir.Server(dataDir).SecretsKeySet()
}

// phaseSecretsKeys settles the key set before kube-apiserver starts. A
// server of several reads the cluster's set from the durable etcd and
// adopts it (its keys, its write key), keeping after them any key of its
// own the cluster's lacks: no Secret becomes unreadable. With no set
// anywhere, --secrets-encryption makes one (the cluster's, once
// published).
// (The cluster's set lacks what only this server had, or a set made here,
// until publishSecretsKeys adds it once kube-apiserver serves.)
func (s *Server) phaseSecretsKeys(ctx context.Context, c *certs, local etcds, stores etcdStores) (secretsenc.KeySet, error) {
	path := SecretsKeySetFile(s.cfg.DataDir)
	own, err := secretsenc.LoadKeySet(path, SecretsKeyFile(s.cfg.DataDir))
	if err != nil {
		return secretsenc.KeySet{}, fmt.Errorf("--secrets-encryption: %w", err)
	}
	var cluster secretsenc.KeySet
	if s.member.clustered {
		if cluster, err = s.clusterSecretsKeys(ctx, c, local, stores); err != nil {
			return secretsenc.KeySet{}, err
		}
	}
	set, _ := secretsenc.Adopt(cluster, own)
	if set.Empty() && s.cfg.SecretsEncryption {
		if set, err = secretsenc.NewKeySet(); err != nil {
			return secretsenc.KeySet{}, err
		}
	}
	if !set.Empty() && !set.Equal(own) {
		if err := secretsenc.SaveKeySet(path, set); err != nil {
			return secretsenc.KeySet{}, err
		}
		if !cluster.Empty() {
			s.step("adopted the cluster's Secrets encryption keys %s (write key %s)", strings.Join(set.Names(), ", "), set.Write)
		}
	}
	return set, nil
}

// clusterSecretsKeys reads and opens the cluster's key set (none: empty)
// from the etcd that holds ConfigMaps: the configmaps partition when the
// store has one, which the durable etcd then lacks.
func (s *Server) clusterSecretsKeys(ctx context.Context, c *certs, local etcds, stores etcdStores) (secretsenc.KeySet, error) {
	endpoints, tls := storeOfKey(join.SecretsKeysKey, local, stores)
	if len(endpoints) == 0 {
		endpoints, tls = []string{memberOfKey(join.SecretsKeysKey, local).ClientURL()}, s.storeTLS(c)
	}
	cli, err := etcd.NewClient(endpoints, tls)
	if err != nil {
		return secretsenc.KeySet{}, err
	}
	defer cli.Close()
	var sealed []byte
	read := func(serializable bool, timeout time.Duration) error {
		return poll.Until(ctx, 2*time.Second, timeout, "the cluster's Secrets encryption keys in the etcd of ConfigMaps", func(ctx context.Context) error {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			var err error
			sealed, err = join.SecretsKeysFromEtcd(rctx, cli, serializable)
			return err
		})
	}
	err = read(false, 20*time.Second)
	if err != nil && memberOfKey(join.SecretsKeysKey, local) != nil {
		// No quorum yet (every server restarting at once): this member's
		// own copy, as of when it stopped. A newer set is taken at the next
		// start (publishSecretsKeys says so).
		s.step("reading the cluster's Secrets encryption keys from this server's etcd member's own copy: %v", err)
		err = read(true, transientTimeout)
	} else if err != nil {
		err = read(false, transientTimeout)
	}
	if err != nil || sealed == nil {
		return secretsenc.KeySet{}, err
	}
	caKey, err := os.ReadFile(c.cluster.key)
	if err != nil {
		return secretsenc.KeySet{}, err
	}
	set, err := serverbundle.OpenKeys(sealed, caKey)
	if err != nil {
		return secretsenc.KeySet{}, fmt.Errorf("--secrets-encryption: %w", err)
	}
	return set, nil
}

// publishSecretsKeys records, once kube-apiserver serves, what this server
// runs with and, when the cluster's set lacks keys of it, the set with
// them added (merged with the set as it is now: another server may have
// changed it meanwhile, which this server then follows at its next
// start).
func (s *Server) publishSecretsKeys(ctx context.Context, client kubernetes.Interface, set secretsenc.KeySet) error {
	caKey, err := os.ReadFile(filepath.Join(TLSDir(s.cfg.DataDir), "ca.key"))
	if err != nil {
		return err
	}
	applied := join.AppliedKeys{Keys: set.Names(), Write: set.Write, Encrypt: s.cfg.SecretsEncryption && !set.Empty()}
	var behind bool
	err = join.UpdateSecretsKeys(ctx, client, s.nodeName, func(current []byte) ([]byte, join.AppliedKeys, error) {
		var cluster secretsenc.KeySet
		if current != nil {
			var err error
			if cluster, err = serverbundle.OpenKeys(current, caKey); err != nil {
				return nil, applied, fmt.Errorf("--secrets-encryption: %w", err)
			}
		}
		merged, added := secretsenc.Adopt(cluster, set)
		behind = !merged.Equal(set)
		if !added {
			return nil, applied, nil
		}
		sealed, err := serverbundle.SealKeys(merged, caKey)
		return sealed, applied, err
	})
	if err == nil && behind {
		s.step("the cluster's Secrets encryption keys changed while this server started: restart it to run with them")
	}
	return err
}

// storeOfKey is the etcd that holds key (kube-apiserver's spelling) when
// this server runs no member of it: the endpoints and TLS kube-apiserver
// is given. Empty endpoints: memberOfKey is this server's own member.
func storeOfKey(key string, local etcds, stores etcdStores) ([]string, etcd.TLS) {
	if memberOfKey(key, local) != nil {
		return nil, etcd.TLS{}
	}
	for _, p := range stores.partitions {
		if strings.HasPrefix(key, p.partition.KeyPrefix) {
			return p.urls, stores.tls
		}
	}
	return stores.durable, stores.tls
}

// memberOfKey is this server's member of the etcd that holds key: its
// member of the partition the key is in, else its durable member (nil: it
// runs none).
func memberOfKey(key string, local etcds) *etcd.Member {
	for _, r := range local.partitions {
		if strings.HasPrefix(key, partitionNamed(r.Member.Partition).KeyPrefix) {
			return &r.Member
		}
	}
	return memberOf(local.durable)
}
