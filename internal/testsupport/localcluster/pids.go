package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// PIDs are the process IDs of the cluster's running components (etcd,
// kube-apiserver, kube-controller-manager, ...), from the PID files
// kwokctl writes. A component whose file names a process that exited, or
// a PID the kernel has since given to another process, is not running
// and not listed: see Stopped.
func (c *Cluster) PIDs() (map[string]int, error) {
	recorded, err := c.recordedPIDs()
	if err != nil {
		return nil, err
	}
	pids := map[string]int{}
	for name, pid := range recorded {
		if runs(name, pid) {
			pids[name] = pid
		}
	}
	return pids, nil
}

// Stopped names the components that are not running, sorted. A PID file
// alone does not say: PIDs are reused once the kernel's counter wraps (at
// 32768 by default, which a long test run passes), and a component that
// exited can have its PID taken by another, even by another component
// started again (seen: the controller manager's file naming a restarted
// apiserver, so that kwokctl left the controller manager stopped).
func (c *Cluster) Stopped() ([]string, error) {
	recorded, err := c.recordedPIDs()
	if err != nil {
		return nil, err
	}
	var stopped []string
	for name, pid := range recorded {
		if !runs(name, pid) {
			stopped = append(stopped, name)
		}
	}
	slices.Sort(stopped)
	return stopped, nil
}

// forgetStopped removes the PID files of the components that are not
// running, so that kwokctl, which trusts any live process a PID file
// names, starts them and kills no process that is not theirs.
func (c *Cluster) forgetStopped() error {
	stopped, err := c.Stopped()
	if err != nil {
		return err
	}
	for _, name := range stopped {
		if err := os.Remove(c.pidFile(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (c *Cluster) pidFile(name string) string {
	return filepath.Join(c.KwokWorkdir(), "clusters", c.Name, "pids", name+".pid")
}

// recordedPIDs are the PIDs kwokctl's files record, running or not.
func (c *Cluster) recordedPIDs() (map[string]int, error) {
	files, err := filepath.Glob(c.pidFile("*"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no PID files of cluster %s in %s: %v", c.Name, c.KwokWorkdir(), err)
	}
	pids := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		pids[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
	}
	return pids, nil
}

// runs tells whether process pid is the component name: kwokctl runs each
// from its cluster's bin/<name>, which is the process's first argument. An
// exited process, a zombie included, has no arguments.
func runs(name string, pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	program, _, _ := bytes.Cut(cmdline, []byte{0})
	return len(program) > 0 && filepath.Base(string(program)) == name
}
