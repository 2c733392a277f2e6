package autoscale

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

// The operator reads a pod's signals as the pod serves them, over HTTP on
// SignalsPort; a pod that cannot read its memcached answers 503, which
// Fetch returns as an error with the pod's words; another path is 404.
func TestThePodsSignalsAreFetchedAsServed(t *testing.T) {
	now := int64(1000)
	items := []string{"key=a exp=-1 la=990 cas=1 fetch=yes cls=1 size=42\r\n"}
	srv := &Server{Dial: fakeMemcached(&now, &items), Log: slog.New(slog.DiscardHandler)}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.124", "11213"))
	if err != nil {
		t.Fatal("the signals' port on 127.0.0.124:", err)
	}
	web := &http.Server{Handler: srv}
	go web.Serve(ln)
	defer web.Close()

	sig, err := Fetch(context.Background(), http.DefaultClient, "127.0.0.124", 60)
	if err != nil || sig.Time != 1000 || sig.WorkingSetBytes != 42 || sig.WorkingSetSeconds != 60 {
		t.Fatalf("%+v %v", sig, err)
	}
	if sig, err := Fetch(context.Background(), http.DefaultClient, "127.0.0.124", 0); err != nil || sig.WorkingSetBytes != -1 {
		t.Fatalf("without a window: %+v %v", sig, err)
	}
	for _, path := range []string{"/", "/metrics"} {
		resp, err := http.Get("http://127.0.0.124:11213" + path)
		if err != nil || resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: %v %v", path, resp.Status, err)
		}
		resp.Body.Close()
	}
	resp, err := http.Post("http://127.0.0.124:11213"+SignalsPath, "text/plain", nil)
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("POST: %v %v", resp.Status, err)
	}
	resp.Body.Close()

	srv.Dial = func(context.Context) (net.Conn, error) { return nil, errors.New("memcached is not answering") }
	if _, err := Fetch(context.Background(), http.DefaultClient, "127.0.0.124", 60); err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "memcached is not answering") {
		t.Fatalf("a pod that cannot read memcached: %v", err)
	}
}
