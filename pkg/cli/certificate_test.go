package cli

import (
	"bytes"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/pki"
)

func TestPrintCertificates(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	printCertificates(&out, []pki.CertInfo{
		{Path: "/d/tls/admin.crt", Subject: "k1m-admin", Issuer: "k1m-ca", NotAfter: now.Add(300 * 24 * time.Hour)},
		{Path: "/d/tls/apiserver.crt", Subject: "kube-apiserver", Issuer: "k1m-ca", NotAfter: now.Add(20 * 24 * time.Hour)},
		{Path: "/d/tls/ca.crt", Subject: "k1m-ca", Issuer: "k1m-ca", NotAfter: now.Add(3650 * 24 * time.Hour), IsCA: true},
		{Path: "/d/tls/old.crt", Subject: "old", Issuer: "k1m-ca", NotAfter: now.Add(-time.Hour)},
	}, now)
	want := "FILE                  SUBJECT         ISSUER  EXPIRES               STATUS\n" +
		"/d/tls/admin.crt      k1m-admin       k1m-ca  2027-09-19T12:00:00Z  ok, 300 days left\n" +
		"/d/tls/apiserver.crt  kube-apiserver  k1m-ca  2026-12-13T12:00:00Z  renewal due, 20 days left\n" +
		"/d/tls/ca.crt         k1m-ca          k1m-ca  2036-11-20T12:00:00Z  CA, 3650 days left\n" +
		"/d/tls/old.crt        old             k1m-ca  2026-11-23T11:00:00Z  EXPIRED\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
