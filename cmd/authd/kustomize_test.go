package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// rawContainers are a rendered workload's containers (init containers
// first) as k8s.raw holds them: the part TestKustomization reads.
func rawContainers(o k8s) []map[string]any {
	spec, _ := o.raw["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	pod, _ := tmpl["spec"].(map[string]any)
	var out []map[string]any
	for _, key := range []string{"initContainers", "containers"} {
		list, _ := pod[key].([]any)
		for _, c := range list {
			if m, ok := c.(map[string]any); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// dig follows keys through nested maps.
func dig(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

// dockerUser returns the Dockerfile's USER as numbers, failing the test
// unless it is uid:gid in digits.
func dockerUser(t *testing.T) (uid, gid int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^USER\s+(\S+)\s*$`).FindAllSubmatch(b, -1)
	if len(m) != 1 {
		t.Fatalf("the Dockerfile has %d USER lines, want 1", len(m))
	}
	u := regexp.MustCompile(`^(\d+):(\d+)$`).FindStringSubmatch(string(m[0][1]))
	if u == nil {
		t.Fatalf("Dockerfile USER %s: want a numeric uid:gid (Kubernetes verifies runAsNonRoot only for a numeric user)", m[0][1])
	}
	uid, _ = strconv.Atoi(u[1])
	gid, _ = strconv.Atoi(u[2])
	if uid == 0 {
		t.Fatal("Dockerfile USER is root")
	}
	return uid, gid
}

// TestKustomization (issue 31): the two kustomizations, rendered as
// kubectl apply -k renders them, make a deploy that starts and can be
// applied again:
//   - deploy/ holds no Job (a Job's template is immutable: the next apply
//     of a new image would fail) and deploy/migrate/ nothing but the Job;
//   - every container runs the same transformed image (no bare "authd"
//     left for the kubelet to pull);
//   - every pod runs as the Dockerfile's numeric user and group, non-root;
//   - every container has CPU and memory requests and a memory limit, no
//     privilege escalation and a read-only root filesystem;
//   - the probes use the operations port (TestDeployManifests checks their
//     paths);
//   - the README's commands are the ones that work: kubectl apply -k of
//     directories that render, the migration first, no apply -f, and the
//     Job they wait for or delete is the one rendered.
func TestKustomization(t *testing.T) {
	uid, gid := dockerUser(t)
	server := renderKustomization(t, "deploy")
	migrate := renderKustomization(t, filepath.Join("deploy", "migrate"))
	var job k8s
	for _, o := range server {
		if o.Kind == "Job" || o.Kind == "CronJob" {
			t.Errorf("deploy/ renders a %s (%s): it belongs in deploy/migrate/", o.Kind, o.Metadata.Name)
		}
	}
	if len(migrate) != 1 || migrate[0].Kind != "Job" {
		t.Fatalf("deploy/migrate/ renders %d objects, want the Job alone", len(migrate))
	}
	job = migrate[0]

	image := ""
	for _, o := range append(server, migrate...) {
		cs := rawContainers(o)
		if o.Kind != "Deployment" && o.Kind != "Job" {
			if len(cs) > 0 {
				t.Errorf("%s %s has containers; the test knows Deployments and Jobs only", o.Kind, o.Metadata.Name)
			}
			continue
		}
		name := o.source + " " + o.Kind + " " + o.Metadata.Name
		psc, _ := dig(o.raw, "spec", "template", "spec", "securityContext").(map[string]any)
		if psc["runAsNonRoot"] != true || psc["runAsUser"] != uid || psc["runAsGroup"] != gid {
			t.Errorf("%s: pod securityContext %v, want runAsNonRoot with runAsUser %d and runAsGroup %d (the Dockerfile's USER)", name, psc, uid, gid)
		}
		if len(cs) == 0 {
			t.Errorf("%s: no containers", name)
		}
		for _, c := range cs {
			cname := name + " container " + c["name"].(string)
			img, _ := c["image"].(string)
			if image == "" {
				image = img
			}
			if img != image || !strings.Contains(img, "/") || !strings.Contains(img, ":") {
				t.Errorf("%s: image %q, want the component's image (%q) on every container", cname, img, image)
			}
			for _, path := range [][]string{{"resources", "requests", "cpu"}, {"resources", "requests", "memory"}, {"resources", "limits", "memory"}} {
				if dig(c, path...) == nil {
					t.Errorf("%s: no %s", cname, strings.Join(path, "."))
				}
			}
			if dig(c, "securityContext", "allowPrivilegeEscalation") != false || dig(c, "securityContext", "readOnlyRootFilesystem") != true {
				t.Errorf("%s: want allowPrivilegeEscalation false and readOnlyRootFilesystem true", cname)
			}
			if u := dig(c, "securityContext", "runAsUser"); u != nil && u != uid {
				t.Errorf("%s: container runAsUser %v differs from the image's %d", cname, u, uid)
			}
			for _, p := range []string{"readinessProbe", "livenessProbe", "startupProbe"} {
				if port := dig(c, p, "httpGet", "port"); port != nil && port != "ops" {
					t.Errorf("%s: %s on port %v, want ops", cname, p, port)
				}
			}
		}
	}

	// The README's commands.
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllSubmatch(readme, -1)
	applies := 0
	for _, b := range blocks {
		block := string(b[1])
		if !strings.Contains(block, "kubectl") {
			continue
		}
		if strings.Contains(block, "apply -f") {
			t.Errorf("the README applies a file with -f; the manifests need kustomize (-k):\n%s", block)
		}
		order := []string{}
		for _, m := range regexp.MustCompile(`kubectl apply -k (\S+)`).FindAllStringSubmatch(block, -1) {
			dir := strings.TrimSuffix(m[1], "/")
			if _, err := os.Stat(filepath.Join("..", "..", dir, "kustomization.yaml")); err != nil {
				t.Errorf("the README applies %s, which has no kustomization.yaml", m[1])
				continue
			}
			renderKustomization(t, dir)
			order = append(order, dir)
			applies++
		}
		mig, srv := -1, -1
		for i, d := range order {
			switch d {
			case "deploy/migrate":
				mig = i
			case "deploy":
				srv = i
			}
		}
		if srv >= 0 && (mig < 0 || mig > srv) {
			t.Errorf("the README applies deploy/ without running deploy/migrate/ first:\n%s", block)
		}
		for _, m := range regexp.MustCompile(`(?:job/|delete job )([a-z0-9-]+)`).FindAllStringSubmatch(block, -1) {
			if m[1] != job.Metadata.Name {
				t.Errorf("the README names job %s; deploy/migrate/ renders %s", m[1], job.Metadata.Name)
			}
		}
		for _, m := range regexp.MustCompile(`deploy/[A-Za-z0-9_./-]+`).FindAllString(block, -1) {
			if _, err := os.Stat(filepath.Join("..", "..", strings.TrimRight(m, "."))); err != nil {
				t.Errorf("the README names %s, which does not exist", m)
			}
		}
	}
	if applies < 2 {
		t.Errorf("the README applies %d kustomizations, want deploy/migrate/ and deploy/", applies)
	}
}
