// Package schedulerconfig writes kube-scheduler's configuration file.
//
// k1m runs kube-scheduler with --config because the setting that decides
// its CPU per pod on large clusters, percentageOfNodesToScore (how many
// feasible nodes each pod is filtered and scored against), exists only in
// the file (docs/performance.md, "The scheduler"). With --config,
// kube-scheduler ignores its deprecated flags (--kubeconfig,
// --kube-api-qps, --kube-api-burst, --kube-api-content-type, --profiling,
// --contention-profiling) without a word, so the file carries what k1m
// set with them, and a --kube-scheduler-arg naming one of them is put
// into the file (Apply) rather than passed on to be ignored. Leader
// election flags are still honoured with a file; k1m passes them as flags.
package schedulerconfig

import (
	"errors"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulerv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"k1m.dev/k1m/pkg/componentargs"
	"k1m.dev/k1m/pkg/fsutil"
)

// Settings are what k1m decides in the file.
type Settings struct {
	// Kubeconfig is the scheduler's credentials and kube-apiserver's URL.
	Kubeconfig string
	// QPS is the client's requests a second, its burst twice that; 0
	// leaves client-go's default (50, burst 100).
	QPS int
	// PercentageOfNodesToScore is the share of the cluster's nodes each
	// pod is filtered and scored against, 1 to 100; 0 leaves upstream's
	// adaptive default (50% less 1% per 125 nodes, at least 5%).
	PercentageOfNodesToScore int
}

// Build returns the configuration for s: profiling off (what --profiling
// =false did; the secure port is on loopback only either way).
func Build(s Settings) *schedulerv1.KubeSchedulerConfiguration {
	c := &schedulerv1.KubeSchedulerConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: schedulerv1.SchemeGroupVersion.String(), Kind: "KubeSchedulerConfiguration"},
	}
	c.ClientConnection.Kubeconfig = s.Kubeconfig
	if s.QPS > 0 {
		c.ClientConnection.QPS = float32(s.QPS)
		c.ClientConnection.Burst = int32(2 * s.QPS)
	}
	if s.PercentageOfNodesToScore > 0 {
		c.PercentageOfNodesToScore = ptr.To(int32(s.PercentageOfNodesToScore))
	}
	c.EnableProfiling = ptr.To(false)
	return c
}

// fileFlags are the deprecated flags kube-scheduler ignores once it reads
// a file, each with the field of the file it stands for.
var fileFlags = map[string]func(c *schedulerv1.KubeSchedulerConfiguration, value string) error{
	"kube-api-qps": func(c *schedulerv1.KubeSchedulerConfiguration, v string) error {
		qps, err := strconv.ParseFloat(v, 32)
		if err != nil || qps < 0 {
			return fmt.Errorf("want requests a second, a number of at least 0, e.g. kube-api-qps=500")
		}
		c.ClientConnection.QPS = float32(qps)
		return nil
	},
	"kube-api-burst": func(c *schedulerv1.KubeSchedulerConfiguration, v string) error {
		burst, err := strconv.ParseInt(v, 10, 32)
		if err != nil || burst < 0 {
			return fmt.Errorf("want a whole number of requests of at least 0, e.g. kube-api-burst=1000")
		}
		c.ClientConnection.Burst = int32(burst)
		return nil
	},
	"kube-api-content-type": func(c *schedulerv1.KubeSchedulerConfiguration, v string) error {
		c.ClientConnection.ContentType = v
		return nil
	},
	"profiling": func(c *schedulerv1.KubeSchedulerConfiguration, v string) (err error) {
		c.EnableProfiling, err = parseBool("profiling", v)
		return err
	},
	"contention-profiling": func(c *schedulerv1.KubeSchedulerConfiguration, v string) (err error) {
		c.EnableContentionProfiling, err = parseBool("contention-profiling", v)
		return err
	},
}

// parseBool reads flag's value v as kube-scheduler's flag would.
func parseBool(flag, v string) (*bool, error) {
	on, err := strconv.ParseBool(v)
	if err != nil {
		return nil, fmt.Errorf("want true or false, e.g. %s=true", flag)
	}
	return &on, nil
}

// Apply puts the pass-through flags that kube-scheduler would ignore
// beside a file into c, and returns the others, to be passed as flags.
// Every bad value is reported, naming --kube-scheduler-arg; c is changed
// only when all are good.
func Apply(c *schedulerv1.KubeSchedulerConfiguration, extra []componentargs.Arg) ([]componentargs.Arg, error) {
	next := c.DeepCopy()
	var flags []componentargs.Arg
	var problems []error
	for _, a := range extra {
		set, inFile := fileFlags[a.Name]
		if !inFile {
			flags = append(flags, a)
			continue
		}
		if err := set(next, a.Value); err != nil {
			problems = append(problems, fmt.Errorf("%s \"%s=%s\": %v", componentargs.Scheduler.Flag, a.Name, a.Value, err))
		}
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	*c = *next
	return flags, nil
}

// Write writes c as YAML, rewritten at every start.
func Write(path string, c *schedulerv1.KubeSchedulerConfiguration) error {
	data, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	return fsutil.WriteFile(path, append([]byte("# Written by k1m server at every start.\n"), data...), 0o600)
}
