package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

type network struct {
	IP        string `json:"ip"`
	Interface string `json:"interface,omitempty"`
}

type embedded struct {
	Zone string `json:"zone"`
}

type request struct {
	embedded
	Name     string             `json:"name"`
	Networks map[string]network `json:"networks"`
	Items    []network          `json:"items"`
	Facts    json.RawMessage    `json:"facts"`
	Any      any                `json:"any"`
	Ptr      *network           `json:"ptr"`
	Skipped  string             `json:"-"`
}

func TestDecodeNamesEveryProblemByPath(t *testing.T) {
	cases := []struct {
		name, body string
		fields     []string
	}{
		{"clean", `{"name":"a","zone":"z","networks":{"storage":{"ip":"1.2.3.4"}},"items":[{"ip":"x"}],"facts":{"Any":{"Thing":1}},"any":{"x":1},"ptr":{"ip":"y"}}`, nil},
		{"unknown top", `{"name":"a","bogus":1}`, []string{"bogus"}},
		{"unknown nested in map", `{"networks":{"storage":{"ip":"1","mask":"24"}}}`, []string{"networks.storage.mask"}},
		{"unknown in array", `{"items":[{"ip":"1"},{"ipp":"2"}]}`, []string{"items[1].ipp"}},
		{"unknown in pointer", `{"ptr":{"nope":true}}`, []string{"ptr.nope"}},
		{"duplicate", `{"name":"a","name":"b"}`, []string{"name"}},
		// SPEC 16.10: free-form values are checked for duplicates too.
		{"duplicate inside facts", `{"facts":{"os":{"id":"a","id":"b"},"x":1,"x":2}}`, []string{"facts.os.id", "facts.x"}},
		{"duplicate inside any", `{"any":[{"x":1,"x":2}]}`, []string{"any[0].x"}},
		{"case clash", `{"name":"a","Name":"b"}`, []string{"Name", "Name"}},
		{"mis-cased alone", `{"Name":"b"}`, []string{"Name"}},
		{"json dash field", `{"Skipped":"x"}`, []string{"Skipped"}},
		{"several at once", `{"a":1,"b":2,"networks":{"s":{"c":3}}}`, []string{"a", "b", "networks.s.c"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r request
			err := Decode([]byte(c.body), &r)
			if c.fields == nil {
				if err != nil {
					t.Fatalf("clean body refused: %v", err)
				}
				if r.Networks["storage"].IP != "1.2.3.4" || r.Zone != "z" {
					t.Fatalf("decoded %+v", r)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want the problems", err)
			}
			var got []string
			for _, f := range e.Problems {
				got = append(got, f.Field)
			}
			if !reflect.DeepEqual(got, c.fields) {
				t.Fatalf("fields %v, want %v", got, c.fields)
			}
		})
	}
}

func TestDecodeRefusesMalformed(t *testing.T) {
	for _, body := range []string{``, `{`, `{"name":}`, `{"name":"a"} {}`, `[1,2`, `{"name":"a"}x`} {
		var r request
		var e *Error
		if !errors.As(Decode([]byte(body), &r), &e) {
			t.Errorf("%q: not refused with its problems", body)
		}
	}
	var r request
	var e *Error
	if !errors.As(Decode([]byte(`{"name":5}`), &r), &e) || e.Problems[0].Field != "name" || e.Problems[0].Message != "must be a string" {
		t.Fatalf("wrong type: %+v", e)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"name":"a","networks":{"s":{"ip":"1"}}}`, `{"items":[{"ip":"1"},{}]}`, `{"a":{"b":[1,{"c":2}]}}`, `{"name":"a","Name":"b"}`, `[]`, `"x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r request
		err := Decode(b, &r)
		if err == nil {
			return
		}
		var e *Error
		if !errors.As(err, &e) || len(e.Problems) == 0 {
			t.Fatalf("a refusal without its problems: %v", err)
		}
	})
}

// TestKeySetPastSmall: duplicate and case-clashing keys are found the same
// in an object of a few keys (compared in place) and of many (a map).
func TestKeySetPastSmall(t *testing.T) {
	for _, n := range []int{3, keySetSmall + 5} {
		var k keySet
		for i := range n {
			if _, dup := k.add(fmt.Sprintf("key%d", i)); dup {
				t.Fatalf("n=%d: key%d reported twice", n, i)
			}
		}
		if prev, dup := k.add("key1"); !dup || prev != "key1" {
			t.Errorf("n=%d: key1 again: %q %v", n, prev, dup)
		}
		if prev, dup := k.add("KEY2"); !dup || prev != "key2" {
			t.Errorf("n=%d: KEY2: %q %v", n, prev, dup)
		}
		if _, dup := k.add("kéy"); dup {
			t.Errorf("n=%d: kéy clashes with nothing", n)
		}
		if prev, dup := k.add("KÉY"); !dup || prev != "kéy" {
			t.Errorf("n=%d: KÉY: %q %v", n, prev, dup)
		}
	}
}
