// Package manifesttest checks fencer's Kubernetes manifests: every document
// decodes strictly into the Kubernetes API types (an unknown or misspelled
// field fails), and what fencer depends on agrees with fencer itself: the
// environment variables are flags `fencer serve` reads, the probes hit
// /readyz and /healthz on the HTTP port, the data volume is mounted at the
// data dir, the initial cluster names every replica by its stable DNS name.
//
// It is a module of its own so that fencer's go.mod stays free of
// Kubernetes's dependencies; make test runs it.
package manifesttest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

const manifestDir = ".."

// manifests are the decoded documents of every manifest.
type manifests struct {
	statefulSets []*appsv1.StatefulSet
	services     []*corev1.Service
	pdbs         []*policyv1.PodDisruptionBudget
	secrets      []*corev1.Secret
}

func load(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestDir, err)
	}
	var m manifests
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitDocs(data) {
			where := fmt.Sprintf("%s document %d", filepath.Base(f), i+1)
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			var obj any
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 StatefulSet":
				v := &appsv1.StatefulSet{}
				m.statefulSets, obj = append(m.statefulSets, v), v
			case "v1 Service":
				v := &corev1.Service{}
				m.services, obj = append(m.services, v), v
			case "policy/v1 PodDisruptionBudget":
				v := &policyv1.PodDisruptionBudget{}
				m.pdbs, obj = append(m.pdbs, v), v
			case "v1 Secret":
				v := &corev1.Secret{}
				m.secrets, obj = append(m.secrets, v), v
			default:
				t.Fatalf("%s: kind %q %q is not one this test knows: add it", where, tm.APIVersion, tm.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s: strict decode: %v", where, err)
			}
		}
	}
	return m
}

// splitDocs splits a YAML stream at its "---" lines, dropping empty documents.
func splitDocs(data []byte) [][]byte {
	var out [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// serveEnv returns the environment variables `fencer serve` reads, from the
// help of a fencer built from this repository.
func serveEnv(t *testing.T) map[string]bool {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fencer")
	build := exec.Command("go", "build", "-o", bin, "./cmd/fencer")
	build.Dir = filepath.Join("..", "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build fencer: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("fencer serve --help: %v\n%s", err, out)
	}
	env := map[string]bool{}
	for _, m := range regexp.MustCompile(`\(\$(FENCER_[A-Z0-9_]+)\)`).FindAllStringSubmatch(string(out), -1) {
		env[m[1]] = true
	}
	if !env["FENCER_DATA_DIR"] || !env["FENCER_INITIAL_CLUSTER"] {
		t.Fatalf("fencer serve --help lists no FENCER_ variables as expected:\n%s", out)
	}
	return env
}

// expand resolves $(VAR) references as the kubelet does, from vars.
func expand(s string, vars map[string]string) string {
	return regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(s, func(ref string) string {
		if v, ok := vars[ref[2:len(ref)-1]]; ok {
			return v
		}
		return ref
	})
}

func TestManifests(t *testing.T) {
	m := load(t)
	if len(m.statefulSets) != 1 || len(m.pdbs) != 1 {
		t.Fatalf("want one StatefulSet and one PodDisruptionBudget, have %d and %d", len(m.statefulSets), len(m.pdbs))
	}
	sts := m.statefulSets[0]
	spec := sts.Spec
	if spec.Replicas == nil || *spec.Replicas != 3 {
		t.Errorf("replicas: want 3")
	}
	replicas := int(*spec.Replicas)
	if spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy %q: want Parallel (with OrderedReady the second pod waits for the first to be ready, which needs a quorum)", spec.PodManagementPolicy)
	}
	podLabels := labels.Set(spec.Template.Labels)
	if sel, err := metav1.LabelSelectorAsSelector(spec.Selector); err != nil || !sel.Matches(podLabels) {
		t.Errorf("the StatefulSet's selector does not match its pods' labels (%v)", err)
	}

	// The headless Service named by serviceName.
	var headless *corev1.Service
	for _, s := range m.services {
		if s.Name == spec.ServiceName {
			headless = s
		}
	}
	if headless == nil {
		t.Fatalf("no Service %q (the StatefulSet's serviceName)", spec.ServiceName)
	}
	if headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service %s: clusterIP %q, want None (headless)", headless.Name, headless.Spec.ClusterIP)
	}
	if !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: publishNotReadyAddresses must be true: members must resolve each other before they are ready", headless.Name)
	}
	for _, s := range m.services {
		if !labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) || len(s.Spec.Selector) == 0 {
			t.Errorf("Service %s does not select the fencer pods", s.Name)
		}
	}

	// At most one member down.
	pdb := m.pdbs[0]
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget: want maxUnavailable 1 and no minAvailable")
	}
	if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || !sel.Matches(podLabels) {
		t.Errorf("the PodDisruptionBudget does not select the fencer pods (%v)", err)
	}

	pod := spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, have %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	if !slices.Equal(c.Args, []string{"serve"}) && !slices.Equal(c.Command[len(c.Command)-1:], []string{"serve"}) {
		t.Errorf("the container must run `fencer serve` (args %v, command %v)", c.Args, c.Command)
	}

	// The environment: only variables fencer reads, $(refs) to earlier ones.
	known := serveEnv(t)
	env := map[string]string{}
	vars := map[string]string{"POD_NAME": "fencer-1", "POD_NAMESPACE": "ns"} // as the kubelet would give pod 1
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "FENCER_") && !known[e.Name] {
			t.Errorf("env %s: fencer serve reads no such variable", e.Name)
		}
		if e.ValueFrom != nil {
			if _, ok := vars[e.Name]; !ok {
				t.Errorf("env %s: valueFrom not expected", e.Name)
			}
			continue
		}
		for _, ref := range regexp.MustCompile(`\$\(([A-Za-z_0-9]+)\)`).FindAllStringSubmatch(e.Value, -1) {
			if _, ok := vars[ref[1]]; !ok {
				t.Errorf("env %s refers to $(%s), which is not defined before it", e.Name, ref[1])
			}
		}
		v := expand(e.Value, vars)
		env[e.Name], vars[e.Name] = v, v
	}
	for _, want := range []string{"FENCER_ID", "FENCER_DATA_DIR", "FENCER_HTTP_ADDR", "FENCER_RAFT_ADDR", "FENCER_INITIAL_CLUSTER"} {
		if env[want] == "" {
			t.Errorf("env %s is not set", want)
		}
	}
	if env["FENCER_ID"] != "fencer-1" {
		t.Errorf("FENCER_ID for pod fencer-1 is %q: want the pod name", env["FENCER_ID"])
	}

	// Ports: the container's, the Service's and fencer's addresses agree.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	portOf := func(name, addr string) int32 {
		_, p, err := net.SplitHostPort(addr)
		n, err2 := strconv.Atoi(p)
		if err != nil || err2 != nil {
			t.Errorf("%s %q: want HOST:PORT", name, addr)
		}
		return int32(n)
	}
	if p := portOf("FENCER_HTTP_ADDR", env["FENCER_HTTP_ADDR"]); p != ports["http"] {
		t.Errorf("FENCER_HTTP_ADDR port %d, container port http %d", p, ports["http"])
	}
	if p := portOf("FENCER_RAFT_ADDR", env["FENCER_RAFT_ADDR"]); p != ports["raft"] {
		t.Errorf("FENCER_RAFT_ADDR port %d, container port raft %d", p, ports["raft"])
	}
	for _, sp := range headless.Spec.Ports {
		if ports[sp.TargetPort.String()] != sp.Port && ports[sp.Name] != sp.Port {
			t.Errorf("Service %s port %s: %d does not match the container's", headless.Name, sp.Name, sp.Port)
		}
	}

	// Stable names: this pod's addresses and the initial cluster's entries
	// are the pods' DNS names under the headless Service.
	dnsName := func(i int) string { return fmt.Sprintf("%s-%d.%s.ns.svc", sts.Name, i, headless.Name) }
	if host, _, _ := net.SplitHostPort(env["FENCER_RAFT_ADDR"]); host != dnsName(1) {
		t.Errorf("FENCER_RAFT_ADDR for pod 1 resolves to host %q, want its stable name %s", host, dnsName(1))
	}
	if adv := env["FENCER_HTTP_ADVERTISE_ADDR"]; adv != "" {
		if host, _, _ := net.SplitHostPort(adv); host != dnsName(1) {
			t.Errorf("FENCER_HTTP_ADVERTISE_ADDR host %q, want %s", host, dnsName(1))
		}
	}
	var want []string
	for i := range replicas {
		want = append(want, fmt.Sprintf("%s-%d=%s:%d@%s:%d", sts.Name, i, dnsName(i), ports["raft"], dnsName(i), ports["http"]))
	}
	if got := env["FENCER_INITIAL_CLUSTER"]; got != strings.Join(want, ",") {
		t.Errorf("FENCER_INITIAL_CLUSTER for %d replicas:\n got %s\nwant %s", replicas, got, strings.Join(want, ","))
	}

	// Probes: /readyz for readiness, /healthz for liveness, on the API port,
	// over HTTPS exactly when fencer serves TLS.
	tlsOn := env["FENCER_TLS_CERT"] != ""
	checkProbe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s probe: want an httpGet", name)
			return
		}
		g := p.HTTPGet
		if g.Path != path {
			t.Errorf("%s probe path %q, want %s", name, g.Path, path)
		}
		if port := g.Port.IntVal; g.Port.StrVal != "" && ports[g.Port.StrVal] != ports["http"] || g.Port.StrVal == "" && port != ports["http"] {
			t.Errorf("%s probe port %s: want the HTTP API's port %d", name, g.Port.String(), ports["http"])
		}
		if wantScheme := map[bool]corev1.URIScheme{true: corev1.URISchemeHTTPS, false: corev1.URISchemeHTTP}[tlsOn]; g.Scheme != wantScheme && (g.Scheme != "" || wantScheme != corev1.URISchemeHTTP) {
			t.Errorf("%s probe scheme %q, want %s (TLS on: %v)", name, g.Scheme, wantScheme, tlsOn)
		}
	}
	checkProbe("readiness", c.ReadinessProbe, "/readyz")
	checkProbe("liveness", c.LivenessProbe, "/healthz")
	if env["FENCER_TLS_CLIENT_AUTH"] == "true" {
		t.Errorf("FENCER_TLS_CLIENT_AUTH would fail the kubelet's probes (they present no client certificate)")
	}

	// Volumes: the data dir is a persistent volume claim template's mount;
	// TLS files come from a Secret volume.
	mounts := map[string]corev1.VolumeMount{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.Name] = vm
	}
	var dataMount *corev1.VolumeMount
	for _, pvc := range spec.VolumeClaimTemplates {
		if vm, ok := mounts[pvc.Name]; ok && vm.MountPath == env["FENCER_DATA_DIR"] {
			dataMount = &vm
			if vm.SubPath != "" || vm.ReadOnly {
				t.Errorf("data mount: no subPath, not read-only")
			}
			if pvc.Spec.Resources.Requests.Storage().IsZero() {
				t.Errorf("volume claim %s requests no storage", pvc.Name)
			}
		}
	}
	if dataMount == nil {
		t.Errorf("FENCER_DATA_DIR %q is not the mount path of a volumeClaimTemplate", env["FENCER_DATA_DIR"])
	}
	if tlsOn {
		for _, name := range []string{"FENCER_TLS_CERT", "FENCER_TLS_KEY", "FENCER_TLS_CA"} {
			checkSecretFile(t, name, env[name], pod.Volumes, c.VolumeMounts)
		}
	}

	// Resources, and time to hand leadership over on SIGTERM.
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("the container requests no CPU or memory")
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g < 20 {
		t.Errorf("terminationGracePeriodSeconds: want at least 20 s to transfer leadership and stop cleanly")
	}
}

// checkSecretFile checks that path is a file of a Secret volume mounted in
// the container.
func checkSecretFile(t *testing.T, name, path string, vols []corev1.Volume, mounts []corev1.VolumeMount) {
	t.Helper()
	for _, vm := range mounts {
		rel, err := filepath.Rel(vm.MountPath, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		for _, v := range vols {
			if v.Name != vm.Name || v.Secret == nil {
				continue
			}
			if len(v.Secret.Items) == 0 {
				return // every key of the Secret is a file
			}
			for _, it := range v.Secret.Items {
				if it.Path == rel {
					return
				}
			}
			t.Errorf("%s %s: the Secret volume %s has no item at %s", name, path, v.Name, rel)
			return
		}
	}
	t.Errorf("%s %s is not in a mounted Secret volume", name, path)
}

// TestSplitDocs keeps the document splitter honest.
func TestSplitDocs(t *testing.T) {
	docs := splitDocs([]byte("# c\n---\na: 1\n---\n# only a comment\n---\nb: 2\n"))
	if len(docs) != 2 || !bytes.Contains(docs[0], []byte("a: 1")) || !bytes.Contains(docs[1], []byte("b: 2")) {
		t.Fatalf("splitDocs: %q", docs)
	}
}
