package repo

import (
	"sync"
	"time"

	"stratum/store"
)

// topicFiles is the store topic of every change to what Stat answers: an
// import (its release, files, sub-chunk indexes and corrupt marks), a
// file marked corrupt, a sub-chunk index computed again. The payload is
// the release.
const topicFiles = "release.files"

// statMemo remembers Stat's answers for files found and not marked
// corrupt, so that back-to-back requests for one file (a joiner's ranges,
// a rack downloading at once) do not each read the store: a read
// transaction, three lookups and the comparison of a chunk index record
// (43 KB for 1 GiB) with its remembered copy were about 7.5 us of a 64 KiB
// range's 150.
//
// Why it stays correct: every transaction that changes what Stat reads
// announces it on topicFiles (store notes leave with the commit; on
// PostgreSQL they reach every replica, and a replica that lost its
// database connection hears Everything), and a note empties the memo. An
// answer read by a transaction that began before a change is kept only if
// no note came while it was read; one that a note has not reached yet is
// as old as a Stat that ran just before the change, which the reads in
// flight already are. Each answer is also kept at most statTTL. What is
// remembered is what Stat returned: an index whose MAC was checked, and
// every byte sent is still verified against it.
type statMemo struct {
	mu  sync.Mutex
	gen uint64 // notes heard
	m   map[statKey]statEntry
}

type statKey struct{ release, path string }

type statEntry struct {
	fi      *FileInfo
	expires time.Time
}

// statTTL bounds how long an answer is kept whatever was heard (a
// variable for the tests that prove the notes alone suffice).
var statTTL = 2 * time.Second

// maxStatMemo bounds the files remembered; a full memo starts over.
const maxStatMemo = 4096

// listen empties the memo on every note of topicFiles from db.
func (s *statMemo) listen(db *store.DB) {
	db.Subscribe(topicFiles, func(string) { s.forget() })
}

func (s *statMemo) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	clear(s.m)
}

// get returns the remembered answer for the file, nil if none is fresh,
// and the generation to hand put.
func (s *statMemo) get(k statKey, now time.Time) (*FileInfo, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[k]; ok && now.Before(e.expires) {
		return e.fi, s.gen
	}
	return nil, s.gen
}

// put remembers fi, read after get returned gen, unless a note came since.
func (s *statMemo) put(k statKey, fi *FileInfo, gen uint64, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		return
	}
	if s.m == nil || len(s.m) >= maxStatMemo {
		s.m = map[statKey]statEntry{}
	}
	s.m[k] = statEntry{fi: fi, expires: now.Add(statTTL)}
}
