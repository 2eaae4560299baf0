package gatherconn

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
)

// countingConn records what reaches it and how many calls it took.
type countingConn struct {
	net.Conn
	calls atomic.Int64
	got   bytes.Buffer
	fail  error
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.calls.Add(1)
	if c.fail != nil {
		return 0, c.fail
	}
	return c.got.Write(p)
}

func TestGather(t *testing.T) {
	record := bytes.Repeat([]byte{7}, 16<<10+22) // a full TLS 1.3 record
	for _, tc := range []struct {
		name      string
		held      bool
		writes    int
		wantCalls int64
	}{
		{"not held: one call a write", false, 20, 20},
		{"held: one call per buffer", true, 20, 2}, // 16 records fill the buffer, 4 at Flush
		{"held, one record", true, 1, 1},
		{"held, nothing", true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := &countingConn{}
			c := &Conn{Conn: cc}
			if tc.held {
				c.Hold()
			}
			var want []byte
			for i := range tc.writes {
				p := append([]byte(nil), record...)
				p[0] = byte(i)
				want = append(want, p...)
				if n, err := c.Write(p); n != len(p) || err != nil {
					t.Fatalf("write %d: %d, %v", i, n, err)
				}
			}
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
			if cc.calls.Load() != tc.wantCalls || !bytes.Equal(cc.got.Bytes(), want) {
				t.Fatalf("%d calls, %d bytes in order %v; want %d calls, %d bytes", cc.calls.Load(), cc.got.Len(), bytes.Equal(cc.got.Bytes(), want), tc.wantCalls, len(want))
			}
		})
	}
	t.Run("large write passes the buffer", func(t *testing.T) {
		cc := &countingConn{}
		c := &Conn{Conn: cc}
		c.Hold()
		c.Write([]byte("head"))
		big := bytes.Repeat([]byte{1}, BufferBytes)
		c.Write(big)
		if cc.calls.Load() != 2 || !bytes.Equal(cc.got.Bytes(), append([]byte("head"), big...)) {
			t.Fatalf("%d calls, %d bytes", cc.calls.Load(), cc.got.Len())
		}
		c.Flush()
	})
}

// TestFailedSendBreaksTheConn: once a gathered send fails, nothing more
// is sent: a record after one that may be cut would be garbage.
func TestFailedSendBreaksTheConn(t *testing.T) {
	boom := errors.New("boom")
	cc := &countingConn{fail: boom}
	c := &Conn{Conn: cc}
	c.Hold()
	if _, err := c.Write([]byte("record")); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); !errors.Is(err, boom) {
		t.Fatalf("Flush: %v, want the send's error", err)
	}
	cc.fail = nil
	if _, err := c.Write([]byte("next")); !errors.Is(err, boom) || cc.got.Len() != 0 {
		t.Fatalf("write after a failed send: %v, %d bytes sent", err, cc.got.Len())
	}
}

// countingListener counts the write calls of the connections it accepts.
type countingListener struct {
	net.Listener
	calls atomic.Int64
}

type countedConn struct {
	net.Conn
	calls *atomic.Int64
}

func (c countedConn) Write(p []byte) (int, error) { c.calls.Add(1); return c.Conn.Write(p) }

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countedConn{c, &l.calls}, nil
}

// TestOverTLS: a 1 MiB response write over real TLS reaches the socket
// in a few system calls (64 records), the client reads the same bytes,
// and the next response on the connection is not held back.
func TestOverTLS(t *testing.T) {
	body := make([]byte, 1<<20)
	rand.Read(body)
	for _, gather := range []bool{false, true} {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			if gather {
				Write(w, r, body)
			} else {
				w.Write(body)
			}
		}))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cl := &countingListener{Listener: ln}
		srv.Listener = Listener(cl)
		srv.Config.ConnContext = ConnContext
		srv.StartTLS()
		client := srv.Client()
		get := func() {
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("gather %v: %d bytes, %v", gather, len(got), err)
			}
		}
		get() // the handshake
		before := cl.calls.Load()
		get()
		calls := cl.calls.Load() - before
		srv.Close()
		if gather && calls > 8 || !gather && calls < 64 {
			t.Fatalf("gather %v: a 1 MiB response took %d write calls", gather, calls)
		}
	}
}
