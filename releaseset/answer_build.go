package releaseset

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strconv"
	"sync"
	"time"

	"stratum/apierr"
	membership "stratum/cluster"
	"stratum/internal/zframe"
	"stratum/store"
	"stratum/wire"
)

// Limits of a page of nodes[] (GET ...?limit=N&after=NODEID).
const (
	MaxPageLimit = 1000
	// pageBudget bounds the encoded pages a view keeps for readers paging
	// through it.
	pageBudget = 32 << 20
)

// fragmentBudget bounds the encoded entries kept between builds of the
// full answer; a larger set writes its entries as it sends them.
var fragmentBudget = 128 << 20

// view is one build of the set: the members in join order, what the cache
// kept of each, and the set's head (everything but nodes[]). The answers
// (whole, summary, pages) are made from it when first asked for.
type view struct {
	generation, version, build uint64
	validUntil                 time.Time

	head      wire.ReleaseSet // Nodes is nil
	ids       []string
	hostnames []string
	recs      []cachedRecord
	has       []bool
	stale     []bool
	running   []string
	behind    []bool

	// index is each member's place in ids, for pages (made with the
	// view: at 100,000 members it is milliseconds no reader should wait).
	index map[string]int

	mu        sync.Mutex
	full      *Answer
	summary   *Answer
	pages     map[string]*Answer
	pageBytes int
}

// current returns the view of the set now, building it only when the
// members, a record or the staleness of a record changed since the last.
func (s *Service) current() (*view, error) {
	now := s.Now()
	var generation uint64
	var members []string
	var hostnames map[string]string
	var admission string
	err := s.DB.View(func(tx *store.Tx) error {
		if err := s.loadFrom(tx); err != nil {
			return err
		}
		generation = membership.Generation(tx)
		var err error
		if members, hostnames, err = s.memberIDs(tx, generation); err != nil {
			return err
		}
		admission, err = membership.AdmissionRelease(tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	version := s.version
	last := s.answer.view
	if s.answer.fresh(generation, version, now) && last.head.AdmissionRelease == admission {
		s.mu.RUnlock()
		return last, nil
	}
	s.mu.RUnlock()

	// A large set's build takes seconds (summary over every node): readers
	// get the last view, at most one build old, while the next is built in
	// the background, one at a time.
	if last != nil && len(members) >= backgroundBuildMembers {
		if s.rebuilding.CompareAndSwap(false, true) {
			go func() {
				defer s.rebuilding.Store(false)
				if v, err := s.build(s.Now(), generation, members, hostnames, version, admission); err == nil {
					_, _ = s.summaryOf(v) // encoded before the first reader asks
				}
			}()
		}
		return last, nil
	}
	return s.build(now, generation, members, hostnames, version, admission)
}

// backgroundBuildMembers: from this many members, views are built in the
// background (current). A variable for tests.
var backgroundBuildMembers = 20000

// build makes the view of the set at now, unless one as fresh exists.
func (s *Service) build(now time.Time, generation uint64, members []string, hostnames map[string]string, version uint64, admission string) (*view, error) {
	// One build at a time: concurrent GETs of a changed set wait for it
	// rather than each building the same one.
	s.building.Lock()
	defer s.building.Unlock()
	s.mu.RLock()
	if s.answer.fresh(generation, version, now) && s.answer.view.head.AdmissionRelease == admission {
		v := s.answer.view
		s.mu.RUnlock()
		return v, nil
	}
	ids := uniqueMembers(members)
	v := &view{generation: generation, version: s.version, ids: ids, hostnames: make([]string, len(ids)),
		recs: make([]cachedRecord, len(ids)), has: make([]bool, len(ids)), stale: make([]bool, len(ids)), running: make([]string, len(ids)), behind: make([]bool, len(ids))}
	for i, id := range ids {
		v.recs[i], v.has[i] = s.records[id]
		v.hostnames[i] = hostnames[id]
	}
	s.mu.RUnlock()

	v.index = make(map[string]int, len(ids))
	for i, id := range ids {
		v.index[id] = i
	}
	sum := make([]summaryNode, len(ids))
	until := now.Add(RecentWindow)
	for i, id := range ids {
		sn := summaryNode{id: id}
		if v.has[i] {
			c := v.recs[i]
			sn.recorded, sn.recordedAt, sn.facts = true, c.recordedAt, c.facts
			sn.stale = now.Sub(c.recordedAt) > RecentWindow
			v.stale[i] = sn.stale
			v.running[i] = c.running
			if t := c.recordedAt.Add(RecentWindow); !sn.stale && t.Before(until) {
				until = t
			}
		}
		sum[i] = sn
	}
	v.validUntil = until
	v.head = wire.ReleaseSet{Node: s.Node, ControlPlane: s.ControlPlane, RunningRelease: runningOfView(v), AdmissionRelease: admission}
	// Who is behind is decided here, once per build over every node, so
	// the summary and every page say the same.
	behindOf := map[string]bool{} // a handful of distinct releases
	for i := range v.running {
		if v.running[i] == "" {
			v.running[i] = v.head.RunningRelease
		}
		b, ok := behindOf[v.running[i]]
		if !ok {
			b = behind(v.running[i], admission)
			behindOf[v.running[i]] = b
		}
		v.behind[i] = b
		sum[i].running, sum[i].behind = v.running[i], b
	}
	v.head.Summary = summarize(sum)
	s.builds++
	v.build = s.builds
	s.mu.Lock()
	s.answer = answerCache{view: v, generation: generation, version: v.version, validUntil: until}
	s.mu.Unlock()
	return v, nil
}

// runningOfView is the oldest valid release the view's nodes recorded.
func runningOfView(v *view) string {
	pos := 0
	return oldestRunning(v.ids, func(string) (string, bool) {
		i := pos
		pos++
		return v.recs[i].running, v.has[i]
	})
}

// Answer returns the whole set (the seed's answer), encoded.
func (s *Service) Answer() (*Answer, error) {
	v, err := s.current()
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	a := v.full
	v.mu.Unlock()
	if a != nil {
		return a, nil
	}
	s.building.Lock()
	defer s.building.Unlock()
	v.mu.Lock()
	a = v.full
	v.mu.Unlock()
	if a != nil {
		return a, nil
	}
	if a, err = s.encodeFull(v); err != nil {
		return nil, err
	}
	a.ETag = etagOf(v.generation, v.version, v.build)
	v.mu.Lock()
	v.full = a
	v.mu.Unlock()
	return a, nil
}

// SummaryAnswer returns the set without nodes[] (?view=summary): the
// head of the whole answer and the number of members.
func (s *Service) SummaryAnswer() (*Answer, error) {
	v, err := s.current()
	if err != nil {
		return nil, err
	}
	return s.summaryOf(v)
}

// summaryOf is v's summary answer, encoded once.
func (s *Service) summaryOf(v *view) (*Answer, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.summary != nil {
		return v.summary, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(summaryHead{answerHead: headOf(v.head), Members: len(v.ids)}); err != nil {
		return nil, err
	}
	a := &Answer{parts: [][]byte{buf.Bytes()}, size: buf.Len()}
	tag := etagOf(v.generation, v.version, v.build)
	a.ETag = tag[:len(tag)-1] + `-summary"`
	v.summary = a
	return a, nil
}

// Page returns up to limit nodes of nodes[] after the member after (from
// the first when empty), in join order, with the head, the number of
// members, and next: the after of the following page, absent on the last.
func (s *Service) Page(after string, limit int) (*Answer, error) {
	if limit < 1 || limit > MaxPageLimit {
		var f apierr.Fields
		f.Add("limit", "must be between 1 and %d", MaxPageLimit)
		return nil, f.Err("the page is not valid; see fields")
	}
	v, err := s.current()
	if err != nil {
		return nil, err
	}
	from := 0
	if after != "" {
		i, ok := v.index[after]
		if !ok {
			var f apierr.Fields
			f.Add("after", "is not a member (page again from the start)")
			return nil, f.Err("the page is not valid; see fields")
		}
		from = i + 1
	}
	to := min(from+limit, len(v.ids))
	key := strconv.Itoa(from) + "-" + strconv.Itoa(to)
	v.mu.Lock()
	if a := v.pages[key]; a != nil {
		v.mu.Unlock()
		return a, nil
	}
	v.mu.Unlock()
	a, err := s.encodePage(v, from, to)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	// A page holds its own bytes (~100 a node) and shares the records'
	// frames; what its identity or gzip coding makes is counted too.
	if own := a.zstdSize + a.size/8; v.pageBytes+own <= pageBudget {
		if v.pages == nil {
			v.pages = map[string]*Answer{}
		}
		v.pages[key] = a
		v.pageBytes += own
	}
	return a, nil
}

// answerHead is everything of the answer before nodes[].
type answerHead struct {
	Node             string            `json:"node"`
	ControlPlane     wire.ControlPlane `json:"controlPlane"`
	RunningRelease   string            `json:"runningRelease"`
	AdmissionRelease string            `json:"admissionRelease,omitempty"`
	Summary          wire.SetSummary   `json:"summary"`
}

func headOf(s wire.ReleaseSet) answerHead {
	return answerHead{Node: s.Node, ControlPlane: s.ControlPlane, RunningRelease: s.RunningRelease, AdmissionRelease: s.AdmissionRelease, Summary: s.Summary}
}

// summaryHead is the summary view: the head and how many members.
type summaryHead struct {
	answerHead
	Members int `json:"members"`
}

// pageHead is what a page says besides its nodes.
type pageHead struct {
	Node             string            `json:"node"`
	ControlPlane     wire.ControlPlane `json:"controlPlane"`
	RunningRelease   string            `json:"runningRelease"`
	AdmissionRelease string            `json:"admissionRelease,omitempty"`
	Members          int               `json:"members"`
}

// fragment appends node i's entry of nodes[] to dst, exactly as
// encodeNode writes it.
func (s *Service) fragment(dst []byte, v *view, i int) ([]byte, error) {
	n := wire.SetNode{NodeID: v.ids[i], Hostname: v.hostnames[i], Recorded: v.has[i], Stale: v.stale[i], RunningRelease: v.running[i], Behind: v.behind[i]}
	prefix, err := encodeNode(n)
	if err != nil {
		return nil, err
	}
	if !v.has[i] {
		return append(dst, prefix...), nil
	}
	// prefix ends with "}\n" (release, the last field, omitted).
	dst = append(dst, prefix[:len(prefix)-2]...)
	dst = append(dst, `,"release":`...)
	if dst, err = s.appendRelease(dst, v.recs[i]); err != nil {
		return nil, err
	}
	return append(dst, "}\n"...), nil
}

// fragmentSize is the length of node i's entry.
func fragmentSize(v *view, i int) (int, error) {
	n := wire.SetNode{NodeID: v.ids[i], Hostname: v.hostnames[i], Recorded: v.has[i], Stale: v.stale[i], RunningRelease: v.running[i], Behind: v.behind[i]}
	prefix, err := encodeNode(n)
	if err != nil {
		return 0, err
	}
	if !v.has[i] {
		return len(prefix), nil
	}
	return len(prefix) - 2 + len(`,"release":`) + v.recs[i].plain + 2, nil
}

// encodeFull joins the head and each node's entry. Entries are kept
// between builds (decoded only when their record, stale flag or shown
// release changed) while they fit in fragmentBudget; a larger set's
// answer writes its entries as it sends them. Called with s.building held.
func (s *Service) encodeFull(v *view) (*Answer, error) {
	head, err := encodeHead(v.head)
	if err != nil {
		return nil, err
	}
	total := 0
	for i := range v.ids {
		if v.has[i] {
			total += v.recs[i].plain
		}
	}
	if total > fragmentBudget {
		s.fragments = nil
		return s.streamFull(v, head)
	}
	if s.fragments == nil {
		s.fragments = map[string]fragment{}
	}
	a := &Answer{parts: make([][]byte, 0, 2*len(v.ids)+2)}
	a.parts = append(a.parts, head)
	live := make(map[string]bool, len(v.ids))
	for i, id := range v.ids {
		if i > 0 {
			a.parts = append(a.parts, comma)
		}
		live[id] = true
		c := v.recs[i]
		f, ok := s.fragments[id]
		if !ok || f.seq != c.seq || f.stale != v.stale[i] || f.running != v.running[i] || f.behind != v.behind[i] || f.hostname != v.hostnames[i] || !v.has[i] || !sameBytes(f.rel, c.release) {
			b, err := s.fragment(nil, v, i)
			if err != nil {
				return nil, err
			}
			f = fragment{seq: c.seq, stale: v.stale[i], running: v.running[i], behind: v.behind[i], hostname: v.hostnames[i], b: b, rel: c.release}
			if v.has[i] {
				s.fragments[id] = f
			}
		}
		a.parts = append(a.parts, f.b)
	}
	a.parts = append(a.parts, []byte(setTail))
	for id := range s.fragments {
		if !live[id] {
			delete(s.fragments, id)
		}
	}
	for _, p := range a.parts {
		a.size += len(p)
	}
	// The answer is held as one run of bytes, so a GET is one write the
	// TLS layer cuts into records, with no copy; the kept entries point
	// into it (the last answer's bytes are freed with its view).
	whole := make([]byte, 0, a.size)
	for k, p := range a.parts {
		lo := len(whole)
		whole = append(whole, p...)
		// parts are head, then entry, comma, entry, ...: entry i is part 2i+1.
		if k%2 == 1 && k < len(a.parts)-1 {
			id := v.ids[k/2]
			if f, ok := s.fragments[id]; ok {
				f.b = whole[lo:len(whole):len(whole)]
				s.fragments[id] = f
			}
		}
	}
	a.parts = [][]byte{whole}
	return a, nil
}

// streamFull is the whole answer of a large set: its size is known, its
// entries are decoded while it is written.
func (s *Service) streamFull(v *view, head []byte) (*Answer, error) {
	size := len(head) + len(setTail)
	for i := range v.ids {
		n, err := fragmentSize(v, i)
		if err != nil {
			return nil, err
		}
		size += n
		if i > 0 {
			size++
		}
	}
	a := &Answer{size: size}
	a.stream = func(w io.Writer) error {
		if _, err := w.Write(head); err != nil {
			return err
		}
		var buf []byte
		for i := range v.ids {
			buf = buf[:0]
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = s.fragment(buf, v, i); err != nil {
				return err
			}
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		_, err := io.WriteString(w, setTail)
		return err
	}
	return a, nil
}

// encodePage encodes nodes from..to-1 of v, with a strong ETag made from
// what the page shows: the head and, for each node, its id, stale flag,
// shown release and record. Its zstd coding is made without compressing
// anything: each record's kept frame, and between them raw frames of the
// bytes around the records (a page's own JSON, ~100 bytes a node). Its
// identity coding decodes the frames as it is written.
func (s *Service) encodePage(v *view, from, to int) (*Answer, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(pageHead{Node: v.head.Node, ControlPlane: v.head.ControlPlane, RunningRelease: v.head.RunningRelease, AdmissionRelease: v.head.AdmissionRelease, Members: len(v.ids)}); err != nil {
		return nil, err
	}
	h := sha256.New()
	head := bytes.TrimSuffix(buf.Bytes(), []byte("}\n"))
	h.Write(head)
	// glue holds the page's bytes between the records, one piece per
	// gap: ends[k] is where piece k ends. Piece k comes before record k.
	glue := append(head, `,"nodes":[`...)
	var ends []int
	var recs []int // the nodes whose records the pieces precede
	var one [3]byte
	for i := from; i < to; i++ {
		if i > from {
			glue = append(glue, ',')
		}
		prefix, err := encodeNode(wire.SetNode{NodeID: v.ids[i], Hostname: v.hostnames[i], Recorded: v.has[i], Stale: v.stale[i], RunningRelease: v.running[i], Behind: v.behind[i]})
		if err != nil {
			return nil, err
		}
		if v.has[i] {
			// prefix ends with "}\n" (release, the last field, omitted).
			glue = append(glue, prefix[:len(prefix)-2]...)
			glue = append(glue, `,"release":`...)
			ends = append(ends, len(glue))
			recs = append(recs, i)
			glue = append(glue, "}\n"...)
		} else {
			glue = append(glue, prefix...)
		}
		h.Write([]byte(v.ids[i]))
		one = [3]byte{0, boolByte(v.has[i]), boolByte(v.stale[i])}
		h.Write(one[:])
		h.Write([]byte(v.running[i]))
		h.Write(one[:1])
		h.Write([]byte(v.hostnames[i]))
		h.Write(one[:1])
		h.Write(v.recs[i].tag[:])
	}
	glue = append(glue, ']')
	if to < len(v.ids) {
		next, err := json.Marshal(v.ids[to-1])
		if err != nil {
			return nil, err
		}
		glue = append(glue, `,"next":`...)
		glue = append(glue, next...)
		h.Write(next)
	}
	glue = append(glue, "}\n"...)
	ends = append(ends, len(glue))

	// The identity parts and the zstd parts, piece by piece.
	pieces := make([][]byte, len(ends))
	rawSize := 0
	for k, end := range ends {
		lo := 0
		if k > 0 {
			lo = ends[k-1]
		}
		pieces[k] = glue[lo:end:end]
		rawSize += zframe.RawSize(end - lo)
	}
	raw := make([]byte, 0, rawSize)
	a := &Answer{ETag: `"rsp-` + instanceTag + "-" + hex.EncodeToString(h.Sum(nil)[:12]) + `"`,
		zstdParts: make([][]byte, 0, 2*len(pieces))}
	a.size = len(glue)
	for k, p := range pieces {
		lo := len(raw)
		raw = zframe.AppendRaw(raw, p)
		a.zstdParts = append(a.zstdParts, raw[lo:len(raw):len(raw)])
		a.zstdSize += len(raw) - lo
		if k < len(recs) {
			c := v.recs[recs[k]]
			a.zstdParts = append(a.zstdParts, c.release)
			a.zstdSize += len(c.release)
			a.size += c.plain
		}
	}
	a.stream = func(w io.Writer) error {
		var rel []byte
		for k, p := range pieces {
			if _, err := w.Write(p); err != nil {
				return err
			}
			if k < len(recs) {
				var err error
				if rel, err = s.appendRelease(rel[:0], v.recs[recs[k]]); err != nil {
					return err
				}
				if _, err := w.Write(rel); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return a, nil
}

// sameBytes: a and b are the same kept slice (records loaded from the
// store all carry sequence 0).
func sameBytes(a, b []byte) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

var comma = []byte{','}

// memberIDs returns the member ids in join order and their host names,
// decoding the members again only when the membership generation moved
// (every admission and removal bumps it).
func (s *Service) memberIDs(tx *store.Tx, generation uint64) ([]string, map[string]string, error) {
	s.mu.RLock()
	if s.membersKnown && s.membersGeneration == generation {
		ids, hostnames := s.members, s.hostnames
		s.mu.RUnlock()
		return ids, hostnames, nil
	}
	s.mu.RUnlock()
	members, err := membership.Members(tx)
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, len(members))
	hostnames := make(map[string]string, len(members))
	for i, m := range members {
		ids[i] = m.NodeID
		if m.Hostname != "" {
			hostnames[m.NodeID] = m.Hostname
		}
	}
	s.mu.Lock()
	s.members, s.hostnames, s.membersGeneration, s.membersKnown = ids, hostnames, generation, true
	s.mu.Unlock()
	return ids, hostnames, nil
}
