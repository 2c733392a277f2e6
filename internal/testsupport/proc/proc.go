// Package proc reads what benchmarks measure of this machine's processes
// from /proc.
package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CPUSeconds is a process's user and system CPU time so far (0 when it is
// gone).
func CPUSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	stat := string(b)
	f := strings.Fields(stat[strings.LastIndexByte(stat, ')')+2:])
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// Named are the IDs of the processes whose command name is name.
func Named(name string) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/comm")
	var pids []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil || strings.TrimSpace(string(b)) != name {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
