"""shinken.k8s without a cluster: k8s:// URLs, which pods are servers, the
kubeconfig subset, the API request, and K8sMultiClient's membership.
(make test-k8s runs test_k8s_cluster.py against a real kube-apiserver.)"""

import asyncio
import base64
import http.server
import json
import threading

import pytest

import shinken
from shinken import k8s
from shinken.multi import connect


def pod(name, *, phase="Running", ready=True, ip="10.0.0.5", host_ip="192.168.1.7", port=8700,
        port_name="http", host_network=False, deleting=False):
    p = {"metadata": {"name": name},
         "spec": {"containers": [{"name": "envserver", "ports": [{"name": port_name, "containerPort": port}]}]},
         "status": {"phase": phase, "podIP": ip, "hostIP": host_ip,
                    "conditions": [{"type": "PodScheduled", "status": "True"},
                                   {"type": "Ready", "status": "True" if ready else "False"}]}}
    if host_network:
        p["spec"]["hostNetwork"] = True
    if deleting:
        p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return p


def test_parse_url():
    t = k8s.parse_url("k8s://shinken/app.kubernetes.io/name=shinken-envserver")
    assert (t.namespace, t.selector, t.port) == ("shinken", "app.kubernetes.io/name=shinken-envserver", "http")
    t = k8s.parse_url("k8s://ml/tier%20in%20(a,b),!canary?port=9000")
    assert (t.namespace, t.selector, t.port) == ("ml", "tier in (a,b),!canary", "9000")
    assert k8s.parse_url("k8s://ml/app=x?port=api").port == "api"
    assert k8s.parse_url(str(t)) == t  # str round-trips
    for bad in ["http://x", "k8s://", "k8s://ns", "k8s://ns/", "k8s:///app=x", "k8s://Bad_NS/app=x",
                "k8s://ns/app=x?port=", "k8s://ns/app=x?prot=http", "k8s://ns/app=x?port=70000"]:
        with pytest.raises(ValueError):
            k8s.parse_url(bad)


def test_ready_pods_only_and_their_urls():
    pods = {"items": [
        pod("b", ip="10.0.0.2"),
        pod("a", ip="10.0.0.1", port=8701),
        pod("pending", phase="Pending"),
        pod("unready", ready=False),
        pod("terminating", deleting=True),
        pod("no-ip", ip=""),
        pod("other-port-name", port_name="metrics"),
        pod("hostnet", ip="10.0.0.9", host_ip="192.168.1.9", host_network=True),
        pod("dup", ip="10.0.0.2"),  # the same URL as b: listed once
        {"metadata": {"name": "no-status"}, "spec": {}},
    ]}
    assert k8s.ready_servers(pods) == [("a", "http://10.0.0.1:8701"), ("b", "http://10.0.0.2:8700"),
                                       ("hostnet", "http://192.168.1.9:8700")]
    # A numeric port needs no named container port; another name picks it.
    assert ("other-port-name", "http://10.0.0.5:9000") in k8s.ready_servers(pods, "9000")
    assert k8s.ready_servers(pods, "metrics") == [("other-port-name", "http://10.0.0.5:8700")]
    assert k8s.pod_url(pod("v6", ip="fd00::5")) == "http://[fd00::5]:8700"
    assert not k8s.pod_ready(pod("x", ready=False)) and k8s.pod_ready(pod("x"))


KUBECONFIG = """\
apiVersion: v1
clusters:
- cluster:
    certificate-authority: ca.crt   # relative: the kubeconfig's directory
    server: https://127.0.0.1:6443
  name: local
- cluster:
    insecure-skip-tls-verify: true
    server: "https://10.1.2.3:443"
  name: other
contexts:
- context:
    cluster: local
    namespace: shinken
    user: admin
  name: local
- context:
    cluster: other
    user: robot
  name: other
- context:
    cluster: local
    user: plugin
  name: plugin
current-context: local
kind: Config
preferences: {}
users:
- name: admin
  user:
    client-certificate: /abs/admin.crt
    client-key: admin.key
- name: robot
  user:
    token: 's3cr''et'
- name: plugin
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: some-helper
      args:
      - get-token
      - --flag
"""


def test_parse_yaml_kubectl_style():
    cfg = k8s.parse_yaml(KUBECONFIG)
    assert cfg["current-context"] == "local" and cfg["preferences"] == {}
    assert [c["name"] for c in cfg["clusters"]] == ["local", "other"]
    assert cfg["clusters"][1]["cluster"] == {"insecure-skip-tls-verify": True, "server": "https://10.1.2.3:443"}
    assert cfg["users"][1]["user"]["token"] == "s3cr'et"
    assert cfg["users"][2]["user"]["exec"]["args"] == ["get-token", "--flag"]
    assert k8s.parse_yaml(json.dumps({"a": [1, {"b": "c"}]})) == {"a": [1, {"b": "c"}]}  # JSON is YAML
    for bad in ["a: |\n  block\n", "a: &x 1\n", "a: {b: c}\n", "a:\n  b: 1\n c: 2\n"]:
        with pytest.raises(ValueError):
            k8s.parse_yaml(bad)


def test_load_kubeconfig(tmp_path):
    p = tmp_path / "config"
    p.write_text(KUBECONFIG)
    kw = k8s.load_kubeconfig(str(p))
    assert kw["server"] == "https://127.0.0.1:6443"
    assert kw["ca_file"] == str(tmp_path / "ca.crt")
    assert kw["cert_file"] == "/abs/admin.crt" and kw["key_file"] == str(tmp_path / "admin.key")
    kw = k8s.load_kubeconfig(str(p), context="other")
    assert kw["token"] == "s3cr'et" and kw["insecure"] and kw["ca_file"] is None
    with pytest.raises(k8s.DiscoveryError, match="exec plugin"):
        k8s.load_kubeconfig(str(p), context="plugin")
    with pytest.raises(k8s.DiscoveryError, match="no context named"):
        k8s.load_kubeconfig(str(p), context="nope")
    with pytest.raises(k8s.DiscoveryError):
        k8s.load_kubeconfig(str(tmp_path / "missing"))
    # -data fields are base64.
    d = tmp_path / "data"
    d.write_text(KUBECONFIG.replace("certificate-authority: ca.crt   # relative: the kubeconfig's directory",
                                    "certificate-authority-data: " + base64.b64encode(b"PEM").decode()))
    assert k8s.load_kubeconfig(str(d))["ca_data"] == b"PEM"


class _API(http.server.BaseHTTPRequestHandler):
    """A stand-in for the pods endpoint: records the request, answers the
    server's current PodList (or 403)."""

    pods = {"items": []}
    seen = []
    status = 200

    def do_GET(self):
        type(self).seen.append((self.path, self.headers.get("Authorization")))
        body = json.dumps(self.pods if self.status == 200 else {"message": "pods is forbidden"}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def api():
    _API.pods, _API.seen, _API.status = {"items": []}, [], 200
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _API)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv, k8s.KubeAPI(f"http://127.0.0.1:{srv.server_address[1]}", token="tok")
    srv.shutdown()


def test_discover_asks_for_the_selector_with_the_token(api):
    _, kube = api
    _API.pods = {"items": [pod("a", ip="127.0.0.1", port=1), pod("b", ready=False)]}
    assert k8s.discover("k8s://shinken/app.kubernetes.io/name=shinken-envserver,tier in (x)", kube) == \
        ["http://127.0.0.1:1"]
    path, auth = _API.seen[-1]
    assert path == "/api/v1/namespaces/shinken/pods?labelSelector=app.kubernetes.io%2Fname%3Dshinken-envserver" \
                   "%2Ctier+in+%28x%29"
    assert auth == "Bearer tok"
    _API.status = 403
    with pytest.raises(k8s.DiscoveryError, match="403.*forbidden"):
        k8s.discover("k8s://shinken/app=x", kube)


def test_in_cluster_credentials(tmp_path, monkeypatch):
    (tmp_path / "token").write_text("sa-token\n")
    (tmp_path / "ca.crt").write_text("")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(Exception):  # an empty CA file is refused by ssl, as it should be
        k8s.KubeAPI.in_cluster(str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(k8s.DiscoveryError, match="not in a pod"):
        k8s.KubeAPI.in_cluster(str(tmp_path))


def test_multi_client_membership_follows_the_pods(api):
    """New pods join placement, deleted or unready ones leave it; indices of
    servers already known never change (envs stay where they are)."""
    _, kube = api
    _API.pods = {"items": [pod("a", ip="127.0.0.1", port=1), pod("b", ip="127.0.0.1", port=2)]}

    async def go():
        m = connect("k8s://shinken/app=envserver", "t", api=kube, rediscover_s=3600)
        assert isinstance(m, k8s.K8sMultiClient) and isinstance(m, shinken.AsyncMultiClient)
        assert m.servers() == ["http://127.0.0.1:1", "http://127.0.0.1:2"]
        m.placement["env-on-b"] = 1
        _API.pods = {"items": [pod("a", ip="127.0.0.1", port=1), pod("b", ip="127.0.0.1", port=2, deleting=True),
                               pod("c", ip="127.0.0.1", port=3)]}
        n = len(_API.seen)
        await m._revive()  # fresh list (rediscover_s not due, nothing failed): no request
        assert len(_API.seen) == n
        m._mark_dead(0)  # a failure: the next placement lists the pods again
        await m._revive()
        assert len(_API.seen) == n + 1
        assert [c.url for c in m.clients] == ["http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"]
        assert m.servers() == ["http://127.0.0.1:3"]  # a still dead (until its health probe), b gone
        assert m.server_of("env-on-b") == 1
        # The API away: the last list stands.
        _API.status = 500
        m._stale = True
        await m._revive()
        assert m.servers() == ["http://127.0.0.1:3"]
        await m.aclose()

    asyncio.run(go())


def test_no_ready_server_is_an_error(api):
    _, kube = api
    _API.pods = {"items": [pod("a", ready=False)]}
    with pytest.raises(k8s.DiscoveryError, match="no ready envserver"):
        k8s.K8sMultiClient("k8s://shinken/app=x", "t", api=kube)


def test_a_new_pod_at_a_lost_address_is_used_at_once(api):
    """A replacement pod at a lost server's address (a new pod UID: a
    DaemonSet's or hostNetwork Deployment's new pod on the same node and
    port) puts the server back in placement without waiting for revive_s,
    and the envs the old pod held fail as SandboxDied (infrastructure), not
    not_found from the new server."""
    _, kube = api

    def with_uid(p, uid):
        p["metadata"]["uid"] = uid
        return p
    _API.pods = {"items": [with_uid(pod("a", ip="127.0.0.1", port=1), "ua"),
                           with_uid(pod("b", ip="127.0.0.1", port=2), "ub")]}

    async def go():
        m = connect("k8s://shinken/app=envserver", "t", api=kube, rediscover_s=3600, revive_s=3600)
        m.placement["env-on-a"], m.placement["env-on-b"] = 0, 1
        m._mark_dead(0)
        await m._revive()  # the same pod a, still listed: a stays dead until its probe
        assert m.servers() == ["http://127.0.0.1:2"]
        _API.pods["items"][0] = with_uid(pod("a2", ip="127.0.0.1", port=1), "ua2")
        m._stale = True
        await m._revive()
        assert m.servers() == ["http://127.0.0.1:1", "http://127.0.0.1:2"]
        assert m.server_of("env-on-a") is None and m.server_of("env-on-b") == 1
        (s,) = await m.step([{"env_id": "env-on-a", "action": {"verb": "wait", "ms": 1}}])
        assert s.error.code == "sandbox_died" and s.error.fault == "infrastructure", s.error
        assert "replaced" in s.error.message
        # b's container restarts after a crash (same pod, same UID): the same.
        m.placement["env-on-b"] = 1
        _API.pods["items"][1]["status"]["containerStatuses"] = [{"restartCount": 1}]
        m._stale = True
        await m._revive()
        (s,) = await m.step([{"env_id": "env-on-b", "action": {"verb": "wait", "ms": 1}}])
        assert s.error.code == "sandbox_died", s.error
        await m.aclose()

    asyncio.run(go())
