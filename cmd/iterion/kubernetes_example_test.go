package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// exampleManifest is deploy/kubernetes's example, which these tests hold
// against the binary it deploys.
const exampleManifest = "../../deploy/kubernetes/iterion.yaml"

// k8sObject is the part of a Kubernetes object the example tests read.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	StringData map[string]string `yaml:"stringData"` // a Secret's
	Spec       struct {
		Template struct {
			Metadata struct {
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec k8sPodSpec `yaml:"spec"`
		} `yaml:"template"`
		Ports []struct { // a Service's
			Name       string `yaml:"name"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
		UnhealthyPodEvictionPolicy string `yaml:"unhealthyPodEvictionPolicy"` // a PodDisruptionBudget's
	} `yaml:"spec"`
}

// k8sPodSpec is the part of a pod spec the example tests read.
type k8sPodSpec struct {
	TerminationGracePeriodSeconds int                `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               k8sSecurityContext `yaml:"securityContext"`
	Containers                    []k8sContainer     `yaml:"containers"`
	Volumes                       []struct {
		Name     string    `yaml:"name"`
		EmptyDir *struct{} `yaml:"emptyDir"`
		Secret   *struct {
			SecretName  string `yaml:"secretName"`
			DefaultMode *int   `yaml:"defaultMode"`
			Items       []struct {
				Key  string `yaml:"key"`
				Path string `yaml:"path"`
				Mode *int   `yaml:"mode"`
			} `yaml:"items"`
		} `yaml:"secret"`
	} `yaml:"volumes"`
}

// k8sSecurityContext is the part of a pod's or a container's security
// context the example tests read.
type k8sSecurityContext struct {
	RunAsUser              *int64 `yaml:"runAsUser"`
	RunAsGroup             *int64 `yaml:"runAsGroup"`
	FSGroup                *int64 `yaml:"fsGroup"`
	ReadOnlyRootFilesystem bool   `yaml:"readOnlyRootFilesystem"`
}

// k8sContainer is the part of a container the example tests read.
type k8sContainer struct {
	Name  string   `yaml:"name"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Lifecycle struct {
		PreStop struct {
			Sleep *struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	Resources struct {
		Limits struct {
			Memory string `yaml:"memory"`
		} `yaml:"limits"`
	} `yaml:"resources"`
	StartupProbe    k8sProbe           `yaml:"startupProbe"`
	LivenessProbe   k8sProbe           `yaml:"livenessProbe"`
	ReadinessProbe  k8sProbe           `yaml:"readinessProbe"`
	SecurityContext k8sSecurityContext `yaml:"securityContext"`
	VolumeMounts    []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

// k8sProbe is the part of a container probe the example tests read.
type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
	TimeoutSeconds   *int `yaml:"timeoutSeconds"`
	PeriodSeconds    int  `yaml:"periodSeconds"`
	FailureThreshold int  `yaml:"failureThreshold"`
}

// readExample parses exampleManifest and returns its objects by kind, each
// kind's in the file's order.
func readExample(t *testing.T) map[string][]k8sObject {
	t.Helper()
	raw, err := os.ReadFile(exampleManifest)
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string][]k8sObject{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var obj k8sObject
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("%s: %v, want valid YAML documents", exampleManifest, err)
		}
		objs[obj.Kind] = append(objs[obj.Kind], obj)
	}
}

// examplePod returns the example's one Deployment's pod spec and the
// container that runs serve in it.
func examplePod(t *testing.T, objs map[string][]k8sObject) (k8sPodSpec, k8sContainer) {
	t.Helper()
	if n := len(objs["Deployment"]); n != 1 {
		t.Fatalf("%s: got %d Deployments, want 1", exampleManifest, n)
	}
	pod := objs["Deployment"][0].Spec.Template.Spec
	for _, c := range pod.Containers {
		if len(c.Args) > 0 && c.Args[0] == "serve" {
			return pod, c
		}
	}
	t.Fatalf("%s: got no container whose args start with serve, want one", exampleManifest)
	return pod, k8sContainer{}
}

// TestKubernetesExampleUsesServesFlags parses deploy/kubernetes's manifests
// and checks that every --flag of the serve container's args and every
// ITERION_* variable of its env appears in `iterion serve -h`, run
// in-process: the example must not drift from the binary it deploys. Its
// probes use each endpoint for what it is: /healthz for liveness, /readyz
// for readiness.
func TestKubernetesExampleUsesServesFlags(t *testing.T) {
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

	_, c := examplePod(t, readExample(t))
	var missing []string
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
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("%s uses %s: got absent from `iterion serve -h`, want every flag and variable the example uses to exist", exampleManifest, strings.Join(missing, ", "))
	}
}

// secretFile is a file the kubelet writes from a Secret volume: the
// Secret and key it holds, and its mode and group.
type secretFile struct {
	secret, key string
	mode        int
	group       int64
}

// mountedSecretFile returns the file at file as the kubelet writes it for
// pod's container c, when an item of a Secret volume c mounts is there:
// owned by root:root with the volume's mode (the item's, when set), unless
// the pod sets fsGroup: then its group is fsGroup and group read is added
// to its mode.
func mountedSecretFile(pod k8sPodSpec, c k8sContainer, file string) (secretFile, bool) {
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			for _, it := range v.Secret.Items {
				if path.Clean(it.Path) != rel {
					continue
				}
				f := secretFile{secret: v.Secret.SecretName, key: it.Key, mode: 0o644} // the kubelet's default mode
				if v.Secret.DefaultMode != nil {
					f.mode = *v.Secret.DefaultMode
				}
				if it.Mode != nil {
					f.mode = *it.Mode
				}
				if fs := pod.SecurityContext.FSGroup; fs != nil {
					f.mode |= 0o440
					f.group = *fs
				}
				return f, true
			}
		}
	}
	return secretFile{}, false
}

// TestKubernetesExampleSecretFilesAreReadableByServe checks each --*-file
// the example passes serve: it is an item of a Secret volume the container
// mounts, its key is one the Secret holds, and the container's user can
// read it as the kubelet writes it, or serve exits at start.
func TestKubernetesExampleSecretFilesAreReadableByServe(t *testing.T) {
	objs := readExample(t)
	pod, c := examplePod(t, objs)
	secrets := exampleSecrets(objs)
	// The user and groups the container runs as: its own settings over the
	// pod's, root's without either (the image's user is not known here),
	// and fsGroup, which the kubelet adds to the container's groups.
	uid, groups := int64(0), []int64{0}
	for _, sc := range []k8sSecurityContext{pod.SecurityContext, c.SecurityContext} {
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			groups[0] = *sc.RunAsGroup
		}
	}
	if fs := pod.SecurityContext.FSGroup; fs != nil {
		groups = append(groups, *fs)
	}

	var files int
	for _, a := range c.Args[1:] {
		name, file, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasSuffix(name, "-file") {
			continue
		}
		files++
		f, ok := mountedSecretFile(pod, c, file)
		if !ok {
			t.Errorf("--%s=%s: got no item of a mounted Secret volume there, want the file to come from the Secret", name, file)
			continue
		}
		if _, ok := secrets[f.secret][f.key]; !ok {
			t.Errorf("--%s=%s: got key %q, which Secret %s does not hold, want a key it holds", name, file, f.key, f.secret)
		}
		readable := f.mode&0o004 != 0 || (uid == 0 && f.mode&0o400 != 0) || (slices.Contains(groups, f.group) && f.mode&0o040 != 0)
		if !readable {
			t.Errorf("--%s=%s: got mode %04o owned by root, group %d, which user %d (groups %v) cannot read, want it readable: serve reads it at start",
				name, file, f.mode, f.group, uid, groups)
		}
	}
	if files == 0 {
		t.Errorf("%s: got no --*-file flag, want the secrets passed as files", exampleManifest)
	}
}

// TestKubernetesExampleGivesTheWebhookSpoolAWritableDir checks that serve
// can write its temporary directory in the example's container: a webhook
// body over 1 MiB is spooled to a file there (os.CreateTemp("", ...) in
// pkg/server's readSigned), or answered 503. With a read-only root file
// system, that directory, $TMPDIR or else /tmp, must be an emptyDir
// volume mounted writable.
func TestKubernetesExampleGivesTheWebhookSpoolAWritableDir(t *testing.T) {
	pod, c := examplePod(t, readExample(t))
	if !c.SecurityContext.ReadOnlyRootFilesystem {
		return // the image's own /tmp is writable
	}
	tmp := "/tmp" // os.TempDir on Unix without $TMPDIR
	for _, e := range c.Env {
		if e.Name == "TMPDIR" && e.Value != "" {
			tmp = e.Value
		}
	}
	for _, m := range c.VolumeMounts {
		if path.Clean(m.MountPath) != path.Clean(tmp) || m.ReadOnly {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				return
			}
		}
	}
	t.Errorf("container %s: got a read-only root file system and no writable emptyDir at %s, want one: serve spools webhook bodies over 1 MiB there, and answers them 503 when it cannot", c.Name, tmp)
}

// exampleSecrets returns the example's Secrets' data by Secret and key.
func exampleSecrets(objs map[string][]k8sObject) map[string]map[string]string {
	secrets := map[string]map[string]string{}
	for _, s := range objs["Secret"] {
		secrets[s.Metadata.Name] = s.StringData
	}
	return secrets
}

// exampleServeConfig parses the example's serve container as serve would
// in the pod: its args, its env (values and Secret keys), and the files of
// the Secret volumes it mounts, written under a temporary directory that
// stands for the container's root. It fails the test when serve refuses
// the settings.
func exampleServeConfig(t *testing.T, objs map[string][]k8sObject) serveConfig {
	t.Helper()
	pod, c := examplePod(t, objs)
	secrets := exampleSecrets(objs)
	root := t.TempDir()
	args := slices.Clone(c.Args[1:])
	for i, a := range args {
		name, file, ok := strings.Cut(a, "=")
		if f, mounted := mountedSecretFile(pod, c, file); ok && mounted {
			local := filepath.Join(root, filepath.FromSlash(file))
			if err := os.MkdirAll(filepath.Dir(local), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(local, []byte(secrets[f.secret][f.key]), 0o600); err != nil {
				t.Fatal(err)
			}
			args[i] = name + "=" + local
		}
	}
	vars := map[string]string{}
	for _, e := range c.Env {
		vars[e.Name] = e.Value
		if ref := e.ValueFrom.SecretKeyRef; ref != nil {
			vars[e.Name] = secrets[ref.Name][ref.Key]
		}
	}
	cfg, err := parseServe(args, func(k string) string { return vars[k] }, io.Discard)
	if err != nil {
		t.Fatalf("%s: serve %v: %v, want serve to accept the example's settings", exampleManifest, c.Args[1:], err)
	}
	return cfg
}

// TestKubernetesExampleLetsOneProxyHoldEveryLargeRead checks that the
// example, whose Service GitHub reaches through an ingress or a load
// balancer that hands serve a proxy's or a node's address, lets one
// address hold every large-read slot: at the default of one per address,
// a second large delivery arriving while one is read would answer 503,
// and GitHub does not send it again.
func TestKubernetesExampleLetsOneProxyHoldEveryLargeRead(t *testing.T) {
	cfg := exampleServeConfig(t, readExample(t))
	if cfg.limits.LargeWebhookReadsPerAddress != cfg.limits.LargeWebhookReads {
		t.Errorf("--large-webhook-reads-per-address %d with --large-webhook-reads %d, want them equal: behind a proxy every delivery has one of a few addresses",
			cfg.limits.LargeWebhookReadsPerAddress, cfg.limits.LargeWebhookReads)
	}
}

// TestKubernetesExampleReadinessOutwaitsTheStoreTimeout checks that the
// readiness probe waits longer than /readyz may take to answer: up to
// --store-timeout for the stores' reads. A probe cut sooner (Kubernetes's
// default timeout is 1 s) marks not ready a replica whose stores answer
// slowly but in time, and since every replica reads the same database, it
// takes them all out of the Service together.
func TestKubernetesExampleReadinessOutwaitsTheStoreTimeout(t *testing.T) {
	objs := readExample(t)
	_, c := examplePod(t, objs)
	cfg := exampleServeConfig(t, objs)
	timeout := time.Second // Kubernetes's default
	if s := c.ReadinessProbe.TimeoutSeconds; s != nil {
		timeout = time.Duration(*s) * time.Second
	}
	if timeout <= cfg.storeTimeout {
		t.Errorf("container %s readinessProbe timeout: got %v, want more than --store-timeout %v: /readyz answers within the store timeout, and a probe cut sooner takes out a replica whose stores answer",
			c.Name, timeout, cfg.storeTimeout)
	}
}

// TestKubernetesExampleShutsDownWithinItsGracePeriod checks the example's
// termination: a preStop sleep of at least 5 s keeps serve listening
// while Kubernetes removes the pod from the Service's endpoints (serve
// stops listening at SIGTERM, and GitHub does not send a refused webhook
// again), and the sleep, serve's wait for in-flight requests
// (server.Config.ShutdownTimeout, 10 s) and a lease release bounded by
// MongoDB's server selection (5 s) fit in terminationGracePeriodSeconds,
// so a replica steps down cleanly before it could be killed.
func TestKubernetesExampleShutsDownWithinItsGracePeriod(t *testing.T) {
	pod, c := examplePod(t, readExample(t))
	if c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds < 5 {
		t.Errorf("container %s: got preStop %+v, want a sleep of at least 5 s: serve stops listening at SIGTERM, before the Service stops sending it requests", c.Name, c.Lifecycle.PreStop)
		return
	}
	need := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds)*time.Second + 10*time.Second + mongoSelectTimeout
	if grace := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second; grace < need {
		t.Errorf("terminationGracePeriodSeconds %v, want at least %v: the preStop sleep, the HTTP drain and the lease release", grace, need)
	}
}

// TestKubernetesExampleTellsGoItsMemoryLimit checks that the example sets
// GOMEMLIMIT under its container's memory limit, and not far under it, so
// the Go runtime collects harder before the kernel kills the process.
func TestKubernetesExampleTellsGoItsMemoryLimit(t *testing.T) {
	_, c := examplePod(t, readExample(t))
	limit, err := parseMebi(c.Resources.Limits.Memory)
	if err != nil {
		t.Fatalf("container %s: memory limit %q: %v, want a Mi or Gi quantity", c.Name, c.Resources.Limits.Memory, err)
	}
	var soft string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			soft = e.Value
		}
	}
	got, err := parseMebi(strings.TrimSuffix(soft, "B"))
	if err != nil {
		t.Fatalf("container %s: GOMEMLIMIT %q: %v, want one set in MiB or GiB", c.Name, soft, err)
	}
	if got >= limit || got < limit*8/10 {
		t.Errorf("container %s: GOMEMLIMIT %s against a memory limit of %s, want 80%% to under 100%% of it", c.Name, soft, c.Resources.Limits.Memory)
	}
}

// parseMebi reads a quantity in Mi or Gi as MiB.
func parseMebi(q string) (int64, error) {
	unit := int64(1)
	switch {
	case strings.HasSuffix(q, "Gi"):
		q, unit = strings.TrimSuffix(q, "Gi"), 1024
	case strings.HasSuffix(q, "Mi"):
		q = strings.TrimSuffix(q, "Mi")
	default:
		return 0, fmt.Errorf("no Mi or Gi suffix")
	}
	n, err := strconv.ParseInt(q, 10, 64)
	return n * unit, err
}

// TestKubernetesExampleLetsUnreadyPodsBeEvicted checks the example's
// disruption budget lets a node drain evict unready replicas: every
// replica is unready while the stores do not answer, and the default
// policy (IfHealthyBudget) would then refuse every eviction.
func TestKubernetesExampleLetsUnreadyPodsBeEvicted(t *testing.T) {
	pdbs := readExample(t)["PodDisruptionBudget"]
	if len(pdbs) != 1 {
		t.Fatalf("got %d PodDisruptionBudgets, want 1", len(pdbs))
	}
	if got := pdbs[0].Spec.UnhealthyPodEvictionPolicy; got != "AlwaysAllow" {
		t.Errorf("PodDisruptionBudget unhealthyPodEvictionPolicy %q, want AlwaysAllow: a store outage makes every replica unready and must not block node drains", got)
	}
}

// TestKubernetesExampleGivesALongStartItsTime checks the example's startup
// probe: serve listens only once its stores are ready (indexes built, and
// on the first start after an upgrade a write for every gate run without
// its repo_key), and the liveness probe alone, 3 failures 10 s apart,
// would restart a start longer than 30 s part-way, again and again. The
// startup probe, on /healthz, must allow at least 5 minutes.
func TestKubernetesExampleGivesALongStartItsTime(t *testing.T) {
	_, c := examplePod(t, readExample(t))
	p := c.StartupProbe
	if p.HTTPGet.Path != "/healthz" {
		t.Fatalf("container %s: got a startup probe on %q, want one on /healthz: a long start must not meet the liveness probe", c.Name, p.HTTPGet.Path)
	}
	if allowed := time.Duration(p.PeriodSeconds*p.FailureThreshold) * time.Second; allowed < 5*time.Minute {
		t.Errorf("container %s: the startup probe allows %v (%d × %d s), want at least 5m", c.Name, allowed, p.FailureThreshold, p.PeriodSeconds)
	}
}

// TestKubernetesExampleProbesOutsideTheConnectionCap checks that the
// example serves its probes on --probe-addr: every probe and Prometheus's
// scrape go to the container port of that address, which the Service
// does not expose, so clients holding every one of --max-connections on
// --listen do not fail the liveness probe and restart a busy replica.
func TestKubernetesExampleProbesOutsideTheConnectionCap(t *testing.T) {
	objs := readExample(t)
	_, c := examplePod(t, objs)
	cfg := exampleServeConfig(t, objs)
	if cfg.probeAddr == "" {
		t.Fatalf("container %s: no --probe-addr, want one: on --listen the probes wait behind --max-connections", c.Name)
	}
	_, port, err := net.SplitHostPort(cfg.probeAddr)
	if err != nil {
		t.Fatal(err)
	}
	probePort := ""
	for _, p := range c.Ports {
		if strconv.Itoa(p.ContainerPort) == port {
			probePort = p.Name
		}
	}
	if probePort == "" {
		t.Fatalf("container %s: no port %s (--probe-addr) among %+v, want one named for the probes", c.Name, port, c.Ports)
	}
	for name, p := range map[string]k8sProbe{"startupProbe": c.StartupProbe, "livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe} {
		if p.HTTPGet.Port != probePort && p.HTTPGet.Port != port {
			t.Errorf("container %s: %s on port %q, want %q, --probe-addr's: outside --max-connections", c.Name, name, p.HTTPGet.Port, probePort)
		}
	}
	if got := objs["Deployment"][0].Spec.Template.Metadata.Annotations["prometheus.io/port"]; got != port {
		t.Errorf("prometheus.io/port %q, want %s, --probe-addr's: a scrape by the pod's address is outside --max-connections and --allowed-hosts", got, port)
	}
	for _, svc := range objs["Service"] {
		for _, p := range svc.Spec.Ports {
			if p.TargetPort == probePort || p.TargetPort == port {
				t.Errorf("Service %s exposes the probe port %s, want it left to the kubelet and Prometheus", svc.Metadata.Name, p.TargetPort)
			}
		}
	}
}
