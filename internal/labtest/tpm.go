package labtest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The hosts' TPMs: each host's swtpm is manufactured by swtpm_setup with
// an EK and an EK certificate signed by the lab's own manufacturer CA
// (swtpm_localca with a configuration in the lab's directory, so neither
// root's nor another lab's CA is used), then runs as a socket TPM in the
// host's namespace for the host's joiner.

// startTPMs manufactures and starts every host's TPM.
func (l *Lab) startTPMs(t testing.TB) {
	t.Helper()
	ca := filepath.Join(l.Dir, "ekca")
	if err := os.MkdirAll(ca, 0o700); err != nil {
		t.Fatal(err)
	}
	localca := filepath.Join(l.Dir, "swtpm-localca.conf")
	setup := filepath.Join(l.Dir, "swtpm_setup.conf")
	files := map[string]string{
		localca: fmt.Sprintf("statedir = %[1]s\nsigningkey = %[1]s/signkey.pem\nissuercert = %[1]s/issuercert.pem\ncertserial = %[1]s/certserial\n", ca),
		setup:   fmt.Sprintf("create_certs_tool = %s\ncreate_certs_tool_config = %s\nactive_pcr_banks = sha256\n", mustLook(t, "swtpm_localca"), localca),
	}
	for p, body := range files {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l.EKRootCA, l.EKIssuerCA = filepath.Join(ca, "swtpm-localca-rootca-cert.pem"), filepath.Join(ca, "issuercert.pem")
	start := time.Now()
	// The first makes the CA; the others share it, a few at a time.
	if err := manufacture(l.Hosts[0], setup); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(l.Hosts))
	sem := make(chan struct{}, 4)
	for _, h := range l.Hosts[1:] {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := manufacture(h, setup); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("lab %s: %d TPMs manufactured (EK certificates) in %v", l.ID, len(l.Hosts), time.Since(start).Round(time.Millisecond))
	for _, h := range l.Hosts {
		startSwtpm(t, h)
	}
}

// manufacture runs swtpm_setup for h: a TPM 2 with an RSA and an ECC EK
// and their certificates in NV, h's RSA EK certificate read back.
func manufacture(h *Host, setupConf string) error {
	state, certs := filepath.Join(h.Dir, "tpm"), filepath.Join(h.Dir, "ek")
	for _, d := range []string{state, certs} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := run("swtpm_setup", "--tpm2", "--tpmstate", state, "--create-ek-cert", "--config", setupConf,
		"--write-ek-cert-files", certs, "--pcr-banks", "sha256", "--logfile", filepath.Join(h.Dir, "swtpm_setup.log")); err != nil {
		log, _ := os.ReadFile(filepath.Join(h.Dir, "swtpm_setup.log"))
		return fmt.Errorf("%s: %v\n%s", h.Name, err, log)
	}
	der, err := os.ReadFile(filepath.Join(certs, "ek-rsa2048.crt"))
	if err != nil {
		return fmt.Errorf("%s: the EK certificate: %w", h.Name, err)
	}
	sum := sha256.Sum256(der)
	h.EKCert, h.EKCertSHA256 = der, hex.EncodeToString(sum[:])
	return nil
}

// startSwtpm runs h's TPM as a socket TPM in h's namespace (powered on
// and started), a child that dies with the test process and is stopped
// when the test ends.
func startSwtpm(t testing.TB, h *Host) {
	t.Helper()
	h.TPM = filepath.Join(h.Dir, "tpm.sock")
	cmd := exec.Command("ip", append(h.Wrap()[1:], "swtpm", "socket", "--tpm2",
		"--tpmstate", "dir="+filepath.Join(h.Dir, "tpm"),
		"--server", "type=unixio,path="+h.TPM,
		"--ctrl", "type=unixio,path="+h.TPM+".ctrl",
		"--flags", "not-need-init,startup-clear")...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := os.Create(filepath.Join(h.Dir, "swtpm.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); out.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("unix", h.TPM)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(h.Dir, "swtpm.log"))
			t.Fatalf("%s: swtpm exited:\n%s", h.Name, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: swtpm socket: %v", h.Name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustLook(t testing.TB, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
