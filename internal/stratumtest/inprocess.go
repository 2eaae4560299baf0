package stratumtest

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"stratum/crypto"
)

// InProcess is what an in-process founder's ServeFunc is given: the
// fields of founder.Options the harness decides.
type InProcess struct {
	Dir               string // the data directory
	Dev               bool   // --dev
	APIAddr, JoinAddr string // listener addresses (127.0.0.1:0 by default)
	Out               io.Writer
	// Ready is called with the listeners' host:port once they listen.
	Ready func(api, join string)
}

// ServeFunc serves a founder in this process until ctx ends (founder.Serve
// with its Options filled from p): stratumtest cannot import the founder
// package, whose own tests use this harness.
type ServeFunc func(ctx context.Context, p InProcess) error

// spawnInProcess runs o.Serve in a goroutine and waits for its listeners.
func spawnInProcess(o FounderOptions) (*Founder, error) {
	if len(o.Args) > 0 || len(o.Env) > 0 {
		return nil, errors.New("stratumtest: an in-process founder takes no Args or Env: its ServeFunc sets the Options")
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Founder{Dir: o.Dir, logFile: o.LogFile, exited: make(chan struct{}), cancel: cancel}
	var out io.Writer = &f.stdout
	closeLog := func() {}
	if o.LogFile != "" {
		lf, err := os.Create(o.LogFile)
		if err != nil {
			cancel()
			return nil, err
		}
		out, closeLog = lf, func() { lf.Close() }
	}
	ready := make(chan [2]string, 1)
	p := InProcess{
		Dir: o.Dir, Dev: o.Dev, APIAddr: cmp.Or(o.APIAddr, "127.0.0.1:0"), JoinAddr: cmp.Or(o.JoinAddr, "127.0.0.1:0"), Out: out,
		Ready: func(api, join string) {
			select {
			case ready <- [2]string{api, join}:
			default:
			}
		},
	}
	f.Started = time.Now()
	go func() {
		err := o.Serve(ctx, p)
		if err != nil {
			fmt.Fprintf(out, "serve: %v\n", err)
			f.exitCode = 1
		}
		f.serveErr = err
		closeLog()
		close(f.exited)
	}()
	timeout := cmp.Or(o.StartTimeout, 60*time.Second)
	select {
	case a := <-ready:
		f.API, f.Join = a[0], a[1]
	case <-f.exited:
		return nil, fmt.Errorf("in-process founder returned before serving: %v\n%s", f.serveErr, f.OutputTail(16<<10))
	case <-time.After(timeout):
		f.Kill()
		return nil, fmt.Errorf("in-process founder did not listen within %v:\n%s", timeout, f.OutputTail(16<<10))
	}
	caFile := filepath.Join(f.Dir, "ca.pem")
	if err := f.UseCA(caFile); err != nil {
		f.Kill()
		return nil, err
	}
	raw, _ := os.ReadFile(caFile)
	if b, _ := pem.Decode(raw); b != nil {
		if cert, err := x509.ParseCertificate(b.Bytes); err == nil {
			f.Pin = crypto.SPKIPin(cert)
		}
	}
	return f, nil
}
