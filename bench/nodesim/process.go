package nodesim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/pkg/cgroups"
)

// The simulator process reads one command per line on stdin and answers
// each with one JSON line (a reply) on stdout; it exits at the end of
// stdin.
const (
	// CommandAdd ("add N") makes it the kubelet of Nodes 0 to N-1.
	CommandAdd = "add"
	// CommandStats ("stats") asks for its counters.
	CommandStats = "stats"
)

type reply struct {
	Stats Stats  `json:"stats"`
	Error string `json:"error,omitempty"`
}

// controller is what Serve drives (a Simulator; a fake in tests).
type controller interface {
	Add(nodes int)
	Stats() Stats
}

// Serve answers the commands on in until in ends.
func Serve(in io.Reader, out io.Writer, sim controller) error {
	sc := bufio.NewScanner(in)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		var r reply
		if err := apply(sc.Text(), sim); err != nil {
			r.Error = err.Error()
		} else {
			r.Stats = sim.Stats()
		}
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return sc.Err()
}

func apply(line string, sim controller) error {
	fields := strings.Fields(line)
	switch {
	case len(fields) == 2 && fields[0] == CommandAdd:
		n, err := strconv.Atoi(fields[1])
		if err != nil || n < 0 {
			return fmt.Errorf("%q: want %s N, N a node count", line, CommandAdd)
		}
		sim.Add(n)
		return nil
	case len(fields) == 1 && fields[0] == CommandStats:
		return nil
	}
	return fmt.Errorf("%q: want %q or %q", line, CommandAdd+" N", CommandStats)
}

// Args are the command line of `SELF simulate-nodes` for cfg.
func Args(kubeconfig string, cfg Config) []string {
	return []string{"simulate-nodes",
		"--kubeconfig=" + kubeconfig,
		"--renew-interval=" + cfg.RenewInterval.String(),
		"--lease-duration=" + cfg.LeaseDuration.String(),
		"--status-interval=" + cfg.StatusInterval.String(),
		"--workers=" + strconv.Itoa(cfg.Workers),
		"--clients=" + strconv.Itoa(cfg.Clients),
	}
}

// Process is a running simulator in a CPU-capped cgroup of its own.
type Process struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	cgroup string
	Cap    float64 // cores
	mu     sync.Mutex
}

// Start runs `self simulate-nodes` (the benchmark binary) against the
// API server of kubeconfig, caps its CPU at cores in cgroup (e.g.
// /k1m-bench/node-simulator) and logs its stderr to logPath.
func Start(ctx context.Context, self, kubeconfig string, cfg Config, cores float64, cgroup, logPath string) (*Process, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child holds its own descriptor
	cmd := exec.CommandContext(ctx, self, Args(kubeconfig, cfg)...)
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.WaitDelay = 10 * time.Second
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the node simulator (%s): %w", self, err)
	}
	p := &Process{cmd: cmd, in: in, out: bufio.NewScanner(out), cgroup: cgroup, Cap: cores}
	if err := cgroups.CapCPU(cgroups.Mount, cgroup, cores, cmd.Process.Pid); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// Add makes the simulator the kubelet of Nodes 0 to nodes-1.
func (p *Process) Add(nodes int) (Stats, error) {
	return p.call(fmt.Sprintf("%s %d", CommandAdd, nodes))
}

// Stats reads the simulator's counters.
func (p *Process) Stats() (Stats, error) { return p.call(CommandStats) }

func (p *Process) call(command string) (Stats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := fmt.Fprintln(p.in, command); err != nil {
		return Stats{}, fmt.Errorf("node simulator: %w (see its log)", err)
	}
	if !p.out.Scan() {
		return Stats{}, fmt.Errorf("node simulator: no answer to %q: %v (see its log)", command, p.out.Err())
	}
	var r reply
	if err := json.Unmarshal(p.out.Bytes(), &r); err != nil {
		return Stats{}, fmt.Errorf("node simulator: answer %q: %w", p.out.Text(), err)
	}
	if r.Error != "" {
		return Stats{}, errors.New("node simulator: " + r.Error)
	}
	return r.Stats, nil
}

// Usage is the simulator's CPU and memory so far.
func (p *Process) Usage() (proc.Usage, error) { return proc.ReadUsage(p.cmd.Process.Pid) }

// Throttling is what its CPU cap held it back so far.
func (p *Process) Throttling() (cgroups.Throttling, error) {
	return cgroups.ReadThrottling(cgroups.Mount, p.cgroup)
}

// Stop ends the simulator (the end of its stdin), waits for it and
// removes its cgroup, and the parent too when nothing else is in it.
func (p *Process) Stop() {
	p.in.Close()
	p.cmd.Wait()
	cgroups.RemoveCPU(cgroups.Mount, p.cgroup)
	cgroups.RemoveCPU(cgroups.Mount, path.Dir(p.cgroup)) // fails, harmlessly, while another child is there
}
