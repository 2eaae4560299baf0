// Package hostmem reads how much memory the machine has, and how much of
// it this process may use.
package hostmem

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Total is the machine's memory (MemTotal in /proc/meminfo), in bytes;
// 0 when it cannot be read.
func Total() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return parseMemTotal(b)
}

// Usable is Total, or this process's cgroup v2 memory limit (memory.max)
// if that is lower: a founder in a container sizes its caches by what the
// container may hold, not by the host. 0 when neither can be read.
func Usable() int64 {
	total := Total()
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return total
	}
	limit := int64(0)
	if path, ok := parseCgroupV2(self); ok {
		if b, err := os.ReadFile("/sys/fs/cgroup" + path + "/memory.max"); err == nil {
			limit = parseMemoryMax(b)
		}
	}
	if limit > 0 && (total == 0 || limit < total) {
		return limit
	}
	return total
}

// parseMemTotal reads MemTotal (kB) out of /proc/meminfo.
func parseMemTotal(meminfo []byte) int64 {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil && kb > 0 {
				return kb * 1024
			}
		}
	}
	return 0
}

// parseCgroupV2 returns the process's cgroup v2 path (the "0::PATH" line
// of /proc/self/cgroup).
func parseCgroupV2(self []byte) (string, bool) {
	for line := range strings.SplitSeq(string(self), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok && strings.HasPrefix(path, "/") && !strings.Contains(path, "..") {
			return strings.TrimSuffix(path, "/"), true
		}
	}
	return "", false
}

// parseMemoryMax reads a cgroup memory.max: bytes, or "max" (no limit: 0).
func parseMemoryMax(b []byte) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}
