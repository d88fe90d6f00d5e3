package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"k1m.dev/k1m/pkg/clock"
)

// requestTimeout bounds one membership request: a cluster that does not
// answer within it has no leader (no quorum) or is unreachable.
const requestTimeout = 10 * time.Second

// NewClient connects to the members at endpoints with the client
// certificate of tls.
func NewClient(endpoints []string, tls TLS) (*clientv3.Client, error) {
	return newClient(context.Background(), endpoints, tls)
}

// newClient is NewClient whose dial (and life) ctx also bounds.
func newClient(ctx context.Context, endpoints []string, tls TLS) (*clientv3.Client, error) {
	tlsCfg, err := transport.TLSInfo{CertFile: tls.CertFile, KeyFile: tls.KeyFile, TrustedCAFile: tls.CAFile}.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd client certificate: %w", err)
	}
	return clientv3.New(clientv3.Config{Context: ctx, Endpoints: endpoints, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// MemberInfo describes one member of a cluster.
type MemberInfo struct {
	ID         uint64
	Name       string // empty until a learner added by Join has started
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
}

func memberInfo(m *etcdserverpb.Member) MemberInfo {
	return MemberInfo{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner}
}

// Members lists the cluster's members, sorted by name.
func Members(ctx context.Context, cli *clientv3.Client) ([]MemberInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the etcd members at %s: %w", strings.Join(cli.Endpoints(), ","), err)
	}
	out := infos(resp.Members)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ErrDuplicateName says another member has the joining member's name.
var ErrDuplicateName = errors.New("duplicate member name")

// ErrPeerURLTaken says another member has the joining member's peer URL.
var ErrPeerURLTaken = errors.New("peer URL taken")

// Join adds m to the cluster the endpoints reach, as a learner (a member
// that receives the log but does not vote, so that a new member catching
// up cannot cost the cluster its quorum), and returns m ready to start
// with Start; Promote makes it a voting member once it has caught up.
// An entry of m's own from before (the server lost its data, or a join
// stopped half-way) is removed first; another member of the same name, or
// another server's member at m's peer URL, is refused. report gets
// progress lines.
func Join(ctx context.Context, endpoints []string, tls TLS, m Member, report func(string)) (Member, error) {
	cli, err := NewClient(endpoints, tls)
	if err != nil {
		return Member{}, err
	}
	defer cli.Close()
	for {
		members, err := Members(ctx, cli)
		if err != nil {
			return Member{}, err
		}
		var added *clientv3.MemberAddResponse
		err = removeStaleSelf(ctx, cli, members, m, report)
		if errors.Is(err, ErrDuplicateName) || errors.Is(err, ErrPeerURLTaken) {
			return Member{}, err // the refusal says all there is to say
		}
		if err == nil {
			added, err = addLearner(ctx, cli, m.PeerURL())
		}
		if errors.Is(err, rpctypes.ErrTooManyLearners) || errors.Is(err, rpctypes.ErrUnhealthy) {
			// etcd takes one learner at a time, and a new member only once
			// every voting member has been connected for 5 s: another
			// server is joining, or has just joined.
			report(fmt.Sprintf("%s: the cluster takes no new member yet (%v): another server is joining or has just joined; retrying in 2s", m.label(), err))
			if err := clock.Sleep(ctx, 2*time.Second); err != nil {
				return Member{}, err
			}
			continue
		}
		if err != nil {
			return Member{}, fmt.Errorf("adding etcd member %s (%s) as a learner: %w", m.Name, m.PeerURL(), err)
		}
		m.InitialCluster = initialCluster(added, m.Name)
		m.JoinExisting = true
		report(fmt.Sprintf("%s: added as a learner to the cluster of %s", m.label(), strings.Join(names(added.Members), ", ")))
		behind := awaitAddApplied(ctx, infos(added.Members), added.Member.ID, linearizableView(tls), addApplied)
		if err := ctx.Err(); err != nil {
			return Member{}, err
		}
		for _, line := range behind {
			report(fmt.Sprintf("%s: %s; starting anyway", m.label(), line))
		}
		return m, nil
	}
}

// addApplied bounds how long Join waits for the other members to apply
// the learner's addition, which takes them milliseconds: Wait in all, Ask
// for one answer of one member (a member that is down or cut off answers
// nothing, and is not waited for longer).
var addApplied = appliedWait{Wait: 10 * time.Second, Ask: 3 * time.Second}

type appliedWait struct{ Wait, Ask time.Duration }

// membersSeen lists the member IDs member m itself holds.
type membersSeen func(ctx context.Context, m MemberInfo) ([]uint64, error)

// awaitAddApplied asks every started member other than the learner, all
// at once, until each lists the learner in its own view, and returns a
// line for each member that did not, in the members' order: it did not
// answer within w.Ask (then it cannot answer the learner either, and is
// not asked again), or it still did not list the learner after w.Wait.
//
// Why: the learner's etcd, started right after the addition, takes the
// cluster's membership from the first peer that answers it and refuses to
// start ("member count is unequal") when that peer has not applied the
// addition yet; seen once when a third server joined.
func awaitAddApplied(ctx context.Context, members []MemberInfo, learner uint64, view membersSeen, w appliedWait) []string {
	ctx, cancel := context.WithTimeout(ctx, w.Wait)
	defer cancel()
	missing := make([]string, len(members))
	var asked sync.WaitGroup
	for i, m := range members {
		if m.ID == learner || m.Name == "" {
			continue // the learner itself, or another that has not started
		}
		asked.Add(1)
		go func() {
			defer asked.Done()
			missing[i] = awaitListed(ctx, m, learner, view, w)
		}()
	}
	asked.Wait()
	var lines []string
	for _, line := range missing {
		if line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

// awaitListed asks m until it lists the learner and returns "", or says
// why it stopped asking.
func awaitListed(ctx context.Context, m MemberInfo, learner uint64, view membersSeen, w appliedWait) string {
	for {
		askCtx, cancel := context.WithTimeout(ctx, w.Ask)
		ids, err := view(askCtx, m)
		cancel()
		behind := fmt.Sprintf("etcd member %s had not applied the addition after %v", m.Name, w.Wait)
		switch {
		case err == nil && slices.Contains(ids, learner):
			return ""
		case err != nil && ctx.Err() == nil: // this ask failed, not the whole wait
			return fmt.Sprintf("etcd member %s did not say whether it has applied the addition (%v)", m.Name, err)
		case err != nil:
			return behind
		}
		if clock.Sleep(ctx, 100*time.Millisecond) != nil {
			return behind
		}
	}
}

// linearizableView asks member m alone for its member list, linearizable:
// m answers once it has applied everything committed before the request,
// the addition included.
func linearizableView(tls TLS) membersSeen {
	return func(ctx context.Context, m MemberInfo) ([]uint64, error) {
		if len(m.ClientURLs) == 0 {
			return nil, errors.New("no client URL")
		}
		cli, err := newClient(ctx, m.ClientURLs, tls)
		if err != nil {
			return nil, err
		}
		defer cli.Close()
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return nil, err
		}
		ids := make([]uint64, 0, len(resp.Members))
		for _, mem := range resp.Members {
			ids = append(ids, mem.ID)
		}
		return ids, nil
	}
}

func infos(members []*etcdserverpb.Member) []MemberInfo {
	out := make([]MemberInfo, 0, len(members))
	for _, m := range members {
		out = append(out, memberInfo(m))
	}
	return out
}

// removeStaleSelf removes m's own entry from before: one of m's name at
// m's peer URL (the server lost its data), or a learner that never
// started at m's peer URL (m's own join stopped half-way). It refuses
// another member with m's name, and a started member of another name at
// m's peer URL: that is a live server, which a wrong advertise address
// must not evict.
func removeStaleSelf(ctx context.Context, cli *clientv3.Client, members []MemberInfo, m Member, report func(string)) error {
	for _, other := range members {
		samePeer := slices.Contains(other.PeerURLs, m.PeerURL())
		switch {
		case samePeer && (other.Name == m.Name || other.Name == ""):
			report(fmt.Sprintf("%s: removing this server's own member entry from before (id %x, %s): it lost its data, and joins again", m.label(), other.ID, m.PeerURL()))
			if err := removeMember(ctx, cli, other.ID); err != nil {
				return err
			}
		case samePeer:
			return fmt.Errorf("%w: etcd member %q (a running server, not this one) already has peer URL %s: each server needs an address of its own",
				ErrPeerURLTaken, other.Name, m.PeerURL())
		case other.Name == m.Name:
			return fmt.Errorf("%w: etcd member %q already exists at %s: give this server another --node-name, or remove the old one first (k1m server remove %s)",
				ErrDuplicateName, m.Name, strings.Join(other.PeerURLs, ","), m.Name)
		}
	}
	return nil
}

func addLearner(ctx context.Context, cli *clientv3.Client, peerURL string) (*clientv3.MemberAddResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := cli.MemberAddAsLearner(ctx, []string{peerURL})
	return resp, rpcError(err)
}

func removeMember(ctx context.Context, cli *clientv3.Client, id uint64) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	_, err := cli.MemberRemove(ctx, id)
	return rpcError(err)
}

// rpcError turns a gRPC status into etcd's typed error, for errors.Is.
func rpcError(err error) error {
	if err == nil {
		return nil
	}
	if typed := rpctypes.Error(err); typed != err {
		return typed
	}
	return err
}

// initialCluster is etcd's --initial-cluster for the member just added
// (it has no name in the list yet).
func initialCluster(added *clientv3.MemberAddResponse, name string) string {
	var parts []string
	for _, mem := range added.Members {
		memName := mem.Name
		if mem.ID == added.Member.ID {
			memName = name
		}
		if memName == "" {
			continue // another learner that has not started: not ours to name
		}
		for _, peer := range mem.PeerURLs {
			parts = append(parts, memName+"="+peer)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func names(members []*etcdserverpb.Member) []string {
	var out []string
	for _, m := range members {
		if m.Name != "" {
			out = append(out, m.Name)
		}
	}
	sort.Strings(out)
	return out
}

// IsLearner tells whether the running member is still a learner.
func (r *Running) IsLearner() bool { return r.etcd.Server.IsLearner() }

// Promote makes the running member a voting member once it has caught up
// with the leader, retrying until then; it returns at once for a member
// that votes already. endpoints are the other members' client URLs: a
// learner serves no cluster requests itself.
func (r *Running) Promote(ctx context.Context, endpoints []string, tls TLS, report func(string)) error {
	if !r.IsLearner() {
		return nil
	}
	cli, err := NewClient(endpoints, tls)
	if err != nil {
		return err
	}
	defer cli.Close()
	id := uint64(r.etcd.Server.ID())
	start := time.Now()
	for {
		pctx, cancel := context.WithTimeout(ctx, requestTimeout)
		_, err := cli.MemberPromote(pctx, id)
		cancel()
		err = rpcError(err)
		switch {
		case err == nil || errors.Is(err, rpctypes.ErrMemberNotLearner):
			// Returned once the leader committed it; this member votes
			// once it has applied it too.
			for r.IsLearner() {
				if err := clock.Sleep(ctx, 100*time.Millisecond); err != nil {
					return err
				}
			}
			report(fmt.Sprintf("%s: promoted to a voting member after %s", r.Member.label(), time.Since(start).Round(time.Millisecond)))
			return nil
		case errors.Is(err, rpctypes.ErrMemberLearnerNotReady):
			// Still catching up with the leader's log.
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			report(fmt.Sprintf("%s: promotion refused (%v); retrying", r.Member.label(), err))
		}
		if err := clock.Sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

// OtherClientURLs are the client URLs of every voting member but self,
// from the member list the running member knows.
func (r *Running) OtherClientURLs() []string {
	self := r.etcd.Server.ID()
	var out []string
	for _, m := range r.etcd.Server.Cluster().Members() {
		if m.ID != self && !m.IsLearner {
			out = append(out, m.ClientURLs...)
		}
	}
	sort.Strings(out)
	return out
}

// SetPeerURL makes the member's entry advertise its current peer URL: a
// lone server's member was added with a loopback peer URL, which peers on
// other machines cannot reach; --cluster-init on its data moves it.
func (r *Running) SetPeerURL(ctx context.Context, tls TLS) (bool, error) {
	want := r.Member.PeerURL()
	self := r.etcd.Server.Cluster().Member(r.etcd.Server.ID())
	if self == nil || slices.Equal(self.PeerURLs, []string{want}) {
		return false, nil
	}
	cli, err := NewClient([]string{r.Member.ClientURL()}, tls)
	if err != nil {
		return false, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := cli.MemberUpdate(ctx, uint64(self.ID), []string{want}); err != nil {
		return false, fmt.Errorf("%s: moving its peer URL from %s to %s: %w", r.Member.label(), strings.Join(self.PeerURLs, ","), want, err)
	}
	return true, nil
}

// Remove takes the member called name out of the cluster the endpoints
// reach (the first: the member of the server running the removal, which
// it refuses to remove). When no member has the name, it takes a learner
// that never started whose peer URL is on one of peerHosts: the entry a
// server's join added before its etcd failed to start, which has no name
// yet and would hold the cluster's one learner place. It refuses when
// what remains could not keep a quorum: fewer voting members answering
// than a majority of those left, or no member left at all.
func Remove(ctx context.Context, endpoints []string, tls TLS, name string, peerHosts []string) error {
	cli, err := NewClient(endpoints, tls)
	if err != nil {
		return err
	}
	defer cli.Close()
	members, err := Members(ctx, cli)
	if err != nil {
		return err
	}
	target := removalTarget(members, name, peerHosts)
	if target < 0 {
		return fmt.Errorf("%w: no etcd member is called %q (members: %s)", ErrNoSuchMember, name, strings.Join(memberNames(members), ", "))
	}
	self, err := localMemberID(ctx, cli, endpoints[0])
	if err != nil {
		return fmt.Errorf("etcd at %s (the member of the server running the removal): %w", endpoints[0], err)
	}
	if self == members[target].ID {
		return fmt.Errorf("%s is the server this runs on (its etcd at %s): run the removal on another server", name, endpoints[0])
	}
	if err := checkQuorumAfterRemoval(ctx, members, target, func(ctx context.Context, m MemberInfo) bool { return answers(ctx, cli, m) }); err != nil {
		return err
	}
	// etcd refuses a change until every voting member has been connected
	// for 5 s: right after a member joined or came back.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := removeMember(ctx, cli, members[target].ID)
		if !errors.Is(err, rpctypes.ErrUnhealthy) || time.Now().After(deadline) {
			return err
		}
		if err := clock.Sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}

// removalTarget is the index of the member called name, else of an
// unstarted one (no name) with a peer URL on one of peerHosts; -1: none.
func removalTarget(members []MemberInfo, name string, peerHosts []string) int {
	for i, m := range members {
		if m.Name == name {
			return i
		}
	}
	for i, m := range members {
		if m.Name == "" && slices.ContainsFunc(m.PeerURLs, func(peer string) bool { return slices.Contains(peerHosts, urlHost(peer)) }) {
			return i
		}
	}
	return -1
}

// PeerHosts are the hosts of the peer URLs of the member called name
// (none when no member is).
func PeerHosts(members []MemberInfo, name string) []string {
	var hosts []string
	for _, m := range members {
		if m.Name != name {
			continue
		}
		for _, peer := range m.PeerURLs {
			if h := urlHost(peer); h != "" && !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
	}
	return hosts
}

// urlHost is the host of a URL, without brackets ("" when it has none).
func urlHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// ErrNoSuchMember says no member has the name.
var ErrNoSuchMember = errors.New("no such member")

func localMemberID(ctx context.Context, cli *clientv3.Client, endpoint string) (uint64, error) {
	sctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	status, err := cli.Status(sctx, endpoint)
	if err != nil {
		return 0, err
	}
	return status.Header.MemberId, nil
}

// checkQuorumAfterRemoval refuses a removal that leaves too few voting
// members answering for a majority of those left.
func checkQuorumAfterRemoval(ctx context.Context, members []MemberInfo, target int, answer func(context.Context, MemberInfo) bool) error {
	voters, answering := 0, 0
	var silent []string
	for i, m := range members {
		if i == target || m.IsLearner {
			continue
		}
		voters++
		if answer(ctx, m) {
			answering++
		} else {
			silent = append(silent, m.Name)
		}
	}
	quorum := voters/2 + 1
	switch {
	case voters == 0:
		return fmt.Errorf("%s is the last voting etcd member: removing it would leave no cluster (to start over, use --cluster-reset on a server)", members[target].Name)
	case answering < quorum:
		return fmt.Errorf("removing %s would leave %d voting etcd members of which %d answer (%s silent): a quorum needs %d; bring a member back first",
			members[target].Name, voters, answering, strings.Join(silent, ", "), quorum)
	}
	return nil
}

func answers(ctx context.Context, cli *clientv3.Client, m MemberInfo) bool {
	for _, u := range m.ClientURLs {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Status(sctx, u)
		cancel()
		if err == nil {
			return true
		}
	}
	return false
}

func memberNames(members []MemberInfo) []string {
	out := make([]string, 0, len(members))
	for _, m := range members {
		name := m.Name
		if name == "" {
			name = fmt.Sprintf("(unstarted learner %x)", m.ID)
		}
		out = append(out, name)
	}
	return out
}

// label names the member in messages: both etcds of a server of several
// carry the server's name.
func (m Member) label() string {
	if m.Partition != "" {
		return "etcd " + m.Partition + " partition " + m.Name
	}
	if m.NoFsync {
		return "no-fsync etcd " + m.Name
	}
	return "etcd " + m.Name
}
