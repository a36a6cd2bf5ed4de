// Package procstat reads a process's CPU time from Linux's /proc, for the
// measurements that quote CPU per request of processes other than their
// own (the ceiling, a flashsale instance, the RabbitMQ broker).
package procstat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// CPU returns the CPU time (user + system) process pid has used so far.
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// utime and stime are the 14th and 15th fields, counted after the
	// command name's closing parenthesis (the name may hold one itself).
	end := bytes.LastIndexByte(b, ')')
	if end < 0 || end+2 > len(b) {
		return 0, fmt.Errorf("procstat: /proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(b[end+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("procstat: /proc/%d/stat: %d fields after the command name, want at least 13", pid, len(f))
	}
	utime, err := strconv.ParseInt(string(f[11]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("procstat: /proc/%d/stat utime: %w", pid, err)
	}
	stime, err := strconv.ParseInt(string(f[12]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("procstat: /proc/%d/stat stime: %w", pid, err)
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(utime+stime) * tick, nil
}
