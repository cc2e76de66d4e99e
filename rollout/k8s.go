package rollout

// Envservers found through the Kubernetes API: k8s:// URLs, the same
// discovery as the Python client's shinken.k8s (docs/kubernetes.md).
//
// k8s://<namespace>/<label selector>[?port=<name or number>] names the
// envservers that are the ready pods of a namespace matching a label
// selector, for example k8s://shinken/app.kubernetes.io/name=shinken-envserver.
// The first "/" ends the namespace; the rest (up to "?") is the selector, as
// kubectl -l takes it, percent-decoded.
//
// A pod is a server when its phase is Running, its Ready condition is true
// and it is not being deleted. Its URL is http://<podIP>:<port> (hostIP
// under hostNetwork); the port is its container port named "http", or the
// one the port query names, or the number it gives.
//
// The pods are listed with one HTTPS GET of
// /api/v1/namespaces/{ns}/pods?labelSelector=... with the standard library
// only (no client-go: its dependency graph would dwarf this module's), with
// the first credentials found: inside a pod, its service account; otherwise
// the current context of $KUBECONFIG (its first file) or ~/.kube/config.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

const (
	k8sScheme = "k8s://"
	// ServiceAccountDir is where a pod's service account credentials are.
	ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	defaultK8sPort    = "http"
)

// K8sTarget is a parsed k8s:// URL.
type K8sTarget struct {
	Namespace string
	Selector  string
	Port      string // a container port's name, or a number
}

// IsK8sURL reports whether u is a k8s:// URL.
func IsK8sURL(u string) bool { return strings.HasPrefix(u, k8sScheme) }

// ParseK8sURL parses k8s://<namespace>/<label selector>[?port=...].
func ParseK8sURL(u string) (K8sTarget, error) {
	if !IsK8sURL(u) {
		return K8sTarget{}, fmt.Errorf("%q: want %s<namespace>/<label selector>", u, k8sScheme)
	}
	rest := u[len(k8sScheme):]
	rest, query, _ := strings.Cut(rest, "?")
	ns, sel, ok := strings.Cut(rest, "/")
	sel, err := url.PathUnescape(sel)
	if err != nil {
		return K8sTarget{}, fmt.Errorf("%q: selector: %v", u, err)
	}
	sel = strings.TrimSpace(sel)
	if !ok || ns == "" || sel == "" {
		return K8sTarget{}, fmt.Errorf("%q: want %s<namespace>/<label selector> (both non-empty)", u, k8sScheme)
	}
	if !isDNSLabel(ns) {
		return K8sTarget{}, fmt.Errorf("%q: namespace %q is not a DNS label", u, ns)
	}
	t := K8sTarget{Namespace: ns, Selector: sel, Port: defaultK8sPort}
	if query != "" {
		q, err := url.ParseQuery(query)
		if err != nil {
			return K8sTarget{}, fmt.Errorf("%q: %v", u, err)
		}
		for k, v := range q {
			if k != "port" || len(v) != 1 || v[0] == "" {
				return K8sTarget{}, fmt.Errorf("%q: unknown, repeated or empty query parameter %q (only port=<name or number>)", u, k)
			}
			t.Port = v[0]
		}
	}
	if n, err := strconv.Atoi(t.Port); err == nil && (n <= 0 || n >= 65536) {
		return K8sTarget{}, fmt.Errorf("%q: port %d out of range", u, n)
	}
	return t, nil
}

func isDNSLabel(s string) bool {
	if len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func (t K8sTarget) String() string {
	q := ""
	if t.Port != defaultK8sPort {
		q = "?port=" + url.QueryEscape(t.Port)
	}
	return k8sScheme + t.Namespace + "/" + strings.ReplaceAll(t.Selector, " ", "%20") + q
}

// Pod is the part of a Kubernetes pod that discovery reads.
type Pod struct {
	Metadata struct {
		Name              string  `json:"name"`
		UID               string  `json:"uid"`
		DeletionTimestamp *string `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		HostNetwork bool `json:"hostNetwork"`
		Containers  []struct {
			Ports []struct {
				Name          string `json:"name"`
				ContainerPort int    `json:"containerPort"`
			} `json:"ports"`
		} `json:"containers"`
	} `json:"spec"`
	Status struct {
		Phase      string `json:"phase"`
		PodIP      string `json:"podIP"`
		HostIP     string `json:"hostIP"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
		ContainerStatuses []struct {
			RestartCount int `json:"restartCount"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

// PodList is a list of pods as the API returns it.
type PodList struct {
	Items []Pod `json:"items"`
}

// PodReady reports whether a pod is Running, Ready and not being deleted.
func PodReady(p *Pod) bool {
	if p.Metadata.DeletionTimestamp != nil || p.Status.Phase != "Running" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" && c.Status == "True" {
			return true
		}
	}
	return false
}

// PodURL is http://<podIP, or hostIP under hostNetwork>:<port>, or "" when
// the pod has no address yet or no such container port.
func PodURL(p *Pod, port string) string {
	ip := p.Status.PodIP
	if p.Spec.HostNetwork {
		ip = p.Status.HostIP
	}
	if ip == "" {
		return ""
	}
	num, err := strconv.Atoi(port)
	if err != nil {
		num = 0
	find:
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == port && cp.ContainerPort > 0 {
					num = cp.ContainerPort
					break find
				}
			}
		}
		if num == 0 {
			return ""
		}
	}
	return "http://" + net.JoinHostPort(ip, strconv.Itoa(num))
}

// ReadyServer is a ready pod's envserver. Restarts is the sum of its
// containers' restart counts: with the UID, it tells a new server process
// behind the same address (a new pod, or the same pod's container
// restarted after a crash).
type ReadyServer struct {
	Pod, UID, URL string
	Restarts      int
}

// incarnation names the server process a ReadyServer stands for.
func (r ReadyServer) incarnation() string {
	if r.UID == "" {
		return ""
	}
	return r.UID + "/" + strconv.Itoa(r.Restarts)
}

// ReadyServers returns each ready pod of l that has a URL, by pod name; a
// URL two pods share is listed once.
func ReadyServers(l *PodList, port string) []ReadyServer {
	items := append([]Pod(nil), l.Items...)
	sort.Slice(items, func(a, b int) bool { return items[a].Metadata.Name < items[b].Metadata.Name })
	var out []ReadyServer
	seen := map[string]bool{}
	for i := range items {
		p := &items[i]
		if !PodReady(p) {
			continue
		}
		if u := PodURL(p, port); u != "" && !seen[u] {
			seen[u] = true
			rs := ReadyServer{Pod: p.Metadata.Name, UID: p.Metadata.UID, URL: u}
			for _, c := range p.Status.ContainerStatuses {
				rs.Restarts += c.RestartCount
			}
			out = append(out, rs)
		}
	}
	return out
}

// DiscoveryError is a failure to ask the Kubernetes API (no credentials,
// refused, unauthorized) or to read its answer.
type DiscoveryError struct{ Msg string }

func (e *DiscoveryError) Error() string { return "k8s discovery: " + e.Msg }

func discoveryErr(format string, a ...any) error {
	return &DiscoveryError{Msg: fmt.Sprintf(format, a...)}
}

// KubeCredentials are what KubeAPI needs: the server and how to trust and
// authenticate to it.
type KubeCredentials struct {
	Server             string
	CAFile             string
	CAData             []byte
	CertFile, KeyFile  string
	CertData, KeyData  []byte
	Token, TokenFile   string // TokenFile is read at each call: projected tokens rotate
	InsecureSkipVerify bool
}

// KubeAPI is just enough of a Kubernetes API client: GET a path, JSON back.
type KubeAPI struct {
	Server    string
	Token     string
	TokenFile string
	HTTP      *http.Client
}

// NewKubeAPI returns a client of the API server c names.
func NewKubeAPI(c KubeCredentials) (*KubeAPI, error) {
	server := c.Server
	if !strings.HasPrefix(server, "https://") && !strings.HasPrefix(server, "http://") {
		server = "https://" + server
	}
	tc := &tls.Config{InsecureSkipVerify: c.InsecureSkipVerify}
	if c.CAFile != "" || len(c.CAData) > 0 {
		pem := c.CAData
		if c.CAFile != "" {
			b, err := os.ReadFile(c.CAFile)
			if err != nil {
				return nil, discoveryErr("certificate authority: %v", err)
			}
			pem = b
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, discoveryErr("certificate authority: no PEM certificate")
		}
		tc.RootCAs = pool
	}
	switch {
	case len(c.CertData) > 0 || len(c.KeyData) > 0:
		cert, err := tls.X509KeyPair(c.CertData, c.KeyData)
		if err != nil {
			return nil, discoveryErr("client-certificate-data/client-key-data: %v", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	case c.CertFile != "" || c.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, discoveryErr("client-certificate/client-key: %v", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	tr.Proxy = nil
	return &KubeAPI{Server: strings.TrimRight(server, "/"), Token: c.Token, TokenFile: c.TokenFile,
		HTTP: &http.Client{Transport: tr, Timeout: 10 * time.Second}}, nil
}

// InClusterKubeAPI is the API as a pod sees it: $KUBERNETES_SERVICE_HOST
// and _PORT, and the service account's CA and token in saDir (default
// ServiceAccountDir).
func InClusterKubeAPI(saDir string) (*KubeAPI, error) {
	if saDir == "" {
		saDir = ServiceAccountDir
	}
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, discoveryErr("not in a pod: $KUBERNETES_SERVICE_HOST/_PORT unset")
	}
	return NewKubeAPI(KubeCredentials{Server: "https://" + net.JoinHostPort(host, port),
		CAFile: filepath.Join(saDir, "ca.crt"), TokenFile: filepath.Join(saDir, "token")})
}

// KubeconfigAPI is the API a kubeconfig's context names (path "": the first
// file of $KUBECONFIG, else ~/.kube/config; context "": its current-context).
func KubeconfigAPI(path, context string) (*KubeAPI, error) {
	c, err := LoadKubeconfig(path, context)
	if err != nil {
		return nil, err
	}
	return NewKubeAPI(c)
}

// AutoKubeAPI is the in-cluster API inside a pod, the kubeconfig's otherwise.
func AutoKubeAPI() (*KubeAPI, error) {
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		if _, err := os.Stat(filepath.Join(ServiceAccountDir, "token")); err == nil {
			return InClusterKubeAPI("")
		}
	}
	return KubeconfigAPI("", "")
}

// LoadKubeconfig reads the credentials of a kubeconfig's context. Relative
// file paths are the kubeconfig's directory's. Exec and auth-provider
// plugins are refused, naming them.
func LoadKubeconfig(path, context string) (KubeCredentials, error) {
	if path == "" {
		for _, p := range filepath.SplitList(os.Getenv("KUBECONFIG")) {
			if p != "" {
				path = p
				break
			}
		}
	}
	if path == "" {
		home, _ := os.UserHomeDir()
		path = filepath.Join(home, ".kube", "config")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return KubeCredentials{}, discoveryErr("kubeconfig: %v", err)
	}
	doc, err := parseKubeYAML(string(b))
	if err != nil {
		return KubeCredentials{}, discoveryErr("kubeconfig %s: %v", path, err)
	}
	cfg, _ := doc.(map[string]any)
	fail := func(format string, a ...any) (KubeCredentials, error) {
		return KubeCredentials{}, discoveryErr("kubeconfig %s: %s", path, fmt.Sprintf(format, a...))
	}
	named := func(kind, name, field string) (map[string]any, bool) {
		items, _ := cfg[kind].([]any)
		for _, it := range items {
			m, _ := it.(map[string]any)
			if n, _ := m["name"].(string); n == name {
				f, _ := m[field].(map[string]any)
				if f == nil {
					f = map[string]any{}
				}
				return f, true
			}
		}
		return nil, false
	}
	str := func(m map[string]any, k string) string { v, _ := m[k].(string); return v }
	if context == "" {
		context = str(cfg, "current-context")
	}
	if context == "" {
		return fail("no current-context")
	}
	ctx, ok := named("contexts", context, "context")
	if !ok {
		return fail("no context named %q", context)
	}
	cluster, ok := named("clusters", str(ctx, "cluster"), "cluster")
	if !ok {
		return fail("no cluster named %q", str(ctx, "cluster"))
	}
	user := map[string]any{}
	if u := str(ctx, "user"); u != "" {
		if user, ok = named("users", u, "user"); !ok {
			return fail("no user named %q", u)
		}
	}
	for _, plugin := range []string{"exec", "auth-provider"} {
		if user[plugin] != nil {
			return fail("user %q uses an %s plugin, which rollout does not run; use a token, a client certificate or a service account's kubeconfig", str(ctx, "user"), plugin)
		}
	}
	if str(cluster, "server") == "" {
		return fail("cluster %q has no server", str(ctx, "cluster"))
	}
	base := filepath.Dir(path)
	file := func(v string) string {
		if v == "" || filepath.IsAbs(v) {
			return v
		}
		return filepath.Join(base, v)
	}
	var derr error
	data := func(v string) []byte {
		if v == "" {
			return nil
		}
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil && derr == nil {
			derr = err
		}
		return b
	}
	insecure, _ := cluster["insecure-skip-tls-verify"].(bool)
	c := KubeCredentials{
		Server: str(cluster, "server"), CAFile: file(str(cluster, "certificate-authority")),
		CAData: data(str(cluster, "certificate-authority-data")), InsecureSkipVerify: insecure,
		CertFile: file(str(user, "client-certificate")), KeyFile: file(str(user, "client-key")),
		CertData: data(str(user, "client-certificate-data")), KeyData: data(str(user, "client-key-data")),
		Token: str(user, "token"), TokenFile: file(str(user, "tokenFile")),
	}
	if derr != nil {
		return fail("base64: %v", derr)
	}
	return c, nil
}

// Get GETs path with query q and decodes its JSON into v.
func (k *KubeAPI) Get(ctx context.Context, path string, q url.Values, v any) error {
	u := k.Server + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return discoveryErr("%v", err)
	}
	req.Header.Set("Accept", "application/json")
	tok := k.Token
	if k.TokenFile != "" {
		b, err := os.ReadFile(k.TokenFile)
		if err != nil {
			return discoveryErr("token: %v", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := k.HTTP.Do(req)
	if err != nil {
		return discoveryErr("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return discoveryErr("GET %s: %v", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := string(body)
		var st struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(body, &st) == nil && st.Message != "" {
			msg = st.Message
		}
		if len(msg) > 512 {
			msg = msg[:512]
		}
		return discoveryErr("GET %s: HTTP %d: %s", path, resp.StatusCode, msg)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return discoveryErr("GET %s: %v", path, err)
	}
	return nil
}

// Pods lists the pods of namespace ns that match a label selector.
func (k *KubeAPI) Pods(ctx context.Context, ns, selector string) (*PodList, error) {
	var l PodList
	err := k.Get(ctx, "/api/v1/namespaces/"+url.PathEscape(ns)+"/pods", url.Values{"labelSelector": {selector}}, &l)
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// DiscoverK8s returns the URLs of the ready envservers a k8s:// URL names,
// by pod name (api nil: AutoKubeAPI).
func DiscoverK8s(ctx context.Context, k8sURL string, api *KubeAPI) ([]string, error) {
	t, err := ParseK8sURL(k8sURL)
	if err != nil {
		return nil, err
	}
	if api == nil {
		if api, err = AutoKubeAPI(); err != nil {
			return nil, err
		}
	}
	l, err := api.Pods(ctx, t.Namespace, t.Selector)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range ReadyServers(l, t.Port) {
		out = append(out, s.URL)
	}
	return out, nil
}

// IsDiscoveryError reports whether err is a DiscoveryError.
func IsDiscoveryError(err error) bool {
	var d *DiscoveryError
	return errors.As(err, &d)
}
