package store

import (
	"strings"
	"testing"
)

// TestTrust16_10_DSNPasswordNeverPrinted: a DSN's password never reaches
// an error, in the URL form, in the keyword form (once taken for a path)
// and in anything opened as a file.
func TestTrust16_10_DSNPasswordNeverPrinted(t *testing.T) {
	const secret = "s3cret-Pa55"
	for _, c := range []struct{ in, want string }{
		{"postgres://stratum:" + secret + "@127.0.0.1:5432/db", "postgres://stratum:xxxxx@127.0.0.1:5432/db"},
		{"host=db user=stratum password=" + secret + " dbname=x", "host=db user=stratum password=xxxxx dbname=x"},
		{"host=db password = '" + secret + " x' dbname=x", "host=db password = xxxxx dbname=x"},
		{"/var/lib/stratum/stratum.db", "/var/lib/stratum/stratum.db"},
	} {
		if got := RedactDSN(c.in); got != c.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	for _, target := range []string{
		"host=127.0.0.1 port=1 user=stratum password=" + secret + " dbname=x sslmode=disable connect_timeout=1",
		"postgres://stratum:" + secret + "@127.0.0.1:1/x?sslmode=disable&connect_timeout=1",
		t.TempDir() + "/no/such/dir password=" + secret,
	} {
		_, err := Open(target, nil)
		if err == nil {
			t.Fatalf("opening %s succeeded", RedactDSN(target))
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error names the password: %v", err)
		}
		if _, err := OpenReadOnly(target, nil); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("read-only open: %v", err)
		}
	}
	if !isPostgres("host=db user=stratum password=x dbname=y") {
		t.Error("a keyword DSN is taken for a path")
	}
}
