package main

import (
	"fmt"
	"sort"
	"strings"
	"unicode"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/example/memcached-operator/pkg/owned"
)

// The OLM console's descriptors (x-descriptors) the CSV uses.
const (
	xPodCount   = "urn:alm:descriptor:com.tectonic.ui:podCount"
	xNumber     = "urn:alm:descriptor:com.tectonic.ui:number"
	xText       = "urn:alm:descriptor:com.tectonic.ui:text"
	xBoolean    = "urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
	xResources  = "urn:alm:descriptor:com.tectonic.ui:resourceRequirements"
	xAdvanced   = "urn:alm:descriptor:com.tectonic.ui:advanced"
	xSecret     = "urn:alm:descriptor:io.kubernetes:Secret"
	xConditions = "urn:alm:descriptor:io.kubernetes.conditions"
	xFieldGroup = "urn:alm:descriptor:com.tectonic.ui:fieldGroup:"
	xSelect     = "urn:alm:descriptor:com.tectonic.ui:select:"
	xAffinity   = "urn:alm:descriptor:com.tectonic.ui:nodeAffinity"
)

// opaque fields are described as a whole: they are Kubernetes' own types
// (copied) or maps, and the console has one widget, or none, for each.
var opaque = map[string][]string{
	"affinity":                        {xAffinity, xAdvanced},
	"tolerations":                     {xAdvanced},
	"topologySpreadConstraints":       {xAdvanced},
	"imagePullSecrets":                {xAdvanced},
	"nodeSelector":                    {xAdvanced},
	"podLabels":                       {xAdvanced},
	"podAnnotations":                  {xAdvanced},
	"resources":                       {xResources},
	"monitoring.resources":            {xResources},
	"monitoring.serviceMonitorLabels": {xAdvanced},
	"conditions":                      {xConditions},
}

// ownedCRD describes the Memcached CRD for the CSV: a descriptor for every
// field of spec and status (each field of the project's own nested objects
// too), from the CRD's schema and its descriptions, and the kinds a
// Memcached owns.
func ownedCRD(crd *apiextensionsv1.CustomResourceDefinition) (operatorsv1alpha1.CRDDescription, error) {
	var served *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Storage {
			served = &crd.Spec.Versions[i]
		}
	}
	if served == nil || served.Schema == nil || served.Schema.OpenAPIV3Schema == nil {
		return operatorsv1alpha1.CRDDescription{}, fmt.Errorf("the CRD has no stored version with a schema")
	}
	root := served.Schema.OpenAPIV3Schema
	spec, ok := root.Properties["spec"]
	if !ok {
		return operatorsv1alpha1.CRDDescription{}, fmt.Errorf("the CRD's schema has no spec")
	}
	status, ok := root.Properties["status"]
	if !ok {
		return operatorsv1alpha1.CRDDescription{}, fmt.Errorf("the CRD's schema has no status")
	}
	var specs []operatorsv1alpha1.SpecDescriptor
	for _, d := range describe(spec, "") {
		specs = append(specs, operatorsv1alpha1.SpecDescriptor(d))
	}
	var statuses []operatorsv1alpha1.StatusDescriptor
	for _, d := range describe(status, "") {
		if d.Path == "readyReplicas" || d.Path == "replicas" {
			d.XDescriptors = []string{xPodCount}
		}
		statuses = append(statuses, operatorsv1alpha1.StatusDescriptor(d))
	}
	return operatorsv1alpha1.CRDDescription{
		Name:              crd.Name,
		Version:           served.Name,
		Kind:              crd.Spec.Names.Kind,
		DisplayName:       crd.Spec.Names.Kind,
		Description:       firstSentence(root.Description),
		Resources:         ownedResources(),
		SpecDescriptors:   specs,
		StatusDescriptors: statuses,
	}, nil
}

// descriptor is the shape spec and status descriptors share.
type descriptor = operatorsv1alpha1.SpecDescriptor

// describe returns a descriptor for each property of s under prefix, and
// for each property of the nested objects that are not opaque, in the
// schema's order of names.
func describe(s apiextensionsv1.JSONSchemaProps, prefix string) []descriptor {
	var out []descriptor
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := s.Properties[n]
		path := prefix + n
		d := descriptor{
			Path:        path,
			DisplayName: displayName(n),
			Description: firstSentence(p.Description),
		}
		if prefix != "" {
			d.XDescriptors = append(d.XDescriptors, xFieldGroup+strings.TrimSuffix(prefix, "."))
		}
		if x, ok := opaque[path]; ok {
			d.XDescriptors = append(d.XDescriptors, x...)
			out = append(out, d)
			continue
		}
		switch {
		case p.Type == "object" && len(p.Properties) > 0:
			// The object itself, then its fields in its field group.
			out = append(out, d)
			out = append(out, describe(p, path+".")...)
			continue
		case n == "size":
			d.XDescriptors = append(d.XDescriptors, xPodCount)
		case n == "secretName":
			d.XDescriptors = append(d.XDescriptors, xSecret)
		case len(p.Enum) > 0:
			for _, e := range p.Enum {
				d.XDescriptors = append(d.XDescriptors, xSelect+strings.Trim(string(e.Raw), `"`))
			}
		case p.Type == "boolean":
			d.XDescriptors = append(d.XDescriptors, xBoolean)
		case p.Type == "integer" || p.Type == "number":
			d.XDescriptors = append(d.XDescriptors, xNumber)
		case p.Type == "object" || p.Type == "array":
			d.XDescriptors = append(d.XDescriptors, xAdvanced)
		default:
			d.XDescriptors = append(d.XDescriptors, xText)
		}
		out = append(out, d)
	}
	return out
}

// displayNames are the names displayName cannot make.
var displayNames = map[string]string{
	"tls":            "TLS",
	"memoryLimitMiB": "Memory Limit (MiB)",
}

// displayName turns a field name into words: memoryLimitMiB → Memory Limit MiB.
func displayName(name string) string {
	if n, ok := displayNames[name]; ok {
		return n
	}
	var b strings.Builder
	r := []rune(name)
	for i, c := range r {
		switch {
		case i == 0:
			c = unicode.ToUpper(c)
		case unicode.IsUpper(c) && unicode.IsLower(r[i-1]):
			b.WriteRune(' ')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// firstSentence is the first sentence of a schema description, which
// controller-gen takes from the field's comment.
func firstSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

// ownedResources are the kinds the operator makes for a Memcached, as the
// CSV lists them: owned.Kinds.
func ownedResources() []operatorsv1alpha1.APIResourceReference {
	var out []operatorsv1alpha1.APIResourceReference
	for _, d := range owned.Kinds {
		out = append(out, operatorsv1alpha1.APIResourceReference{Kind: string(d.Kind), Version: d.Resource.Version})
	}
	return out
}
