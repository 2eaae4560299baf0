package hostmem

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		meminfo string
		want    int64
	}{
		{"total", "MemTotal:       24594300 kB\nMemFree:  100 kB\n", 24594300 * 1024},
		{"second line", "Foo: 1 kB\nMemTotal: 2048 kB\n", 2048 * 1024},
		{"missing", "MemFree: 100 kB\n", 0},
		{"garbage", "MemTotal: lots kB\n", 0},
		{"negative", "MemTotal: -5 kB\n", 0},
	} {
		if got := parseMemTotal([]byte(tc.meminfo)); got != tc.want {
			t.Errorf("%s: parseMemTotal = %d, want %d", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		self, path string
		ok         bool
	}{
		{"0::/system.slice/stratum.service\n", "/system.slice/stratum.service", true},
		{"12:memory:/x\n0::/\n", "", true},
		{"12:memory:/docker/abc\n", "", false},
		{"0::/../../etc\n", "", false},
	} {
		path, ok := parseCgroupV2([]byte(tc.self))
		if path != tc.path || ok != tc.ok {
			t.Errorf("parseCgroupV2(%q) = %q, %v; want %q, %v", tc.self, path, ok, tc.path, tc.ok)
		}
	}
	for in, want := range map[string]int64{"max\n": 0, "1073741824\n": 1 << 30, "0\n": 0, "": 0} {
		if got := parseMemoryMax([]byte(in)); got != want {
			t.Errorf("parseMemoryMax(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestThisMachine reads this machine's memory: Linux always has
// /proc/meminfo, and a cgroup limit only ever lowers the figure.
func TestThisMachine(t *testing.T) {
	total, usable := Total(), Usable()
	if total <= 0 {
		t.Fatalf("Total() = %d", total)
	}
	if usable <= 0 || usable > total {
		t.Fatalf("Usable() = %d, Total() = %d", usable, total)
	}
}
