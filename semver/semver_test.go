package semver

import "testing"

func TestValid(t *testing.T) {
	valid := []string{"0.2.0", "1.0.0-rc.1", "1.0.0-alpha-1.0", "1.0.0+20260701", "10.20.30-x.7.z.92+meta.1", "99999999999999999999.0.0"}
	invalid := []string{"", "v0.2.0", "0.2", "0.2.0.1", "01.2.0", "0.02.0", "1.0.0-", "1.0.0-01", "1.0.0-a..b", "1.0.0-rc..1", "1.0.0+", "1.0.0+a..b", "1.0.0-rc_1", "1.0.0-ä", " 1.0.0", "1.0.0 "}
	for _, s := range valid {
		if err := Valid(s); err != nil {
			t.Errorf("Valid(%q) = %v", s, err)
		}
	}
	for _, s := range invalid {
		if Valid(s) == nil {
			t.Errorf("Valid(%q) accepted", s)
		}
	}
}

func TestCompare(t *testing.T) {
	// Ascending, from semver.org section 11, plus numbers of any size.
	order := []string{
		"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
		"1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.2.0", "1.10.0", "2.0.0", "99999999999999999999.0.0",
	}
	for i := range order {
		for j := range order {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := Compare(order[i], order[j]); got != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
	if Compare("1.0.0+a", "1.0.0+b") != 0 {
		t.Error("build metadata must not order versions")
	}
}

func FuzzCompare(f *testing.F) {
	f.Add("1.0.0-rc.1", "1.0.0")
	f.Add("0.2.0+b", "0.10.0-x.1")
	f.Fuzz(func(t *testing.T, a, b string) {
		if Valid(a) != nil || Valid(b) != nil {
			return
		}
		if Compare(a, b) != -Compare(b, a) || Compare(a, a) != 0 {
			t.Fatalf("Compare(%q, %q) is not antisymmetric", a, b)
		}
	})
}
