// Package lab runs the founder, `stratum join` and `stratum agent` as a
// rack of real hosts: network namespaces on a bridge, each host with its
// own address and software TPM (internal/labtest). It needs root and
// iproute2 and skips without them.
package lab

import (
	"os"
	"testing"

	"stratum/internal/stratumtest"
)

func TestMain(m *testing.M) { os.Exit(stratumtest.Main(m)) }
