package cleanup

import (
	"fmt"
	"os/exec"
	"strings"

	"k1m.dev/k1m/pkg/netpol"
)

// removeKubeChains deletes the KUBE-* chains the kubelet and kube-proxy
// leave behind (canaries, KUBE-FIREWALL) and the rules jumping to them,
// for IPv4 and IPv6: kube-proxy --cleanup removes only its own.
func removeKubeChains() error {
	var errs []string
	for _, tool := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(tool); err != nil {
			continue
		}
		out, err := exec.Command(tool + "-save").Output()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s-save: %v", tool, err))
			continue
		}
		for _, cmd := range kubeChainCleanup(string(out)) {
			if msg, err := exec.Command(tool, cmd...).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Sprintf("%s %s: %v: %s", tool, strings.Join(cmd, " "), err, strings.TrimSpace(string(msg))))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// removeNetpolTable deletes the nftables table of NetworkPolicy rules
// (pkg/netpol), if there is one.
func removeNetpolTable() error {
	if _, err := exec.LookPath("nft"); err != nil {
		return nil
	}
	if exec.Command("nft", "list", "table", "inet", netpol.Table).Run() != nil {
		return nil // none
	}
	if out, err := exec.Command("nft", "delete", "table", "inet", netpol.Table).CombinedOutput(); err != nil {
		return fmt.Errorf("nft delete table inet %s: %v: %s", netpol.Table, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// kubeChainCleanup turns iptables-save output into the commands that
// remove jumps into KUBE-* chains from other chains, then flush and delete
// the KUBE-* chains.
func kubeChainCleanup(save string) [][]string {
	var deletes, flushes, removes [][]string
	table := ""
	for _, line := range strings.Split(save, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":KUBE-"):
			chain := strings.Fields(line[1:])[0]
			flushes = append(flushes, []string{"-t", table, "-F", chain})
			removes = append(removes, []string{"-t", table, "-X", chain})
		case strings.HasPrefix(line, "-A ") && strings.Contains(line, " -j KUBE-"):
			fields := strings.Fields(line)
			if strings.HasPrefix(fields[1], "KUBE-") {
				continue // goes with its chain
			}
			deletes = append(deletes, append([]string{"-t", table, "-D"}, splitRule(line[3:])...))
		}
	}
	return append(append(deletes, flushes...), removes...)
}

// splitRule splits a saved rule into arguments, keeping quoted comments.
func splitRule(rule string) []string {
	var args []string
	var cur strings.Builder
	quoted := false
	for _, r := range rule {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				args = append(args, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		args = append(args, cur.String())
	}
	return args
}
