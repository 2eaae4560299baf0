package tpm

import (
	"testing"

	"github.com/google/go-tpm-tools/simulator"
	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// openSim returns a freshly manufactured reference TPM simulator. It is a
// process-wide singleton, so tests here must not run in parallel.
func openSim(t *testing.T) (*simulator.Simulator, transport.TPM) {
	t.Helper()
	sim, err := simulator.Get()
	if err != nil {
		t.Fatalf("simulator: %v", err)
	}
	t.Cleanup(func() {
		if err := sim.Close(); err != nil {
			t.Errorf("close simulator: %v", err)
		}
	})
	return sim, transport.FromReadWriter(sim)
}

// assertNoHandles fails if any transient object or session is left loaded:
// a leak would exhaust the TPM's few slots on a long-running node.
func assertNoHandles(t *testing.T, tp transport.TPM) {
	t.Helper()
	for _, ht := range []tpm2.TPMHT{tpm2.TPMHTTransient, tpm2.TPMHTHMACSession, tpm2.TPMHTPolicySession} {
		rsp, err := tpm2.GetCapability{
			Capability:    tpm2.TPMCapHandles,
			Property:      uint32(ht) << 24,
			PropertyCount: 64,
		}.Execute(tp)
		if err != nil {
			t.Fatalf("GetCapability: %v", err)
		}
		hs, err := rsp.CapabilityData.Data.Handles()
		if err != nil {
			t.Fatal(err)
		}
		if len(hs.Handle) > 0 {
			t.Errorf("leaked handles of type 0x%02x: %v", uint8(ht), hs.Handle)
		}
	}
}

func mustSeal(t *testing.T, tp transport.TPM, secret []byte, pcrs []int) []byte {
	t.Helper()
	blob, err := Seal(tp, secret, pcrs)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	return blob
}
