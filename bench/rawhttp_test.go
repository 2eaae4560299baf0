package bench

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
)

// The load generators that stand for many nodes (the long-poll's 10,000
// joiners, the release set's agents) write their HTTP/1.1 requests by
// hand on their own TLS connections: net/http's Transport spends two
// goroutines and a hand-off a request on a connection, CPU that on two
// cores is taken from the founder being measured. The answers are read
// by net/http's own parser.

// appendRequest appends one HTTP/1.1 request to dst: header lines are
// "Name: value" each, written as they are.
func appendRequest(dst []byte, method, host, path string, header []string, body []byte, closeConn bool) []byte {
	dst = append(dst, method...)
	dst = append(dst, ' ')
	dst = append(dst, path...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, host...)
	dst = append(dst, "\r\nUser-Agent: stratum-bench\r\nAccept: application/json\r\n"...)
	for _, h := range header {
		dst = append(dst, h...)
		dst = append(dst, "\r\n"...)
	}
	if body != nil {
		dst = append(dst, "Content-Type: application/json\r\nContent-Length: "...)
		dst = strconv.AppendInt(dst, int64(len(body)), 10)
		dst = append(dst, "\r\n"...)
	}
	if closeConn {
		dst = append(dst, "Connection: close\r\n"...)
	}
	dst = append(dst, "\r\n"...)
	return append(dst, body...)
}

// readResponse reads one whole response; closing is true when the
// founder closes the connection after it (a parked long-poll's answer).
func readResponse(br *bufio.Reader) (status int, raw []byte, closing bool, err error) {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, nil, false, err
	}
	defer resp.Body.Close()
	raw, err = io.ReadAll(resp.Body)
	return resp.StatusCode, raw, resp.Close, err
}
