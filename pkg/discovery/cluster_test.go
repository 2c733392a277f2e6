package discovery

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBodyParsesBack(t *testing.T) {
	for _, c := range []Cluster{
		{Version: 1},
		{Version: 3, Nodes: []Node{{Host: "a-0.a.ns.svc", IP: "10.1.2.3", Port: 11211}}},
		{Version: 1 << 40, Nodes: []Node{
			{Host: "a-0.a.ns.svc", IP: "10.1.2.3", Port: 11211},
			{Host: "a-1.a.ns.svc", IP: "fd00::1", Port: 1},
		}},
	} {
		got, err := Parse(c.Body())
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.Body(), err)
		}
		if diff := cmp.Diff(c, got); diff != "" {
			t.Errorf("Parse(Body()) (-want +got):\n%s", diff)
		}
	}
}

func TestParseRefusesWhatAClientCannotUse(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"empty", "", "no line of nodes"},
		{"no version", "\na|10.0.0.1|11211\n", "not a positive number"},
		{"version 0", "0\na|10.0.0.1|11211\n", "not a positive number"},
		{"two fields", "1\na|11211\n", "not host|ip|port"},
		{"no host", "1\n|10.0.0.1|11211\n", "no host name"},
		{"no address", "1\na||11211\n", "no IP address"},
		{"a name for an address", "1\na|a|11211\n", "no IP address"},
		{"port 0", "1\na|10.0.0.1|0\n", "no port"},
		{"port too big", "1\na|10.0.0.1|65536\n", "no port"},
		{"huge", "1\n" + strings.Repeat("a", maxClusterBytes), "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%.40q) = %v, want an error saying %q", tc.body, err, tc.want)
			}
		})
	}
}

func TestBodyIsElastiCaches(t *testing.T) {
	c := Cluster{Version: 12, Nodes: []Node{
		{Host: "myCluster.pc4ldq.0001.use1.cache.amazonaws.com", IP: "10.82.235.120", Port: 11211},
		{Host: "myCluster.pc4ldq.0002.use1.cache.amazonaws.com", IP: "10.80.249.27", Port: 11211},
	}}
	// The example of ElastiCache's documentation.
	want := "12\nmyCluster.pc4ldq.0001.use1.cache.amazonaws.com|10.82.235.120|11211 myCluster.pc4ldq.0002.use1.cache.amazonaws.com|10.80.249.27|11211\n"
	if got := string(c.Body()); got != want {
		t.Errorf("Body() = %q, want %q", got, want)
	}
}
