package localcluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k1m.dev/k1m/pkg/constants"
)

// Options describe a local cluster. The zero value of a field is its
// default; errors name each option by the environment variable
// test/cmd/k1m-cluster (and so `make cluster`) reads it from.
type Options struct {
	// Servers is the number of `k1m server`s (SERVERS, default 1). One
	// runs in the host's network namespace; several run each in a
	// namespace of its own.
	Servers int
	// Nodes is the number of nodes, each server's own node included
	// (NODES, default Servers); the other Nodes-Servers are agents.
	Nodes int
	// K1M is the k1m binary (K1M, default _output/bin/k1m).
	K1M string
	// ClusterDir holds the logs and pid files (CLUSTER_DIR, default
	// _output/cluster).
	ClusterDir string
	// DataRoot holds every server's and node's data (DATA_ROOT, default
	// /var/lib/k1m).
	DataRoot string
	// ImagesDir is the image archives every node imports at start
	// (IMAGES_DIR, default _output/images).
	ImagesDir string
	// EarlierRelease says K1M is an earlier release (the upgrade test's
	// start): servers start without the harness's flags newer than it
	// (--default-local-storage-path). UseK1M clears it.
	EarlierRelease bool
	// Zones spreads the nodes over that many zones (ZONES, 1 to
	// MaxZones; 0: none): node k gets --node-label
	// topology.kubernetes.io/zone=zone-X, X the k-th letter modulo Zones
	// (zone-a, zone-b, ...), as rack-aware databases expect.
	Zones int
	// ServerArgs are extra `k1m server` flags, given to every server
	// (SERVER_ARGS, split on spaces).
	ServerArgs []string
	// AgentArgs are extra `k1m agent` flags, given to every agent
	// (AGENT_ARGS, split on spaces).
	AgentArgs []string
	// ServerMemory is each server's --memory-limit (SERVER_MEMORY). With
	// several servers it defaults to 3Gi, so that each has its own cgroup
	// and they do not all size themselves from the whole machine; with one
	// it is empty, the server's own sizing rule (docs/operations.md).
	ServerMemory string
	// PodRoutes says who routes each node's pod range (POD_ROUTES, k1m or
	// provider, default k1m): with provider every server starts with
	// --pod-routes=provider and the harness plays the provider's router,
	// routing each Node's pod range via the node's address in the host's
	// namespace, which every node namespace has as its default gateway.
	PodRoutes constants.PodRoutes
	// Timeout bounds each wait: a server up, every node Ready (TIMEOUT,
	// seconds, default 300).
	Timeout time.Duration
	// Out gets the progress lines ("cluster: ..."); default os.Stdout.
	Out io.Writer
}

// Limits and defaults of the options.
const (
	MaxServers = 9
	MaxNodes   = 99
	MaxZones   = 26

	DefaultK1M          = "_output/bin/k1m"
	DefaultClusterDir   = "_output/cluster"
	DefaultDataRoot     = "/var/lib/k1m"
	DefaultImagesDir    = "_output/images"
	DefaultTimeout      = 300 * time.Second
	DefaultServerMemory = "3Gi" // with several servers
)

// withDefaults returns o with every unset option set to its default.
func (o Options) withDefaults() Options {
	if o.Servers == 0 {
		o.Servers = 1
	}
	if o.Nodes == 0 {
		o.Nodes = max(o.Servers, 1)
	}
	o.K1M = or(o.K1M, DefaultK1M)
	o.ClusterDir = or(o.ClusterDir, DefaultClusterDir)
	o.DataRoot = or(o.DataRoot, DefaultDataRoot)
	o.ImagesDir = or(o.ImagesDir, DefaultImagesDir)
	if o.ServerMemory == "" && o.Servers > 1 {
		o.ServerMemory = DefaultServerMemory
	}
	if o.PodRoutes == "" {
		o.PodRoutes = constants.PodRoutesK1m
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	return o
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// memorySize is SERVER_MEMORY's form: bytes, or a binary-suffixed size.
var memorySize = regexp.MustCompile(`^([1-9][0-9]*)(Ki|Mi|Gi|Ti)?$`)

// validate checks defaulted options and reports every problem at once.
func (o Options) validate() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(countError("SERVERS", o.Servers, "servers", MaxServers))
	add(countError("NODES", o.Nodes, "nodes", MaxNodes))
	if o.Nodes < o.Servers && o.Servers >= 1 && o.Nodes >= 1 {
		add(fmt.Errorf("NODES=%d: want at least SERVERS=%d nodes (every server is a node too; the other NODES-SERVERS are agents)", o.Nodes, o.Servers))
	}
	if o.ServerMemory != "" && !memorySize.MatchString(o.ServerMemory) {
		add(fmt.Errorf("SERVER_MEMORY=%s: want a size such as 3Gi, 512Mi or 3221225472 (bytes), or leave it unset", o.ServerMemory))
	}
	if _, ok := constants.ParsePodRoutes(string(o.PodRoutes)); !ok {
		add(fmt.Errorf("POD_ROUTES=%s: want %s, or leave it unset (k1m)", o.PodRoutes, constants.PodRoutesForms()))
	}
	if o.Timeout < time.Second {
		add(fmt.Errorf("TIMEOUT=%s: want at least 1 second, e.g. 300", o.Timeout))
	}
	return errors.Join(errs...)
}

func countError(name string, n int, what string, max int) error {
	if n < 1 || n > max {
		return fmt.Errorf("%s=%d: want a number of %s from 1 to %d", name, n, what, max)
	}
	return nil
}

// memoryBytes is ServerMemory in bytes (0 when unset); ServerMemory is
// valid.
func (o Options) memoryBytes() int64 {
	m := memorySize.FindStringSubmatch(o.ServerMemory)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	shift := map[string]uint{"": 0, "Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40}[m[2]]
	return n << shift
}

// OptionsFromEnv reads the options from the environment variables the
// shell harness read (getenv is os.Getenv outside tests). An unset or
// empty variable is the option's default.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	o := Options{K1M: getenv("K1M"), ClusterDir: getenv("CLUSTER_DIR"), DataRoot: getenv("DATA_ROOT"),
		ImagesDir: getenv("IMAGES_DIR"), ServerMemory: getenv("SERVER_MEMORY"), PodRoutes: constants.PodRoutes(getenv("POD_ROUTES"))}
	if args := strings.Fields(getenv("SERVER_ARGS")); len(args) > 0 {
		o.ServerArgs = args
	}
	if args := strings.Fields(getenv("AGENT_ARGS")); len(args) > 0 {
		o.AgentArgs = args
	}
	var errs []error
	count := func(name, what string, max int) int {
		v := getenv(name)
		if v == "" {
			return 0
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > max {
			errs = append(errs, fmt.Errorf("%s=%s: want a number of %s from 1 to %d", name, v, what, max))
		}
		return n
	}
	o.Servers = count("SERVERS", "servers", MaxServers)
	o.Nodes = count("NODES", "nodes", MaxNodes)
	o.Zones = count("ZONES", "zones", MaxZones)
	if v := getenv("TIMEOUT"); v != "" {
		seconds, err := strconv.Atoi(v)
		if err != nil || seconds < 1 {
			errs = append(errs, fmt.Errorf("TIMEOUT=%s: want a number of seconds, e.g. 300", v))
		}
		o.Timeout = time.Duration(seconds) * time.Second
	}
	return o, errors.Join(errs...)
}
