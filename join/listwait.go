package join

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"stratum/wire"
	"time"
)

// listTopic is the hub topic woken by every committed registration change,
// for operators watching the whole list. Join ids start with "j-", so it
// never names a registration.
const listTopic = "*registrations"

// ListIndex identifies one version of a registration list: the first 16
// hex digits of the SHA-256 of its JSON. A digest rather than a counter
// survives a restart and agrees between founders sharing one store, so a
// client's index is never mistaken for a newer list.
func ListIndex(list []wire.OperatorView) (string, error) {
	b, err := json.Marshal(list)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// WaitList is the operator's long-poll over the registration list, in the
// manner of a blocking query: it answers at once when index is empty or
// differs from the current list's, and otherwise holds until the list
// changes, wait passes (at most MaxWait), ctx ends or the hub closes. It
// answers the list (filtered by state as List is) and its index.
func (s *Service) WaitList(ctx context.Context, state, index string, wait time.Duration) ([]wire.OperatorView, string, error) {
	wait = min(wait, MaxWait)
	// Subscribe before reading, so a change committed between the read
	// and the select still wakes this waiter.
	sub := s.hub.Subscribe(listTopic)
	defer sub.Cancel()
	list, cur, err := s.indexedList(state)
	if err != nil || index == "" || cur != index || wait <= 0 {
		return list, cur, err
	}
	read := func() (listAt, error) {
		l, i, err := s.indexedList(state)
		return listAt{l, i}, err
	}
	v, err := hold(ctx, s.hub, sub, wait, read, func(v listAt) bool { return v.index != index })
	return v.list, v.index, err
}

// listAt is a list with its index, as one value for hold.
type listAt struct {
	list  []wire.OperatorView
	index string
}

func (s *Service) indexedList(state string) ([]wire.OperatorView, string, error) {
	list, err := s.List(state)
	if err != nil {
		return nil, "", err
	}
	idx, err := ListIndex(list)
	return list, idx, err
}
