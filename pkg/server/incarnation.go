package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/fsutil"
)

// incarnationRecord is what DATA-DIR/incarnation.json keeps: the
// incarnation (package etcd) the server's durable data is of, and the
// client URLs of the other servers' durable etcds when it last ran,
// which the next start asks before its own etcd starts.
type incarnationRecord struct {
	Incarnation etcd.Incarnation `json:"incarnation"`
	Peers       []string         `json:"peers,omitempty"`
}

func incarnationPath(dataDir string) string { return datadir.Server(dataDir).Incarnation() }

// readIncarnation is the record; ok is false when there is none (data
// from a build before incarnations, or none yet).
func readIncarnation(dataDir string) (rec incarnationRecord, ok bool, err error) {
	data, err := os.ReadFile(incarnationPath(dataDir))
	if errors.Is(err, os.ErrNotExist) {
		return incarnationRecord{}, false, nil
	}
	if err != nil {
		return incarnationRecord{}, false, err
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return incarnationRecord{}, false, fmt.Errorf("%s: %w", incarnationPath(dataDir), err)
	}
	return rec, true, nil
}

func writeIncarnation(dataDir string, rec incarnationRecord) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFile(incarnationPath(dataDir), append(data, '\n'), 0o600)
}

// peerIncarnationTimeout bounds the read of one other server's
// incarnation: a server that does not answer is down, and etcd's own
// fence (cluster IDs, removed members) holds for it.
const peerIncarnationTimeout = 3 * time.Second

// checkIncarnation refuses, before the durable etcd starts, a server of
// several whose data is of another incarnation than the other servers'
// (fenceError). It asks each server its last start knew, once per
// start: nothing per node.
func (s *Server) checkIncarnation(ctx context.Context) error {
	rec, ok, err := readIncarnation(s.cfg.DataDir)
	if err != nil || !ok {
		return err
	}
	for _, peer := range rec.Peers {
		theirs, err := etcd.ReadIncarnation(ctx, peer, EtcdClientTLS(s.cfg.DataDir), peerIncarnationTimeout)
		if err != nil {
			continue
		}
		if err := fenceError(s.cfg.DataDir, s.nodeName, rec.Incarnation, peer, theirs); err != nil {
			return err
		}
	}
	return nil
}

// fenceError says why a server whose data is of incarnation mine cannot
// start beside the durable etcd at peer, of incarnation theirs; nil when
// it can.
func fenceError(dataDir, node string, mine etcd.Incarnation, peer string, theirs etcd.Incarnation) error {
	switch mine.FenceAgainst(theirs) {
	case etcd.PeerReplaced:
		return fmt.Errorf("the durable etcd at %s still runs incarnation %s, which this server's %s replaced: "+
			"stop every other server before the restored one starts; once it runs, each rejoins it with an empty --data-dir (docs/operations.md, \"Restoring a cluster of several servers\")",
			peer, theirs, mine)
	case etcd.Stale:
		return fmt.Errorf("this server's data (%s) is of incarnation %s, but the durable etcd at %s runs incarnation %s: "+
			"the cluster was restored or reset since, and this data is the cluster as it was before, which must not rejoin it; "+
			"on a running server run k1m server remove %s, then move %s away and start this server with an empty --data-dir, --server and --token (docs/operations.md, \"Restoring a cluster of several servers\")",
			dataDir, mine, peer, theirs, node, dataDir)
	}
	return nil
}

// recordIncarnation records, once the durable etcd runs, its incarnation
// (made now when it records none: a new cluster, or data from a build
// before incarnations) and the other servers' durable etcds, in
// DATA-DIR/incarnation.json. One transaction per start.
func (s *Server) recordIncarnation(ctx context.Context, durable *etcd.Running, hadData bool) error {
	how := "created"
	if hadData {
		how = "first recorded on data from a build before incarnations"
	}
	fresh, err := etcd.NewIncarnation("", how, time.Now())
	if err != nil {
		return err
	}
	cli, err := etcd.NewClient([]string{durable.Member.ClientURL()}, EtcdClientTLS(s.cfg.DataDir))
	if err != nil {
		return err
	}
	defer cli.Close()
	inc, err := etcd.EnsureIncarnation(ctx, cli, fresh)
	if err != nil {
		return err
	}
	return writeIncarnation(s.cfg.DataDir, incarnationRecord{Incarnation: inc, Peers: durable.OtherClientURLs()})
}

// newIncarnation starts the incarnation a restore or reset makes on the
// member (stopped, its data restored or about to be reset): started
// alone, it records the incarnation and forgets the no-fsync members,
// which are the old incarnation's; the record keeps the servers the old
// one knew, which the next start asks (checkIncarnation).
func (s *Server) newIncarnation(ctx context.Context, member etcd.Member, next etcd.Incarnation) error {
	r, err := etcd.Start(ctx, member)
	if err != nil {
		return fmt.Errorf("--cluster-reset: %w", err)
	}
	defer r.Stop()
	cli, err := etcd.NewClient([]string{member.ClientURL()}, EtcdClientTLS(s.cfg.DataDir))
	if err != nil {
		return err
	}
	defer cli.Close()
	if next.Replaces == "" {
		// Data from a build before DATA-DIR/incarnation.json: the
		// snapshot's (or the data's) own record names what it replaces.
		if was, err := etcd.ReadIncarnation(ctx, member.ClientURL(), EtcdClientTLS(s.cfg.DataDir), requestTimeout); err == nil {
			next.Replaces = was.ID
		}
	}
	if err := etcd.SetIncarnation(ctx, cli, next); err != nil {
		return err
	}
	if err := etcd.ForgetNoFsyncMembers(ctx, cli); err != nil {
		return err
	}
	if err := etcd.ForgetPartitionMembers(ctx, cli); err != nil {
		return err
	}
	old, _, err := readIncarnation(s.cfg.DataDir)
	if err != nil {
		return err
	}
	s.step("the durable data is incarnation %s now (it replaces %s): a server with data of an earlier one is refused", next, orNone(next.Replaces))
	return writeIncarnation(s.cfg.DataDir, incarnationRecord{Incarnation: next, Peers: old.Peers})
}

func orNone(id string) string {
	if id == "" {
		return "none recorded"
	}
	return id
}

// requestTimeout bounds one request to the server's own etcd member.
const requestTimeout = 10 * time.Second
