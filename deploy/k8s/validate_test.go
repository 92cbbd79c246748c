// Package k8s holds Vigil's Kubernetes manifests and the test that validates them. No schema
// registry is reachable from CI, so instead of kubeconform the test decodes every manifest
// strictly into the k8s.io/api types (an unknown or misspelt field fails), then checks what a
// schema cannot: selectors match, probes point at declared ports, every referenced ConfigMap and
// Secret (and Secret key) exists, every container is non-root with resource requests, and the
// deployment is closed by default (API keys, HTTPS, mutual TLS, metrics off the public port).
package k8s

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/pkg/redisx"
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
				for _, vm := range c.VolumeMounts {
					if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name }) {
						t.Errorf("%s: mounts volume %q, which the pod does not declare", c.Name, vm.Name)
					}
				}
			}
			for _, v := range pod.Volumes {
				if v.Secret == nil {
					continue
				}
				sec := m.secrets[v.Secret.SecretName]
				if sec == nil {
					t.Errorf("volume %s wants secret %q, which does not exist", v.Name, v.Secret.SecretName)
					continue
				}
				for _, it := range v.Secret.Items {
					if _, ok := sec.StringData[it.Key]; !ok {
						t.Errorf("volume %s wants key %q of secret %s, which it does not have", v.Name, it.Key, sec.Name)
					}
				}
			}
		})
	}
}

// TestClosedByDefault: the gateway refuses to start without API keys and serves HTTPS with
// /metrics on a port its Service does not expose; every service serves mutual TLS; every
// certificate and key a process is told to read lies in a mounted Secret.
func TestClosedByDefault(t *testing.T) {
	m := load(t)
	for _, d := range m.deployments {
		t.Run(d.Name, func(t *testing.T) {
			pod := d.Spec.Template.Spec
			c := pod.Containers[0]
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			want := []string{"VIGIL_TLS_CA", "VIGIL_TLS_CERT", "VIGIL_TLS_KEY"}
			if d.Name == "gateway" {
				want = append(want, "VIGIL_API_KEYS_FILE", "VIGIL_SOCKET_TOKEN_SECRET_FILE", "VIGIL_GATEWAY_TLS_CERT", "VIGIL_GATEWAY_TLS_KEY")
				if env["VIGIL_REQUIRE_AUTH"] != "true" {
					t.Errorf("VIGIL_REQUIRE_AUTH = %q, want true: a gateway without keys must not start", env["VIGIL_REQUIRE_AUTH"])
				}
				if env["VIGIL_METRICS_ADDR"] == "" {
					t.Errorf("VIGIL_METRICS_ADDR unset: /metrics needs its operator-only port")
				}
				for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
					if p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
						t.Errorf("probe %+v: want an HTTPS GET (the gateway serves only HTTPS)", p)
					}
				}
				for _, s := range m.services {
					if s.Name != "gateway" {
						continue
					}
					for _, p := range s.Spec.Ports {
						if p.TargetPort.String() == "metrics" || p.TargetPort.IntValue() == 9090 {
							t.Errorf("service gateway exposes the metrics port (%s)", p.Name)
						}
					}
				}
			}
			for _, name := range want {
				path := env[name]
				mounted := slices.ContainsFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool {
					return vm.ReadOnly && strings.HasPrefix(path, vm.MountPath+"/") && slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
						return v.Name == vm.Name && v.Secret != nil
					})
				})
				if !mounted {
					t.Errorf("%s = %q: want a file in a read-only mounted Secret", name, path)
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

// healthcheckTarget is the image's probe command: /healthcheck [-alive] <scheme>://127.0.0.1:<port>.
var healthcheckTarget = regexp.MustCompile(`^[a-z]+://127\.0\.0\.1:(\d+)(/.*)?$`)

func probeHitsPort(p *corev1.Probe, ports []corev1.ContainerPort) bool {
	switch {
	case p.Exec != nil:
		cmd := p.Exec.Command
		if len(cmd) < 2 || cmd[0] != "/healthcheck" {
			return false
		}
		target := cmd[len(cmd)-1]
		if len(cmd) == 3 && cmd[1] != "-alive" {
			return false
		}
		mt := healthcheckTarget.FindStringSubmatch(target)
		if mt == nil {
			return false
		}
		port, err := strconv.Atoi(mt[1])
		return err == nil && portDeclared(intstr.FromInt(port), ports)
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

// TestStoreSettingsKeepThePromise: the durability every service reads is one the services
// accept, and under replica (or fsync) every domain's store is named so that it can keep it:
// a Sentinel URL (a primary with replicas that fail over) or a Cluster's seed list.
func TestStoreSettingsKeepThePromise(t *testing.T) {
	m := load(t)
	durability := m.configMaps["vigil"].Data["VIGIL_REDIS_DURABILITY"]
	if err := config.RedisSettings(durability, "", ""); err != nil {
		t.Fatalf("ConfigMap vigil: %v", err)
	}
	if durability != string(redisx.Replica) {
		t.Errorf("ConfigMap vigil: VIGIL_REDIS_DURABILITY = %q, want %q (the deployment's promise: nothing acknowledged lost with a primary)", durability, redisx.Replica)
	}
	sec := m.secrets["vigil-redis"]
	if sec == nil {
		t.Fatal("no Secret vigil-redis")
	}
	for _, d := range m.deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.Name != "REDIS_URL" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					continue
				}
				u := sec.StringData[e.ValueFrom.SecretKeyRef.Key]
				cluster := sec.StringData[strings.TrimSuffix(e.ValueFrom.SecretKeyRef.Key, "-url")+"-cluster"]
				if !redisx.IsSentinelURL(u) && cluster == "" {
					t.Errorf("%s: REDIS_URL (vigil-redis %s) = %q, want a redis+sentinel:// or rediss+sentinel:// URL (or a -cluster seed list) under %s durability",
						d.Name, e.ValueFrom.SecretKeyRef.Key, u, durability)
				}
			}
		}
	}
}
