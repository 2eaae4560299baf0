package release

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// SignaturePrefix is prepended to the exact manifest bytes before signing,
// so a release signature can never be mistaken for a signature over any
// other kind of document made with the same key.
const SignaturePrefix = "stratum-release-manifest-v1\n"

// AlgorithmEd25519 is the only signature algorithm this version verifies.
const AlgorithmEd25519 = "ed25519"

// maxSignatures bounds the work a hostile manifest.sig can ask for.
const maxSignatures = 64

// Signatures is payload/manifest.sig.
type Signatures struct {
	Signatures []Signature `json:"signatures"`
}

// Signature is one signer's signature over the manifest.
type Signature struct {
	KeyID     string `json:"keyId"`
	Algorithm string `json:"algorithm"`
	Signature string `json:"signature"` // standard base64
}

// ParseSignatures decodes manifest.sig strictly. Signatures of algorithms
// other than ed25519 are kept (a later release may add some) but never
// count towards the threshold; an ed25519 signature must be 64 bytes.
func ParseSignatures(b []byte) (*Signatures, error) {
	var s Signatures
	if err := decodeDocument(b, &s); err != nil {
		return nil, fmt.Errorf("manifest.sig: %w", err)
	}
	if len(s.Signatures) == 0 {
		return nil, fmt.Errorf("manifest.sig: no signature")
	}
	if len(s.Signatures) > maxSignatures {
		return nil, fmt.Errorf("manifest.sig: %d signatures, more than %d", len(s.Signatures), maxSignatures)
	}
	seen := map[string]bool{}
	for i, sig := range s.Signatures {
		if err := checkHex(sig.KeyID, 32); err != nil {
			return nil, fmt.Errorf("manifest.sig: signatures[%d]: keyId: %w", i, err)
		}
		if sig.Algorithm == "" || len(sig.Algorithm) > 64 {
			return nil, fmt.Errorf("manifest.sig: signatures[%d]: algorithm is empty or too long", i)
		}
		id := sig.Algorithm + "/" + sig.KeyID
		if seen[id] {
			return nil, fmt.Errorf("manifest.sig: signatures[%d]: key %s signs twice", i, sig.KeyID)
		}
		seen[id] = true
		raw, err := base64.StdEncoding.Strict().DecodeString(sig.Signature)
		if err != nil {
			return nil, fmt.Errorf("manifest.sig: signatures[%d]: signature is not base64: %w", i, err)
		}
		if sig.Algorithm == AlgorithmEd25519 && len(raw) != ed25519.SignatureSize {
			return nil, fmt.Errorf("manifest.sig: signatures[%d]: ed25519 signature of %d bytes, want %d", i, len(raw), ed25519.SignatureSize)
		}
	}
	return &s, nil
}

// Marshal returns manifest.sig as Sign writes it.
func (s *Signatures) Marshal() ([]byte, error) {
	return marshalIndent(s)
}

func signedMessage(manifest []byte) []byte {
	msg := make([]byte, 0, len(SignaturePrefix)+len(manifest))
	return append(append(msg, SignaturePrefix...), manifest...)
}

// signManifest returns the signature of priv over manifest.
func signManifest(priv ed25519.PrivateKey, manifest []byte) Signature {
	pub := priv.Public().(ed25519.PublicKey)
	return Signature{
		KeyID:     KeyID(pub),
		Algorithm: AlgorithmEd25519,
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, signedMessage(manifest))),
	}
}

// Keyring is a verifier's set of trusted release keys and its threshold.
type Keyring struct {
	keys      map[string]ed25519.PublicKey // by keyId
	threshold int
	// notes say, by keyId, why a key the verifier holds is not in the
	// ring (Note): a failure over its signature says so.
	notes map[string]string
}

// Note records why keyID, a key the verifier knows of, is not trusted:
// a manifest that fails for want of its signature names note.
func (k *Keyring) Note(keyID, note string) {
	if k.notes == nil {
		k.notes = map[string]string{}
	}
	k.notes[keyID] = note
}

// NewKeyring trusts keys and needs threshold (>= 1) distinct ones to sign.
func NewKeyring(threshold int, keys ...ed25519.PublicKey) (*Keyring, error) {
	k := &Keyring{keys: map[string]ed25519.PublicKey{}, threshold: threshold}
	for _, pub := range keys {
		if len(pub) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("release key of %d bytes, want %d", len(pub), ed25519.PublicKeySize)
		}
		k.keys[KeyID(pub)] = pub
	}
	if len(k.keys) == 0 {
		return nil, fmt.Errorf("no release key to trust")
	}
	if threshold < 1 {
		return nil, fmt.Errorf("threshold %d: must be at least 1", threshold)
	}
	if threshold > len(k.keys) {
		return nil, fmt.Errorf("threshold %d but only %d distinct trusted key(s): no release could ever verify", threshold, len(k.keys))
	}
	return k, nil
}

// Threshold is the number of distinct trusted signatures needed.
func (k *Keyring) Threshold() int { return k.threshold }

// KeyIDs lists the trusted key ids.
func (k *Keyring) KeyIDs() []string {
	out := make([]string, 0, len(k.keys))
	for id := range k.keys {
		out = append(out, id)
	}
	return sortedStrings(out)
}

// VerifyManifest checks manifest.sig against the exact manifest bytes
// before parsing them, so nothing unauthenticated is ever interpreted, and
// returns the parsed manifest. A failure names the untrusted key ids and
// the trusted keys whose signature does not verify.
func (k *Keyring) VerifyManifest(manifest, sig []byte) (*Manifest, error) {
	if k == nil || len(k.keys) == 0 {
		return nil, errors.New("no release keys to verify the manifest signature with")
	}
	sigs, err := ParseSignatures(sig)
	if err != nil {
		return nil, badFile(SignaturePath, "", strings.TrimPrefix(err.Error(), "manifest.sig: "))
	}
	good, untrusted, invalid, other := k.check(manifest, sigs)
	if len(good) < k.threshold {
		var b strings.Builder
		fmt.Fprintf(&b, "%d valid signature(s) by trusted keys, %d needed", len(good), k.threshold)
		if len(invalid) > 0 {
			fmt.Fprintf(&b, "; signature by trusted key %s does not verify (manifest.json altered?)", strings.Join(invalid, ", "))
		}
		if len(untrusted) > 0 {
			fmt.Fprintf(&b, "; signed by untrusted key %s", strings.Join(untrusted, ", "))
			for _, id := range untrusted {
				if n := k.notes[id]; n != "" {
					fmt.Fprintf(&b, "; %s", n)
				}
			}
		}
		if len(other) > 0 {
			fmt.Fprintf(&b, "; unsupported algorithm %s", strings.Join(other, ", "))
		}
		return nil, badFile(SignaturePath, "", b.String())
	}
	m, err := ParseManifest(manifest)
	if err != nil {
		return nil, badFile(ManifestPath, "", strings.TrimPrefix(err.Error(), "manifest.json: "))
	}
	return m, nil
}

// check sorts the signatures over manifest: by a trusted key and valid
// (good), by a key not in the ring, by a trusted key but not valid, and
// of an algorithm this verifier does not know.
func (k *Keyring) check(manifest []byte, sigs *Signatures) (good map[string]bool, untrusted, invalid, other []string) {
	msg := signedMessage(manifest)
	good = map[string]bool{}
	for _, s := range sigs.Signatures {
		if s.Algorithm != AlgorithmEd25519 {
			other = append(other, s.Algorithm+" by "+s.KeyID)
			continue
		}
		pub, ok := k.keys[s.KeyID]
		if !ok {
			untrusted = append(untrusted, s.KeyID)
			continue
		}
		raw, _ := base64.StdEncoding.Strict().DecodeString(s.Signature) // checked by ParseSignatures
		if !ed25519.Verify(pub, msg, raw) {
			invalid = append(invalid, s.KeyID)
			continue
		}
		good[s.KeyID] = true
	}
	return good, untrusted, invalid, other
}

// SignedBy lists the trusted keys whose signature over manifest verifies,
// so an import can record who signed what it serves.
func (k *Keyring) SignedBy(manifest, sig []byte) []string {
	sigs, err := ParseSignatures(sig)
	if err != nil || k == nil {
		return nil
	}
	good, _, _, _ := k.check(manifest, sigs)
	out := make([]string, 0, len(good))
	for id := range good {
		out = append(out, id)
	}
	return sortedStrings(out)
}
