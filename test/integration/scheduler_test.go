package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"testing"

	"k8s.io/client-go/rest"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/flavor"
	"k1m.dev/k1m/pkg/testutil"
)

// schedulerConfigz is what the test reads of kube-scheduler's /configz,
// which serves its internal configuration type (Go field names).
type schedulerConfigz struct {
	ClientConnection struct {
		Kubeconfig string
		QPS        float32
		Burst      int32
	}
	PercentageOfNodesToScore int32
	EnableProfiling          bool
}

// testSchedulerConfiguration reads the running kube-scheduler's
// configuration from its /configz (on its loopback secure port, with the
// admin's certificate, which it checks with kube-apiserver): what k1m
// wrote in its file is what it runs with, not only what the file says.
func testSchedulerConfiguration(ctx context.Context, t *testing.T, c *cluster) {
	cfg, err := testutil.RESTConfig(c.adminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	// kube-scheduler serves with a certificate of its own making, which
	// no CA of the cluster signed: the admin certificate still proves who
	// asks.
	cfg.Host = "https://" + net.JoinHostPort("::1", strconv.Itoa(constants.SchedulerPort))
	cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.CAFile, cfg.TLSClientConfig.Insecure = nil, "", true
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Get(cfg.Host + "/configz")
	if err != nil {
		t.Fatalf("kube-scheduler's /configz: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("kube-scheduler's /configz: %s", resp.Status)
	}
	var configz struct {
		Config schedulerConfigz `json:"componentconfig"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&configz); err != nil {
		t.Fatal(err)
	}
	var want schedulerConfigz
	want.ClientConnection.Kubeconfig = fmt.Sprintf("%s/server/kubeconfig/scheduler.kubeconfig", c.dataRoot)
	want.ClientConnection.QPS, want.ClientConnection.Burst = float32(flavor.SchedulerQPS), int32(2*flavor.SchedulerQPS)
	want.PercentageOfNodesToScore = flavor.SchedulerPercentageOfNodesToScore
	if got := configz.Config; got != want {
		t.Errorf("kube-scheduler runs with %+v, want %+v", got, want)
	}
}
