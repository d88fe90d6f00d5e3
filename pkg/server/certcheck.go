package server

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/pki"
)

// certCheckInterval is how often a running server renews the leaf
// certificates that come within pki.RenewBefore of expiry. Every component
// reads them from their files again: kube-apiserver's serving and
// front-proxy certificates at once, the etcds' on each new connection,
// the kubeconfig clients within 5 minutes (client-go's rotation).
const certCheckInterval = time.Hour

// caWarnBefore is how long before a CA expires the server warns: k1m does
// not rotate CAs.
const caWarnBefore = 365 * 24 * time.Hour

// TLSDir is where a server keeps its CAs, leaf certificates and keys.
func TLSDir(dataDir string) string { return datadir.Server(dataDir).TLS() }

// certificateExpiries maps every certificate file in dir to its expiry.
func certificateExpiries(dir string) map[string]pki.CertInfo {
	out := map[string]pki.CertInfo{}
	paths, _ := filepath.Glob(filepath.Join(dir, "*.crt"))
	for _, p := range paths {
		if info, err := pki.Inspect(p); err == nil {
			out[filepath.Base(p)] = info
		}
	}
	return out
}

// renewCertificates reissues what is due (loadOrIssueCerts keeps the
// rest) and reports each renewal, and each CA near its end, as a warning.
func renewCertificates(dir string, names servingNames, now time.Time, warn func(string)) error {
	// A running server never makes a CA: one deleted while it runs is an
	// error, not a reason to cut every client off with a new one.
	if _, err := loadCAs(dir); err != nil {
		return err
	}
	before := certificateExpiries(dir)
	if _, err := loadOrIssueCerts(dir, names); err != nil {
		return err
	}
	after := certificateExpiries(dir)
	var files []string
	for f := range after {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		b, a := before[f], after[f]
		switch {
		case !b.NotAfter.IsZero() && !a.NotAfter.Equal(b.NotAfter):
			warn(fmt.Sprintf("certificate %s renewed: it would have expired %s (in %s), the new one expires %s",
				f, b.NotAfter.UTC().Format(time.RFC3339), days(b.NotAfter.Sub(now)), a.NotAfter.UTC().Format(time.RFC3339)))
		case a.IsCA && a.NotAfter.Sub(now) < caWarnBefore:
			warn(fmt.Sprintf("CA %s expires %s (in %s) and k1m does not rotate CAs: plan its replacement", f, a.NotAfter.UTC().Format(time.RFC3339), days(a.NotAfter.Sub(now))))
		}
	}
	return nil
}

func days(d time.Duration) string { return fmt.Sprintf("%d days", int(d.Hours()/24)) }

// watchCertificates renews due certificates every certCheckInterval until
// ctx ends; a failure is logged with how long is left, and tried again.
func (s *Server) watchCertificates(ctx context.Context) {
	wait.UntilWithContext(ctx, func(context.Context) {
		dir := TLSDir(s.cfg.DataDir)
		if err := renewCertificates(dir, s.apiserverNames(), time.Now(), func(msg string) { s.warn("%s", msg) }); err != nil {
			s.warn("renewing certificates in %s failed (tried again in %s): %v", dir, certCheckInterval, err)
		}
	}, certCheckInterval)
}

// Rotate reissues the named leaf certificates of a server's data
// directory now (all of them when names is empty), each signed by its own
// CA, with the same names and usages. It works with the server running or
// stopped; CAs are never rotated.
func Rotate(dataDir string, names []string, report func(string)) error {
	dir := TLSDir(dataDir)
	cas, err := loadCAs(dir)
	if err != nil {
		return err
	}
	leaves := map[string]pki.CertInfo{}
	var all []string
	for file, info := range certificateExpiries(dir) {
		if !info.IsCA {
			name := strings.TrimSuffix(file, ".crt")
			leaves[name] = info
			all = append(all, name)
		}
	}
	sort.Strings(all)
	if len(names) == 0 {
		names = all
	}
	for _, name := range names {
		info, ok := leaves[name]
		if !ok {
			return fmt.Errorf("no leaf certificate %q in %s: want one of %s (CAs are not rotated)", name, dir, strings.Join(all, ", "))
		}
		ca := cas[info.Issuer]
		if ca == nil {
			return fmt.Errorf("%s was issued by %q, none of this server's CAs", info.Path, info.Issuer)
		}
		if err := ca.Reissue(info.Path, strings.TrimSuffix(info.Path, ".crt")+".key"); err != nil {
			return err
		}
		report(name)
	}
	return nil
}

// loadCAs loads the server's CAs, by common name; a missing one is an
// error (pki.LoadCA never creates).
func loadCAs(dir string) (map[string]*pki.Authority, error) {
	cas := map[string]*pki.Authority{}
	for _, spec := range caSpecs {
		ca, err := pki.LoadCA(dir, spec.name)
		if err != nil {
			return nil, err
		}
		cas[ca.Cert.Subject.CommonName] = ca
	}
	return cas, nil
}
