// Package release installs the release (make release) the way a user
// does, on machines that have never seen Go or a checkout: two containers
// from the kind base image (Debian bookworm, systemd as PID 1, run as kind
// runs its nodes) on one IPv6 network. install.sh server must refuse a
// release with one flipped byte and change nothing. From the tarball it
// must install the server, from the directory an agent joined with a
// token (the token file gone after the join); both nodes Ready, a pod runs
// on each. k1m-uninstall.sh must then leave each machine as it was before
// the install: the same processes, mounts, network links, packet-filter
// rules, cgroups and files (Debian packages the install added stay, as
// with k3s).
//
// Run by make release-test (hack/release.sh test), which builds the release
// and the kind images and starts Docker first.
package release

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/fsutil"
)

const (
	// The containers' names, hostnames and so node names.
	server  machine = "k1m-release-test"
	agent   machine = "k1m-release-test-agent"
	network         = "k1m-release-test"
	// subnet gives the containers an IPv6 default route (k1m takes the node
	// IP from it), apart from k1m's ranges (fddf:4035:b500::/40) and the
	// host's fd00::/64.
	subnet    = "fd6b:31e1:7e57::/64"
	baseRepo  = "k1m.local/kind-base"
	nodeImage = "k1m.local/kind-node:latest" // the base image plus one layer
	busybox   = "k1m.local/busybox:1.35"     // in the release's images/busybox.tar
	// Where the release goes in a container (/root is not compared).
	releaseDir = "/root/k1m-release"
	corruptDir = "/root/k1m-corrupt"
	tarballDir = "/root/tarball"
)

func TestRelease(t *testing.T) {
	dir, tarball := os.Getenv("K1M_RELEASE_DIR"), os.Getenv("K1M_RELEASE_TARBALL")
	if dir == "" || tarball == "" {
		t.Skip("K1M_RELEASE_DIR or K1M_RELEASE_TARBALL unset: run through make release-test (hack/release.sh test)")
	}
	image := baseImage(t)
	createNetwork(t)
	before := map[machine]state{}
	for _, m := range []machine{server, agent} {
		m.start(t, image)
		before[m] = m.snapshot(t)
		t.Logf("%s before the install: %s", m, before[m].summary())
	}

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"CorruptReleaseRefused", func(t *testing.T) { testCorruptRefused(t, dir, before[server]) }},
		{"MissingPackagesWithoutAptRefused", func(t *testing.T) { testNoApt(t, dir, before[agent]) }},
		{"InstallServerFromTarball", func(t *testing.T) { testInstallServer(t, tarball) }},
		{"InstallAgentFromDirectory", func(t *testing.T) { testInstallAgent(t, dir) }},
		{"PodOnEachNode", testPods},
		{"UninstallAgent", func(t *testing.T) { testUninstall(t, agent, before[agent]) }},
		{"UninstallServer", func(t *testing.T) { testUninstall(t, server, before[server]) }},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return
		}
	}
}

// testCorruptRefused flips one byte in the middle of k1m: install.sh must
// name the file, fail, and leave the machine as it was.
func testCorruptRefused(t *testing.T, dir string, before state) {
	bad := filepath.Join(t.TempDir(), "k1m-corrupt")
	copyRelease(t, dir, bad, "k1m")
	docker(t, "cp", bad, string(server)+":"+corruptDir)
	defer run("docker", "exec", string(server), "rm", "-rf", corruptDir)
	out, code := server.exec(t, corruptDir+"/install.sh", "server")
	if code != 1 {
		t.Errorf("install.sh from a release with a corrupt k1m exited %d, want 1; output:\n%s", code, out)
	}
	want := "install: checksum mismatch in " + corruptDir + ": k1m: nothing installed (copy the release again)"
	if got := lastLine(out); got != want {
		t.Errorf("install.sh's last line:\n  %s\nwant\n  %s\noutput:\n%s", got, want, out)
	}
	if diff := before.diff(server.snapshot(t), ""); diff != "" {
		t.Errorf("install.sh refused the release but changed the machine:\n%s", diff)
	}
}

// testNoApt points apt at a closed port: install.sh must name the
// packages it misses (of its list, the kind base image lacks only ipset),
// fail, and install nothing.
func testNoApt(t *testing.T, dir string, before state) {
	const offline = "/etc/apt/apt.conf.d/99k1m-release-test-offline"
	docker(t, "cp", dir, string(agent)+":"+releaseDir)
	agent.out(t, "sh", "-c", `echo 'Acquire::http::Proxy "http://[::1]:9";' >`+offline)
	out, code := agent.exec(t, releaseDir+"/install.sh", "server")
	agent.out(t, "rm", offline)
	if code != 1 {
		t.Errorf("install.sh with apt offline exited %d, want 1; output:\n%s", code, out)
	}
	want := "install: apt-get could not install ipset: install these Debian bookworm packages (from a mirror or as .deb files), then run this again"
	if got := lastLine(out); got != want {
		t.Errorf("install.sh's last line:\n  %s\nwant\n  %s\noutput:\n%s", got, want, out)
	}
	if diff := before.diff(agent.snapshot(t), ""); diff != "" {
		t.Errorf("install.sh failed for want of packages but changed the machine:\n%s", diff)
	}
}

// testInstallServer checks the tarball against its .sha256, unpacks it and
// runs install.sh server, as docs/install.md says.
func testInstallServer(t *testing.T, tarball string) {
	docker(t, "exec", string(server), "mkdir", tarballDir)
	for _, f := range []string{tarball, tarball + ".sha256"} {
		docker(t, "cp", f, string(server)+":"+tarballDir+"/")
	}
	name := filepath.Base(tarball)
	server.out(t, "sh", "-c", fmt.Sprintf("cd %s && sha256sum --check --strict %s.sha256 && tar -xzf %s && rm %s", tarballDir, name, name, name))
	unpacked := tarballDir + "/" + strings.TrimSuffix(name, ".tar.gz")
	start := time.Now()
	install(t, server, unpacked, "server")
	server.wantExecStart(t, "server", "ExecStart=/usr/local/bin/k1m server")
	waitNodes(t, start, server.String()+"=True")
}

// testInstallAgent joins the agent with the server's token through
// install.sh's K1M_TOKEN, which must not stay on the machine.
func testInstallAgent(t *testing.T, dir string) {
	if _, code := agent.exec(t, "test", "-f", releaseDir+"/sha256sum.txt"); code != 0 {
		docker(t, "cp", dir, string(agent)+":"+releaseDir)
	}
	token := server.out(t, "cat", "/var/lib/k1m/server/token")
	ip := docker(t, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.GlobalIPv6Address}}{{end}}", string(server))
	url := "https://[" + ip + "]:6443"
	start := time.Now()
	install(t, agent, releaseDir, "agent", "--server", url, "K1M_TOKEN="+token)
	agent.wantExecStart(t, "agent", "ExecStart=/usr/local/bin/k1m agent --token-file /etc/k1m/join-token --server "+url)
	waitNodes(t, start, server.String()+"=True "+agent.String()+"=True") // sorted by name
	if out, code := agent.exec(t, "test", "-e", "/etc/k1m/join-token"); code != 1 {
		t.Errorf("/etc/k1m/join-token still there after the join (test -e: %d %s)", code, out)
	}
}

// install runs install.sh ROLE ARGS (an argument KEY=VALUE goes to the
// environment) and checks that the installed binary and images are the
// release's, byte for byte.
func install(t *testing.T, m machine, from, role string, args ...string) {
	cmd := []string{"exec"}
	var flags []string
	for _, a := range args {
		if strings.HasPrefix(a, "K1M_") {
			cmd = append(cmd, "--env", a)
		} else {
			flags = append(flags, a)
		}
	}
	cmd = append(append(cmd, string(m), from+"/install.sh", role), flags...)
	start := time.Now()
	out, err := run("docker", cmd...)
	t.Logf("%s: install.sh %s (%s):\n%s", m, strings.Join(append([]string{role}, flags...), " "), time.Since(start).Round(time.Second), out)
	if err != nil {
		t.Fatalf("%s: install.sh %s: %v", m, role, err)
	}
	sums := strings.Fields(m.out(t, "sh", "-c", "cd "+from+" && grep -E ' (images/.*|k1m)$' sha256sum.txt | cut -d' ' -f1"))
	installed := strings.Fields(m.out(t, "sh", "-c", "cd /var/lib/k1m && sha256sum images/* /usr/local/bin/k1m | cut -d' ' -f1"))
	if !slices.Equal(installed, sums) {
		t.Errorf("%s: sha256 of /var/lib/k1m/images/* and /usr/local/bin/k1m: %v, want the release's %v", m, installed, sums)
	}
}

func (m machine) wantExecStart(t *testing.T, role, want string) {
	if got := m.out(t, "grep", "^ExecStart=", "/etc/systemd/system/k1m-"+role+".service"); got != want {
		t.Errorf("%s: k1m-%s.service has %q, want %q", m, role, got, want)
	}
}

// waitNodes waits until every installed k1m unit is active and the
// cluster's nodes with their Ready status are want ("name=True ...",
// sorted by name), showing progress; on a timeout it dumps the journals.
func waitNodes(t *testing.T, start time.Time, want string) {
	deadline := time.Now().Add(4 * time.Minute)
	var last time.Time
	for ; ; time.Sleep(2 * time.Second) {
		units := activeUnits(t)
		nodes, _ := server.exec(t, "k1m", "kubectl", "get", "nodes", "--sort-by=.metadata.name", "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{" "}{end}`)
		ok := nodes == want
		for _, u := range units {
			ok = ok && strings.HasSuffix(u, "=active")
		}
		if ok {
			t.Logf("units %v, nodes %q, %s after the install", units, nodes, time.Since(start).Round(time.Second))
			return
		}
		if time.Now().After(deadline) {
			journals(t)
			t.Fatalf("after %s: units %v, nodes %q; want every unit active and nodes %q", time.Since(start).Round(time.Second), units, nodes, want)
		}
		if time.Since(last) >= 10*time.Second {
			t.Logf("waiting: units %v, nodes %q", units, lastLine(nodes))
			last = time.Now()
		}
	}
}

// activeUnits is systemctl is-active of each machine's installed k1m
// unit, as "machine/unit=state".
func activeUnits(t *testing.T) []string {
	var units []string
	for _, u := range []struct {
		m    machine
		unit string
	}{{server, "k1m-server"}, {agent, "k1m-agent"}} {
		if _, code := u.m.exec(t, "test", "-f", "/etc/systemd/system/"+u.unit+".service"); code == 0 {
			state, _ := u.m.exec(t, "systemctl", "is-active", u.unit)
			units = append(units, u.m.String()+"/"+u.unit+"="+state)
		}
	}
	return units
}

// testPods runs a busybox pod (from the release's images, never pulled) on
// each node to completion and reads its log through the server.
func testPods(t *testing.T) {
	kubectl := func(args ...string) (string, int) {
		return server.exec(t, append([]string{"k1m", "kubectl"}, args...)...)
	}
	for _, m := range []machine{server, agent} {
		pod, msg := "hello-"+m.String(), "hello from "+m.String()
		overrides := fmt.Sprintf(`{"spec": {"nodeName": %q}}`, m)
		if out, code := kubectl("run", pod, "--image="+busybox, "--image-pull-policy=Never", "--restart=Never",
			"--overrides="+overrides, "--command", "--", "sh", "-c", "echo "+msg); code != 0 {
			t.Fatalf("kubectl run %s: %s", pod, out)
		}
		if out, code := kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/"+pod, "--timeout=120s"); code != 0 {
			desc, _ := kubectl("describe", "pod", pod)
			journals(t)
			t.Fatalf("pod %s did not succeed: %s\n%s", pod, out, desc)
		}
		// The log may reach its file a moment after the container ended.
		var log string
		try := 0
		for ; try < 15 && log != msg; try++ {
			if try > 0 {
				time.Sleep(time.Second)
			}
			log, _ = kubectl("logs", pod)
		}
		if log != msg {
			t.Errorf("pod %s's log %q, want %q", pod, log, msg)
		} else if try > 1 {
			t.Logf("pod %s's log read on try %d", pod, try)
		}
	}
}

// testUninstall runs k1m-uninstall.sh and compares the machine with its
// state before the install.
func testUninstall(t *testing.T, m machine, before state) {
	start := time.Now()
	out, code := m.exec(t, "/usr/local/bin/k1m-uninstall.sh")
	t.Logf("%s: k1m-uninstall.sh (%s):\n%s", m, time.Since(start).Round(time.Second), out)
	if code != 0 {
		t.Fatalf("%s: k1m-uninstall.sh exited %d", m, code)
	}
	after := m.snapshot(t)
	if diff := before.diff(after, "packages"); diff != "" {
		t.Errorf("%s after the uninstall differs from before the install:\n%s", m, diff)
	}
	added, removed := setDiff(before["packages"], after["packages"])
	if len(removed) > 0 {
		t.Errorf("%s: Debian packages removed: %v", m, removed)
	}
	t.Logf("%s: Debian packages the install added (they stay): %v", m, added)
}

// baseImage is the kind base image the loaded node image is built on: the
// k1m.local/kind-base tag whose only layer is the node image's first.
func baseImage(t *testing.T) string {
	layers := func(ref string) []string {
		return strings.Fields(docker(t, "image", "inspect", "-f", `{{join .RootFS.Layers " "}}`, ref))
	}
	nodeLayers := layers(nodeImage)
	for _, ref := range strings.Fields(docker(t, "images", "--format", "{{.Repository}}:{{.Tag}}", baseRepo)) {
		if l := layers(ref); len(l) == 1 && len(nodeLayers) > 0 && l[0] == nodeLayers[0] {
			return ref
		}
	}
	t.Fatalf("no %s image is the base of %s: make kind-image loads both (after docker rmi %s it reloads them)", baseRepo, nodeImage, nodeImage)
	return ""
}

// createNetwork makes the containers' IPv6 network, removed when the test
// ends (after the containers: cleanups run last first).
func createNetwork(t *testing.T) {
	remove := func() { _, _ = run("docker", "network", "rm", network) }
	for _, m := range []machine{server, agent} {
		m.remove() // left by a run that was killed
	}
	remove()
	t.Cleanup(remove)
	docker(t, "network", "create", "--ipv6", "--subnet", subnet, network)
}

// machine is a container that stands for one machine.
type machine string

func (m machine) String() string { return string(m) }

func (m machine) remove() { _, _ = run("docker", "rm", "--force", "--volumes", string(m)) }

// start runs the base image as kind runs a node (kind's docker provider:
// privileged, tmpfs /tmp and /run, an anonymous /var volume, /lib/modules,
// a private cgroup namespace, IPv6 on) and waits for systemd. Container
// and volume are removed when the test ends.
func (m machine) start(t *testing.T, image string) {
	t.Cleanup(m.remove)
	docker(t, "run", "--detach", "--tty", "--name", string(m), "--hostname", string(m), "--net", network,
		"--privileged", "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
		"--tmpfs", "/tmp", "--tmpfs", "/run", "--volume", "/var", "--volume", "/lib/modules:/lib/modules:ro",
		"--cgroupns=private", "--init=false", "--restart=no",
		"--sysctl=net.ipv6.conf.all.disable_ipv6=0", "--sysctl=net.ipv6.conf.all.forwarding=1", image)
	deadline := time.Now().Add(time.Minute)
	for {
		state, _ := m.exec(t, "systemctl", "is-system-running")
		if state == "running" || state == "degraded" {
			t.Logf("%s: container from %s, systemd %s", m, image, state)
			return
		}
		if time.Now().After(deadline) {
			logs, _ := run("docker", "logs", string(m))
			t.Fatalf("%s: systemd is %q after a minute; container log:\n%s", m, state, logs)
		}
		time.Sleep(time.Second)
	}
}

// exec runs a command in the machine and returns its trimmed combined
// output and exit code.
func (m machine) exec(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := run("docker", append([]string{"exec", string(m)}, args...)...)
	if ee, ok := err.(*exec.ExitError); ok {
		return out, ee.ExitCode()
	} else if err != nil {
		t.Fatalf("docker exec %s %s: %v", m, strings.Join(args, " "), err)
	}
	return out, 0
}

// out runs a command in the machine that must succeed.
func (m machine) out(t *testing.T, args ...string) string {
	t.Helper()
	out, code := m.exec(t, args...)
	if code != 0 {
		t.Fatalf("%s: %s exited %d: %s", m, strings.Join(args, " "), code, out)
	}
	return out
}

// journals logs the end of each machine's k1m journal.
func journals(t *testing.T) {
	for _, m := range []machine{server, agent} {
		out, _ := m.exec(t, "journalctl", "-u", "k1m-server", "-u", "k1m-agent", "--no-pager", "-n", "150")
		t.Logf("%s: journalctl -u k1m-server -u k1m-agent (last 150 lines):\n%s", m, out)
	}
}

// copyRelease copies the release directory (modes kept), flipping the
// middle byte of the file named flip.
func copyRelease(t *testing.T, src, dst, flip string) {
	modeOf := func(rel string) os.FileMode {
		info, err := os.Stat(filepath.Join(src, rel))
		if err != nil {
			t.Fatal(err)
		}
		return info.Mode().Perm()
	}
	if err := fsutil.CopyTree(src, dst, modeOf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dst, flip)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(path, data, modeOf(flip)); err != nil {
		t.Fatal(err)
	}
}

// state is what snapshotScript reports, by section.
type state map[string][]string

var sections = []string{"processes", "mounts", "links", "iptables", "nftables", "cgroups", "packages", "files"}

// snapshotScript lists, one section each, what an install could leave
// behind: processes (the script's own left out), mount points, network
// links, iptables and ip6tables rules and chains other than the built-in
// ones (counters dropped), nftables tables other than iptables-nft's,
// k1m's cgroups, Debian packages, and the files under /etc, /usr/local,
// /opt, /srv, /var and /run, except package and journal state.
const snapshotScript = `
echo "== processes"; procs=$(ps -e -o pid=,ppid=,args=)
echo "$procs" | awk -v me=$$ '$1 != me && $2 != me {$1 = $2 = ""; print substr($0, 3)}' | sort
echo "== mounts"; awk '{print $5}' /proc/self/mountinfo | sort
echo "== links"; ip -o link | awk -F': ' '{print $2}' | sort
echo "== iptables"; for t in iptables ip6tables; do $t-save | sed -n "s/^\(-A .*\|:[^ ]* -\) *.*/$t \1/p"; done | sort
echo "== nftables"; nft list tables | grep -Ev '^table (ip|ip6) (filter|nat|mangle|raw|security)$' | sort
echo "== cgroups"; find /sys/fs/cgroup -maxdepth 2 -name 'k1m*' | sort
echo "== packages"; dpkg-query -W -f '${Package}\n' | sort
echo "== files"; find /etc /usr/local /opt /srv /var /run -xdev \( -path /var/lib/dpkg -o -path /var/lib/apt \
  -o -path /var/cache -o -path /var/log/journal -o -path /var/log/apt -o -path /var/log/dpkg.log -o -path /run/systemd \) \
  -prune -o -print | sort
`

func (m machine) snapshot(t *testing.T) state {
	s := state{}
	section := ""
	for _, line := range strings.Split(m.out(t, "sh", "-c", snapshotScript), "\n") {
		if name, ok := strings.CutPrefix(line, "== "); ok {
			section = name
			s[section] = []string{}
		} else if line != "" && section != "" {
			s[section] = append(s[section], line)
		}
	}
	if len(s) != len(sections) {
		t.Fatalf("%s: the snapshot has sections %v, want %v", m, s, sections)
	}
	return s
}

func (s state) summary() string {
	var parts []string
	for _, k := range sections {
		parts = append(parts, fmt.Sprintf("%d %s", len(s[k]), k))
	}
	return strings.Join(parts, ", ")
}

// diff lists, section by section, what after has that s has not and the
// reverse; skip names a section left out.
func (s state) diff(after state, skip string) string {
	var b strings.Builder
	for _, k := range sections {
		if k == skip {
			continue
		}
		added, removed := setDiff(s[k], after[k])
		for _, l := range added {
			fmt.Fprintf(&b, "  %s: left behind: %s\n", k, l)
		}
		for _, l := range removed {
			fmt.Fprintf(&b, "  %s: gone: %s\n", k, l)
		}
	}
	return b.String()
}

// setDiff returns the lines only in b and those only in a (as multisets).
func setDiff(a, b []string) (added, removed []string) {
	only := func(x, y []string) []string {
		count := map[string]int{}
		for _, l := range y {
			count[l]++
		}
		var out []string
		for _, l := range x {
			if count[l] == 0 {
				out = append(out, l)
			} else {
				count[l]--
			}
		}
		return out
	}
	return only(b, a), only(a, b)
}

// docker runs a docker command that must succeed.
func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := run("docker", args...)
	if err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return out
}

func run(name string, args ...string) (string, error) {
	var buf bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return strings.TrimSpace(buf.String()), err
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
