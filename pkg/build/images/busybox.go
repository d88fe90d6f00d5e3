package images

import (
	"fmt"
	"os/exec"
	"strings"
)

// BusyboxApplets maps /bin/<applet> to busybox for every applet the
// busybox binary at path has (Debian's busybox-static).
func BusyboxApplets(path string) (map[string]string, error) {
	out, err := exec.Command(path, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("listing busybox applets (%s from Debian's busybox-static; make deps-cluster installs it): %v", path, err)
	}
	links := map[string]string{}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" {
			links["/bin/"+applet] = "busybox"
		}
	}
	return links, nil
}
