// Package joiner is `stratum join`, the client run on a new node (SPEC 7):
// it registers with the founder's join listener over TLS pinned both ways
// (the founder pins this node's key, this node pins the cluster CA),
// long-polls its registration, self-upgrades when told to, persists the
// delivery under --root with secrets at mode 0600 and the OpenBao unseal
// key sealed to the TPM, reports progress, and returns once joined.
//
// Every step survives a restart: the identity key, the registration id
// and last state, partial downloads and verified release files live in
// --state-dir, and re-registering with the same key is idempotent on the
// founder, so a rerun with the same flags picks up where a run stopped.
//
// Decisions taken where the specification is silent:
//
//   - Trust: the join listener is trusted through --ca-pin only. The
//     server's chain must contain a CA certificate whose SPKI hashes to
//     the pin and the leaf must verify up to it (signature, validity,
//     server auth); host names are not checked, because the pin, not the
//     dialled address, is the trust root (the founder's certificate names
//     what the founder thinks it is called). A pin mismatch is final,
//     never retried. A release mirror (upgrade.source) is reached with the
//     system roots, no client certificate and proxies from the
//     environment: it is an ordinary web server, and need not be trusted
//     since every byte is checked against the signed manifest (so plain
//     http is accepted too, for an air-gapped mirror).
//   - Retries: network errors, every 5xx and 429 are retried after
//     Retry-After when given (capped at 5 minutes), else after capped
//     exponential backoff with jitter (0.5 s doubling to 30 s, each delay
//     drawn from [d/2, d]); a retry that made download progress starts
//     the backoff over. Any other 4xx ends the run with the founder's
//     message. There is no overall retry limit: a joiner waiting for its
//     founder to come back should wait; SIGTERM ends it cleanly.
//   - Exit codes: 0 joined, 1 any error (fix and rerun: it resumes),
//     2 usage, 3 rejected, 4 failed (by the founder, or locally after the
//     delivery, which is then reported as phase failed).
//   - State dir: identity.key (ed25519, PKCS#8 PEM, 0600; a key readable by
//     others is refused), state.json (0600: joinId, last state, the CA pin,
//     the SHA-256 of the token, whether done was reported, whether a
//     delivery was written), release (the
//     release after a self-upgrade), releases/<release>/ (verified trees:
//     the payload files and verified files only) and downloads/<release>/
//     (<path>.partial and its If-Range validator). The spec's
//     "<state-dir>/release" is both the release file and the download
//     root; the two are split so they cannot collide, and partial files
//     are never inside a tree handed to the hook.
//   - Restart rules: a remembered registration is looked up first. If the
//     founder no longer knows it, or it belongs to another CA pin, the
//     joiner registers afresh. A final registration is reported again
//     (joined: exit 0, nothing re-registered), except a rejected or failed
//     one when the token given now differs from the one that made it: that
//     is a new attempt, and a new registration is made.
//   - The release this machine runs: --release, else the one recorded in
//     <state-dir>/release (by a registration the founder accepted, or a
//     self-upgrade), else the host's: ROOT/usr/lib/stratum/release, else
//     IMAGE_VERSION in ROOT/etc/os-release (without --release the newer of
//     recorded and host wins). A recorded release newer than --release
//     wins too (a node's unit keeps the flag of the image it was installed
//     from). With none, the joiner asks the founder (a registration at
//     0.0.0-0 without selfUpgrade, refused with the cluster's release in
//     RELEASE_MISMATCH details, nothing written) and names the flag to add
//     with that release as the example.
//   - Upgrade hook: exec'd directly (no shell) as HOOK <tree> <release>,
//     with STRATUM_JOIN_STATE_DIR and STRATUM_JOIN_RELEASE_FILE in its
//     environment; stdout and stderr go to the joiner's output, and a
//     failure quotes the last 2 KiB of stderr. A hook that reboots should
//     write the new release into STRATUM_JOIN_RELEASE_FILE first; otherwise
//     the next run re-checks the verified files (no download) and runs the
//     hook again, so a hook must be idempotent. The verified tree is kept
//     after the hook for its later use; only the downloads dir is removed.
//   - Downloads: one file at a time (the founder serves a few files at
//     once across all joiners; one joiner should not take them all). A
//     file already in the tree is hashed again rather than trusted; a
//     download stalled for 90 s is cut and resumed. A hash mismatch deletes
//     the partial file and ends the run naming the file.
//   - Delivery files: node.crt and ca.pem are public (0644); every secret is
//     0600 in etc/stratum/secrets (0700, mode enforced even if the directory
//     exists). A secret the delivery leaves empty has no file, and a stale
//     copy from an earlier delivery is removed. Password and token files
//     hold the value without a trailing newline. Env files are KEY=value,
//     unquoted (read literally by podman --env-file and systemd); a value
//     with a line break is refused. STRATUM_OPENBAO_ADDR is
//     https://<vips.openBao>:8200. A missing adminEmail means the seed's
//     default, admin@stratum.local; a missing axdnsdEncryptionKey means no
//     axdnsd.env. Before any write the delivery is checked: nodeCert must
//     match nodeKey and chain to caBundle, caBundle must hold the pinned CA,
//     and node.yaml's nodeId (when present) must be the certificate's
//     CommonName, which is the node id used for STRATUM_NODE_ID.
//   - A delivery whose join the founder ends failed or rejected (a
//     delivery timeout struck while the answer carrying it was on the
//     way, an operator cancelled it, a local failure was reported) is
//     removed from --root, every file it may write (secrets, the unseal
//     key, the agent's unit) and the removal said by path; state.json
//     records "delivered" before the first write, so a later run removes
//     it too. A file that cannot be removed is named for a person.
//   - Unseal key: sealed first, before the other files ("immediately on
//     receipt"). --insecure-store-unseal-key only covers a machine with no
//     TPM (tpm.ErrNoTPM); a TPM that is present but fails is an error.
//   - TPM attestation: a new registration carries the claim of the TPM at
//     --tpm (its EK certificate, EK and an attestation key, all derived
//     again when needed, nothing stored); the challenge in the view is
//     answered once per run (a lost answer's 409 reads the view again).
//     No TPM, or a TPM that fails to claim or answer, is said and the join
//     waits for a person: the claim only ever adds trust, so its absence
//     is not an error (unlike the unseal key's sealing).
//   - Registration facts: machineId from <root>/etc/machine-id, else
//     derived from the key fingerprint (stable, unique); mgmtIp defaults to
//     the source address of the route to the founder; facts carry arch,
//     os, cpus, kernel, memoryBytes, osRelease and the non-loopback
//     addresses.
//   - "Applying" between installing and done needs no action from the
//     joiner: the node's services start from the written files.
package joiner
