package join

import (
	"errors"

	"stratum/store"
	"stratum/wire"
)

// The queue holds approved joins in approval order; the turn holds the
// one join in delivering or installing. A slot that frees is handed on in
// the same transaction that freed it, so the queue never stalls between
// requests.

var errStop = errors.New("stop")

// queueIDs lists approved join ids, next first.
func queueIDs(tx *store.Tx) ([]string, error) {
	var ids []string
	err := bucketQueue.ForEach(tx, func(_ string, raw []byte) error {
		ids = append(ids, string(raw))
		return nil
	})
	return ids, err
}

// queueHead is the next queued join, "" when the queue is empty.
func queueHead(tx *store.Tx) (string, error) {
	var head string
	err := bucketQueue.ForEach(tx, func(_ string, raw []byte) error {
		head = string(raw)
		return errStop
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return head, err
}

// queuePosition is 1 for the next approved join, 0 when r is not queued.
func queuePosition(tx *store.Tx, r record) (int, error) {
	if r.State != wire.StateApproved {
		return 0, nil
	}
	pos, n := 0, 0
	err := bucketQueue.ForEach(tx, func(_ string, raw []byte) error {
		n++
		if string(raw) == r.JoinID {
			pos = n
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, err
	}
	return pos, nil
}

// queuePositions maps every queued join to its position, for listings.
func queuePositions(tx *store.Tx) (map[string]int, error) {
	ids, err := queueIDs(tx)
	pos := make(map[string]int, len(ids))
	for i, id := range ids {
		pos[id] = i + 1
	}
	return pos, err
}

func (t *txn) enqueue(r *record) error {
	seq, err := bucketQueue.NextSequence(t.Tx)
	if err != nil {
		return err
	}
	r.QueueSeq = seq
	if err := putClaims(t.Tx, r); err != nil {
		return err
	}
	return bucketQueue.Put(t.Tx, queueKey(seq), []byte(r.JoinID))
}

// dequeue removes r from the queue. Every join behind it moves up, and
// none is woken: only a state change answers a joiner's long-poll (Wait),
// so waking the whole queue at every turn would only have each waiter
// read its view again (N reads a turn); a position reaches the joiner
// when its hold ends.
func (t *txn) dequeue(r *record) error {
	if r.QueueSeq == 0 {
		return nil
	}
	if err := bucketQueue.Delete(t.Tx, queueKey(r.QueueSeq)); err != nil {
		return err
	}
	if err := dropClaims(t.Tx, r); err != nil {
		return err
	}
	r.QueueSeq = 0
	return nil
}

// turn is the join holding the delivery slot, "" when it is free.
func turn(tx *store.Tx) string { return string(bucketMeta.Get(tx, keyTurn)) }

func (t *txn) setTurn(joinID string) error {
	t.kick = true
	if joinID == "" {
		return bucketMeta.Delete(t.Tx, keyTurn)
	}
	return bucketMeta.Put(t.Tx, keyTurn, []byte(joinID))
}

// advance hands a free slot to the next approved join.
func (t *txn) advance() error {
	if turn(t.Tx) != "" {
		return nil
	}
	next, err := queueHead(t.Tx)
	if err != nil || next == "" {
		return err
	}
	r, err := t.mustRecord(next)
	if err != nil {
		return err
	}
	if t.s.carriesOpenBao(r.Role) {
		// Its tokens come from OpenBao, over the network: the Step loop
		// mints them outside this transaction and delivers then.
		t.kick = true
		return nil
	}
	if err := t.dequeue(&r); err != nil {
		return err
	}
	return t.deliver(&r)
}
