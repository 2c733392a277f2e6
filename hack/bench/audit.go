package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// phase is what one phase of a run cost.
type phase struct {
	name     string
	wall     time.Duration
	requests map[string]int // "verb resource" -> count
	writes   int            // create/update/patch/delete of anything but events: the objects the operator makes, the Memcacheds' status, pods (the membership they are told of, a rollout's steps)
	events   int            // event writes
	conflict int
	cpu      float64
	rss      int64              // peak resident set, KiB
	stack    map[string]float64 // CPU seconds of each process of the local cluster
	// stages and internals: where the Memcacheds' time went (phases that
	// change Memcacheds).
	stages    []stage
	internals internals
}

// total is the number of the operator's requests in the phase.
func (p phase) total() int {
	n := 0
	for _, v := range p.requests {
		n += v
	}
	return n
}

// reads is the number of the operator's gets and lists in the phase
// (watches not included).
func (p phase) reads() int {
	n := 0
	for k, v := range p.requests {
		if strings.HasPrefix(k, "get ") || strings.HasPrefix(k, "list ") {
			n += v
		}
	}
	return n
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// auditEvent is the part of an audit.k8s.io/v1 Event the bench reads.
type auditEvent struct {
	Stage     string                    `json:"stage"`
	Verb      string                    `json:"verb"`
	User      struct{ Username string } `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

func countAudit(path string, from int64, p *phase) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening the audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return err
	}
	p.requests = map[string]int{}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<24)
	for s.Scan() {
		var e auditEvent
		if json.Unmarshal(s.Bytes(), &e) != nil || e.User.Username != operatorUser || e.Stage != "ResponseComplete" {
			continue
		}
		res := "-"
		if e.ObjectRef != nil {
			res = e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				res += "/" + e.ObjectRef.Subresource
			}
		}
		p.requests[e.Verb+" "+res]++
		switch e.Verb {
		case "create", "update", "patch", "delete":
			if strings.HasPrefix(res, "events") {
				p.events++
			} else {
				p.writes++
			}
		}
		if e.ResponseStatus != nil && e.ResponseStatus.Code == http.StatusConflict {
			p.conflict++
		}
	}
	return s.Err()
}
