package join

import (
	"strconv"
	"strings"

	"stratum/crypto"
	"stratum/store"
)

// joinIDSeqDigits is how many of a join id's eight characters are its
// registration's sequence number in base 36 (60 million registrations).
const joinIDSeqDigits = 5

// newJoinID is the id of the registration numbered seq: "j-", seq in base
// 36 over five digits, and three random characters, [a-z0-9] all eight as
// before. Ids in join order keep the registrations of one commit side by
// side in the bucket: random ids put each on a page of its own, so a rack
// registering at once rewrote a page, and its branch pages, for every
// joiner. The id is no secret: a registration answers only the key that
// made it, and another key's asking gets 404. Past 36^5 registrations, or
// if the three draws are all taken (ids from before this scheme), the id
// is random as it always was.
func newJoinID(tx *store.Tx, seq uint64) (string, error) {
	digits := strconv.FormatUint(seq, 36)
	if len(digits) <= joinIDSeqDigits {
		lead := "j-" + strings.Repeat("0", joinIDSeqDigits-len(digits)) + digits
		for range 3 {
			if id := crypto.RandomID(lead, 8-joinIDSeqDigits); !bucketRegistrations.Has(tx, id) {
				return id, nil
			}
		}
	}
	return unusedKey(tx, bucketRegistrations, "j-", 8)
}
