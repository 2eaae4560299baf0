package cluster

import (
	"testing"
	"time"

	"stratum/apierr"
	"stratum/store"
)

// TestOpenBaoInitInventsNothing: without OpenBao values in the file, init
// stores no OpenBao token (an earlier build made up an hvs. string).
func TestOpenBaoInitInventsNothing(t *testing.T) {
	db := openStore(t)
	err := db.Update(func(tx *store.Tx) error {
		_, _, _, err := Init(tx, DevDefaults(), true, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *store.Tx) error {
		if tok, found, err := LoadOpenBaoToken(tx); err != nil || found || tok != "" {
			t.Errorf("an OpenBao token was stored without one given: %q %v %v", tok, found, err)
		}
		if s, err := LoadOpenBao(tx); err != nil || s.Configured() {
			t.Errorf("OpenBao configured without one given: %+v %v", s, err)
		}
		return nil
	})
}

func TestOpenBaoConfigBlock(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		bad        []string // fields named in the error
	}{
		{"full", "openbao: {addr: 'https://bao.lab:8200', caFile: /etc/bao/ca.pem, tokenFile: /etc/bao/founder.token}", nil},
		{"loopback http", "openbao: {addr: 'http://127.0.0.1:8200'}", nil},
		{"plain http to a network address", "openbao: {addr: 'http://192.0.2.9:8200'}", []string{"openbao.addr"}},
		{"not a URL", "openbao: {addr: 'bao.lab:8200'}", []string{"openbao.addr"}},
		{"a path", "openbao: {addr: 'https://bao.lab:8200/v1'}", []string{"openbao.addr"}},
		{"token file without addr", "openbao: {tokenFile: /x}", []string{"openbao.addr"}},
		{"unknown key", "openbao: {address: x}", []string{"openbao.address"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte("parentDomain: a.example\nregion: r\n" + tt.yaml))
			if err == nil {
				err = c.Validate(false)
			}
			if len(tt.bad) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			e, ok := apierr.As(err)
			if !ok {
				t.Fatalf("want field errors %v, got %v", tt.bad, err)
			}
			for _, want := range tt.bad {
				found := false
				for _, f := range e.Fields {
					found = found || f.Field == want
				}
				if !found {
					t.Errorf("no problem named %s in %v", want, e.Fields)
				}
			}
		})
	}
}
