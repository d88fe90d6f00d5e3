// Package containerd configures and runs the node's containerd (Debian's
// package) for the kubelet: the CRI settings this kind of machine needs,
// the local pause image, overlayfs, the cgroupfs driver, and one instance
// per node so that several nodes can share a machine.
package containerd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"text/template"
	"time"

	"k1m.dev/k1m/pkg/airgap"
)

// Config is where one containerd keeps its files and listens.
type Config struct {
	Root       string // persistent data (images, snapshots)
	State      string // runtime state, under /run
	CNIConfDir string
	CNIBinDir  string
	// RestrictOOMScoreAdj keeps containers' oom_score_adj at or above
	// containerd's own: needed where root lacks CAP_SYS_RESOURCE (runc
	// otherwise fails to start any sandbox).
	RestrictOOMScoreAdj bool
}

// Address is the CRI socket.
func (c Config) Address() string { return filepath.Join(c.State, "containerd.sock") }

// Endpoint is the socket as the kubelet's --container-runtime-endpoint.
func (c Config) Endpoint() string { return "unix://" + c.Address() }

// ConfigPath is where the rendered config.toml goes.
func (c Config) ConfigPath() string { return filepath.Join(c.Root, "config.toml") }

var configTemplate = template.Must(template.New("config.toml").Parse(`# Written by k1m agent at every start: edit k1m's settings, not this file.
version = 2
root = "{{.Root}}"
state = "{{.State}}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "{{.Address}}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{{.Root}}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{.Pause}}"
  restrict_oom_score_adj = {{.RestrictOOMScoreAdj}}
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{.CNIBinDir}}"
    conf_dir = "{{.CNIConfDir}}"
`))

// Render returns config.toml.
func (c Config) Render() ([]byte, error) {
	var buf bytes.Buffer
	err := configTemplate.Execute(&buf, struct {
		Config
		Address, Pause string
	}{c, c.Address(), airgap.PauseImage})
	return buf.Bytes(), err
}

// LacksSysResource tells whether this process lacks CAP_SYS_RESOURCE (bit
// 24 of CapEff), as root does in some containers and VMs.
func LacksSysResource() (bool, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			var caps uint64
			if _, err := fmt.Sscanf(strings.TrimSpace(hex), "%x", &caps); err != nil {
				return false, fmt.Errorf("parsing CapEff %q: %v", hex, err)
			}
			return caps&(1<<24) == 0, nil
		}
	}
	return false, fmt.Errorf("no CapEff line in /proc/self/status")
}

// Process is a running containerd.
type Process struct {
	cmd  *exec.Cmd
	done chan error
}

// Start writes the config and starts containerd with its log in logPath,
// then waits until it answers on its socket. containerd dies with this
// process (the pods' shims do not: a restarted agent finds its pods).
func Start(ctx context.Context, c Config, logPath string) (*Process, error) {
	if _, err := exec.LookPath("containerd"); err != nil {
		return nil, fmt.Errorf("containerd is not installed: install Debian's containerd package (make deps-cluster does)")
	}
	if answers(ctx, c.Address()) {
		return nil, fmt.Errorf("a containerd already serves %s: stop it first (k1m cleanup stops the ones k1m started)", c.Address())
	}
	for _, d := range []string{c.Root, c.State, c.CNIConfDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	cfg, err := c.Render()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.ConfigPath(), cfg, 0o600); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("containerd", "--config", c.ConfigPath())
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting containerd: %w", err)
	}
	p := &Process{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); logFile.Close() }()
	deadline := time.Now().Add(60 * time.Second)
	for !answers(ctx, c.Address()) {
		select {
		case err := <-p.done:
			return nil, fmt.Errorf("containerd exited while starting (%v): see %s", err, logPath)
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("containerd did not answer on %s within 60s: see %s", c.Address(), logPath)
		}
	}
	return p, nil
}

// Done reports containerd's exit.
func (p *Process) Done() <-chan error { return p.done }

// Stop terminates containerd and waits for it.
func (p *Process) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
	}
}

func answers(ctx context.Context, address string) bool {
	if _, err := os.Stat(address); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, "ctr", "--address", address, "version").Run() == nil
}
