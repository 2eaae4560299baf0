package joiner

import (
	"encoding/json"
	"fmt"
	"strings"

	"stratum/wire"
)

// view is the joiner's view of its registration (wire.JoinerView), with
// the delivery's bundle also kept as it came, so bundle.json keeps every
// field the founder sends, including ones this joiner does not know yet
// (the seed warns of fields silently lost on the way).
type view struct {
	wire.JoinerView
	bundle json.RawMessage
}

func (v *view) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &v.JoinerView); err != nil {
		return err
	}
	var raw struct {
		Delivery *struct {
			Bundle json.RawMessage `json:"bundle"`
		} `json:"delivery"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	v.bundle = nil
	if raw.Delivery != nil {
		v.bundle = raw.Delivery.Bundle
	}
	return nil
}

// stall says which members a join waits for, as the joiner prints it:
// "waiting for n-abc12def to apply generation 4 (it has 3)".
func stall(generation uint64, lagging []wire.MemberLag) string {
	const named = 3
	parts := make([]string, 0, named)
	for i, m := range lagging {
		if i == named {
			break
		}
		parts = append(parts, fmt.Sprintf("%s (it has %d)", m.NodeID, m.AppliedGeneration))
	}
	more := ""
	if len(lagging) > named {
		more = fmt.Sprintf(" and %d more", len(lagging)-named)
	}
	if len(lagging) == 1 {
		return fmt.Sprintf("waiting for %s to apply generation %d (it has %d)", lagging[0].NodeID, generation, lagging[0].AppliedGeneration)
	}
	return fmt.Sprintf("waiting for %s%s to apply generation %d", strings.Join(parts, ", "), more, generation)
}
