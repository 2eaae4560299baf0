package cli

import "testing"

func TestByteSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"268435456", 256 << 20, true},
		{"256MiB", 256 << 20, true},
		{"256m", 256 << 20, true},
		{"1GiB", 1 << 30, true},
		{"2G", 2 << 30, true},
		{"512 KiB", 512 << 10, true},
		{"10B", 10, true},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5GiB", 0, false},
		{"MiB", 0, false},
		{"1TiB", 0, false},
		{"9999999999GiB", 0, false},
	} {
		var b byteSize
		err := b.Set(c.in)
		if (err == nil) != c.ok || (c.ok && int64(b) != c.want) {
			t.Errorf("Set(%q) = %d, %v; want %d, ok %v", c.in, b, err, c.want, c.ok)
		}
	}
	for _, c := range []struct {
		v    byteSize
		want string
	}{{256 << 20, "256MiB"}, {1 << 30, "1GiB"}, {0, "0"}, {1000, "1000"}} {
		if got := c.v.String(); got != c.want {
			t.Errorf("%d.String() = %q, want %q", c.v, got, c.want)
		}
	}
}
