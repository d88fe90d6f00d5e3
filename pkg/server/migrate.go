package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/kubeconfig"
	"k1m.dev/k1m/pkg/poll"
)

// FreezeName names the ValidatingAdmissionPolicy (and its binding) that
// refuses writes to the resources a migration moves.
const FreezeName = "k1m-partitions-migration"

// Migrate moves resources of a running cluster into partitions
// (k1m etcd-partitions migrate), run on a server:
//
//  1. every published server must record the cluster's current layout
//     (it runs a release that takes part);
//  2. writes to the moved resources are refused cluster-wide (FreezeName),
//     confirmed by a refused dry-run through every server's API;
//  3. the migration is recorded; the operator restarts each server with
//     the new --etcd-partitions, and the first seeds each partition from
//     its durable member while the others join it;
//  4. once every server records the new layout, it is recorded as the
//     cluster's, the moved keys leave the durable etcd, and the freeze
//     is lifted.
//
// Each step is safe to run again: an interrupted Migrate resumes.
type Migrate struct {
	DataDir    string
	EtcdPort   int
	Partitions []constants.StorePartition
	Out        io.Writer
	// Interval is how often it looks at the servers (5 s unless set).
	Interval time.Duration
	// Timeout bounds each wait on the servers (an hour unless set).
	Timeout time.Duration
	// Settle is how long writes admitted before every server refused them
	// may take to reach etcd: kube-apiserver's --request-timeout (1m) and
	// a margin.
	Settle time.Duration
}

func (m *Migrate) say(format string, args ...any) { fmt.Fprintf(m.Out, format+"\n", args...) }

func (m *Migrate) target() []string {
	out := []string{}
	for _, p := range m.Partitions {
		out = append(out, p.Name)
	}
	return out
}

// Run carries the migration as far as it goes: to its end, or to an error
// that says what to do.
func (m *Migrate) Run(ctx context.Context) error {
	if m.Interval == 0 {
		m.Interval = 5 * time.Second
	}
	if m.Timeout == 0 {
		m.Timeout = time.Hour
	}
	durable, err := etcd.NewClient([]string{DurableEtcdURL(m.EtcdPort)}, EtcdClientTLS(m.DataDir))
	if err != nil {
		return err
	}
	defer durable.Close()
	if _, _, err := etcd.ReadLayout(ctx, durable); err != nil {
		return fmt.Errorf("%w (is the server running with --data-dir %s and --etcd-port %d?)", err, m.DataDir, m.EtcdPort)
	}
	cfg, err := kubeconfig.RESTConfig(datadir.Server(m.DataDir).AdminKubeconfig())
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	mig, done, err := m.begin(ctx, durable, client, cfg)
	if err != nil || done {
		return err
	}
	to := "--etcd-partitions=" + strings.Join(mig.To, ",")
	m.say("writes to %s are refused until every server runs %s: restart each server now, one at a time, with %s",
		strings.Join(mig.Moved(), ", "), strings.Join(mig.To, ","), to)
	if err := m.waitForServers(ctx, durable, client, mig.To, "restarted with "+to, m.Timeout); err != nil {
		return fmt.Errorf("%w (the migration stays recorded and the writes refused: restart the servers and run the command again)", err)
	}
	var prefixes []string
	for _, name := range mig.Moved() {
		p, _ := constants.StorePartitionNamed(name)
		prefixes = append(prefixes, p.KeyPrefix)
	}
	if err := etcd.FinishMigration(ctx, durable, mig, prefixes); err != nil {
		return err
	}
	m.say("the cluster keeps %s in partitions of their own; their keys left the durable etcd", strings.Join(mig.To, ", "))
	return m.lift(ctx, client)
}

// begin starts the migration to m.Partitions, or finds the one under way;
// done: the cluster has those partitions (a run that ended before lifting
// the freeze lifts it).
func (m *Migrate) begin(ctx context.Context, durable *clientv3.Client, client kubernetes.Interface, cfg *rest.Config) (mig etcd.Migration, done bool, err error) {
	want := m.target()
	mig, ok, err := etcd.ReadMigration(ctx, durable)
	if err != nil {
		return etcd.Migration{}, false, err
	}
	if ok {
		if !slices.Equal(mig.To, want) {
			return etcd.Migration{}, false, fmt.Errorf("--etcd-partitions=%s: a migration to %s is under way: run it again with --etcd-partitions=%s",
				strings.Join(want, ","), strings.Join(mig.To, ","), strings.Join(mig.To, ","))
		}
		m.say("resuming the migration to %s", strings.Join(mig.To, ","))
		// An earlier run may have been cut short before the refusal was
		// confirmed, or it was deleted by hand: it holds again first.
		if err := m.freeze(ctx, client, cfg, mig.Moved()); err != nil {
			return etcd.Migration{}, false, fmt.Errorf("%w (the migration stays recorded: run the command again)", err)
		}
		return mig, false, nil
	}
	layout, _, err := etcd.ReadLayout(ctx, durable)
	if err != nil {
		return etcd.Migration{}, false, err
	}
	from := layout.Partitions
	if from == nil {
		from = []string{}
	}
	if slices.Equal(from, want) && len(want) > 0 {
		m.say("the cluster keeps %s in partitions of their own", strings.Join(want, ", "))
		return etcd.Migration{}, true, m.lift(ctx, client)
	}
	mig = etcd.Migration{From: from, To: want}
	if err := requireAdds(mig); err != nil {
		return etcd.Migration{}, false, err
	}
	// Every server must take part: one of a release before migrations
	// would keep its layout and split the resource.
	if err := m.waitForServers(ctx, durable, client, from, "running with the cluster's partitions ("+describePartitions(from)+") on a release that records them", 3*m.Interval); err != nil {
		return etcd.Migration{}, false, fmt.Errorf("%w: start every server with this release first (nothing was changed)", err)
	}
	if err := m.freeze(ctx, client, cfg, mig.Moved()); err != nil {
		return etcd.Migration{}, false, m.undoFreeze(ctx, durable, client, err)
	}
	// A write admitted just before a server took the refusal may still be
	// on its way to the durable etcd: it must be there before a server
	// copies it.
	if m.Settle > 0 {
		m.say("waiting %s for writes admitted before the refusal to finish (kube-apiserver's --request-timeout)", m.Settle)
		select {
		case <-ctx.Done():
			return etcd.Migration{}, false, m.undoFreeze(ctx, durable, client, ctx.Err())
		case <-time.After(m.Settle):
		}
	}
	if err := etcd.StartMigration(ctx, durable, mig); err != nil {
		return etcd.Migration{}, false, m.undoFreeze(ctx, durable, client, err)
	}
	return mig, false, nil
}

// undoFreeze lifts the freeze after err, unless a migration is recorded
// (this run's, whose commit was cut short, or another's): its writes must
// stay refused.
func (m *Migrate) undoFreeze(ctx context.Context, durable *clientv3.Client, client kubernetes.Interface, err error) error {
	ctx = context.WithoutCancel(ctx)
	if _, recorded, rerr := etcd.ReadMigration(ctx, durable); rerr != nil || recorded {
		return fmt.Errorf("%w (a migration may be recorded, so writes stay refused: run the command again to resume it)", err)
	}
	if lerr := m.lift(ctx, client); lerr != nil {
		return fmt.Errorf("%w; %v: delete it by hand (kubectl delete validatingadmissionpolicybinding,validatingadmissionpolicy %s) (nothing moved)", err, lerr, FreezeName)
	}
	return fmt.Errorf("%w (the refusal was lifted; nothing moved)", err)
}

// requireAdds refuses a migration that does not only add partitions of
// resources that can move.
func requireAdds(mig etcd.Migration) error {
	for _, p := range mig.From {
		if !slices.Contains(mig.To, p) {
			return fmt.Errorf("--etcd-partitions=%s: the cluster keeps %s in partitions; a migration only adds partitions: give --etcd-partitions with %s",
				strings.Join(mig.To, ","), strings.Join(mig.From, ", "), strings.Join(mig.From, ","))
		}
	}
	moved := mig.Moved()
	if len(moved) == 0 {
		if len(mig.From) == 0 {
			return fmt.Errorf("--etcd-partitions: none given: name the partitions to add, e.g. pods,nodes")
		}
		return fmt.Errorf("--etcd-partitions=%s: the cluster keeps those in partitions already", strings.Join(mig.To, ","))
	}
	for _, name := range moved {
		if p, _ := constants.StorePartitionNamed(name); !p.Movable {
			return fmt.Errorf("--etcd-partitions: %s: its partition is set only when a cluster is made (servers write %s as they start, which a migration's freeze would refuse); partitions a running cluster can add: %s",
				name, name, strings.Join(constants.MovableStorePartitionNames(), ", "))
		}
	}
	return nil
}

// waitForServers waits up to timeout until every server records a
// kube-apiserver started with layout, showing which do not yet.
func (m *Migrate) waitForServers(ctx context.Context, durable *clientv3.Client, client kubernetes.Interface, layout []string, what string, timeout time.Duration) error {
	last := ""
	return poll.Until(ctx, m.Interval, timeout, "every server "+what, func(ctx context.Context) error {
		published, err := join.PublishedServers(ctx, client)
		if err != nil {
			return err
		}
		recorded, err := etcd.ServerLayouts(ctx, durable)
		if err != nil {
			return err
		}
		all, pending := pendingServers(published, recorded, layout)
		status := fmt.Sprintf("%d/%d servers %s", all-len(pending), all, what)
		if len(pending) > 0 {
			status += "; not yet: " + strings.Join(pending, ", ")
		}
		if status != last {
			m.say("%s", status)
			last = status
		}
		if len(pending) > 0 {
			return errors.New(status)
		}
		return nil
	})
}

// pendingServers are the servers whose recorded kube-apiserver was not
// started with layout, sorted, out of all: those a multi-server cluster
// publishes (name: API URL) and those that record a layout (a lone
// server publishes none). No server at all is one pending.
func pendingServers(published map[string]string, recorded map[string]etcd.ServerLayout, layout []string) (all int, pending []string) {
	names := map[string]bool{}
	for name := range published {
		names[name] = true
	}
	for name := range recorded {
		names[name] = true
	}
	if len(names) == 0 {
		return 1, []string{"this server (no server records its partitions)"}
	}
	for name := range names {
		if r, ok := recorded[name]; !ok || !slices.Equal(r.Partitions, layout) {
			pending = append(pending, name)
		}
	}
	sort.Strings(pending)
	return len(names), pending
}

// freezePolicy is the policy and binding that refuse every write to the
// moved resources and their subresources (a Pod's binding and eviction
// write the Pod).
func freezePolicy(moved []string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	fail := admissionv1.Fail
	forbidden := metav1.StatusReasonForbidden
	var rules []admissionv1.NamedRuleWithOperations
	for _, name := range moved {
		p, _ := constants.StorePartitionNamed(name)
		group, resource, _ := strings.Cut(p.Resource, "/")
		rules = append(rules, admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete},
			Rule:       admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource, resource + "/*"}},
		}})
	}
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: FreezeName},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: rules},
			Validations: []admissionv1.Validation{{
				Expression: "false",
				Message:    freezeMessage(moved),
				Reason:     &forbidden,
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: FreezeName},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        FreezeName,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	return policy, binding
}

func freezeMessage(moved []string) string {
	return strings.Join(moved, ", ") + " are moving into partitions of the store (k1m etcd-partitions migrate): writes resume when every server runs them"
}

// freeze installs the freeze and waits until every published server's API
// refuses a dry-run write of each moved resource.
func (m *Migrate) freeze(ctx context.Context, client kubernetes.Interface, cfg *rest.Config, moved []string) error {
	policy, binding := freezePolicy(moved)
	if err := applyFreeze(ctx, client, policy, binding); err != nil {
		return fmt.Errorf("refusing writes to %s: %w", strings.Join(moved, ", "), err)
	}
	servers, err := join.PublishedServers(ctx, client)
	if err != nil {
		return err
	}
	// Each server's API by how the lines name it.
	apis := map[string]string{}
	for name, url := range servers {
		apis["server "+name] = url
	}
	if len(apis) == 0 {
		// A lone server publishes nothing: it is the admin kubeconfig's.
		apis["this server"] = cfg.Host
	}
	names := make([]string, 0, len(apis))
	for name := range apis {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		one := rest.CopyConfig(cfg)
		one.Host = apis[name]
		c, err := kubernetes.NewForConfig(one)
		if err != nil {
			return err
		}
		err = poll.Until(ctx, time.Second, 2*time.Minute, name+" ("+apis[name]+") refusing writes to "+strings.Join(moved, ", "), func(ctx context.Context) error {
			for _, res := range moved {
				if err := probeWrite(ctx, c, res); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), FreezeName) {
					return fmt.Errorf("a dry-run create of %s: %v, want refused by %s", res, err, FreezeName)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		m.say("%s refuses writes to %s", name, strings.Join(moved, ", "))
	}
	return nil
}

// probeWrite is a dry-run create of a valid object of the resource.
func probeWrite(ctx context.Context, c kubernetes.Interface, resource string) error {
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	meta := metav1.ObjectMeta{Name: "k1m-freeze-probe", Namespace: metav1.NamespaceDefault}
	var err error
	switch resource {
	case "pods":
		_, err = c.CoreV1().Pods(meta.Namespace).Create(ctx, &corev1.Pod{ObjectMeta: meta,
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "k1m.invalid/probe"}}}}, dry)
	case "nodes":
		_, err = c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: meta.Name}}, dry)
	case "endpointslices":
		_, err = c.DiscoveryV1().EndpointSlices(meta.Namespace).Create(ctx, &discoveryv1.EndpointSlice{ObjectMeta: meta, AddressType: discoveryv1.AddressTypeIPv6}, dry)
	default:
		return fmt.Errorf("no probe of %s", resource)
	}
	return err
}

// applyFreeze creates the freeze's policy and binding, or makes those
// there (from an interrupted run) what they should be.
func applyFreeze(ctx context.Context, client kubernetes.Interface, policy *admissionv1.ValidatingAdmissionPolicy, binding *admissionv1.ValidatingAdmissionPolicyBinding) error {
	policies := client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	if _, err := policies.Create(ctx, policy, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		there, err := policies.Get(ctx, policy.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		there.Spec = policy.Spec
		if _, err := policies.Update(ctx, there, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("ValidatingAdmissionPolicy %s: %w", policy.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("ValidatingAdmissionPolicy %s: %w", policy.Name, err)
	}
	bindings := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		there, err := bindings.Get(ctx, binding.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		there.Spec = binding.Spec
		if _, err := bindings.Update(ctx, there, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("ValidatingAdmissionPolicyBinding %s: %w", binding.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("ValidatingAdmissionPolicyBinding %s: %w", binding.Name, err)
	}
	return nil
}

// lift deletes the freeze (gone already: nothing to do), even once ctx
// is cancelled (an operator's Ctrl-C must not leave writes refused).
func (m *Migrate) lift(ctx context.Context, client kubernetes.Interface) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, FreezeName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("lifting the refusal (ValidatingAdmissionPolicyBinding %s): %w", FreezeName, err)
	}
	err = client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, FreezeName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("lifting the refusal (ValidatingAdmissionPolicy %s): %w", FreezeName, err)
	}
	m.say("writes resumed (%s deleted)", FreezeName)
	return nil
}
