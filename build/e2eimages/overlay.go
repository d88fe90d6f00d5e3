package e2eimages

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k1m.dev/k1m/build/images"
)

// overlay is the tree of one Debian image's own layer, filled before it is
// written as a layer.
type overlay struct {
	dir string
	err error
}

func (o *overlay) file(path, data string, mode os.FileMode) {
	if o.err != nil {
		return
	}
	p := filepath.Join(o.dir, path)
	if o.err = os.MkdirAll(filepath.Dir(p), 0o755); o.err == nil {
		o.err = os.WriteFile(p, []byte(data), mode)
		if o.err == nil {
			o.err = os.Chmod(p, mode) // WriteFile's mode passes the umask
		}
	}
}

func (o *overlay) copy(path, src string, mode os.FileMode) {
	if o.err != nil {
		return
	}
	data, err := os.ReadFile(src)
	if err != nil {
		o.err = err
		return
	}
	o.file(path, string(data), mode)
}

func (o *overlay) symlink(path, target string) {
	if o.err != nil {
		return
	}
	p := filepath.Join(o.dir, path)
	if o.err = os.MkdirAll(filepath.Dir(p), 0o755); o.err == nil {
		o.err = os.Symlink(target, p)
	}
}

func (o *overlay) mkdir(path string, mode os.FileMode) {
	if o.err == nil {
		p := filepath.Join(o.dir, path)
		if o.err = os.MkdirAll(p, mode); o.err == nil {
			o.err = os.Chmod(p, mode)
		}
	}
}

// fillOverlay makes dir hold what image name adds to the Debian layer and
// returns the image's config.
func (in Inputs) fillOverlay(name, dir string) (images.Config, error) {
	if err := os.RemoveAll(dir); err != nil {
		return images.Config{}, err
	}
	o := &overlay{dir: dir}
	o.mkdir(".", 0o755)
	var cfg images.Config
	switch name {
	case "agnhost", "nautilus", "kitten":
		cfg = in.agnhost(o)
		if name != "agnhost" {
			html := filepath.Join(in.K8sDir, "test", "images", name, "html")
			o.copy(name+".jpg", filepath.Join(html, name+".jpg"), 0o644)
			o.copy("data.json", filepath.Join(html, "data.json"), 0o644)
			cfg.Cmd = []string{"test-webserver"}
		}
	case "httpd":
		cfg = httpd(o)
	case "nginx":
		cfg = nginx(o)
	case "jessie-dnsutils":
		o.copy("coredns", in.CoreDNS, 0o755)
		cfg = images.Config{Cmd: []string{"/bin/bash"}}
	case "nonroot":
		cfg = images.Config{Cmd: []string{"/bin/sh"}, User: "1234"}
	default:
		return cfg, fmt.Errorf("no Debian recipe for %q", name)
	}
	return cfg, o.err
}

// agnhost follows test/images/agnhost/Dockerfile: the program and its
// agnhost-2 link, coredns, porter's certificate, /uploads, iperf in
// /usr/local/bin, and the user and group defined in the image.
func (in Inputs) agnhost(o *overlay) images.Config {
	o.copy("agnhost", filepath.Join(in.Bin, "agnhost"), 0o755)
	o.symlink("agnhost-2", "agnhost")
	o.copy("coredns", in.CoreDNS, 0o755)
	porter := filepath.Join(in.K8sDir, "test", "images", "agnhost", "porter")
	o.copy("localhost.crt", filepath.Join(porter, "localhost.crt"), 0o644)
	o.copy("localhost.key", filepath.Join(porter, "localhost.key"), 0o644)
	o.mkdir("uploads", 0o755)
	o.symlink("usr/local/bin/iperf", "/usr/bin/iperf")
	in.appendBase(o, "etc/passwd", "user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n", 0o644)
	in.appendBase(o, "etc/group", "user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n", 0o644)
	return images.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}}
}

// appendBase writes the Debian tree's file at path with lines appended.
func (in Inputs) appendBase(o *overlay, path, lines string, mode os.FileMode) {
	if o.err != nil {
		return
	}
	data, err := os.ReadFile(filepath.Join(in.debianRoot(), path))
	if err != nil {
		o.err = fmt.Errorf("reading the Debian tree's %s: %w", path, err)
		return
	}
	o.file(path, strings.TrimRight(string(data), "\n")+"\n"+lines, mode)
}

// httpd lays Debian's apache2 out like the httpd image the specs expect:
// documents in /usr/local/apache2/htdocs (the StatefulSet specs move
// index.html away to fail a readiness probe), httpd-foreground as command.
func httpd(o *overlay) images.Config {
	o.file("usr/local/apache2/htdocs/index.html", "<html><body><h1>It works!</h1></body></html>\n", 0o644)
	o.file("usr/local/bin/httpd-foreground", `#!/bin/sh
# Runs Debian's apache2 in the foreground, as the httpd image's command does.
set -e
. /etc/apache2/envvars
# /var/lock links to /run/lock, and an image's /run starts empty.
mkdir -p /run/lock "$APACHE_RUN_DIR" "$APACHE_LOCK_DIR" "$APACHE_LOG_DIR"
rm -f "$APACHE_PID_FILE"
exec apache2 -DFOREGROUND "$@"
`, 0o755)
	o.file("etc/apache2/sites-available/000-default.conf", `<VirtualHost *:80>
	DocumentRoot /usr/local/apache2/htdocs
	ErrorLog /dev/stderr
	CustomLog /dev/stdout combined
</VirtualHost>
<Directory /usr/local/apache2/htdocs>
	Require all granted
</Directory>
`, 0o644)
	return images.Config{Cmd: []string{"httpd-foreground"}}
}

// nginx serves /usr/share/nginx/html on port 80 (IPv6 and IPv4) in the
// foreground, logging to the container's output, as the nginx image does.
func nginx(o *overlay) images.Config {
	o.file("etc/nginx/sites-available/default", `server {
	listen 80 default_server;
	listen [::]:80 default_server;
	root /usr/share/nginx/html;
	index index.html;
	location / {
		try_files $uri $uri/ =404;
	}
}
`, 0o644)
	o.symlink("var/log/nginx/access.log", "/dev/stdout")
	o.symlink("var/log/nginx/error.log", "/dev/stderr")
	return images.Config{Cmd: []string{"nginx", "-g", "daemon off;"}}
}
