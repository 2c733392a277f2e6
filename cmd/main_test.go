package main

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/example/memcached-operator/pkg/desired"
)

func TestMemcachedImageDefaultsToTheEnvironment(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"MEMCACHED_IMAGE set", map[string]string{"MEMCACHED_IMAGE": "registry.example.com/memcached:1.6.40"}, "registry.example.com/memcached:1.6.40"},
		{"MEMCACHED_IMAGE unset", nil, desired.DefaultImage},
		{"MEMCACHED_IMAGE empty", map[string]string{"MEMCACHED_IMAGE": ""}, desired.DefaultImage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := memcachedImageDefault(func(k string) string { return tt.env[k] })
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
