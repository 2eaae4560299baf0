package joiner

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"stratum/apiclient"

	"stratum/tpm"
)

// Defaults of the flags (SPEC 7).
const (
	DefaultStateDir    = "/var/lib/stratum/join"
	DefaultRoot        = "/"
	DefaultReleaseKeys = "/etc/stratum/release-keys"
)

// Config is one `stratum join` run.
type Config struct {
	// Founder is HOST:PORT of the join listener, or several separated by
	// commas (the replicas of an HA founder, tried in turn).
	Founder string
	Token   string // sjt1.<id>.<secret>
	CAPin   string // sha256:<hex> of the cluster CA's SubjectPublicKeyInfo

	// Release is what this machine runs; empty means the one a previous
	// run recorded in StateDir/release, else the host's (resolveRelease).
	Release     string
	SelfUpgrade bool
	UpgradeHook string // executable run as HOOK <tree> <release>
	ReleaseKeys string // directory of trusted release *.pub keys

	StateDir string // identity key, registration state, downloads
	Root     string // where the delivery is written (etc/stratum/...)

	TPMPath                string // TPM device or swtpm socket
	PCRs                   []int  // PCR policy for the sealed unseal key
	InsecureStoreUnsealKey bool   // no TPM: write the unseal key in plaintext

	// InstallAgent installs and enables the node agent's systemd unit
	// under Root once the delivery is persisted; AgentAPI is the founder's
	// admin API it is given (default https://<founder host>:8443).
	InstallAgent bool
	AgentAPI     string

	Hostname string // reported hostname; default os.Hostname
	MgmtIP   string // reported management IP; default: the route to the founder

	// Out receives the state lines and the download progress.
	Out io.Writer

	// Tuning knobs, set only by tests.
	pollWait    time.Duration  // the long-poll's wait= (60 s)
	backoffBase time.Duration  // first retry delay
	backoffMax  time.Duration  // cap of the retry delay (30 s)
	stallAfter  time.Duration  // a download with no byte for this long is cut
	mirrorHTTP  apiclient.Doer // client for a release mirror (system roots)
	systemd     *systemd       // how systemd is asked about the agent's unit (the host's)
}

func (c *Config) applyDefaults() {
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	if c.Root == "" {
		c.Root = DefaultRoot
	}
	if c.ReleaseKeys == "" {
		c.ReleaseKeys = DefaultReleaseKeys
	}
	if c.TPMPath == "" {
		c.TPMPath = tpm.DefaultPath
	}
	if len(c.PCRs) == 0 {
		c.PCRs = tpm.DefaultPCRs
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	if c.pollWait == 0 {
		c.pollWait = 60 * time.Second
	}
	if c.backoffBase == 0 {
		c.backoffBase = 500 * time.Millisecond
	}
	if c.backoffMax == 0 {
		c.backoffMax = 30 * time.Second
	}
	if c.stallAfter == 0 {
		c.stallAfter = 90 * time.Second
	}
	if c.systemd == nil {
		c.systemd = hostSystemd
	}
}

// founders splits --founder into the replicas' addresses.
func (c *Config) founders() []string {
	if c.Founder == "" {
		return nil
	}
	var out []string
	for _, f := range strings.Split(c.Founder, ",") {
		out = append(out, strings.TrimSpace(f))
	}
	return out
}

// validate lists every problem at once, as the founder does.
func (c *Config) validate() error {
	var errs []error
	if c.Founder == "" {
		errs = append(errs, errors.New("--founder HOST:PORT is required"))
	}
	for _, f := range c.founders() {
		if _, port, err := net.SplitHostPort(f); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("--founder %q: want HOST:PORT (the join listener, e.g. 192.0.2.10:9443), or several separated by commas", f))
		}
	}
	if c.Token == "" {
		errs = append(errs, errors.New("--token is required (the token from `stratum token create`)"))
	}
	if err := checkPin(c.CAPin); err != nil {
		errs = append(errs, fmt.Errorf("--ca-pin: %w", err))
	}
	if c.SelfUpgrade && c.UpgradeHook == "" {
		errs = append(errs, errors.New("--self-upgrade needs --upgrade-hook: the executable that switches this machine to the new release"))
	}
	return errors.Join(errs...)
}

// checkPin accepts "sha256:" and 64 lowercase or uppercase hex digits.
func checkPin(pin string) error {
	hexPart, ok := strings.CutPrefix(pin, "sha256:")
	if pin == "" {
		return errors.New("required (sha256:<hex>, printed by `stratum serve`)")
	}
	if !ok || len(hexPart) != 64 {
		return fmt.Errorf("%q is not sha256:<64 hex digits>", pin)
	}
	for _, r := range hexPart {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return fmt.Errorf("%q is not sha256:<64 hex digits>", pin)
		}
	}
	return nil
}

// normalPin lowercases the hex, so a pin copied in capitals still matches.
func normalPin(pin string) string { return strings.ToLower(pin) }
