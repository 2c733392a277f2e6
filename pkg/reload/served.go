package reload

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/example/memcached-operator/pkg/material"
)

// The served directory (Config.ServedDir) is the only place memcached reads
// its certificate, key, CA and authentication file from: a memory-backed
// volume of the pod that the reloader alone writes, with files it checked.
// So a client's refresh_certs, or memcached restarted in its container,
// loads only what the reloader passed, whatever the kubelet mounted since.
//
// It is laid out as the kubelet lays out a Secret volume, so that a reader
// never sees half of a change: each file is a link through "..data" to a
// directory holding one whole generation, and "..data" is replaced by a
// rename. It is also the reloader's memory, which outlives it in the pod:
// restarted, it takes the served files as what memcached loaded.
const servedData = "..data"

// Prepare checks the mounted files and publishes them to c.ServedDir,
// before memcached starts (the pod's init container): memcached then
// starts with nothing the reloader did not pass. Unfit files are an error:
// the pod does not start, and says why.
func Prepare(c Config, now time.Time) error {
	if c.ServedDir == "" {
		return errors.New("no served directory to prepare")
	}
	r := &Reloader{c: c}
	f, err := r.read()
	if err != nil {
		return err
	}
	if c.TLSDir != "" {
		if _, err := material.Fit(f.cert, f.key, f.ca, c.ServerName, now); err != nil {
			return fmt.Errorf("the mounted certificate is not fit to serve: %w", err)
		}
	}
	if c.AuthFile != "" {
		if err := material.CheckAuthFile(f.auth); err != nil {
			return fmt.Errorf("the mounted authentication file: %w", err)
		}
	}
	return r.publish(f)
}

// served reads the files of the served directory.
func (r *Reloader) served() (files, error) {
	return r.readFrom(r.c.ServedDir, filepath.Join(r.c.ServedDir, filepath.Base(r.c.AuthFile)))
}

// publish makes f the served directory's content, at once.
func (r *Reloader) publish(f files) error {
	d := r.c.ServedDir
	gen := "..gen-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	dir := filepath.Join(d, gen)
	if err := os.Mkdir(dir, 0o750); err != nil {
		return err
	}
	names := map[string][]byte{}
	if r.c.TLSDir != "" {
		names[material.CertKey], names[material.KeyKey] = f.cert, f.key
		if f.ca != nil {
			names[material.CAKey] = f.ca
		}
	}
	if r.c.AuthFile != "" {
		names[filepath.Base(r.c.AuthFile)] = f.auth
	}
	for name, b := range names {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o440); err != nil {
			return err
		}
	}
	old, _ := os.Readlink(filepath.Join(d, servedData))
	tmp := filepath.Join(d, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(gen, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(d, servedData)); err != nil {
		return err
	}
	for name := range names {
		link := filepath.Join(d, name)
		if target, err := os.Readlink(link); err == nil && target == filepath.Join(servedData, name) {
			continue
		}
		_ = os.Remove(link)
		if err := os.Symlink(filepath.Join(servedData, name), link); err != nil {
			return err
		}
	}
	if old != "" && old != gen {
		_ = os.RemoveAll(filepath.Join(d, old))
	}
	return nil
}
