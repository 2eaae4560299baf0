package releaseset

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestSortPkgsIsStableSort: the order a previous record took, tried
// first, gives what a stable sort gives, whatever order the next record
// lists its packages in (the same, another, with repeated components,
// longer or shorter).
func TestSortPkgsIsStableSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var in interner
	base := []string{"qemu", "ovn", "edk2", "crun", "podman", "libvirt", "conmon", "openvswitch"}
	for it := range 2000 {
		n := len(base)
		if it%7 == 0 {
			n = rng.IntN(len(base)) + 1
		}
		var pk []pkgFact
		for i := range n {
			c := base[i]
			if it%5 == 0 {
				c = base[rng.IntN(3)] // repeated components
			}
			pk = append(pk, pkgFact{component: c, value: fieldValue{value: string(rune('a' + i))}})
		}
		if it%3 == 0 {
			rng.Shuffle(len(pk), func(i, j int) { pk[i], pk[j] = pk[j], pk[i] })
		}
		want := slices.Clone(pk)
		slices.SortStableFunc(want, func(a, b pkgFact) int { return strings.Compare(a.component, b.component) })
		in.sortPkgs(pk)
		if !slices.Equal(pk, want) {
			t.Fatalf("iteration %d: got %v, want %v", it, pk, want)
		}
	}
	long := make([]pkgFact, maxPermLen+1)
	for i := range long {
		long[i] = pkgFact{component: string(rune('z' - i%26))}
	}
	in.sortPkgs(long)
	if !slices.IsSortedFunc(long, func(a, b pkgFact) int { return strings.Compare(a.component, b.component) }) {
		t.Fatal("a list longer than maxPermLen is not sorted")
	}
}
