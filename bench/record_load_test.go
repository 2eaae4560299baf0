package bench

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
)

// recordLoad is the agents of BenchmarkReleaseSetScale: clients
// keep-alive TLS connections, one a client as an agent holds one, each
// sending the next node's record (PUT /v1/cluster/nodes/{id}/release
// with a bearer token) as soon as its previous one is answered, the whole
// request in one write as the agent's transport writes it
// (agent.recordWriteBuffer).
//
// 256 connections, where the benchmark had 32: a cluster's agents record
// from as many connections as there are nodes, and with 32 the founder's
// two cores were a fifth idle (1.53-1.66 busy), every client waiting on
// the shared commit's fsyncs with nothing else to hand the founder. With
// 256 a commit is shared by about 60 records instead of 15 and the cores
// stay busy (1.81-1.87). RELEASESET_RECORD_CLIENTS sets another count.
type recordLoad struct {
	host    string
	tls     *tls.Config
	token   string
	ids     []string
	bodies  [][]byte // node i's record is bodies[i%len(bodies)]
	clients int
}

const defaultRecordClients = 256

// run sends every node's record once; the first failure stops every
// client.
func (l recordLoad) run() error {
	var next atomic.Int64
	var stop atomic.Bool
	errs := make([]error, l.clients)
	var wg sync.WaitGroup
	auth := []string{"Authorization: Bearer " + l.token}
	for c := range l.clients {
		wg.Go(func() {
			if errs[c] = l.client(&next, &stop, auth); errs[c] != nil {
				stop.Store(true)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// client sends records on one connection until none are left or another
// client failed.
func (l recordLoad) client(next *atomic.Int64, stop *atomic.Bool, auth []string) error {
	conn, err := tls.Dial("tcp", l.host, l.tls)
	if err != nil {
		return err
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	var req []byte
	for {
		i := int(next.Add(1) - 1)
		if i >= len(l.ids) || stop.Load() {
			return nil
		}
		req = appendRequest(req[:0], http.MethodPut, l.host, "/v1/cluster/nodes/"+l.ids[i]+"/release", auth, l.bodies[i%len(l.bodies)], false)
		if _, err := conn.Write(req); err != nil {
			return fmt.Errorf("PUT %s: %w", l.ids[i], err)
		}
		status, raw, _, err := readResponse(br)
		if err != nil {
			return fmt.Errorf("PUT %s: %w", l.ids[i], err)
		}
		if status != http.StatusNoContent {
			return fmt.Errorf("PUT %s: %d %.200s", l.ids[i], status, raw)
		}
	}
}
