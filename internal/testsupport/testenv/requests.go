package testenv

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Request is one HTTP request a client sent, with the answer's status code.
type Request struct {
	// At is when the answer came.
	At          time.Time
	Method      string
	Path        string
	Query       url.Values
	ContentType string
	Watch       bool
	Code        int
	// Body is the body of a DELETE (its options: preconditions,
	// propagation) or of a PATCH other than an apply (the patch); empty
	// for other requests.
	Body string
}

func (r Request) String() string {
	return fmt.Sprintf("%s %s (%s) -> %d", r.Method, r.Path, r.ContentType, r.Code)
}

// IsApply reports whether r is a server-side apply.
func (r Request) IsApply() bool {
	return r.Method == http.MethodPatch && strings.HasPrefix(r.ContentType, "application/apply-patch")
}

// Requests records every request sent through the configs it wraps: an
// honest count of what a controller costs the apiserver, taken at the
// transport rather than from the controller's own bookkeeping.
type Requests struct {
	mu   sync.Mutex
	list []Request
}

// Wrap returns a copy of cfg whose requests are recorded.
func (rs *Requests) Wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper{rt: rt, rs: rs}
	})
	return cfg
}

// Mark is the number of requests recorded so far: pass it to Since.
func (rs *Requests) Mark() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.list)
}

// Since returns the requests recorded after mark that match all of filters.
func (rs *Requests) Since(mark int, filters ...func(Request) bool) []Request {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []Request
next:
	for _, r := range rs.list[mark:] {
		for _, f := range filters {
			if !f(r) {
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}

// NotWatch matches requests that are not watches (a watch stays open).
func NotWatch(r Request) bool { return !r.Watch }

// Wrote matches the requests that may have changed something: a write
// the apiserver did not refuse.
func Wrote(r Request) bool { return r.Method != http.MethodGet && r.Code < 400 }

// PathContains matches requests whose path contains s.
func PathContains(s string) func(Request) bool {
	return func(r Request) bool { return strings.Contains(r.Path, s) }
}

type roundTripper struct {
	rt http.RoundTripper
	rs *Requests
}

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	r := Request{
		At:          time.Now(),
		Method:      req.Method,
		Path:        req.URL.Path,
		Query:       req.URL.Query(),
		ContentType: req.Header.Get("Content-Type"),
		Watch:       req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1",
	}
	if (req.Method == http.MethodDelete || (req.Method == http.MethodPatch && !r.IsApply())) && req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			raw, _ := io.ReadAll(body)
			r.Body = string(raw)
		}
	}
	if resp != nil {
		r.Code = resp.StatusCode
	}
	t.rs.mu.Lock()
	t.rs.list = append(t.rs.list, r)
	t.rs.mu.Unlock()
	return resp, err
}
