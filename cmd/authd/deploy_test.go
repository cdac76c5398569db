package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/authd/authd/ops"
	"github.com/authd/authd/storage/memory"
)

// k8s is the part of a Kubernetes object the deployment test reads.
type k8s struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		// Deployment, Job
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		// Service: a label selector map (the Deployment's is matchLabels).
		Ports []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
		MinAvailable int `yaml:"minAvailable"`
	} `yaml:"spec"`
	raw    map[string]any
	source string // the kustomization it was rendered from
}

type podSpec struct {
	TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot bool `yaml:"runAsNonRoot"`
	} `yaml:"securityContext"`
	Containers []struct {
		Name  string   `yaml:"name"`
		Image string   `yaml:"image"`
		Args  []string `yaml:"args"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		Env []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom *struct {
				SecretKeyRef *struct {
					Name string `yaml:"name"`
					Key  string `yaml:"key"`
				} `yaml:"secretKeyRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		ReadinessProbe *probe `yaml:"readinessProbe"`
		LivenessProbe  *probe `yaml:"livenessProbe"`
		StartupProbe   *probe `yaml:"startupProbe"`
	} `yaml:"containers"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

// loadManifests renders the two kustomizations, deploy/ (the server) and
// deploy/migrate/ (the migration Job), as kubectl apply -k would.
func loadManifests(t *testing.T) []k8s {
	t.Helper()
	return append(renderKustomization(t, "deploy"), renderKustomization(t, filepath.Join("deploy", "migrate"))...)
}

// renderKustomization renders the kustomization in dir (relative to the
// repository root) with the kustomize Go API (what kubectl apply -k
// embeds) and parses each object.
func renderKustomization(t *testing.T, dir string) []k8s {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, dir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	b, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	var objs []k8s
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var node yaml.Node
		if err := dec.Decode(&node); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: not YAML: %v", dir, err)
		}
		var o k8s
		if err := node.Decode(&o); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if err := node.Decode(&o.raw); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if o.Kind == "" || o.APIVersion == "" {
			t.Fatalf("%s: an object without kind or apiVersion", dir)
		}
		o.source = dir
		objs = append(objs, o)
	}
	return objs
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return port
}

// TestDeployManifests: the Kubernetes manifests parse, and their ports,
// probe paths and settings agree with the binary: the ports are those of
// the default addresses, the probes hit paths the operations listener
// serves, every AUTHD_* variable is a setting, AUTHD_SECRET comes from a
// Secret, and the migration Job runs a command that exists.
func TestDeployManifests(t *testing.T) {
	objs := loadManifests(t)
	var c config
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c.flags(fs, true)
	settings := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { settings[envName(f.Name)] = true })
	defaultPort := map[string]string{
		"AUTHD_ADDR":     portOf(t, fs.Lookup("addr").DefValue),
		"AUTHD_OPS_ADDR": portOf(t, defaultOpsAddr),
	}

	byKind := map[string][]k8s{}
	for _, o := range objs {
		byKind[o.Kind] = append(byKind[o.Kind], o)
	}
	for kind, n := range map[string]int{"Deployment": 1, "Job": 1, "PodDisruptionBudget": 1, "Service": 2, "ConfigMap": 1} {
		if len(byKind[kind]) != n {
			t.Fatalf("%d %s in deploy/, want %d", len(byKind[kind]), kind, n)
		}
	}
	for _, cm := range byKind["ConfigMap"] {
		for k := range cm.raw["data"].(map[string]any) {
			if !settings[k] {
				t.Errorf("ConfigMap %s: %s is not a setting of authd serve", cm.Metadata.Name, k)
			}
		}
	}

	dep := byKind["Deployment"][0]
	pod := dep.Spec.Template
	for k, v := range dep.Spec.Selector.MatchLabels {
		if pod.Metadata.Labels[k] != v {
			t.Errorf("Deployment selector %s=%s does not select its pods", k, v)
		}
	}
	if !pod.Spec.SecurityContext.RunAsNonRoot || len(pod.Spec.Containers) != 1 {
		t.Fatalf("Deployment: want one container, runAsNonRoot")
	}
	ctr := pod.Spec.Containers[0]
	if !slices.Equal(ctr.Args, []string{"serve"}) {
		t.Errorf("Deployment args %v, want [serve]", ctr.Args)
	}
	env := map[string]string{}
	secretRef := map[string]bool{}
	for _, e := range ctr.Env {
		if !settings[e.Name] {
			t.Errorf("Deployment env %s is not a setting of authd serve", e.Name)
		}
		env[e.Name] = e.Value
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			secretRef[e.Name] = true
		}
	}
	for _, name := range []string{"AUTHD_SECRET", "AUTHD_DATABASE_URL"} {
		if !secretRef[name] {
			t.Errorf("Deployment: %s must come from a Secret (secretKeyRef)", name)
		}
	}
	ports := map[string]string{}
	for _, p := range ctr.Ports {
		ports[p.Name] = strconv.Itoa(p.ContainerPort)
	}
	for name, setting := range map[string]string{"http": "AUTHD_ADDR", "ops": "AUTHD_OPS_ADDR"} {
		if got := portOf(t, env[setting]); got != ports[name] || got != defaultPort[setting] {
			t.Errorf("port %s: containerPort %s, %s=%q, binary default port %s: want all equal", name, ports[name], setting, env[setting], defaultPort[setting])
		}
	}
	drain, err := time.ParseDuration(env["AUTHD_DRAIN_DELAY"])
	if err != nil || time.Duration(pod.Spec.TerminationGracePeriodSeconds)*time.Second < drain+15*time.Second {
		t.Errorf("terminationGracePeriodSeconds %d must cover AUTHD_DRAIN_DELAY (%q) and the 15 s shutdown", pod.Spec.TerminationGracePeriodSeconds, env["AUTHD_DRAIN_DELAY"])
	}

	// The probes hit the operations port, on paths it serves.
	health, err := ops.New(ops.Config{Database: memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*probe{"readiness": ctr.ReadinessProbe, "liveness": ctr.LivenessProbe, "startup": ctr.StartupProbe} {
		if p == nil {
			t.Errorf("no %s probe", name)
			continue
		}
		if p.HTTPGet.Port != "ops" {
			t.Errorf("%s probe on port %q, want the operations port (ops)", name, p.HTTPGet.Port)
		}
		rec := httptest.NewRecorder()
		health.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p.HTTPGet.Path, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("%s probe path %s: the operations listener answers %d", name, p.HTTPGet.Path, rec.Code)
		}
	}
	if ctr.ReadinessProbe != nil && ctr.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe path %s, want /readyz", ctr.ReadinessProbe.HTTPGet.Path)
	}

	// One Service per listener, each selecting the pods by a named port.
	targets := map[string]bool{}
	for _, svc := range byKind["Service"] {
		sel, _ := svc.raw["spec"].(map[string]any)["selector"].(map[string]any)
		for k, v := range sel {
			if pod.Metadata.Labels[k] != v {
				t.Errorf("Service %s selector %s=%v does not select the pods", svc.Metadata.Name, k, v)
			}
		}
		for _, p := range svc.Spec.Ports {
			if ports[p.TargetPort] == "" {
				t.Errorf("Service %s targets port %q, which the container does not name", svc.Metadata.Name, p.TargetPort)
			}
			targets[p.TargetPort] = true
		}
	}
	if !targets["http"] || !targets["ops"] {
		t.Errorf("Services target %v, want one for http and one for ops", targets)
	}
	pdb := byKind["PodDisruptionBudget"][0]
	for k, v := range pdb.Spec.Selector.MatchLabels {
		if pod.Metadata.Labels[k] != v {
			t.Errorf("PodDisruptionBudget selector %s=%s does not select the pods", k, v)
		}
	}
	if pdb.Spec.MinAvailable < 1 {
		t.Error("PodDisruptionBudget: minAvailable must be at least 1")
	}

	job := byKind["Job"][0].Spec.Template.Spec
	if len(job.Containers) != 1 || !slices.Equal(job.Containers[0].Args, []string{"migrate", "up"}) || job.Containers[0].Image != ctr.Image {
		t.Fatalf("migration Job: want one container running \"migrate up\" on the server's image")
	}
	if code, _, stderr := runMain(t, "migrate", "up", "-h"); code != 0 {
		t.Errorf("authd migrate up -h: exit %d %s", code, stderr)
	}
}

// TestDockerfile: multi-stage, static, non-root, no shell, built with the
// toolchain go.mod pins, exposing the ports the image's addresses use.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	toolchain := regexp.MustCompile(`(?m)^toolchain go(\S+)$`).FindSubmatch(gomod)
	if toolchain == nil {
		t.Fatal("go.mod has no toolchain line")
	}
	var froms []string
	var user, expose string
	env := map[string]string{}
	// Instructions, with continuation lines joined.
	joined := strings.ReplaceAll(string(b), "\\\n", " ")
	sc := bufio.NewScanner(strings.NewReader(joined))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms = append(froms, f[1])
		case "USER":
			user = f[1]
		case "EXPOSE":
			expose = strings.Join(f[1:], " ")
		case "ENV":
			for _, kv := range f[1:] {
				if k, v, ok := strings.Cut(kv, "="); ok {
					env[k] = v
				}
			}
		}
	}
	if len(froms) < 2 {
		t.Fatalf("FROM %v: want a multi-stage build", froms)
	}
	if want := "golang:" + string(toolchain[1]); !strings.HasPrefix(froms[0], want) {
		t.Errorf("build stage FROM %s, want %s (go.mod's toolchain line)", froms[0], want)
	}
	if last := froms[len(froms)-1]; last != "scratch" && !strings.HasPrefix(last, "gcr.io/distroless/static") {
		t.Errorf("final stage FROM %s, want distroless/static or scratch (no shell)", last)
	}
	if user == "" || strings.HasPrefix(user, "root") || user == "0" {
		t.Errorf("USER %q, want a non-root user", user)
	}
	if !bytes.Contains(b, []byte("CGO_ENABLED=0")) {
		t.Error("the binary must be built with CGO_ENABLED=0 (static)")
	}
	for _, setting := range []string{"AUTHD_ADDR", "AUTHD_OPS_ADDR"} {
		if port := portOf(t, env[setting]); !strings.Contains(" "+expose+" ", " "+port+" ") {
			t.Errorf("%s=%s but EXPOSE %s", setting, env[setting], expose)
		}
	}
}
