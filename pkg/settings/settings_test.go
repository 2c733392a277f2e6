package settings_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/example/memcached-operator/pkg/settings"
)

func TestOnlyTheOperatorsFlagsAreTaken(t *testing.T) {
	tests := []struct {
		name       string
		annotation string
		want       []string
		refused    bool
	}{
		{name: "none", annotation: "", want: []string{}},
		{name: "every flag the operator writes", annotation: "--memory-limit=64\n-vv\n--conn-limit=1024\n--threads=4\n--max-item-size=2097152\n",
			want: []string{"--memory-limit=64", "-vv", "--conn-limit=1024", "--threads=4", "--max-item-size=2097152"}},
		{name: "TLS verification turned off", annotation: "--threads=4\n-Z\n-o ssl_verify_mode=0", want: []string{"--threads=4"}, refused: true},
		{name: "a UDP port", annotation: "--udp-port=11211", want: []string{}, refused: true},
		{name: "a value past its bound", annotation: "--threads=65\n--memory-limit=7", want: []string{}, refused: true},
		{name: "the lower bounds", annotation: "--threads=1\n--memory-limit=8\n--conn-limit=16\n--max-item-size=524288",
			want: []string{"--threads=1", "--memory-limit=8", "--conn-limit=16", "--max-item-size=524288"}},
		{name: "the upper bounds", annotation: "--threads=64\n--memory-limit=65536\n--conn-limit=65536\n--max-item-size=1073741824",
			want: []string{"--threads=64", "--memory-limit=65536", "--conn-limit=65536", "--max-item-size=1073741824"}},
		{name: "an item size not a multiple of 512Ki", annotation: "--max-item-size=1000000", want: []string{}, refused: true},
		{name: "a value that is more than a number", annotation: "--threads=4 -U 11211\n--conn-limit=+20", want: []string{}, refused: true},
		{name: "too verbose", annotation: "-vvv", want: []string{}, refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := settings.Parse(tt.annotation)
			g.Expect(got).To(Equal(tt.want))
			g.Expect(err != nil).To(Equal(tt.refused), "%v", err)
		})
	}
}

func TestSettingsReadBackAsWritten(t *testing.T) {
	g := NewWithT(t)
	flags := []string{"--memory-limit=128", "-v", "--threads=2"}
	got, err := settings.Parse(settings.Format(flags))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(flags))
}
