package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stratum/release/releasetest"
)

// TestPushNamesTheTreesFault: a tree whose file no longer matches its
// manifest stops the upload, and push says so in its own words rather
// than as the failed request (`Post "https://...": ...`).
func TestPushNamesTheTreesFault(t *testing.T) {
	api, ca := apiStandIn(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusBadRequest)
	})
	t.Setenv("STRATUM_TOKEN", "tok")
	dir, _, _ := releasetest.SignedTree(t, 4096, "0.6.0")
	if err := os.WriteFile(filepath.Join(dir, "os", "index.json"), []byte(`{"layers":12}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := Execute(context.Background(), []string{"release", "push", dir, "--api", api, "--ca-file", ca}, nil, &out, &errb)
	if code != ExitFailed || strings.Contains(errb.String(), "Post ") || !strings.Contains(errb.String(), "not sent: os/index.json") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

// TestTrustKeySendsNoPrivateKey: trust-key given the signing key (NAME.key
// beside NAME.pub) refuses it before sending anything to the founder.
func TestTrustKeySendsNoPrivateKey(t *testing.T) {
	called := false
	api, ca := apiStandIn(t, func(w http.ResponseWriter, r *http.Request) {
		called = true
		w.WriteHeader(http.StatusBadRequest)
	})
	t.Setenv("STRATUM_TOKEN", "tok")
	keyFile, _, _ := releasetest.Key(t, t.TempDir(), "k1")
	var out, errb bytes.Buffer
	code := Execute(context.Background(), []string{"release", "trust-key", keyFile, "--api", api, "--ca-file", ca}, nil, &out, &errb)
	if code != ExitFailed || called || !strings.Contains(errb.String(), "nothing was sent") {
		t.Fatalf("exit %d, request sent %v, stderr %q", code, called, errb.String())
	}
}
