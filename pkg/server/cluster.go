package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/clock"
	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/fsutil"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/serverbundle"
	"k1m.dev/k1m/pkg/version"
)

// membership is this server's place in a multi-server cluster.
type membership struct {
	// clustered: the etcds serve other servers (peer TLS on the
	// advertise address); false for a lone server.
	clustered bool
	// joining: the durable etcd has no data yet and joins the members at
	// seeds as a learner.
	joining bool
	seeds   []string
}

// clusterMarker records in the data directory that the server is one of a
// multi-server cluster, so that a restart without --cluster-init (or
// --server) keeps its etcds reachable by the others.
func clusterMarker(dataDir string) string { return datadir.Server(dataDir).MultiServer() }

// IsClustered tells whether the server of dataDir is one of several
// (started with --cluster-init or --server).
func IsClustered(dataDir string) bool { return fsutil.Exists(clusterMarker(dataDir)) }

func durableHasData(dataDir string) bool { return etcd.HasData(datadir.Server(dataDir).Etcd()) }

// joinedBefore tells a joining server's restart from its first start: its
// durable member has data, or, on a server without one (--disable-etcd,
// --datastore-endpoint), the marker says it joined.
func (s *Server) joinedBefore(marked bool) bool {
	if s.cfg.DisableEtcd || len(s.cfg.ExternalDurable) > 0 {
		return marked
	}
	return durableHasData(s.cfg.DataDir)
}

// phaseCluster settles the membership; a joining server's first start
// gets the cluster's shared files here, after checking that its
// cluster-wide settings are the cluster's (refused before anything is
// written, naming each flag that differs).
func (s *Server) phaseCluster(ctx context.Context) (membership, error) {
	_, markerErr := os.Stat(clusterMarker(s.cfg.DataDir))
	marked := markerErr == nil
	m := membership{clustered: marked || s.cfg.ClusterInit || s.cfg.JoinServer != ""}
	if s.cfg.JoinServer != "" && !s.joinedBefore(marked) {
		if !marked && fsutil.Exists(filepath.Join(TLSDir(s.cfg.DataDir), "ca.key")) {
			return membership{}, fmt.Errorf("--server: %s holds a cluster of its own (a lone or first server's CAs): a joining server needs an empty --data-dir (or start this one without --server)", s.cfg.DataDir)
		}
		if s.cfg.JoinToken == (pki.Token{}) {
			return membership{}, s.noJoinToken()
		}
		seeds, err := s.fetchClusterFiles(ctx)
		if err != nil {
			return membership{}, err
		}
		m.joining, m.seeds = true, seeds
	}
	if m.clustered && !marked {
		how := "--cluster-init"
		if s.cfg.JoinServer != "" {
			how = "joined " + s.cfg.JoinServer
		}
		if err := fsutil.WriteFile(clusterMarker(s.cfg.DataDir), []byte(how+"\n"), 0o600); err != nil {
			return membership{}, err
		}
	}
	return m, nil
}

// noJoinToken is the error of a server that must join and has no token:
// validation lets --token-file name a missing file (deleted after the
// join), and only here is it known that this server has not joined yet.
func (s *Server) noJoinToken() error {
	return fmt.Errorf("--token-file %s does not exist, and this server has not joined the cluster of %s yet: write the cluster's server token (a server's DATA-DIR/server-token) to it, mode 0600 (k1m server deletes it once it has joined)", s.cfg.TokenFile, s.cfg.JoinServer)
}

// fetchClusterFiles joins the way an agent does (the token pins the CA),
// checks the settings, and writes the shared files the token opens.
func (s *Server) fetchClusterFiles(ctx context.Context) ([]string, error) {
	token := s.cfg.JoinToken
	s.step("joining the cluster of %s with token %s", s.cfg.JoinServer, token.TokenID())
	found, err := join.Discover(ctx, s.cfg.JoinServer, token)
	if err != nil {
		return nil, joinFlagError(err)
	}
	if err := s.checkRelease(found.ServerVersions); err != nil {
		return nil, fmt.Errorf("--server %s: %w", s.cfg.JoinServer, err)
	}
	fetched, err := s.fetchServerBootstrap(ctx, found.CAPEM)
	if err != nil {
		return nil, joinFlagError(err)
	}
	bundle, err := serverbundle.Open(fetched.Sealed, token.Seal)
	if errors.Is(err, serverbundle.ErrWrongToken) {
		return nil, fmt.Errorf("--token: %w: join servers with a server's DATA-DIR/server-token", err)
	}
	if err != nil {
		return nil, err
	}
	if err := checkClusterSettings(s.cfg, found.Settings, bundle.SecretsEncryption, fetched.Datastore); err != nil {
		return nil, err
	}
	if err := bundle.Write(TLSDir(s.cfg.DataDir)); err != nil {
		return nil, err
	}
	if durable := fetched.Datastore.Durable; len(durable) > 0 {
		s.step("got the cluster's CAs and keys; its durable store is the external etcd at %s", strings.Join(durable, ","))
	} else {
		s.step("got the cluster's CAs and keys; its durable etcd members: %s", strings.Join(fetched.DurableEtcdURLs(), ", "))
	}
	return fetched.DurableEtcdURLs(), nil
}

// bootstrapWait is how long a joining server waits for the first server
// to publish the server bootstrap: a lone server's data restarted with
// --cluster-init answers /readyz (and keeps its old token files) a moment
// before it publishes.
const bootstrapWait = time.Minute

// fetchServerBootstrap reads the server bootstrap, waiting up to
// bootstrapWait while the server publishes none.
func (s *Server) fetchServerBootstrap(ctx context.Context, caPEM []byte) (join.ServerBootstrap, error) {
	deadline := time.Now().Add(bootstrapWait)
	for said := false; ; said = true {
		fetched, err := join.FetchServerBootstrap(ctx, s.cfg.JoinServer, caPEM, s.cfg.JoinToken)
		if !errors.Is(err, join.ErrNotPublished) || time.Now().After(deadline) {
			return fetched, err
		}
		if !said {
			s.step("%s publishes no %s yet (a first server started with --cluster-init publishes it once its kube-apiserver is up): waiting up to %s", s.cfg.JoinServer, join.ServerBootstrapName, bootstrapWait)
		}
		if err := clock.Sleep(ctx, 2*time.Second); err != nil {
			return join.ServerBootstrap{}, err
		}
	}
}

// joinFlagError names the joining server's flag for a join error.
func joinFlagError(err error) error {
	var je *join.Error
	if !errors.As(err, &je) {
		return err
	}
	if je.Input == join.InputToken {
		return fmt.Errorf("--token: %v", je.Err)
	}
	return fmt.Errorf("--server: %v", je.Err)
}

// checkClusterSettings refuses a joining server whose cluster-wide
// settings differ from the cluster's: every server runs the same
// controllers and kubelet profile over one datastore.
func checkClusterSettings(cfg *config.CompletedServer, cluster join.Settings, secretsEncryption bool, datastore join.Datastore) error {
	var errs []error
	differs := func(flag, mine, theirs string) {
		if mine != theirs {
			errs = append(errs, fmt.Errorf("%s %s differs from the cluster's %s: every server of a cluster has the same; start this one with %s=%s", flag, mine, theirs, flag, theirs))
		}
	}
	differs("--node-lease-renew-interval", cfg.Lease.RenewInterval.String(), cluster.RenewInterval.String())
	differs("--cluster-domain", cfg.ClusterDomain, cluster.ClusterDomain)
	differs("--cluster-cidr", cfg.ClusterCIDR, cluster.ClusterCIDR)
	differs("--service-cidr", cfg.ServiceCIDR, cluster.ServiceCIDR)
	differs("--secrets-encryption", fmt.Sprint(cfg.SecretsEncryption), fmt.Sprint(secretsEncryption))
	if err := checkPodRoutes(cfg.Routes, cluster.PodRoutes); err != nil {
		errs = append(errs, err)
	}
	// Servers over different stores would serve different clusters.
	storeDiffers := func(flag string, mine, theirs []string) {
		m, t := endpointSet(mine), endpointSet(theirs)
		switch {
		case m == t:
		case t == "":
			errs = append(errs, fmt.Errorf("%s %s: the cluster keeps this store in its servers' embedded etcd; start this one without %s", flag, m, flag))
		case m == "":
			errs = append(errs, fmt.Errorf("%s is not set: the cluster keeps this store in the external etcd at %s; start this one with %s=%s", flag, t, flag, t))
		default:
			differs(flag, m, t)
		}
	}
	storeDiffers("--datastore-endpoint", cfg.ExternalDurable, datastore.Durable)
	storeDiffers("--no-fsync-datastore-endpoint", cfg.ExternalNoFsync, datastore.NoFsync)
	// A partition the cluster has and this server not (or the reverse) is
	// the layout check's to refuse; here the external etcd of each.
	for _, name := range constants.StorePartitionNames() {
		mine, theirs := cfg.ExternalPartitions[name], datastore.Partitions[name]
		if len(mine) > 0 && len(theirs) > 0 {
			storeDiffers(config.PartitionEndpointFlag+" "+name, mine, theirs)
		}
	}
	return errors.Join(errs...)
}

// checkPodRoutes refuses a server whose --pod-routes is not the cluster's:
// on a join, and at a restart (publishing its own would switch the
// cluster's nodes, which keep the routes of the mode they started with).
// The mode is chosen when the cluster is made.
func checkPodRoutes(mine, cluster constants.PodRoutes) error {
	if mine == cluster {
		return nil
	}
	return fmt.Errorf("--pod-routes %s differs from the cluster's %s: every server of a cluster has the same, %s, chosen when the cluster is made; start this one with --pod-routes=%s",
		mine, cluster, constants.PodRoutesForms(), cluster)
}

// endpointSet shows an external store's endpoints in one order, "" for
// an embedded store.
func endpointSet(endpoints []string) string {
	sorted := slices.Sorted(slices.Values(endpoints))
	return strings.Join(sorted, ",")
}

// publishServer records the server and where its durable etcd serves
// (durable nil: none), and seals this server's copy of the shared files
// with the server token's seal: what the next joining server and k1m
// server remove read. A server without a seal makes one when the cluster
// has none yet (its first start as one of several, or the first start of
// this build); one whose seal the cluster no longer uses (rotated on
// another server) forgets it.
func (s *Server) publishServer(ctx context.Context, client kubernetes.Interface, token *serverToken, durable *etcd.Running) error {
	bundle, err := serverbundle.Read(TLSDir(s.cfg.DataDir), s.cfg.SecretsEncryption)
	if err != nil {
		return err
	}
	fresh := token.seal == ""
	if fresh {
		if token.seal, err = pki.NewSeal(); err != nil {
			return err
		}
		// Kept before it is published: a seal the cluster uses must not
		// exist only in memory. (DATA-DIR/token comes last: its presence
		// tells scripts the server is ready.)
		if err := s.writeServerToken(*token); err != nil {
			return err
		}
	}
	sealed, err := serverbundle.Seal(bundle, token.seal)
	if err != nil {
		return err
	}
	etcdURL := "" // an API-server-only server runs none
	if durable != nil {
		etcdURL = durable.Member.AdvertisedClientURL()
	}
	err = join.PublishServer(ctx, client, serverbundle.SealID(token.seal), sealed, s.nodeName, apiURL(s.advertise, s.cfg.HTTPSPort), etcdURL, s.datastore())
	if errors.Is(err, join.ErrSealRotated) {
		if !fresh {
			s.step("%v: %s removed; join servers with DATA-DIR/server-token of the server it was rotated on", err, ServerTokenFile(s.cfg.DataDir))
		}
		token.seal = ""
		return fsutil.RemoveIfExists(ServerTokenFile(s.cfg.DataDir))
	}
	if err == nil && fresh {
		s.step("made the server token's seal (%s): the shared files are sealed with it", ServerTokenFile(s.cfg.DataDir))
	}
	return err
}

// checkKubeletServingCA refuses a server of several whose kubelet serving CA
// is not the cluster's: kube-apiserver would refuse the kubelets whose
// serving certificates another server's controller-manager signed. That
// happens when servers of a build from before that CA are upgraded: the
// first to start makes it, the others would each make their own. A CA
// made at this start is removed again, so that the server starts cleanly
// once the cluster's is copied in.
func (s *Server) checkKubeletServingCA(ctx context.Context, client kubernetes.Interface, c *certs) error {
	cluster, err := join.ClaimKubeletServingCA(ctx, client, c.kubeletServing.CertPEM)
	if err != nil || bytes.Equal(bytes.TrimSpace(cluster), bytes.TrimSpace(c.kubeletServing.CertPEM)) {
		return err
	}
	what := "is not the cluster's"
	if c.kubeletServingMade {
		what = "was made at this start (the data directory is from a build before it) and is not the cluster's: it is removed again"
		if err := errors.Join(fsutil.RemoveIfExists(c.kubeletServing.cert), fsutil.RemoveIfExists(c.kubeletServing.key)); err != nil {
			return err
		}
	}
	return fmt.Errorf("this server's kubelet serving CA (%s) %s; copy %s.crt and %s.key from the DATA-DIR/tls of a server started with this build before, then start this one again",
		c.kubeletServing.cert, what, constants.KubeletServingCA, constants.KubeletServingCA)
}

// writeTokenFiles writes DATA-DIR/server-token when the server holds the
// seal, then DATA-DIR/token, then deletes --token-file: from then on a
// restart needs no token (DATA-DIR holds what it does), so the server
// token stays in DATA-DIR alone, as on every server.
func (s *Server) writeTokenFiles(token serverToken) error {
	if err := s.writeServerToken(token); err != nil {
		return err
	}
	if err := fsutil.WriteFile(TokenFile(s.cfg.DataDir), []byte(token.JoinToken().String()+"\n"), 0o600); err != nil {
		return err
	}
	return s.forgetTokenFile()
}

// forgetTokenFile deletes --token-file when there is one (also at a
// restart: a reinstall may have written it again).
func (s *Server) forgetTokenFile() error {
	path := s.cfg.TokenFile
	if path == "" {
		return nil
	}
	removed, err := fsutil.RemoveIfPresent(path)
	if err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	if removed {
		s.step("deleted --token-file %s: this server has joined, and a restart needs no token", path)
	}
	return nil
}

func (s *Server) writeServerToken(token serverToken) error {
	if token.seal == "" {
		return nil
	}
	server := token.JoinToken()
	server.Seal = token.seal
	return fsutil.WriteFile(ServerTokenFile(s.cfg.DataDir), []byte(server.String()+"\n"), 0o600)
}

// checkRelease refuses a server whose release cannot run next to the
// others' (pkg/version's skew rules), naming both: on a join before
// anything is written, on a start before the server publishes itself.
func (s *Server) checkRelease(servers map[string]string) error {
	own, err := join.ServerAddress(apiURL(s.advertise, s.cfg.HTTPSPort))
	if err != nil {
		return err
	}
	if err := version.CheckServer(version.Mine(), own, servers); err != nil {
		return fmt.Errorf("%w (docs/operations.md#upgrades)", err)
	}
	return nil
}
