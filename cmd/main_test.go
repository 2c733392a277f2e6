package main

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/example/memcached-operator/pkg/desired"
)

func TestImagesDefaultToTheEnvironment(t *testing.T) {
	tests := []struct {
		name        string
		env         map[string]string
		variable    string
		image, want string
	}{
		{"MEMCACHED_IMAGE set", map[string]string{"MEMCACHED_IMAGE": "registry.example.com/memcached:1.6.40"}, "MEMCACHED_IMAGE", desired.DefaultImage, "registry.example.com/memcached:1.6.40"},
		{"MEMCACHED_IMAGE unset", nil, "MEMCACHED_IMAGE", desired.DefaultImage, desired.DefaultImage},
		{"MEMCACHED_IMAGE empty", map[string]string{"MEMCACHED_IMAGE": ""}, "MEMCACHED_IMAGE", desired.DefaultImage, desired.DefaultImage},
		{"EXPORTER_IMAGE set", map[string]string{"EXPORTER_IMAGE": "registry.example.com/exporter:1"}, "EXPORTER_IMAGE", desired.DefaultExporterImage, "registry.example.com/exporter:1"},
		{"EXPORTER_IMAGE unset, MEMCACHED_IMAGE set", map[string]string{"MEMCACHED_IMAGE": "m:1"}, "EXPORTER_IMAGE", desired.DefaultExporterImage, desired.DefaultExporterImage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := imageDefault(func(k string) string { return tt.env[k] }, tt.variable, tt.image)
			NewWithT(t).Expect(got).To(Equal(tt.want))
		})
	}
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
