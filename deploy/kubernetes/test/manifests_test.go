package k8stest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// manifests is deploy/kubernetes, from this package's directory.
const manifests = ".."

// render is `kubectl kustomize DIR`: the YAML a variant applies.
func render(t *testing.T, c *cluster, dir string) []byte {
	t.Helper()
	out, err := c.kubectlCmd(t.Context(), nil, "kustomize", dir).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	return out
}

// TestManifestsServerSide: each variant, as kustomize renders it, passes
// the real apiserver's validation (a server-side dry run, then a
// server-side apply with strict field validation), and the objects stored
// are what the docs promise; the same YAML with one defect each is refused.
func TestManifestsServerSide(t *testing.T) {
	c := need(t)
	for _, variant := range []struct{ dir, kind string }{{"daemonset", "daemonset"}, {"deployment", "deployment"}} {
		t.Run(variant.dir, func(t *testing.T) {
			y := render(t, c, filepath.Join(manifests, variant.dir))
			if _, err := c.kubectl(y, "apply", "--server-side", "--dry-run=server", "--validate=strict", "--field-manager=shinken-test", "-f", "-"); err != nil {
				t.Fatalf("dry run: %v", err)
			}
			// One defect each, in the YAML that passes (before it is stored:
			// the workload's own create is what is validated).
			for _, bad := range []struct{ name, from, to, want string }{
				{"unknown field", "readinessProbe:", "readinesProbe:", "readinesProbe"},
				{"port out of range", "containerPort: 8700", "containerPort: 87000", "87000"},
				{"probe on an invalid port name", "port: http\n", "port: htp_port\n", "htp_port"},
				{"memory request over its limit", "memory: 1536Mi", "memory: 16Gi", "less than or equal to memory limit"},
			} {
				b := strings.Replace(string(y), bad.from, bad.to, 1)
				if b == string(y) {
					t.Fatalf("%s: %q not in the rendered YAML", bad.name, bad.from)
				}
				out, err := c.kubectl([]byte(b), "apply", "--server-side", "--dry-run=server", "--validate=strict", "--field-manager=shinken-test", "-f", "-")
				if err == nil {
					t.Errorf("%s: the apiserver accepted it:\n%s", bad.name, out)
				} else if !strings.Contains(out, bad.want) {
					t.Errorf("%s: refused, but not for %q:\n%s", bad.name, bad.want, out)
				} else {
					t.Logf("%s: refused: %s", bad.name, firstLine(out, bad.want))
				}
			}
			out, err := c.kubectl(y, "apply", "--server-side", "--validate=strict", "--field-manager=shinken-test", "-f", "-")
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			t.Logf("applied:\n%s", out)
			for _, obj := range []string{"namespace/shinken", "-n shinken serviceaccount/shinken-envserver", "-n shinken configmap/shinken-envserver",
				"-n shinken service/shinken-envserver", "-n shinken poddisruptionbudget/shinken-envserver", "-n shinken " + variant.kind + "/shinken-envserver"} {
				if _, err := c.kubectl(nil, append([]string{"get"}, strings.Fields(obj)...)...); err != nil {
					t.Errorf("stored: %v", err)
				}
			}
			js, err := c.kubectl(nil, "-n", "shinken", "get", variant.kind, "shinken-envserver", "-o", "json")
			if err != nil {
				t.Fatal(err)
			}
			checkPod(t, []byte(js))
		})
	}
	t.Run("deployment rollout bounds", func(t *testing.T) {
		// A cross-field rule only the server knows: a rolling update must be
		// able to make progress.
		y := render(t, c, filepath.Join(manifests, "deployment"))
		b := strings.Replace(string(y), "maxSurge: 1", "maxSurge: 0", 1)
		out, err := c.kubectl([]byte(b), "apply", "--server-side", "--dry-run=server", "--field-manager=shinken-test", "-f", "-")
		if err == nil || !strings.Contains(out, "may not be 0") {
			t.Errorf("maxSurge 0 with maxUnavailable 0: err %v\n%s", err, out)
		}
	})
	t.Run("narrower privileges", func(t *testing.T) {
		// The set below privileged that boots sandboxes (docs/kubernetes.md,
		// "Privileges") needs /proc unmasked, which the apiserver allows
		// only in a pod with a user namespace of its own.
		y := string(render(t, c, filepath.Join(manifests, "daemonset")))
		narrow := strings.Replace(y, "privileged: true\n", "capabilities:\n            add: [SYS_ADMIN, NET_ADMIN, SYS_PTRACE, DAC_READ_SEARCH]\n          procMount: Unmasked\n          seccompProfile:\n            type: Unconfined\n", 1)
		if narrow == y {
			t.Fatal("privileged: true not in the rendered DaemonSet")
		}
		out, err := c.kubectl([]byte(narrow), "apply", "--server-side", "--dry-run=server", "--field-manager=shinken-test", "-f", "-")
		if err == nil || !strings.Contains(out, "hostUsers") {
			t.Errorf("procMount Unmasked with host users: err %v\n%s", err, out)
		} else {
			t.Logf("refused: %s", firstLine(out, "hostUsers"))
		}
	})
	t.Run("components", func(t *testing.T) {
		// The optional components on top of a variant: the client RBAC
		// applies; the ServiceMonitor needs its CRD, which this cluster
		// lacks, which is why it is not in the base.
		dir := t.TempDir()
		rel := relTo(t, dir)
		os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- "+
			rel("daemonset")+"\ncomponents:\n- "+rel("components/client-rbac")+"\n- "+rel("components/servicemonitor")+"\n"), 0o644)
		y := string(render(t, c, dir))
		docs := strings.Split(y, "\n---\n")
		var withoutSM []string
		sm := ""
		for _, d := range docs {
			if strings.Contains(d, "kind: ServiceMonitor") {
				sm = d
				continue
			}
			withoutSM = append(withoutSM, d)
		}
		if sm == "" || !strings.Contains(y, "kind: Role\n") || !strings.Contains(y, "kind: RoleBinding") {
			t.Fatalf("components not rendered:\n%s", y)
		}
		if _, err := c.kubectl([]byte(strings.Join(withoutSM, "\n---\n")), "apply", "--server-side", "--validate=strict", "--field-manager=shinken-test", "-f", "-"); err != nil {
			t.Fatalf("daemonset + client-rbac: %v", err)
		}
		if out, err := c.kubectl(nil, "auth", "can-i", "list", "pods", "-n", "shinken", "--as=system:serviceaccount:shinken:shinken-trainer"); err != nil || strings.TrimSpace(out) != "yes" {
			t.Errorf("shinken-trainer may not list pods: %v %s", err, out)
		}
		if out, _ := c.kubectl(nil, "auth", "can-i", "delete", "pods", "-n", "shinken", "--as=system:serviceaccount:shinken:shinken-trainer"); strings.TrimSpace(out) != "no" {
			t.Errorf("shinken-trainer may delete pods: %s", out)
		}
		out, err := c.kubectl([]byte(sm), "apply", "--server-side", "--dry-run=server", "--field-manager=shinken-test", "-f", "-")
		if err == nil || !strings.Contains(out, "ServiceMonitor") {
			t.Errorf("ServiceMonitor without its CRD: err %v\n%s", err, out)
		}
	})
}

// checkPod checks the stored workload's pod template against what
// docs/kubernetes.md says it is.
func checkPod(t *testing.T, js []byte) {
	t.Helper()
	var w struct {
		Spec struct {
			Template struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
				Spec struct {
					AutomountServiceAccountToken  *bool `json:"automountServiceAccountToken"`
					TerminationGracePeriodSeconds int   `json:"terminationGracePeriodSeconds"`
					HostNetwork                   bool  `json:"hostNetwork"`
					HostPID                       bool  `json:"hostPID"`
					Containers                    []struct {
						Args  []string `json:"args"`
						Ports []struct {
							Name          string `json:"name"`
							ContainerPort int    `json:"containerPort"`
						} `json:"ports"`
						Env []struct {
							Name, Value string
						} `json:"env"`
						Resources struct {
							Requests map[string]string `json:"requests"`
						} `json:"resources"`
						SecurityContext struct {
							Privileged             *bool `json:"privileged"`
							RunAsUser              *int  `json:"runAsUser"`
							ReadOnlyRootFilesystem *bool `json:"readOnlyRootFilesystem"`
						} `json:"securityContext"`
						ReadinessProbe struct {
							HTTPGet struct {
								Path string `json:"path"`
							} `json:"httpGet"`
						} `json:"readinessProbe"`
						LivenessProbe struct {
							HTTPGet struct {
								Path string `json:"path"`
							} `json:"httpGet"`
						} `json:"livenessProbe"`
					} `json:"containers"`
					Volumes []struct {
						Name   string `json:"name"`
						Secret *struct {
							SecretName string `json:"secretName"`
						} `json:"secret"`
					} `json:"volumes"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(js, &w); err != nil {
		t.Fatal(err)
	}
	p := w.Spec.Template.Spec
	if len(p.Containers) != 1 {
		t.Fatalf("containers: %d", len(p.Containers))
	}
	ct := p.Containers[0]
	if len(ct.Ports) != 1 || ct.Ports[0].Name != "http" || ct.Ports[0].ContainerPort != 8700 {
		t.Errorf("ports %+v: want one named http, 8700 (what k8s:// discovery reads)", ct.Ports)
	}
	if sc := ct.SecurityContext; sc.Privileged == nil || !*sc.Privileged || sc.RunAsUser == nil || *sc.RunAsUser != 0 ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("securityContext %+v: want privileged, root, read-only root", sc)
	}
	if p.HostNetwork || p.HostPID || p.AutomountServiceAccountToken == nil || *p.AutomountServiceAccountToken {
		t.Errorf("pod: hostNetwork %v hostPID %v automount %v", p.HostNetwork, p.HostPID, p.AutomountServiceAccountToken)
	}
	if p.TerminationGracePeriodSeconds != 90 || !contains(ct.Args, "--shutdown-timeout=60s") {
		t.Errorf("grace %d, args %v: want 90 s over a 60 s drain", p.TerminationGracePeriodSeconds, ct.Args)
	}
	if ct.ReadinessProbe.HTTPGet.Path != "/readyz" || ct.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("readiness %+v", ct.ReadinessProbe)
	}
	if ct.Resources.Requests["memory"] != "1536Mi" {
		t.Errorf("memory request %v", ct.Resources.Requests)
	}
	if a := w.Spec.Template.Metadata.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != "8700" {
		t.Errorf("annotations %v", a)
	}
	tokenFile := ""
	for _, e := range ct.Env {
		if e.Name == "SHINKEN_TOKEN_FILE" {
			tokenFile = e.Value
		}
	}
	secret := ""
	for _, v := range p.Volumes {
		if v.Secret != nil {
			secret = v.Secret.SecretName
		}
	}
	if tokenFile == "" || secret != "shinken-token" {
		t.Errorf("token: $SHINKEN_TOKEN_FILE %q from secret %q", tokenFile, secret)
	}
}

// relTo returns a function naming a directory of deploy/kubernetes
// relative to dir: kustomize refuses absolute paths.
func relTo(t *testing.T, dir string) func(string) string {
	t.Helper()
	abs, err := filepath.Abs(manifests)
	if err != nil {
		t.Fatal(err)
	}
	return func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(abs, p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

func firstLine(out, want string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, want) {
			if len(l) > 200 {
				return l[:200] + "..."
			}
			return l
		}
	}
	return ""
}
