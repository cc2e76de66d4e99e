package rollout

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
)

// K8sServers is Servers over the ready envservers a k8s:// URL names,
// found again as pods come and go (k8s.go has the URL and the credentials).
//
// It lists the pods again when a server fails under a request, when no
// server is in placement, and at most every RediscoverEvery before placing
// new envs: new pods join placement; pods gone, unready or being deleted
// leave it (even while they still answer). Envs stay on the server that
// holds them and forks beside their parent (Servers). When the server
// process behind an address changes (a new pod UID: a DaemonSet's or a
// hostNetwork Deployment's replacement on the same node and port; or the
// same pod's container restarted after a crash), the envs placed on the old
// one fail as sandbox_died naming the server: their sandboxes went with it.
type K8sServers struct {
	*Servers
	Target K8sTarget
	API    *KubeAPI
	// RediscoverEvery bounds how stale the server list may get before new
	// envs are placed.
	RediscoverEvery time.Duration

	listMu sync.Mutex // one listing at a time
	stale  atomic.Bool
	listed atomic.Int64   // unix nanoseconds of the last listing
	uids   map[int]string // server → the incarnation (pod UID, restarts) last found behind it (under listMu)
	byURL  map[string]int // URL → server (under listMu)
	pods   map[int]string // server → pod name (under listMu)
	lastOK []ReadyServer  // the last listing (under listMu)
}

// NewK8sServers lists the ready envservers k8sURL names and returns a client
// of them (one token for all; api nil: AutoKubeAPI). It fails when the API
// cannot be asked or no server is ready.
func NewK8sServers(ctx context.Context, k8sURL, token string, kapi *KubeAPI, hc *http.Client) (*K8sServers, error) {
	t, err := ParseK8sURL(k8sURL)
	if err != nil {
		return nil, err
	}
	if kapi == nil {
		if kapi, err = AutoKubeAPI(); err != nil {
			return nil, err
		}
	}
	k := &K8sServers{Servers: newServers(token, hc), Target: t, API: kapi, RediscoverEvery: 30 * time.Second,
		uids: map[int]string{}, byURL: map[string]int{}, pods: map[int]string{}}
	k.Servers.onLoss = func(int) { k.stale.Store(true) }
	found, err := k.Rediscover(ctx)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, discoveryErr("%s: no ready envserver (no pod Running and Ready with a container port %q)", t, t.Port)
	}
	return k, nil
}

// Rediscover lists the pods again: new servers join placement, servers
// whose pod is gone or unready leave it, a server whose pod was replaced
// loses its envs (sandbox_died). It returns the ready servers; an API
// failure keeps the last list and returns a DiscoveryError.
func (k *K8sServers) Rediscover(ctx context.Context) ([]ReadyServer, error) {
	k.listMu.Lock()
	defer k.listMu.Unlock()
	l, err := k.API.Pods(ctx, k.Target.Namespace, k.Target.Selector)
	if err != nil {
		return nil, err
	}
	found := ReadyServers(l, k.Target.Port)
	now := map[int]bool{}
	for _, f := range found {
		i, ok := k.byURL[f.URL]
		if !ok {
			i = k.Servers.add(f.URL)
			k.byURL[f.URL] = i
		}
		if old, now := k.uids[i], f.incarnation(); old != "" && now != "" && old != now {
			why := fmt.Sprintf("pod %s was replaced by pod %s", k.pods[i], f.Pod)
			if k.pods[i] == f.Pod {
				why = fmt.Sprintf("pod %s's server restarted", f.Pod)
			}
			k.Servers.dropEnvs(i, &aci.Error{Code: aci.CodeSandboxDied,
				Message: fmt.Sprintf("env server %s lost: %s", f.URL, why),
				Detail:  map[string]any{"server": f.URL, "pod": k.pods[i]}})
			k.Servers.mu.Lock()
			delete(k.Servers.sizes, i) // the new pod's pool is asked again
			k.Servers.mu.Unlock()
		}
		k.uids[i], k.pods[i] = f.incarnation(), f.Pod
		now[i] = true
	}
	k.Servers.mu.Lock()
	for i := range k.Servers.clients {
		if now[i] {
			delete(k.Servers.gone, i)
			delete(k.Servers.down, i) // the API says it is ready: place on it again
		} else {
			k.Servers.gone[i] = true
		}
	}
	k.Servers.mu.Unlock()
	k.lastOK = found
	k.listed.Store(time.Now().UnixNano())
	k.stale.Store(false)
	return found, nil
}

// Pods returns the servers of the last listing: pod name, UID and URL.
func (k *K8sServers) Pods() []ReadyServer {
	k.listMu.Lock()
	defer k.listMu.Unlock()
	return append([]ReadyServer(nil), k.lastOK...)
}

// refresh lists the pods when a server failed, none is in placement, or the
// last listing is older than RediscoverEvery. An API failure keeps the
// last list: placement goes on with what was found before.
func (k *K8sServers) refresh(ctx context.Context) {
	if k.stale.Load() || len(k.InPlacement()) == 0 ||
		time.Since(time.Unix(0, k.listed.Load())) >= k.RediscoverEvery {
		k.Rediscover(ctx)
	}
}

// Reset places new envs on the servers found now (listing the pods first
// when due) and restarts placed envs on their servers.
func (k *K8sServers) Reset(ctx context.Context, req *api.ResetRequest) (*api.BatchReply, error) {
	k.refresh(ctx)
	rep, err := k.Servers.Reset(ctx, req)
	var ae *aci.Error
	if err != nil && errors.As(err, &ae) && ae.Code == aci.CodePoolExhausted {
		// No server reachable: the pods may have moved since; look once more.
		if _, lerr := k.Rediscover(ctx); lerr == nil {
			return k.Servers.Reset(ctx, req)
		}
	}
	return rep, err
}

// Spec is the spec of the first server in placement (listing the pods
// first when due).
func (k *K8sServers) Spec(ctx context.Context) (*api.Spec, error) {
	k.refresh(ctx)
	for _, u := range k.InPlacement() {
		k.listMu.Lock()
		i := k.byURL[u]
		k.listMu.Unlock()
		if sp, err := k.Servers.client(i).Spec(ctx); err == nil {
			k.Servers.mu.Lock()
			k.Servers.sizes[i] = sp.Pool.Size
			k.Servers.mu.Unlock()
			return sp, nil
		} else {
			k.Servers.markDown(i, err)
		}
	}
	return k.Servers.Spec(ctx)
}
