package repo

import (
	"encoding/json"
	"fmt"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"

	sha256 "github.com/minio/sha256-simd"
	"lukechampine.com/blake3"

	"stratum/internal/b3unit"
	"stratum/store"
)

// SubChunkSize is the unit a reader verifies: the BLAKE3 hash of every
// 16 KiB sub-chunk is indexed beside the 1 MiB chunk index, so a 64 KiB
// range hashes four or five sub-chunks (64-80 KiB) instead of a whole
// 1 MiB chunk, with a hash about twice as fast as SHA-256 here (BLAKE3
// hashes the 1 KiB chunks of a unit in parallel, AVX2/AVX-512). The
// sub-chunk index is made in the pass that checks the file against the
// signed manifest's SHA-256, and kept only when that check passes. The
// 1 MiB SHA-256 chunk index stays what the specification names and what
// an older import is checked against when its sub-chunk index is
// computed again (UpgradeIndexes).
const SubChunkSize = 16 << 10

// subHash names the hash of the sub-chunk index this build makes and
// reads; an index of another hash or unit (an older build's SHA-256 of
// 64 KiB) is not used, and is computed again at start.
const subHash = "blake3-16k"

// subIndex is the sub-chunk index of one imported file, kept under its own
// key (bucketSubs) so that a request reads the small chunk index only;
// the sub-chunk hashes (2 MiB per GiB) are read once per import of the
// file and kept with its decoded chunk index.
type subIndex struct {
	// ImportID ties the hashes to one import of the file: a sub-chunk
	// index is used only with the chunk index of the same import.
	ImportID string `json:"importId"`
	// Hash is subHash; empty in an index of SHA-256 of 64 KiB sub-chunks.
	Hash string `json:"hash,omitempty"`
	Sums []byte `json:"sums"` // the hash of each sub-chunk, concatenated
}

func (fi *fileIndex) subCount() int64 { return (fi.Size + SubChunkSize - 1) / SubChunkSize }

// subSum is the BLAKE3 hash of one sub-chunk (a whole unit, or a file's
// shorter last unit).
func subSum(b []byte) (sum [32]byte) {
	if len(b) != SubChunkSize {
		return blake3.Sum256(b)
	}
	b3unit.Sums(sum[:], b)
	return sum
}

// subSums writes the hash of each sub-chunk of b (units from the start of
// a file: whole ones, and maybe the file's shorter last one) to sums, 32
// bytes each. The whole units are hashed together (b3unit.Sums: their
// parents merged 16 at a time across units).
func subSums(sums, b []byte) {
	whole := len(b) / SubChunkSize * SubChunkSize
	b3unit.Sums(sums, b[:whole])
	if whole < len(b) {
		s := blake3.Sum256(b[whole:])
		copy(sums[whole/SubChunkSize*32:], s[:])
	}
}

// indexChunk appends the hash of each sub-chunk of b (one chunk of a
// file: ChunkSize bytes, fewer for the last) to subs and returns the
// SHA-256 of the whole chunk with them; the two are hashed on two cores.
func indexChunk(b, subs []byte) (chunk [32]byte, _ []byte) {
	var wg sync.WaitGroup
	wg.Go(func() { chunk = sha256.Sum256(b) })
	n := len(subs)
	subs = append(subs, make([]byte, (len(b)+SubChunkSize-1)/SubChunkSize*32)...)
	subSums(subs[n:], b)
	wg.Wait()
	return chunk, subs
}

// putSubIndex stores the sub-chunk index of the file at key for importID.
func putSubIndex(tx *store.Tx, key, importID string, sums []byte) error {
	return putSubRecord(tx, key, subIndex{ImportID: importID, Hash: subHash, Sums: sums})
}

func putSubRecord(tx *store.Tx, key string, si subIndex) error {
	raw, err := json.Marshal(si)
	if err != nil {
		return err
	}
	return bucketSubs.Put(tx, key, raw)
}

// getSubRecord reads the sub-chunk index stored for the file at key.
func getSubRecord(tx *store.Tx, key string) (si subIndex, found bool, err error) {
	raw := bucketSubs.Get(tx, key)
	if raw == nil {
		return si, false, nil
	}
	// The JSON decoder of go-json-experiment: encoding/json took 50-70 ms
	// of CPU on the 2.8 MB of a 1 GiB file's index (a whole pass to check
	// it, then one to decode), the first request's for that file; 7 ms.
	if err := jsonv2.Unmarshal(raw, &si); err != nil {
		return si, true, fmt.Errorf("release sub-chunk index %q: %w", key, err)
	}
	return si, true, nil
}

// storedSubs returns the stored sub-chunk hashes of the file at key if
// they belong to fi's import and have its length, else nil: an index of
// another import (not yet upgraded) is never used, and the file is then
// verified by 1 MiB chunk.
func storedSubs(tx *store.Tx, key string, fi *fileIndex) ([]byte, error) {
	si, found, err := getSubRecord(tx, key)
	if err != nil || !found {
		return nil, err
	}
	if si.ImportID != fi.ImportID || si.Hash != subHash || int64(len(si.Sums)) != fi.subCount()*32 {
		return nil, nil
	}
	return si.Sums, nil
}

// loadSubIndex attaches the stored sub-chunk index of the file at key to
// its decoded chunk index, once: the hashes of one import never change.
func loadSubIndex(tx *store.Tx, key string, fi *fileIndex) error {
	if fi.subs.Load() != nil {
		return nil
	}
	sums, err := storedSubs(tx, key, fi)
	if sums != nil {
		fi.subs.Store(&sums)
	}
	return err
}
