package tpm

import (
	"reflect"
	"testing"
)

func TestParsePCRs(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"7", []int{7}, false},
		{"0,7", []int{0, 7}, false},
		{" 7 , 0 ", []int{0, 7}, false},
		{"23", []int{23}, false},
		{"", nil, true},
		{"24", nil, true},
		{"-1", nil, true},
		{"7,7", nil, true},
		{"0,,7", nil, true},
		{"7,", nil, true},
		{"seven", nil, true},
		{"0x7", nil, true},
	}
	for _, tt := range tests {
		got, err := ParsePCRs(tt.in)
		if (err != nil) != tt.wantErr || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParsePCRs(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
