package join

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"k1m.dev/k1m/pkg/pki"
)

// Discovered is what an agent learns from the server before joining.
type Discovered struct {
	CAPEM    []byte
	Settings Settings
	// ServerVersions is the release each server runs (versions.go).
	ServerVersions map[string]string
}

// Input names what a join error is about, so that the command layer can
// name its own flag (k1m agent) or its own words (k1m server's node).
type Input string

// The inputs of a join.
const (
	InputServer Input = "server" // the server's URL, or the server itself
	InputToken  Input = "token"
)

// Error is a join failure about one input.
type Error struct {
	Input Input
	Err   error
}

func (e *Error) Error() string { return string(e.Input) + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func serverError(format string, args ...any) error {
	return &Error{InputServer, fmt.Errorf(format, args...)}
}

func tokenError(format string, args ...any) error {
	return &Error{InputToken, fmt.Errorf(format, args...)}
}

// Discover fetches and checks the cluster CA and settings from serverURL.
// Every error is an *Error naming the input to fix.
func Discover(ctx context.Context, serverURL string, token pki.Token) (*Discovered, error) {
	u, err := url.Parse(serverURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, serverError("%q is not the server's https URL, e.g. https://[fddf:4035:b520::1]:6443", serverURL)
	}
	// Unverified on purpose: the CA is checked against the token's hash
	// below, and nothing secret is sent before that.
	insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var info struct {
		Data map[string]string `json:"data"`
	}
	if err := getJSON(ctx, insecure, serverURL, ClusterInfoName, "", &info); err != nil {
		return nil, err
	}
	// Exactly one CA certificate, or nothing secret is ever sent: the
	// token's hash covers one certificate and the pool trusts only it.
	caPEM, err := clusterCA(info.Data["kubeconfig"])
	if err != nil {
		return nil, serverError("%s/%s: %w", PublicNamespace, ClusterInfoName, err)
	}
	pool, err := token.VerifyCA(caPEM)
	if err != nil {
		return nil, &Error{InputToken, err}
	}
	verified := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	var settings struct {
		Data map[string]string `json:"data"`
	}
	if err := getJSON(ctx, verified, serverURL, SettingsName, token.Secret, &settings); err != nil {
		return nil, err
	}
	s, err := SettingsFromData(settings.Data)
	if err != nil {
		return nil, err
	}
	return &Discovered{CAPEM: caPEM, Settings: s, ServerVersions: ServerVersions(settings.Data)}, nil
}

// clusterCA is the CA data of the one cluster in the cluster-info
// kubeconfig. More than one cluster is refused rather than one picked.
func clusterCA(data string) ([]byte, error) {
	cfg, err := clientcmd.Load([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("holds no kubeconfig (%v): is this a k1m server?", err)
	}
	if len(cfg.Clusters) != 1 {
		return nil, fmt.Errorf("its kubeconfig names %d clusters, want exactly 1: is this a k1m server?", len(cfg.Clusters))
	}
	var caPEM []byte
	for _, c := range cfg.Clusters {
		caPEM = c.CertificateAuthorityData
	}
	if _, err := pki.ParseCA(caPEM); err != nil {
		return nil, err
	}
	return caPEM, nil
}

var errUnauthorized = errors.New("unauthorized")

func getJSON(ctx context.Context, client *http.Client, serverURL, name, bearer string, into any) error {
	path := serverURL + "/api/v1/namespaces/" + PublicNamespace + "/configmaps/" + name
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := client.Do(req)
	if err != nil {
		return serverError("cannot reach kube-apiserver (%v): check the URL and that k1m server runs there", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusUnauthorized && bearer != "":
		return tokenError("the server refused the token (401 Unauthorized): it is mistyped, expired or deleted; make one with k1m token create on a server: %w", errUnauthorized)
	case resp.StatusCode != http.StatusOK:
		return serverError("reading %s/%s: HTTP %d: %s", PublicNamespace, name, resp.StatusCode, truncate(body))
	}
	if err := json.Unmarshal(body, into); err != nil {
		return serverError("%s/%s is not a ConfigMap: %v", PublicNamespace, name, err)
	}
	return nil
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// ReadSettings reads k1m-cluster with a node's own kubeconfig: what a
// node that joined before needs at a restart, without a token (its
// settings, and the releases the servers run).
func ReadSettings(ctx context.Context, kubeconfigPath string) (Settings, map[string]string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		return Settings{}, nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Settings{}, nil, err
	}
	cm, err := client.CoreV1().ConfigMaps(PublicNamespace).Get(ctx, SettingsName, metav1.GetOptions{})
	if err != nil {
		return Settings{}, nil, fmt.Errorf("reading %s/%s with the node's own certificate (%s): %w", PublicNamespace, SettingsName, kubeconfigPath, err)
	}
	settings, err := SettingsFromData(cm.Data)
	return settings, ServerVersions(cm.Data), err
}
