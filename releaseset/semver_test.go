package releaseset

import "testing"

func TestParseSemver(t *testing.T) {
	valid := []string{"0.2.0", "1.0.0-rc.1", "1.0.0-alpha-1.0", "1.0.0+20260701", "10.20.30-x.7.z.92+meta.1", "99999999999999999999.0.0"}
	invalid := []string{"", "v0.2.0", "0.2", "0.2.0.1", "01.2.0", "0.02.0", "1.0.0-", "1.0.0-01", "1.0.0-a..b", "1.0.0+", "1.0.0-ä", " 1.0.0", "1.0.0 "}
	for _, s := range valid {
		if _, ok := parseSemver(s); !ok {
			t.Errorf("parseSemver(%q) refused", s)
		}
	}
	for _, s := range invalid {
		if _, ok := parseSemver(s); ok {
			t.Errorf("parseSemver(%q) accepted", s)
		}
	}
}

func TestCompareSemver(t *testing.T) {
	// Ascending, from semver.org section 11, plus numbers of any size.
	order := []string{
		"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
		"1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.2.0", "1.10.0", "2.0.0", "99999999999999999999.0.0",
	}
	for i := range order {
		for j := range order {
			a, _ := parseSemver(order[i])
			b, _ := parseSemver(order[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := compareSemver(a, b); got != want {
				t.Errorf("compare(%s, %s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
	a, _ := parseSemver("1.0.0+a")
	b, _ := parseSemver("1.0.0+b")
	if compareSemver(a, b) != 0 {
		t.Error("build metadata must not order versions")
	}
}
