// Package approver decides the two kinds of node certificate requests that
// kube-controller-manager leaves to k1m:
//
//   - a kubelet client certificate asked for with a join token (the
//     bootstrap group). A token holder may name any node that does not
//     exist yet and is no server's: a name that is already a Node, that a
//     certificate was already issued for to another key, or that is a
//     server's node name (present, removed, or the approving server's
//     own: servernames.go) is refused. So a join token can add nodes but
//     never take one over, nor become a server's node. (Renewals by a
//     node of its own certificate, with its own credentials, stay with
//     the controller manager's selfnodeclient approval.)
//   - a kubelet serving certificate, asked for by a node with its own
//     credentials, for names and addresses that are the node's alone: in
//     its Node's status, no other Node's name, listed by no Node created
//     before it (the first owner of an address keeps it: nodes.go), and
//     not the control plane's (ControlPlane: the servers, the service and
//     pod ranges, the node network's gateway). With it kube-apiserver
//     verifies kubelets (--kubelet-certificate-authority, the kubelet
//     serving CA, which nothing else trusts).
//
// Everything a decision reads but the CSR itself comes from informer
// caches (the CSRs, the Nodes, the servers' names), started by Run: a
// decision adds no API request but the approval; the Node GET of a join
// stays, the authoritative answer to "does this node exist".
package approver

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/apis/certificates"

	"k1m.dev/k1m/pkg/elect"
	"k1m.dev/k1m/pkg/podnet"
)

// Reasons written on the CSR's condition.
const (
	ReasonApproved       = "K1mNodeApprover"
	ReasonNodeExists     = "NodeExists"
	ReasonNameTaken      = "NodeNameTaken"
	ReasonInvalidRequest = "InvalidRequest"
	ReasonNotOwnAddress  = "NotTheNodesAddress"
	ReasonNotOwnNode     = "NotTheRequestersNode"
)

// Approver watches CSRs and approves or denies the ones it owns.
type Approver struct {
	Client kubernetes.Interface
	// BootstrapGroup is the extra group of k1m's join tokens.
	BootstrapGroup string
	// ControlPlane is refused in serving certificates.
	ControlPlane ControlPlane
	// Self is the approving server's node name, refused to join tokens
	// (a lone server does not publish it).
	Self string

	// csrs indexes the CSRs by the node name of approved kubelet client
	// requests (the informer's cache: no list per request).
	csrs cache.Indexer
	// nodes holds every Node, stripped, indexed by IP and DNS name
	// (nodes.go); servers the server names' ConfigMap (servernames.go);
	// routes the pod routes, indexed by the address each binds (nodes.go).
	nodes, servers, routes cache.Indexer
	// names serializes join decisions and remembers the key each node
	// name was approved for here, which the cache may not show yet.
	names struct {
		sync.Mutex
		approved map[string][]byte
	}
	// recorded, when set, hears of each decision this approver records
	// (the tests count who decided).
	recorded func(csr string)
}

// Workers is how many CSRs are decided at once. Join decisions take a
// lock of their own (one node name, one key), serving ones read the Node.
const Workers = 4

// approvedClientName indexes approved kubelet client CSRs by common name.
const approvedClientName = "approvedClientName"

type verdict struct {
	approve bool
	reason  string
	message string
}

// errNotYet leaves a request pending for another look: a serving
// certificate asked for before the Node shows its addresses.
type errNotYet struct{ why string }

func (e errNotYet) Error() string { return e.why }

// Election is the Lease servers campaign for: one approver decides at a
// time, so "one node name, one key" holds across servers.
const Election = "k1m-approver"

// RunElected runs the approver while this process holds the Lease
// kube-system/k1m-approver (identity: the server's node name), and
// campaigns again after losing it, until ctx ends.
func (a *Approver) RunElected(ctx context.Context, identity string) {
	elect.Run(ctx, a.Client, Election, identity, a.Run)
}

// Run decides CSRs until ctx ends, Workers at a time, from the informers'
// caches; join decisions are serialized (names) so that two requests
// racing for one node name cannot both pass.
func (a *Approver) Run(ctx context.Context) {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	serversChanged := make(chan struct{}, 1)
	synced, err := a.startCaches(ctx, queue, serversChanged)
	if err != nil {
		klog.ErrorS(err, "starting the approver's caches")
		return
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	go a.keepRecordingServerNames(ctx, serversChanged)
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a.next(ctx, queue) {
			}
		}()
	}
	wg.Wait()
}

// startCaches starts the informers of the CSRs (pending ones queued), of
// the Nodes and of the servers' names (serversChanged told of each
// change), and returns what tells they have synced.
func (a *Approver) startCaches(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], serversChanged chan<- struct{}) ([]cache.InformerSynced, error) {
	factory := informers.NewSharedInformerFactory(a.Client, 10*time.Minute)
	csrs := factory.Certificates().V1().CertificateSigningRequests().Informer()
	if err := csrs.AddIndexers(cache.Indexers{approvedClientName: indexApprovedClientName}); err != nil {
		return nil, fmt.Errorf("indexing CSRs: %w", err)
	}
	nodes := factory.Core().V1().Nodes().Informer()
	if err := nodes.SetTransform(stripNode); err != nil {
		return nil, err
	}
	if err := nodes.AddIndexers(nodeIndexers); err != nil {
		return nil, fmt.Errorf("indexing Nodes: %w", err)
	}
	serverFactory := informers.NewSharedInformerFactoryWithOptions(a.Client, 10*time.Minute,
		informers.WithNamespace(metav1.NamespaceSystem), informers.WithTweakListOptions(serverBootstrapSelector))
	servers := serverFactory.Core().V1().ConfigMaps().Informer()
	if err := servers.SetTransform(stripServerBootstrap); err != nil {
		return nil, err
	}
	routeFactory := informers.NewSharedInformerFactoryWithOptions(a.Client, 10*time.Minute,
		informers.WithNamespace(podnet.RoutesNamespace), informers.WithTweakListOptions(podnet.RouteSelector))
	routes := routeFactory.Core().V1().ConfigMaps().Informer()
	if err := routes.AddIndexers(routeIndexers); err != nil {
		return nil, fmt.Errorf("indexing the pod routes: %w", err)
	}
	a.csrs, a.nodes, a.servers, a.routes = csrs.GetIndexer(), nodes.GetIndexer(), servers.GetIndexer(), routes.GetIndexer()
	enqueue := func(obj any) {
		csr, ok := obj.(*certv1.CertificateSigningRequest)
		switch {
		case ok && pending(csr):
			queue.Add(csr.Name)
		case ok:
			a.forgetShown(csr)
		}
	}
	if _, err := csrs.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }}); err != nil {
		return nil, err
	}
	if _, err := servers.AddEventHandler(signal(serversChanged)); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	serverFactory.Start(ctx.Done())
	routeFactory.Start(ctx.Done())
	return []cache.InformerSynced{csrs.HasSynced, nodes.HasSynced, servers.HasSynced, routes.HasSynced}, nil
}

// next decides one queued CSR; false once the queue is shut down.
func (a *Approver) next(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string]) bool {
	name, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(name)
	err := a.Sync(ctx, name)
	switch {
	case err == nil:
		queue.Forget(name)
	case ctx.Err() != nil:
	default:
		klog.V(2).InfoS("CSR not decided yet", "csr", name, "why", err)
		queue.AddRateLimited(name)
	}
	return true
}

// indexApprovedClientName keys an approved kubelet client CSR by the
// common name it asks for.
func indexApprovedClientName(obj any) ([]string, error) {
	csr, ok := obj.(*certv1.CertificateSigningRequest)
	if !ok || csr.Spec.SignerName != certv1.KubeAPIServerClientKubeletSignerName || !approved(csr) {
		return nil, nil
	}
	req, err := parse(csr)
	if err != nil {
		return nil, nil
	}
	return []string{req.Subject.CommonName}, nil
}

// Sync decides one CSR, if it is still pending and one this package owns.
func (a *Approver) Sync(ctx context.Context, name string) error {
	csr, err := a.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !pending(csr) {
		return nil
	}
	switch {
	case csr.Spec.SignerName == certv1.KubeAPIServerClientKubeletSignerName && slices.Contains(csr.Spec.Groups, a.BootstrapGroup):
		return a.syncJoin(ctx, csr)
	case csr.Spec.SignerName == certv1.KubeletServingSignerName:
		v, err := a.decideServing(ctx, csr)
		if err != nil {
			return err
		}
		return a.record(ctx, csr, v)
	}
	return nil // the controller manager's, or nobody's
}

// syncJoin decides and records a join request holding the names lock, and
// remembers an approval until the cache shows it.
func (a *Approver) syncJoin(ctx context.Context, csr *certv1.CertificateSigningRequest) error {
	a.names.Lock()
	defer a.names.Unlock()
	v, err := a.decideJoin(ctx, csr)
	if err != nil {
		return err
	}
	if err := a.record(ctx, csr, v); err != nil {
		return err
	}
	if v.approve {
		if req, err := parse(csr); err == nil {
			if a.names.approved == nil {
				a.names.approved = map[string][]byte{}
			}
			a.names.approved[req.Subject.CommonName] = publicKey(req)
		}
	}
	return nil
}

// forgetShown drops the approval syncJoin remembered for a node name once
// the cache shows it, so that the approver keeps one entry per join in
// flight, not one per node the cluster ever had.
func (a *Approver) forgetShown(csr *certv1.CertificateSigningRequest) {
	names, _ := indexApprovedClientName(csr)
	if len(names) == 0 {
		return
	}
	req, err := parse(csr)
	if err != nil {
		return
	}
	a.names.Lock()
	defer a.names.Unlock()
	if key, ok := a.names.approved[names[0]]; ok && string(key) == string(publicKey(req)) {
		delete(a.names.approved, names[0])
	}
}

// approvedFor lists the approved kubelet client CSRs for a common name,
// from the informer's cache.
func (a *Approver) approvedFor(commonName string) ([]*certv1.CertificateSigningRequest, error) {
	if a.csrs == nil {
		return nil, errors.New("the approver's CSR cache is not running")
	}
	objs, err := a.csrs.ByIndex(approvedClientName, commonName)
	if err != nil {
		return nil, err
	}
	out := make([]*certv1.CertificateSigningRequest, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*certv1.CertificateSigningRequest))
	}
	return out, nil
}

func pending(csr *certv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certv1.CertificateApproved || c.Type == certv1.CertificateDenied || c.Type == certv1.CertificateFailed {
			return false
		}
	}
	return true
}

func approved(csr *certv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certv1.CertificateApproved && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func deny(reason, format string, args ...any) *verdict {
	return &verdict{reason: reason, message: fmt.Sprintf(format, args...)}
}

// decideJoin decides a client certificate asked for with a join token.
func (a *Approver) decideJoin(ctx context.Context, csr *certv1.CertificateSigningRequest) (*verdict, error) {
	req, invalid := parseAs(csr, "client", certificates.ValidateKubeletClientCSR)
	if invalid != nil {
		return invalid, nil
	}
	node := strings.TrimPrefix(req.Subject.CommonName, "system:node:")
	if errs := validation.IsDNS1123Subdomain(node); len(errs) > 0 {
		return deny(ReasonInvalidRequest, "node name %q is not a lower-case DNS-1123 subdomain: %s", node, strings.Join(errs, "; ")), nil
	}
	// Before the Node: a removed server's Node is gone, and a server's
	// node may not be registered yet.
	switch server, err := a.serverNameOf(node); {
	case err != nil:
		return nil, err
	case server != "":
		return deny(ReasonServerName, "node name %s is the name of server %s (%s): a join token cannot take a server's name; a server's own node joins with the server's credentials; choose another --node-name", node, node, server), nil
	}
	_, err := a.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	switch {
	case err == nil:
		return deny(ReasonNodeExists, "node %s exists already: a join token adds new nodes and cannot take over one; to join a machine again under this name, delete the Node first (k1m kubectl delete node %s)", node, node), nil
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	// The Node may not be registered yet: a certificate issued for this
	// name to another key in the last hour (approved CSRs live that long)
	// binds the name too. The same key asking again is the same kubelet
	// (it keeps its key across restarts while it waits).
	others, err := a.approvedFor(req.Subject.CommonName)
	if err != nil {
		return nil, err
	}
	for _, other := range others {
		if other.Name == csr.Name {
			continue
		}
		otherReq, err := parse(other)
		if err != nil {
			continue
		}
		if !samePublicKey(otherReq, req) {
			return deny(ReasonNameTaken, "a client certificate for node %s was issued to another key (CSR %s): a join token cannot take over a node name; delete that CSR if the machine it went to is gone", node, other.Name), nil
		}
	}
	if key, ok := a.names.approved[req.Subject.CommonName]; ok && string(key) != string(publicKey(req)) {
		return deny(ReasonNameTaken, "a client certificate for node %s was approved for another key a moment ago: a join token cannot take over a node name", node), nil
	}
	return &verdict{approve: true, reason: ReasonApproved, message: fmt.Sprintf("new node %s joined with a token of %s", node, a.BootstrapGroup)}, nil
}

// decideServing decides a kubelet serving certificate: asked for by the
// node it names, for its own names and addresses only.
func (a *Approver) decideServing(ctx context.Context, csr *certv1.CertificateSigningRequest) (*verdict, error) {
	req, invalid := parseAs(csr, "serving", certificates.ValidateKubeletServingCSR)
	if invalid != nil {
		return invalid, nil
	}
	if csr.Spec.Username != req.Subject.CommonName || !slices.Contains(csr.Spec.Groups, "system:nodes") {
		return deny(ReasonNotOwnNode, "%s asked for a serving certificate of %s: a node may ask only for its own", csr.Spec.Username, req.Subject.CommonName), nil
	}
	name := strings.TrimPrefix(req.Subject.CommonName, "system:node:")
	node, err := a.registeredNode(name)
	if err != nil {
		return nil, err
	}
	// Before the node's own addresses: a node can put any address in its
	// status.
	if v, err := a.ControlPlane.refuse(ctx, name, req.IPAddresses, req.DNSNames); v != nil || err != nil {
		return v, err
	}
	if notInStatus(node, req.IPAddresses, req.DNSNames) != nil {
		// The cache may not show yet the status the node wrote just
		// before asking: a denial is final, so read the Node itself
		// first (one GET, only for a request the cache would deny).
		live, err := a.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		stripped, _ := stripNode(live)
		node = stripped.(*corev1.Node)
		if v := notInStatus(node, req.IPAddresses, req.DNSNames); v != nil {
			return v, nil
		}
	}
	// In its status, but maybe copied from another node's.
	if v, err := a.refuseOthers(node, req.IPAddresses, req.DNSNames); v != nil || err != nil {
		return v, err
	}
	return &verdict{approve: true, reason: ReasonApproved, message: "serving certificate for node " + name + "'s own addresses"}, nil
}

// registeredNode is the named Node from the cache, once it has an
// address; before, errNotYet.
func (a *Approver) registeredNode(name string) (*corev1.Node, error) {
	node, err := a.cachedNode(name)
	switch {
	case err != nil:
		return nil, err
	case node == nil:
		return nil, errNotYet{"node " + name + " is not registered yet (or not in the approver's cache yet)"}
	}
	if ips, _ := nodeAddresses(node); len(ips) == 0 {
		return nil, errNotYet{"node " + name + " has no address yet"}
	}
	return node, nil
}

// notInStatus denies IPs and DNS names the node's status does not list.
func notInStatus(node *corev1.Node, ips []net.IP, dnsNames []string) *verdict {
	own, ownNames := nodeAddresses(node)
	for _, ip := range ips {
		if !own.Has(ip.String()) {
			return deny(ReasonNotOwnAddress, "IP %s is not an address of node %s (it has %s)", ip, node.Name, strings.Join(sets.List(own), ", "))
		}
	}
	for _, d := range dnsNames {
		if !ownNames.Has(d) {
			return deny(ReasonNotOwnAddress, "DNS name %s is not a name of node %s (it has %s)", d, node.Name, strings.Join(sets.List(ownNames), ", "))
		}
	}
	return nil
}

// nodeAddresses are the IPs and DNS names a node's serving certificate
// may carry: its name and the addresses in its status.
func nodeAddresses(node *corev1.Node) (ips, dns sets.Set[string]) {
	ips, dns = sets.New[string](), sets.New(node.Name)
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			if ip := net.ParseIP(a.Address); ip != nil {
				ips.Insert(ip.String())
			}
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			dns.Insert(a.Address)
		}
	}
	return ips, dns
}

func (a *Approver) record(ctx context.Context, csr *certv1.CertificateSigningRequest, v *verdict) error {
	condition := certv1.CertificateSigningRequestCondition{Type: certv1.CertificateDenied, Status: corev1.ConditionTrue,
		Reason: v.reason, Message: v.message, LastUpdateTime: metav1.Now()}
	if v.approve {
		condition.Type = certv1.CertificateApproved
	}
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, condition)
	if _, err := a.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		return err
	}
	klog.InfoS("CSR decided", "csr", csr.Name, "approved", v.approve, "reason", v.reason, "message", v.message)
	if a.recorded != nil {
		a.recorded(csr.Name)
	}
	return nil
}

// parseAs parses the request and checks it is a kubelet certificate of
// the given kind; a request that is not is denied with the reason.
func parseAs(csr *certv1.CertificateSigningRequest, kind string, validate func(*x509.CertificateRequest, sets.String) error) (*x509.CertificateRequest, *verdict) {
	req, err := parse(csr)
	if err != nil {
		return nil, deny(ReasonInvalidRequest, "%v", err)
	}
	if err := validate(req, usages(csr)); err != nil {
		return nil, deny(ReasonInvalidRequest, "not a kubelet %s certificate request: %v", kind, err)
	}
	return req, nil
}

func parse(csr *certv1.CertificateSigningRequest) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("the request holds no PEM CERTIFICATE REQUEST")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

func usages(csr *certv1.CertificateSigningRequest) sets.String {
	s := sets.NewString()
	for _, u := range csr.Spec.Usages {
		s.Insert(string(u))
	}
	return s
}

func samePublicKey(a, b *x509.CertificateRequest) bool {
	ad, bd := publicKey(a), publicKey(b)
	return ad != nil && string(ad) == string(bd)
}

// publicKey is the request's public key in DER, nil if it does not encode.
func publicKey(r *x509.CertificateRequest) []byte {
	der, err := x509.MarshalPKIXPublicKey(r.PublicKey)
	if err != nil {
		return nil
	}
	return der
}

// ReleaseNodeName deletes the kubelet client certificate requests that
// name node (system:node:NODE): for an hour after its approval such a
// request binds the name to its key. (A join token is refused a server's
// name anyway, removed or not: servernames.go.) For k1m server remove, an
// operator's act: one List of the kubelet client requests (at most an
// hour's joins and renewals) per removal, nothing per node.
func ReleaseNodeName(ctx context.Context, client kubernetes.Interface, node string) ([]string, error) {
	csrs := client.CertificatesV1().CertificateSigningRequests()
	list, err := csrs.List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=" + certv1.KubeAPIServerClientKubeletSignerName})
	if err != nil {
		return nil, fmt.Errorf("listing the kubelet client certificate requests: %w", err)
	}
	var deleted []string
	for i := range list.Items {
		if list.Items[i].Spec.SignerName != certv1.KubeAPIServerClientKubeletSignerName {
			continue // the server's selector is the filter; a fake client's is not
		}
		req, err := parse(&list.Items[i])
		if err != nil || req.Subject.CommonName != "system:node:"+node {
			continue
		}
		err = csrs.Delete(ctx, list.Items[i].Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return deleted, fmt.Errorf("deleting CertificateSigningRequest %s: %w", list.Items[i].Name, err)
		}
		deleted = append(deleted, list.Items[i].Name)
	}
	return deleted, nil
}
