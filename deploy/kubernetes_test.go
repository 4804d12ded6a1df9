package deploy

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// k8sObject is the part of a manifest the test reads; unknown fields are
// ignored, so only what matters is pinned.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		MaxUnavailable any `yaml:"maxUnavailable"`
		MinAvailable   any `yaml:"minAvailable"`
		Template       struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		Ports []struct {
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
	raw map[string]any
}

type podSpec struct {
	TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot bool `yaml:"runAsNonRoot"`
	} `yaml:"securityContext"`
	InitContainers []container `yaml:"initContainers"`
	Containers     []container `yaml:"containers"`
	Volumes        []struct {
		Name      string `yaml:"name"`
		ConfigMap struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

type container struct {
	Name          string   `yaml:"name"`
	Image         string   `yaml:"image"`
	RestartPolicy string   `yaml:"restartPolicy"`
	Args          []string `yaml:"args"`
	Env           []struct {
		Name      string `yaml:"name"`
		ValueFrom struct {
			SecretKeyRef struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe probe `yaml:"readinessProbe"`
	LivenessProbe  probe `yaml:"livenessProbe"`
	StartupProbe   probe `yaml:"startupProbe"`
	Lifecycle      struct {
		PreStop struct {
			Sleep struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

// loadManifests reads every document of every YAML file in
// deploy/kubernetes, by kind.
func loadManifests(t *testing.T) map[string][]k8sObject {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(repoRoot(t), "deploy/kubernetes/*.yaml"))
	if len(files) < 4 {
		t.Fatalf("found %d manifests, want configmap, secret, deployment and pdb", len(files))
	}
	out := map[string][]k8sObject{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(fh)
		for {
			var raw map[string]any
			if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			b, _ := yaml.Marshal(raw)
			var o k8sObject
			if err := yaml.Unmarshal(b, &o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			o.raw = raw
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Errorf("%s: a document without apiVersion, kind or metadata.name", f)
			}
			out[o.Kind] = append(out[o.Kind], o)
		}
		fh.Close()
	}
	return out
}

// TestKubernetesManifests checks, without a cluster, what makes the
// manifests work: Helios as a native sidecar in front of the app, probes
// on the admin port, the config from the ConfigMap (and valid), the token
// from the Secret, a grace period longer than the drain, selectors that
// match, and a PodDisruptionBudget.
func TestKubernetesManifests(t *testing.T) {
	m := loadManifests(t)
	for _, kind := range []string{"ConfigMap", "Secret", "Deployment", "Service", "PodDisruptionBudget"} {
		if len(m[kind]) != 1 {
			t.Fatalf("got %d %s, want 1", len(m[kind]), kind)
		}
	}
	dep, cm, secret := m["Deployment"][0], m["ConfigMap"][0], m["Secret"][0]
	labels := dep.Spec.Template.Metadata.Labels
	pod := dep.Spec.Template.Spec

	if len(pod.InitContainers) != 1 || len(pod.Containers) != 1 {
		t.Fatalf("got %d init containers and %d containers, want Helios and the app", len(pod.InitContainers), len(pod.Containers))
	}
	h, app := pod.InitContainers[0], pod.Containers[0]
	if h.RestartPolicy != "Always" {
		t.Errorf("helios restartPolicy: got %q, want Always (a native sidecar)", h.RestartPolicy)
	}
	port := func(c container, name string) int {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
		return 0
	}
	if port(h, "http") != 8080 || port(h, "admin") != 9901 {
		t.Errorf("helios ports: got http %d admin %d, want 8080 and 9901", port(h, "http"), port(h, "admin"))
	}
	for _, p := range []struct {
		name string
		got  probe
		path string
	}{{"readiness", h.ReadinessProbe, "/readyz"}, {"liveness", h.LivenessProbe, "/healthz"}, {"startup", h.StartupProbe, "/healthz"}} {
		if p.got.HTTPGet.Path != p.path || p.got.HTTPGet.Port != "admin" {
			t.Errorf("%s probe: got %s on %s, want %s on admin", p.name, p.got.HTTPGet.Path, p.got.HTTPGet.Port, p.path)
		}
	}

	// The config comes from the ConfigMap and is valid.
	if i := slices.Index(h.Args, "--config"); i < 0 || h.Args[i+1] != "/etc/helios/helios.yaml" {
		t.Errorf("helios args %v: want --config /etc/helios/helios.yaml", h.Args)
	}
	mounted := false
	for _, vm := range h.VolumeMounts {
		for _, v := range pod.Volumes {
			mounted = mounted || (vm.Name == v.Name && vm.MountPath == "/etc/helios" && v.ConfigMap.Name == cm.Metadata.Name)
		}
	}
	if !mounted {
		t.Errorf("the ConfigMap %s is not mounted at /etc/helios in the helios container", cm.Metadata.Name)
	}
	cfg, ok := cm.Data["helios.yaml"]
	if !ok {
		t.Fatalf("ConfigMap has no helios.yaml")
	}
	for _, want := range []string{`address: ":8080"`, `address: ":9901"`, `address: "127.0.0.1:8081"`, `token: "${HELIOS_ADMIN_TOKEN}"`} {
		if !strings.Contains(cfg, want) {
			t.Errorf("ConfigMap config lacks %s", want)
		}
	}
	dir := t.TempDir()
	bin := buildHelios(t, dir)
	os.WriteFile(filepath.Join(dir, "helios.yaml"), []byte(cfg), 0o644)
	cmd := exec.Command(bin, "validate", "--config", filepath.Join(dir, "helios.yaml"))
	cmd.Env = append(os.Environ(), "HELIOS_ADMIN_TOKEN=0123456789abcdef0123456789abcdef")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("helios validate on the ConfigMap's config: %v\n%s", err, out)
	}
	// The Secret's token is a placeholder, which Helios refuses, saying
	// how to make one (issue 18 item 5).
	cmd = exec.Command(bin, "validate", "--config", filepath.Join(dir, "helios.yaml"))
	cmd.Env = append(os.Environ(), "HELIOS_ADMIN_TOKEN="+secret.StringData["token"])
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "openssl rand -hex 32") {
		t.Errorf("helios validate with the Secret's placeholder token: got %v\n%s\nwant a refusal saying how to make a token", err, out)
	}

	// The token comes from the Secret.
	fromSecret := false
	for _, e := range h.Env {
		ref := e.ValueFrom.SecretKeyRef
		fromSecret = fromSecret || (e.Name == "HELIOS_ADMIN_TOKEN" && ref.Name == secret.Metadata.Name && secret.StringData[ref.Key] != "")
	}
	if !fromSecret {
		t.Errorf("HELIOS_ADMIN_TOKEN does not come from a key of Secret %s", secret.Metadata.Name)
	}

	// Stopping: the grace period covers the app's preStop sleep, Helios's
	// shutdown delay and drain.
	flag := func(name string) time.Duration {
		i := slices.Index(h.Args, name)
		if i < 0 {
			return 0
		}
		d, err := time.ParseDuration(h.Args[i+1])
		if err != nil {
			t.Errorf("%s %s: %v", name, h.Args[i+1], err)
		}
		return d
	}
	delay, drain := flag("--shutdown-delay"), flag("--shutdown-timeout")
	if delay == 0 || drain == 0 {
		t.Errorf("helios args %v: want --shutdown-delay and --shutdown-timeout", h.Args)
	}
	sleep := time.Duration(app.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	if sleep == 0 {
		t.Errorf("app has no preStop sleep: it would stop while endpoints still send to the pod")
	}
	grace := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second
	if grace <= sleep+delay+drain {
		t.Errorf("terminationGracePeriodSeconds %v: want more than preStop %v + shutdown delay %v + drain %v", grace, sleep, delay, drain)
	}

	// Hardening.
	if !pod.SecurityContext.RunAsNonRoot {
		t.Errorf("pod runAsNonRoot: want true")
	}
	for _, c := range []container{h, app} {
		sc := c.SecurityContext
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || !sc.ReadOnlyRootFilesystem || !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
			t.Errorf("container %s: want no privilege escalation, a read-only root and every capability dropped", c.Name)
		}
	}

	// Selectors match the pod's labels.
	match := func(sel map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	if !match(dep.Spec.Selector.MatchLabels) {
		t.Errorf("Deployment selector %v does not match the pod labels %v", dep.Spec.Selector.MatchLabels, labels)
	}
	svcSel, _ := m["Service"][0].raw["spec"].(map[string]any)["selector"].(map[string]any)
	svcLabels := map[string]string{}
	for k, v := range svcSel {
		svcLabels[k], _ = v.(string)
	}
	if !match(svcLabels) || m["Service"][0].Spec.Ports[0].TargetPort != "http" {
		t.Errorf("Service: selector %v, target port %q; want the pod's labels and port http", svcLabels, m["Service"][0].Spec.Ports[0].TargetPort)
	}
	pdb := m["PodDisruptionBudget"][0]
	if !match(pdb.Spec.Selector.MatchLabels) || (pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable == nil) {
		t.Errorf("PodDisruptionBudget: selector %v, maxUnavailable %v, minAvailable %v; want the pod's labels and a bound",
			pdb.Spec.Selector.MatchLabels, pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	}
}

// TestKubernetesVersionAgrees guards issue 18 item 11: the README said
// Kubernetes 1.29+ while the manifests need 1.30 (the app's preStop sleep
// action). Every place that names the minimum names the same one.
func TestKubernetesVersionAgrees(t *testing.T) {
	re := regexp.MustCompile(`Kubernetes (1\.\d+)(\+| or later)`)
	for _, f := range []string{"README.md", "deploy/kubernetes/README.md", "deploy/kubernetes/deployment.yaml"} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), f))
		if err != nil {
			t.Fatal(err)
		}
		ms := re.FindAllStringSubmatch(string(b), -1)
		if len(ms) == 0 {
			t.Errorf("%s names no minimum Kubernetes version", f)
		}
		for _, m := range ms {
			if m[1] != "1.30" {
				t.Errorf("%s: %q, want 1.30 (preStop.sleep)", f, m[0])
			}
		}
	}
}
