package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// k8sObject is the part of a Kubernetes object the example test reads.
type k8sObject struct {
	Kind string `yaml:"kind"`
	Spec struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Name string   `yaml:"name"`
					Args []string `yaml:"args"`
					Env  []struct {
						Name string `yaml:"name"`
					} `yaml:"env"`
					LivenessProbe  k8sProbe `yaml:"livenessProbe"`
					ReadinessProbe k8sProbe `yaml:"readinessProbe"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// k8sProbe is the part of a container probe the example test reads.
type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
	} `yaml:"httpGet"`
}

// TestKubernetesExampleUsesServesFlags parses deploy/kubernetes's manifests
// and checks that every --flag of the serve container's args and every
// ITERION_* variable of its env appears in `iterion serve -h`, run
// in-process: the example must not drift from the binary it deploys. Its
// probes use each endpoint for what it is: /healthz for liveness, /readyz
// for readiness.
func TestKubernetesExampleUsesServesFlags(t *testing.T) {
	const manifest = "../../deploy/kubernetes/iterion.yaml"
	raw, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var help bytes.Buffer
	if err := serve(context.Background(), []string{"-h"}, env(), &help); err != nil {
		t.Fatalf("serve -h: %v, want the usage and nil", err)
	}
	// flag's usage lists "  -name type" and our twins as "[$ITERION_NAME]".
	helpFlags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(help.String(), -1) {
		helpFlags[m[1]] = true
	}
	helpVars := map[string]bool{}
	for _, m := range regexp.MustCompile(`\[\$(ITERION_[A-Z0-9_]+)\]`).FindAllStringSubmatch(help.String(), -1) {
		helpVars[m[1]] = true
	}
	if len(helpFlags) == 0 || len(helpVars) == 0 {
		t.Fatalf("serve -h: found %d flags and %d variables in %q, want both", len(helpFlags), len(helpVars), help.String())
	}

	var missing []string
	var deployments int
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var obj k8sObject
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v, want valid YAML documents", manifest, err)
		}
		if obj.Kind != "Deployment" {
			continue
		}
		deployments++
		for _, c := range obj.Spec.Template.Spec.Containers {
			if len(c.Args) == 0 || c.Args[0] != "serve" {
				t.Errorf("container %s args %v: got no serve subcommand first, want serve", c.Name, c.Args)
				continue
			}
			for _, a := range c.Args[1:] {
				name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
				if !strings.HasPrefix(a, "-") || !helpFlags[name] {
					missing = append(missing, "flag --"+name)
				}
			}
			if got := c.LivenessProbe.HTTPGet.Path; got != "/healthz" {
				t.Errorf("container %s livenessProbe path: got %q, want /healthz: a stuck holder is restarted", c.Name, got)
			}
			if got := c.ReadinessProbe.HTTPGet.Path; got != "/readyz" {
				t.Errorf("container %s readinessProbe path: got %q, want /readyz: a replica whose stores do not answer takes no traffic", c.Name, got)
			}
			for _, e := range c.Env {
				if strings.HasPrefix(e.Name, "ITERION_") && !helpVars[e.Name] {
					missing = append(missing, "variable "+e.Name)
				}
			}
		}
	}
	if deployments != 1 {
		t.Fatalf("%s: got %d Deployments, want 1", manifest, deployments)
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("%s uses %s: got absent from `iterion serve -h`, want every flag and variable the example uses to exist", manifest, strings.Join(missing, ", "))
	}
}
