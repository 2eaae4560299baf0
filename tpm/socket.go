package tpm

import (
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/google/go-tpm/tpm2/transport"
)

// A socket TPM (swtpm) serves one connection at a time and, like go-tpm's
// linuxudstpm, we dial once per command. Between two commands swtpm may
// not be back in accept() yet: the next dial then finds a full backlog
// (EAGAIN) or, at start, no listener (ECONNREFUSED). Both pass in
// milliseconds, so a dial retries them for a short while instead of
// failing a seal halfway.
const socketDialPatience = 3 * time.Second

// socketTPM is one command per connection: Write dials and sends, Read
// reads the response and closes.
type socketTPM struct {
	path string
	conn net.Conn
}

func openSocketTransport(path string) transport.TPMCloser {
	return transport.FromReadWriteCloser(&socketTPM{path: path})
}

func (s *socketTPM) Write(p []byte) (int, error) {
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
	c, err := dialTPMSocket(s.path, socketDialPatience)
	if err != nil {
		return 0, err
	}
	s.conn = c
	return c.Write(p)
}

func (s *socketTPM) Read(p []byte) (int, error) {
	if s.conn == nil {
		return 0, errors.New("TPM socket: read without a command")
	}
	n, err := s.conn.Read(p)
	s.conn.Close()
	s.conn = nil
	return n, err
}

func (s *socketTPM) Close() error {
	if s.conn != nil {
		err := s.conn.Close()
		s.conn = nil
		return err
	}
	return nil
}

// dialTPMSocket dials path, retrying a busy or not yet listening socket
// until patience runs out.
func dialTPMSocket(path string, patience time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(patience)
	delay := time.Millisecond
	for {
		c, err := net.DialTimeout("unix", path, patience)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(delay)
		delay = min(2*delay, 50*time.Millisecond)
	}
}
