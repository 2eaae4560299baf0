package joiner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"stratum/apiclient"
	"stratum/release"
	"stratum/tpm"
	"stratum/wire"
)

// joiner is one run of `stratum join`.
type joiner struct {
	cfg     Config
	log     *printer
	id      *Identity
	api     *apiclient.Client
	bo      apiclient.Backoff // retries of calls and downloads
	keys    *release.Keyring  // nil without --self-upgrade
	release string            // what this machine runs now
	st      savedState

	claim    *tpm.Claim      // the TPM attestation claim, once made
	answered map[string]bool // attestation challenges answered (hex nonce)

	lastLine string // last line printed, to print each change once
}

// Run joins this machine to the cluster whose founder is cfg.Founder
// (SPEC 7): it registers, waits, self-upgrades when told to, persists the
// delivery, and returns nil once the founder says joined. A rejected or
// failed join returns an error matching ErrRejected or ErrFailed (see
// ExitCode). Every step is resumable: a rerun with the same state dir picks
// up the same registration where this run stopped.
func Run(ctx context.Context, cfg Config) error {
	cfg.applyDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	log := &printer{w: cfg.Out}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	id, err := LoadOrCreateIdentity(cfg.StateDir)
	if err != nil {
		return err
	}
	log.printf("joiner key fingerprint: %s", id.Fingerprint)
	log.printf("  (the operator sees it on the registration: compare before approving)")
	rel, err := resolveRelease(cfg.Release, cfg.StateDir, cfg.Root, log)
	if err != nil {
		return err
	}
	if rel != "" {
		removeInstalledRelease(cfg.StateDir, rel, log)
	}
	var keys *release.Keyring
	if cfg.SelfUpgrade {
		// Loaded now, not when an upgrade is offered: a joiner that could
		// never verify a release should say so before it queues up.
		if keys, err = release.LoadKeyring(cfg.ReleaseKeys, 1); err != nil {
			return fmt.Errorf("--release-keys: %w", err)
		}
	}
	if cfg.Hostname == "" {
		if cfg.Hostname, err = os.Hostname(); err != nil {
			return fmt.Errorf("hostname: %w (give --hostname)", err)
		}
	}
	if cfg.MgmtIP == "" {
		cfg.MgmtIP = defaultMgmtIP(cfg.founders()[0])
	}
	cert, err := id.ClientCertificate(time.Now())
	if err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(cfg.founders()[0])
	tickets := newTicketCache()
	tr := &http.Transport{
		// No proxy: the join listener is the founder on the management
		// network, and a proxy in between could not pass the client
		// certificate through anyway.
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     pinnedTLS(cfg.CAPin, cert, host, scopedTickets{"founder", tickets}),
		TLSHandshakeTimeout: 15 * time.Second,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
	}
	defer tr.CloseIdleConnections()
	if cfg.mirrorHTTP == nil {
		cfg.mirrorHTTP = mirrorClient(scopedTickets{"mirror", tickets})
	}
	j := &joiner{
		cfg:      cfg,
		log:      log,
		id:       id,
		api:      newAPI(cfg.founders(), &http.Client{Transport: tr}, apiclient.Backoff{Base: cfg.backoffBase, Max: cfg.backoffMax}, log),
		bo:       apiclient.Backoff{Base: cfg.backoffBase, Max: cfg.backoffMax},
		keys:     keys,
		release:  rel,
		answered: map[string]bool{},
	}
	if rel == "" {
		return j.releaseUnknown(ctx)
	}
	err = j.run(ctx)
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("interrupted; run stratum join again with the same --state-dir to pick up where it stopped")
	}
	return err
}

func (j *joiner) run(ctx context.Context) error {
	st, err := loadState(j.cfg.StateDir)
	if err != nil {
		return err
	}
	j.st = st
	v, err := j.resume(ctx)
	if err != nil {
		return err
	}
	if v == nil || !wire.IsFinal(v.State) {
		// Also for a registration picked up from the state dir: a
		// re-registration is idempotent, and it is how the founder learns
		// the release this machine runs after a self-upgrade.
		if v, err = j.register(ctx); err != nil {
			return err
		}
	}
	for {
		if v, err = j.answerChallenge(ctx, v); err != nil {
			return err
		}
		if err := j.observe(v); err != nil {
			return err
		}
		switch v.State {
		case wire.StateJoined:
			return nil
		case wire.StateRejected:
			j.discardDelivery(v.JoinID, v.State)
			return &outcome{sentinel: ErrRejected, joinID: v.JoinID, reason: v.Reason}
		case wire.StateFailed:
			j.discardDelivery(v.JoinID, v.State)
			return &outcome{sentinel: ErrFailed, joinID: v.JoinID, reason: v.Reason}
		case wire.StateNeedsUpgrade:
			if v, err = j.selfUpgrade(ctx, v); err != nil {
				return err
			}
			continue
		case wire.StateDelivering, wire.StateInstalling:
			if !j.st.DoneReported {
				if v, err = j.install(ctx, v); err != nil {
					return err
				}
				continue
			}
		}
		if v, err = j.poll(ctx, v); err != nil {
			return err
		}
	}
}

// resume looks up the registration the state dir remembers. It returns
// nil when there is none to pick up: no state, another cluster, a
// registration the founder no longer knows, or a final one while the
// operator now gives a different token (a new attempt).
func (j *joiner) resume(ctx context.Context) (*view, error) {
	st := j.st
	if st.JoinID == "" {
		return nil, nil
	}
	if normalPin(st.CAPin) != normalPin(j.cfg.CAPin) {
		j.log.printf("the state dir remembers registration %s with another cluster (CA %s): registering afresh", st.JoinID, st.CAPin)
		j.st = savedState{}
		return nil, nil
	}
	v, err := j.get(ctx, st.JoinID, "", 0)
	if isNotFound(err) {
		j.log.printf("the founder no longer knows registration %s: registering afresh", st.JoinID)
		j.st = savedState{}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if (v.State == wire.StateRejected || v.State == wire.StateFailed) && st.TokenSHA256 != tokenHash(j.cfg.Token) {
		j.discardDelivery(v.JoinID, v.State)
		j.log.printf("registration %s ended %s (%s); registering afresh with the token given now", v.JoinID, v.State, v.Reason)
		j.st = savedState{}
		return nil, nil
	}
	j.log.printf("picking up registration %s (%s)", v.JoinID, v.State)
	return v, nil
}

// register posts the registration; the same key registering again gets
// its open registration back (200), so this is also the re-registration.
func (j *joiner) register(ctx context.Context) (*view, error) {
	facts, err := json.Marshal(gatherFacts(j.cfg.Root))
	if err != nil {
		return nil, fmt.Errorf("facts: %w", err)
	}
	req := wire.RegisterRequest{
		Token:       j.cfg.Token,
		Release:     j.release,
		SelfUpgrade: j.cfg.SelfUpgrade,
		Hostname:    j.cfg.Hostname,
		MgmtIP:      j.cfg.MgmtIP,
		MachineID:   machineID(j.cfg.Root, j.id.Fingerprint),
		Facts:       facts,
	}
	if j.st.JoinID == "" {
		// Only a new registration: an open one keeps the claim it made.
		req.Attestation = j.tpmClaim()
	}
	var v view
	status, err := j.call(ctx, "registering with the founder "+j.cfg.Founder, http.MethodPost, "/v1/join/registrations", req, &v, time.Minute)
	if err != nil {
		return nil, err // the founder's message says what to do: adding advice here would say it twice
	}
	if v.JoinID == "" || v.State == "" {
		return nil, errors.New("the founder answered the registration without a joinId or state")
	}
	if status == http.StatusCreated {
		j.log.printf("registered as join %s (role %s, release %s)", v.JoinID, v.Role, j.release)
	} else {
		j.log.printf("registration %s is open on the founder: continuing it (role %s, release %s)", v.JoinID, v.Role, j.release)
	}
	j.st.CAPin, j.st.Founder, j.st.TokenSHA256 = normalPin(j.cfg.CAPin), j.cfg.Founder, tokenHash(j.cfg.Token)
	// The founder accepted this release for this machine: a later run
	// without --release knows it from here.
	if recorded, _ := readReleaseFile(j.cfg.StateDir); recorded != j.release {
		if err := writeReleaseFile(j.cfg.StateDir, j.release); err != nil {
			return nil, fmt.Errorf("record the release: %w", err)
		}
	}
	return &v, nil
}

// get reads the view; with wait > 0 it is the long-poll, held by the
// founder until the state differs from state or wait passes.
func (j *joiner) get(ctx context.Context, joinID, state string, wait time.Duration) (*view, error) {
	path := registrationPath(joinID)
	timeout := 30 * time.Second
	if wait > 0 {
		secs := max(int(wait/time.Second), 1)
		path += fmt.Sprintf("?wait=%d&state=%s", secs, queryEscape(state))
		// The founder holds up to wait plus 5 % jitter; the slack covers it
		// and a slow network, and still notices a silently dead peer.
		timeout = time.Duration(secs)*time.Second*21/20 + 30*time.Second
	}
	var v view
	_, err := j.call(ctx, "waiting for the founder", http.MethodGet, path, nil, &v, timeout)
	if err != nil {
		return nil, err
	}
	if v.State == "" {
		return nil, errors.New("the founder's view of the registration has no state")
	}
	return &v, nil
}

// poll is the long-poll on the last state seen.
func (j *joiner) poll(ctx context.Context, last *view) (*view, error) {
	v, err := j.get(ctx, last.JoinID, last.State, j.cfg.pollWait)
	if isNotFound(err) {
		j.st = savedState{}
		_ = j.st.save(j.cfg.StateDir)
		return nil, fmt.Errorf("the founder no longer knows registration %s: run again to register afresh (%w)", last.JoinID, err)
	}
	return v, err
}

// observe prints each state change once (and each new queue position
// while approved) and persists where the registration stands.
func (j *joiner) observe(v *view) error {
	// A new queue position or a new set of members holding the install
	// changes the line, so it is printed again.
	if line := describe(v); line != j.lastLine {
		j.log.printf("%s", line)
		j.lastLine = line
	}
	if v.JoinID == j.st.JoinID && v.State == j.st.State {
		return nil
	}
	if v.JoinID != j.st.JoinID {
		j.st.DoneReported, j.st.Delivered = false, false
	}
	j.st.JoinID, j.st.State = v.JoinID, v.State
	return j.st.save(j.cfg.StateDir)
}

// describe is the one line printed for a state.
func describe(v *view) string {
	switch v.State {
	case wire.StatePending:
		return fmt.Sprintf("state: pending: waiting for an operator to approve join %s (stratum joins approve %s)", v.JoinID, v.JoinID)
	case wire.StateNeedsUpgrade:
		if v.Upgrade != nil {
			from := "the founder"
			if v.Upgrade.Source != "" {
				from = v.Upgrade.Source
			}
			return fmt.Sprintf("state: needs-upgrade: this machine runs %s, the cluster %s; upgrading from %s", v.Upgrade.From, v.Upgrade.To, from)
		}
		return "state: needs-upgrade"
	case wire.StateApproved:
		return fmt.Sprintf("state: approved: waiting for its turn, queue position %d (1 = next)", v.QueuePosition)
	case wire.StateDelivering:
		return "state: delivering: its turn has come; node.yaml and the join bundle received"
	case wire.StateInstalling:
		if len(v.WaitingFor) > 0 {
			return "state: installing: " + stall(v.Generation, v.WaitingFor)
		}
		return "state: installing: waiting for every member to apply the new membership"
	case wire.StateJoined:
		return "state: joined: this machine is a member of the cluster"
	case wire.StateRejected:
		return "state: rejected: " + orNone(v.Reason)
	case wire.StateFailed:
		return "state: failed: " + orNone(v.Reason)
	default:
		return "state: " + v.State
	}
}

func orNone(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}
