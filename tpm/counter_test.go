package tpm

import (
	"testing"

	"stratum/tpm/tpmtest"
)

// An NV counter on swtpm: absent until first incremented, then strictly
// increasing by one per Increment, read back the same.
func TestSwtpmCounter(t *testing.T) {
	sock := tpmtest.StartSwtpm(t)
	c := NewCounter(sock, 0x01814a3c)
	if _, defined, err := c.Read(); err != nil || defined {
		t.Fatalf("Read of a new index = defined %v, %v", defined, err)
	}
	first, err := c.Increment()
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 3; i++ {
		v, err := c.Increment()
		if err != nil || v != first+i {
			t.Fatalf("increment %d = %d, %v; want %d", i, v, err, first+i)
		}
	}
	if v, defined, err := c.Read(); err != nil || !defined || v != first+3 {
		t.Fatalf("Read = %d %v %v, want %d", v, defined, err, first+3)
	}
	if _, _, err := NewCounter(sock+".gone", 0x01814a3c).Read(); err == nil {
		t.Fatal("a missing TPM read a counter")
	}
}
