package main

import (
	"flag"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/operator"
)

// The images the operator runs come from its command line, else from the
// environment (MEMCACHED_IMAGE, as the tutorial's operator reads it;
// EXPORTER_IMAGE; RELOADER_IMAGE), else the built-in ones: read as main
// reads them.
func TestImagesDefaultToTheEnvironment(t *testing.T) {
	type images struct{ memcached, exporter, reloader string }
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want images
	}{
		{"nothing set", nil, nil, images{desired.DefaultImage, desired.DefaultExporterImage, ""}},
		{"the environment", map[string]string{"MEMCACHED_IMAGE": "registry.example.com/memcached:1.6.40", "EXPORTER_IMAGE": "registry.example.com/exporter:1", "RELOADER_IMAGE": "registry.example.com/operator:2"},
			nil, images{"registry.example.com/memcached:1.6.40", "registry.example.com/exporter:1", "registry.example.com/operator:2"}},
		{"an empty variable is unset", map[string]string{"MEMCACHED_IMAGE": "", "EXPORTER_IMAGE": ""}, nil, images{desired.DefaultImage, desired.DefaultExporterImage, ""}},
		{"one variable, the others built in", map[string]string{"MEMCACHED_IMAGE": "m:1"}, nil, images{"m:1", desired.DefaultExporterImage, ""}},
		{"the flags over the environment", map[string]string{"MEMCACHED_IMAGE": "m:1", "EXPORTER_IMAGE": "e:1"},
			[]string{"--memcached-image=m:2", "--exporter-image", "e:2", "--reloader-image=r:2"}, images{"m:2", "e:2", "r:2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s, err := parseSettings(tt.args, func(k string) string { return tt.env[k] })
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(images{s.defaultImage, s.exporterImage, s.reloaderImage}).To(Equal(tt.want))
		})
	}
}

func TestEmptyImagesAreRefused(t *testing.T) {
	g := NewWithT(t)
	_, err := parseSettings([]string{"--memcached-image= "}, func(string) string { return "" })
	g.Expect(err).To(MatchError(ContainSubstring("the default memcached image is empty")))
	_, err = parseSettings([]string{"--exporter-image="}, func(string) string { return "" })
	g.Expect(err).To(MatchError(ContainSubstring("the exporter image is empty")))
}

// Settings main passes on: the production resync by default, and the
// flags controller-runtime registers (--kubeconfig) still accepted.
func TestSettingsDefaults(t *testing.T) {
	g := NewWithT(t)
	s, err := parseSettings([]string{"--kubeconfig=/dev/null", "--zap-log-level=error"}, func(string) string { return "" })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.syncPeriod).To(Equal(operator.DefaultSyncPeriod))
	g.Expect(flag.CommandLine.Lookup("kubeconfig").Value.String()).To(Equal("/dev/null"))
}

func TestParseNamespaces(t *testing.T) {
	tests := []struct {
		list    string
		want    []string
		wantErr bool
	}{
		{"", nil, false},
		{"cache", []string{"cache"}, false},
		{" a , b,,a ", []string{"a", "b"}, false},
		{"a,Not_A_Name", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.list, func(t *testing.T) {
			g := NewWithT(t)
			got, err := parseNamespaces(tt.list)
			if tt.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// Taking over the tutorial's Deployments is off unless asked for, on the
// command line or through $TAKE_OVER (OLM's Subscription config sets only
// environment variables).
func TestTakeOverIsOptIn(t *testing.T) {
	tests := []struct {
		name string
		env  string
		args []string
		want bool
	}{
		{"nothing set", "", nil, false},
		{"the flag", "", []string{"--take-over"}, true},
		{"the environment", "true", nil, true},
		{"the flag over the environment", "true", []string{"--take-over=false"}, false},
		{"not a boolean", "yes please", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s, err := parseSettings(tt.args, func(k string) string {
				if k == "TAKE_OVER" {
					return tt.env
				}
				return ""
			})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.takeOver).To(Equal(tt.want))
		})
	}
}
