package founder

import (
	"errors"
	"os"
	"testing"

	"stratum/crypto"
	"stratum/store"
)

func TestAuditHWMFile(t *testing.T) {
	d := DataDir(t.TempDir())
	key, _ := crypto.GenerateDataKey()
	other, _ := crypto.GenerateDataKey()
	if _, found, err := d.readAuditHWM(key); found || err != nil {
		t.Fatalf("no mark yet: found=%v err=%v", found, err)
	}
	m := store.AuditMark{Seq: 42, Head: "abc"}
	if err := d.writeAuditHWM(key, m); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(d.AuditHWM()); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	if got, found, err := d.readAuditHWM(key); !found || err != nil || got != m {
		t.Fatalf("read back %+v %v %v", got, found, err)
	}
	if _, _, err := d.readAuditHWM(other); err == nil {
		t.Fatal("a mark opened under another data key")
	}
}

func TestCheckAuditMark(t *testing.T) {
	mark := store.AuditMark{Seq: 10, Head: "h10"}
	for _, tc := range []struct {
		name   string
		have   store.AuditMark
		refuse bool
	}{
		{"same end", mark, false},
		{"advanced", store.AuditMark{Seq: 11, Head: "h11"}, false},
		{"below", store.AuditMark{Seq: 7, Head: "h7"}, true},
		{"same sequence, other head", store.AuditMark{Seq: 10, Head: "forged"}, true},
		{"empty store", store.AuditMark{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkAuditMark(tc.have, mark, "audit.hwm")
			var rb *AuditRollbackError
			if tc.refuse != errors.As(err, &rb) {
				t.Fatalf("checkAuditMark = %v, refuse=%v", err, tc.refuse)
			}
		})
	}
}
