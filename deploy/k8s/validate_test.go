// Package k8s holds Vigil's Kubernetes manifests and the test that validates them. No schema
// registry is reachable from CI, so instead of kubeconform the test decodes every manifest
// strictly into the k8s.io/api types (an unknown or misspelt field fails), then checks what a
// schema cannot: selectors match, probes point at declared ports, every referenced ConfigMap and
// Secret exists, every container is non-root with resource requests.
package k8s

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// manifests are every object of every *.yaml file in this directory but the kustomization.
type manifests struct {
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	configMaps  map[string]*corev1.ConfigMap
	secrets     map[string]*corev1.Secret
	pdbs        []*policyv1.PodDisruptionBudget
	files       []string
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

func load(t *testing.T) *manifests {
	t.Helper()
	m := &manifests{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	paths, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if p == "kustomization.yaml" {
			continue
		}
		m.files = append(m.files, p)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range docSep.Split(string(data), -1) {
			if len(bytes.TrimSpace([]byte(doc))) == 0 {
				continue
			}
			if err := m.add([]byte(doc)); err != nil {
				t.Errorf("%s, document %d: %v", p, i+1, err)
			}
		}
	}
	return m
}

func (m *manifests) add(doc []byte) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	strict := func(into any) error { return yaml.UnmarshalStrict(doc, into) }
	switch head.APIVersion + " " + head.Kind {
	case "apps/v1 Deployment":
		d := &appsv1.Deployment{}
		m.deployments = append(m.deployments, d)
		return strict(d)
	case "v1 Service":
		s := &corev1.Service{}
		m.services = append(m.services, s)
		return strict(s)
	case "v1 ConfigMap":
		c := &corev1.ConfigMap{}
		if err := strict(c); err != nil {
			return err
		}
		m.configMaps[c.Name] = c
	case "v1 Secret":
		s := &corev1.Secret{}
		if err := strict(s); err != nil {
			return err
		}
		m.secrets[s.Name] = s
	case "policy/v1 PodDisruptionBudget":
		p := &policyv1.PodDisruptionBudget{}
		m.pdbs = append(m.pdbs, p)
		return strict(p)
	case "v1 Namespace":
		return strict(&corev1.Namespace{})
	default:
		return fmt.Errorf("unexpected %s %s", head.APIVersion, head.Kind)
	}
	return nil
}

func TestManifestsDecodeStrictly(t *testing.T) {
	m := load(t)
	var names []string
	for _, d := range m.deployments {
		names = append(names, d.Name)
	}
	slices.Sort(names)
	want := []string{"chat", "gateway", "lobby", "locks", "reservations", "room"}
	if !slices.Equal(names, want) {
		t.Fatalf("deployments = %v, want %v", names, want)
	}
	t.Logf("%d files: %d deployments, %d services, %d config maps, %d secrets, %d disruption budgets, all decoded strictly with k8s.io/api",
		len(m.files), len(m.deployments), len(m.services), len(m.configMaps), len(m.secrets), len(m.pdbs))
}

func TestKustomizationListsEveryFile(t *testing.T) {
	m := load(t)
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	for _, f := range m.files {
		if !slices.Contains(k.Resources, f) {
			t.Errorf("kustomization.yaml does not list %s", f)
		}
	}
}

func TestDeploymentsAreRunnable(t *testing.T) {
	m := load(t)
	for _, d := range m.deployments {
		t.Run(d.Name, func(t *testing.T) {
			sel := d.Spec.Selector.MatchLabels
			if len(sel) == 0 || !subset(sel, d.Spec.Template.Labels) {
				t.Errorf("selector %v does not match the pod labels %v", sel, d.Spec.Template.Labels)
			}
			pod := d.Spec.Template.Spec
			if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
				t.Errorf("pod may run as root")
			}
			for _, c := range pod.Containers {
				if c.Image == "" {
					t.Errorf("%s: no image", c.Name)
				}
				if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
					t.Errorf("%s: no cpu and memory requests", c.Name)
				}
				if c.ReadinessProbe == nil || c.LivenessProbe == nil {
					t.Errorf("%s: want readiness and liveness probes", c.Name)
				}
				for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
					if p != nil && !probeHitsPort(p, c.Ports) {
						t.Errorf("%s: probe %+v is not on a declared port", c.Name, p.ProbeHandler)
					}
				}
				for _, e := range c.EnvFrom {
					if e.ConfigMapRef != nil && m.configMaps[e.ConfigMapRef.Name] == nil {
						t.Errorf("%s: envFrom config map %q does not exist", c.Name, e.ConfigMapRef.Name)
					}
				}
				for _, e := range c.Env {
					if e.ValueFrom == nil {
						continue
					}
					if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
						if cm := m.configMaps[r.Name]; cm == nil || cm.Data[r.Key] == "" {
							t.Errorf("%s: env %s wants config map key %s/%s, which does not exist", c.Name, e.Name, r.Name, r.Key)
						}
					}
					if r := e.ValueFrom.SecretKeyRef; r != nil && m.secrets[r.Name] == nil {
						t.Errorf("%s: env %s wants secret %q, which does not exist", c.Name, e.Name, r.Name)
					}
				}
			}
		})
	}
}

func TestServicesSelectPods(t *testing.T) {
	m := load(t)
	for _, s := range m.services {
		var target *appsv1.Deployment
		for _, d := range m.deployments {
			if len(s.Spec.Selector) > 0 && subset(s.Spec.Selector, d.Spec.Template.Labels) {
				target = d
			}
		}
		if target == nil {
			t.Errorf("service %s selects no deployment's pods", s.Name)
			continue
		}
		for _, p := range s.Spec.Ports {
			if !portDeclared(p.TargetPort, target.Spec.Template.Spec.Containers[0].Ports) {
				t.Errorf("service %s: target port %s is not a port of %s", s.Name, p.TargetPort.String(), target.Name)
			}
		}
	}
	for _, p := range m.pdbs {
		found := false
		for _, d := range m.deployments {
			found = found || subset(p.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
		}
		if !found {
			t.Errorf("disruption budget %s selects no deployment's pods", p.Name)
		}
	}
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func probeHitsPort(p *corev1.Probe, ports []corev1.ContainerPort) bool {
	switch {
	case p.GRPC != nil:
		return portDeclared(intstr.FromInt32(p.GRPC.Port), ports)
	case p.HTTPGet != nil:
		return portDeclared(p.HTTPGet.Port, ports)
	case p.TCPSocket != nil:
		return portDeclared(p.TCPSocket.Port, ports)
	}
	return false
}

func portDeclared(p intstr.IntOrString, ports []corev1.ContainerPort) bool {
	for _, cp := range ports {
		if (p.Type == intstr.String && p.StrVal == cp.Name) || (p.Type == intstr.Int && p.IntVal == cp.ContainerPort) {
			return true
		}
	}
	return false
}
