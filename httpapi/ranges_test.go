package httpapi

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseRange(t *testing.T) {
	const size = 1000
	type r = ByteRange
	cases := []struct {
		header string
		want   []ByteRange
		err    error
	}{
		{"", nil, nil},
		{"items=0-1", nil, nil},
		{"bytes=0-0", []r{{0, 1}}, nil},
		{"bytes=0-499", []r{{0, 500}}, nil},
		{"BYTES=10-", []r{{10, 990}}, nil},
		{"bytes=-10", []r{{990, 10}}, nil},
		{"bytes=-5000", []r{{0, 1000}}, nil},
		{"bytes=990-5000", []r{{990, 10}}, nil},
		{"bytes=999-99999999999999999999999", []r{{999, 1}}, nil},
		{"bytes= 5-6 ", []r{{5, 2}}, nil},
		{"bytes=,5-6,", []r{{5, 2}}, nil},
		{"bytes=1000-", nil, ErrRangeUnsatisfiable},
		{"bytes=1000-1001", nil, ErrRangeUnsatisfiable},
		{"bytes=99999999999999999999-", nil, ErrRangeUnsatisfiable},
		{"bytes=-0", nil, ErrRangeUnsatisfiable},
		{"bytes=5-4", nil, ErrRangeMalformed},
		{"bytes=", nil, ErrRangeMalformed},
		{"bytes=,,", nil, ErrRangeMalformed},
		{"bytes", nil, ErrRangeMalformed},
		{"bytes=a-b", nil, ErrRangeMalformed},
		{"bytes=-", nil, ErrRangeMalformed},
		{"bytes=+1-2", nil, ErrRangeMalformed},
		{"bytes=1 -2", nil, ErrRangeMalformed},
		{"bytes=0x10-", nil, ErrRangeMalformed},
		{"bytes=0-1,5-6", []r{{0, 2}, {5, 2}}, nil},
		{"bytes=0-1,2000-3000", []r{{0, 2}, {1000, 0}}, nil},
		{"bytes=0-1,5-6,x-y", []r{{0, 2}, {5, 2}}, nil}, // parsing stops at two
		{"bytes=0-1,x-y", nil, ErrRangeMalformed},
	}
	for _, c := range cases {
		got, err := ParseRange(c.header, size)
		if !errors.Is(err, c.err) || (c.err == nil && err != nil) || !slices.Equal(got, c.want) {
			t.Errorf("ParseRange(%q) = %v, %v; want %v, %v", c.header, got, err, c.want, c.err)
		}
	}
	if _, err := ParseRange("bytes=-1", 0); !errors.Is(err, ErrRangeUnsatisfiable) {
		t.Errorf("empty file: %v", err)
	}
	if got := (ByteRange{990, 10}).ContentRange(size); got != "bytes 990-999/1000" {
		t.Errorf("ContentRange = %q", got)
	}
	huge := "bytes=" + strings.Repeat("0-0,", 10000)
	if got, err := ParseRange(huge, size); err != nil || len(got) != 2 {
		t.Errorf("10,000 ranges: %v %v", got, err)
	}
}

func BenchmarkParseRange10000(b *testing.B) {
	huge := "bytes=" + strings.Repeat("0-0,", 10000)
	for b.Loop() {
		ParseRange(huge, 1000)
	}
}

func TestETagMatch(t *testing.T) {
	etag := `"sha256:abc"`
	for list, want := range map[string]bool{
		`"sha256:abc"`:            true,
		`W/"sha256:abc"`:          true,
		`"x", "sha256:abc"`:       true,
		`*`:                       true,
		`"x"`:                     false,
		`sha256:abc`:              false,
		`"sha256:abc`:             false,
		`"a,b", "sha256:abc"`:     true,
		` , ,"y",W/"sha256:abc" `: true,
	} {
		if got := etagListMatches(list, etag); got != want {
			t.Errorf("etagListMatches(%q) = %v", list, got)
		}
	}
	if !ifRangeAllows("", etag) || !ifRangeAllows(etag, etag) || ifRangeAllows(`W/`+etag, etag) || ifRangeAllows("Wed, 21 Oct 2015 07:28:00 GMT", etag) {
		t.Error("If-Range")
	}
}
