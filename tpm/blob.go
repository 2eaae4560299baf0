package tpm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/go-tpm/tpm2"

	"stratum/strictjson"
)

// The blob is JSON so an operator can see what a file is sealed to (which
// PCRs, which values) with nothing but cat; the TPM parts are opaque anyway.
const (
	blobType    = "stratum.tpm.sealed"
	blobVersion = 1
	blobBank    = "sha256"
	// maxBlobSize is far above a real blob (under 1 KiB) and keeps a
	// hostile file from costing memory before it is rejected.
	maxBlobSize = 64 << 10
	// maxTPMPart bounds the public and private areas; TPM2B sizes are u16.
	maxTPMPart = 4096
)

// blobJSON is the on-disk shape. PCR values and the SRK name are hex so they
// compare directly with tpm2_pcrread and tpm2_readpublic output.
type blobJSON struct {
	Type      string   `json:"type"`
	Version   int      `json:"version"`
	Bank      string   `json:"pcr_bank"`
	PCRs      []int    `json:"pcrs"`
	PCRValues []string `json:"pcr_values"`
	SRKName   string   `json:"srk_name"` // TPM name of the SRK sealed under
	Public    []byte   `json:"public"`   // TPMT_PUBLIC, no size prefix
	Private   []byte   `json:"private"`  // TPM2B_PRIVATE contents, no size prefix
}

// sealedBlob is a parsed, validated blob.
type sealedBlob struct {
	pcrs      []int
	pcrValues [][]byte // SHA-256 values at seal time, ascending PCR order
	composite []byte   // digest of pcrValues, what PolicyPCR checks
	srkName   []byte
	public    []byte // marshalled TPMT_PUBLIC of the sealed object
	private   []byte // TPM2B_PRIVATE contents, encrypted by the SRK
}

func (b *sealedBlob) marshal() ([]byte, error) {
	j := blobJSON{
		Type:    blobType,
		Version: blobVersion,
		Bank:    blobBank,
		PCRs:    b.pcrs,
		SRKName: hex.EncodeToString(b.srkName),
		Public:  b.public,
		Private: b.private,
	}
	for _, v := range b.pcrValues {
		j.PCRValues = append(j.PCRValues, hex.EncodeToString(v))
	}
	out, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// errBadBlob prefixes every parse failure so callers can tell a damaged file
// from a TPM refusal.
var errBadBlob = errors.New("invalid sealed blob")

func badBlob(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadBlob, fmt.Sprintf(format, args...))
}

// parseSealedBlob validates everything that can be checked without a TPM,
// including that the sealed object's policy is exactly "these PCRs hold
// these values", so a corrupted file fails here and not as a misleading
// PCR mismatch later.
func parseSealedBlob(data []byte) (*sealedBlob, error) {
	if len(data) > maxBlobSize {
		return nil, badBlob("%d bytes, more than %d", len(data), maxBlobSize)
	}
	var j blobJSON
	if err := strictjson.Decode(data, &j); err != nil {
		return nil, badBlob("%v", err)
	}
	if j.Type != blobType {
		return nil, badBlob("type %q, want %q", j.Type, blobType)
	}
	if j.Version != blobVersion {
		return nil, badBlob("format version %d, this stratum reads %d", j.Version, blobVersion)
	}
	if j.Bank != blobBank {
		return nil, badBlob("PCR bank %q, want %q", j.Bank, blobBank)
	}
	if err := checkPCRs(j.PCRs); err != nil {
		return nil, badBlob("%v", err)
	}
	if len(j.PCRValues) != len(j.PCRs) {
		return nil, badBlob("%d PCR values for %d PCRs", len(j.PCRValues), len(j.PCRs))
	}
	b := &sealedBlob{pcrs: j.PCRs, public: j.Public, private: j.Private}
	for i, s := range j.PCRValues {
		v, err := hex.DecodeString(s)
		if err != nil || len(v) != sha256.Size {
			return nil, badBlob("PCR %d value is not %d hex bytes", j.PCRs[i], sha256.Size)
		}
		b.pcrValues = append(b.pcrValues, v)
	}
	name, err := hex.DecodeString(j.SRKName)
	if err != nil || len(name) != 2+sha256.Size || name[0] != 0 || name[1] != byte(tpm2.TPMAlgSHA256) {
		return nil, badBlob("srk_name is not a SHA-256 TPM name")
	}
	b.srkName = name
	if len(b.private) == 0 || len(b.private) > maxTPMPart {
		return nil, badBlob("private area is %d bytes", len(b.private))
	}
	if len(b.public) == 0 || len(b.public) > maxTPMPart {
		return nil, badBlob("public area is %d bytes", len(b.public))
	}
	pub, err := unmarshalPublic(b.public)
	if err != nil {
		return nil, badBlob("public area: %v", err)
	}
	var policy []byte
	b.composite, policy, err = pcrPolicy(b.pcrs, b.pcrValues)
	if err != nil {
		return nil, badBlob("%v", err)
	}
	if err := checkSealedPublic(pub, policy); err != nil {
		return nil, badBlob("%v", err)
	}
	return b, nil
}

// unmarshalPublic decodes a TPMT_PUBLIC and insists the bytes are canonical
// (re-marshal gives them back), which also rejects trailing bytes.
// tpm2.Marshal panics on failure and go-tpm's reflection codec was not
// written for hostile input, so a panic becomes an error here instead of
// killing the boot service (fuzzing has not found one; this is insurance).
func unmarshalPublic(data []byte) (pub *tpm2.TPMTPublic, err error) {
	defer func() {
		if r := recover(); r != nil {
			pub, err = nil, fmt.Errorf("undecodable: %v", r)
		}
	}()
	pub, err = tpm2.Unmarshal[tpm2.TPMTPublic](data)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(tpm2.Marshal(pub), data) {
		return nil, errors.New("not canonically encoded (trailing or malformed bytes)")
	}
	return pub, nil
}
