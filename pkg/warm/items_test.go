package warm

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The runner counts the restored items over the connection memcached's
// command line asks for: TLS when it enables it, its own certificate when
// it verifies clients', and the first user of its authentication file.
func TestTheConnectionFollowsMemcachedsCommandLine(t *testing.T) {
	dir := t.TempDir()
	auth := filepath.Join(dir, "auth")
	if err := os.WriteFile(auth, []byte("first:one\nsecond:two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		command []string
		tls     bool
		login   string
		wantErr bool
	}{
		{name: "plain", command: []string{"memcached", "--port=11211"}},
		{name: "TLS", command: []string{"memcached", "--enable-ssl", "--extended=ssl_chain_cert=/x/tls.crt,ssl_key=/x/tls.key"}, tls: true},
		{name: "authentication", command: []string{"memcached", "--auth-file=" + auth}, login: "first:one"},
		// Its certificate is read when memcached verifies clients'.
		{name: "client certificates", command: []string{"memcached", "--enable-ssl", "--extended=ssl_chain_cert=/missing/tls.crt,ssl_key=/missing/tls.key,ssl_ca_cert=/missing/ca.crt,ssl_verify_mode=2"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := filesOf(tc.command).Read()
			if err != nil && !tc.wantErr {
				t.Fatal(err)
			}
			o, oerr := m.Options("localhost:11211")
			err = errors.Join(err, oerr)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if o.TLS != tc.tls || o.Login != tc.login || o.Address != "localhost:11211" {
				t.Errorf("got %+v, want TLS %v, login %q", o, tc.tls, tc.login)
			}
		})
	}
}
