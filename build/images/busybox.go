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

// BusyboxLayer is a layer of the busybox binary at path as /bin/busybox
// and a /bin link for each of its applets.
func BusyboxLayer(path, layerPath string) (Layer, error) {
	links, err := BusyboxApplets(path)
	if err != nil {
		return Layer{}, err
	}
	return FilesLayer(map[string]string{"/bin/busybox": path}, links, layerPath)
}
