"""k8s:// discovery against a real kube-apiserver (make test-k8s starts it;
deploy/kubernetes/test). Pods are created as objects and their status set
through the status subresource (no kubelet), pointing at real envservers
on loopback. Skipped without $SHINKEN_K8S_KUBECONFIG."""

import asyncio
import json
import os
import signal
import subprocess

import pytest

from conftest import start_server
from shinken import k8s
from shinken.errors import TransportError
from shinken.multi import connect

KC = os.environ.get("SHINKEN_K8S_KUBECONFIG", "")
pytestmark = pytest.mark.skipif(not KC, reason="make test-k8s runs these against a real kube-apiserver")

NS = "shinken"
LABEL = "shinken-test=discovery"
URL = f"k8s://{NS}/{LABEL}"
WAIT = {"verb": "wait", "ms": 10}


def kubectl(*args, input=None):
    r = subprocess.run([os.environ["SHINKEN_K8S_KUBECTL"], "--kubeconfig", KC, *args], input=input,
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {r.stdout}{r.stderr}")
    return r.stdout


def make_pod(name, port, *, phase="Running", ready=True, labels=None, finalizer=False):
    """A pod object whose container port "http" is port, its status set as a
    kubelet would (phase, Ready, podIP 127.0.0.1)."""
    meta = {"name": name, "namespace": NS, "labels": labels or {"shinken-test": "discovery"}}
    if finalizer:
        meta["finalizers"] = ["shinken.test/hold"]
    kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {"nodeName": "node-1", "automountServiceAccountToken": False,
                 "containers": [{"name": "envserver", "image": "shinken-envserver:latest",
                                 "ports": [{"name": "http", "containerPort": port}]}]}}))
    if phase:
        kubectl("patch", "pod", name, "-n", NS, "--subresource=status", "--type=merge", "-p", json.dumps({"status": {
            "phase": phase, "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}],
            "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}))


def scrape(url, token):
    """A server's /metrics (it needs the token), series → value."""
    import urllib.request
    req = urllib.request.Request(url + "/metrics", headers={"Authorization": "Bearer " + token})
    out = {}
    with urllib.request.urlopen(req, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#"):
                k, _, v = line.rpartition(" ")
                out[k] = float(v)
    return out


def port_of(url):
    return int(url.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Two real envservers (pool 1) sharing a token, and their pods a and b,
    beside pods that must not be found."""
    tmp = tmp_path_factory.mktemp("k8s")
    a = start_server(tmp, pool=1)
    try:
        b = start_server(tmp, pool=1, token=a.srv.token)
    except BaseException:
        a.cleanup()
        raise
    kubectl("delete", "pods", "-n", NS, "-l", "shinken-test", "--ignore-not-found", "--wait=false")
    make_pod("a", port_of(a.srv.url))
    make_pod("b", port_of(b.srv.url))
    make_pod("c-unready", 1, ready=False)
    make_pod("d-pending", 2, phase=None)
    make_pod("e-terminating", 3, finalizer=True)
    kubectl("delete", "pod", "e-terminating", "-n", NS, "--wait=false")
    make_pod("f-other-label", 4, labels={"shinken-test": "other"})
    yield tmp, a, b
    kubectl("patch", "pod", "e-terminating", "-n", NS, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    kubectl("delete", "pods", "-n", NS, "-l", "shinken-test", "--ignore-not-found", "--wait=false")
    b.cleanup()
    a.cleanup()


def test_finds_the_ready_pods_with_each_kind_of_credentials(servers, monkeypatch):
    _, a, b = servers
    want = [a.srv.url, b.srv.url]
    # The admin's kubeconfig as kubectl wrote it: CA and client certificate embedded (-data).
    assert k8s.discover(URL, k8s.KubeAPI.from_kubeconfig(KC)) == want
    # A service account's token, the CA as a file: what components/client-rbac grants.
    tok = k8s.KubeAPI.from_kubeconfig(os.environ["SHINKEN_K8S_TOKEN_KUBECONFIG"])
    assert k8s.discover(URL, tok) == want
    with pytest.raises(k8s.DiscoveryError, match="403"):  # and nothing beyond its namespace
        k8s.discover("k8s://default/" + LABEL, tok)
    # Inside a pod: the service account directory and $KUBERNETES_SERVICE_HOST/_PORT.
    host, port = os.environ["SHINKEN_K8S_SERVER"].rsplit(":", 1)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    assert k8s.discover(URL, k8s.KubeAPI.in_cluster(os.environ["SHINKEN_K8S_SA_DIR"])) == want
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    # $KUBECONFIG, through connect(): the default a trainer gets.
    monkeypatch.setenv("KUBECONFIG", KC)
    m = connect(URL, a.srv.token)
    assert isinstance(m, k8s.K8sMultiClient) and m.servers() == want
    asyncio.run(m.aclose())
    # The command line, for tools that take plain URLs (rollout --server).
    import sys
    out = subprocess.run([sys.executable, "-m", "shinken.k8s", URL], capture_output=True, text=True, timeout=30,
                         env=dict(os.environ, KUBECONFIG=KC))
    assert out.returncode == 0 and out.stdout.split() == want, out


def test_spreads_sticks_forks_beside_and_finds_again(servers, task_id, monkeypatch):
    """Envs spread over the two servers and stay there, forks beside their
    parent; when b's pod is deleted and its server lost, the failure makes
    the client list the pods again: the new pod's server takes new envs,
    b's envs fail typed, a's go on."""
    tmp, a, b = servers
    monkeypatch.setenv("KUBECONFIG", KC)
    ua, ub = a.srv.url, b.srv.url

    async def go():
        m = connect(URL, a.srv.token, rediscover_s=3600)  # only a failure lists the pods again
        try:
            slots = await m.reset([{"task": task_id}] * 4)
            assert all(s.error is None for s in slots), [s.error for s in slots]
            ids = [s.env_id for s in slots]
            on = {e: m.clients[m.server_of(e)].url for e in ids}
            assert sorted(on.values()) == sorted([ua, ua, ub, ub]), on
            steps = await m.step([{"env_id": e, "action": WAIT} for e in ids])
            assert all(s.error is None for s in steps), [s.error for s in steps]
            # The scaling gauge: what a's pool can still take, its two envs leased.
            mt = scrape(ua, a.srv.token)
            assert mt["shinken_pool_sandboxes{state=\"leased\"}"] >= 2
            assert mt["shinken_capacity_free"] == max(0, mt["shinken_pool_max_sandboxes"] - mt[
                "shinken_pool_sandboxes{state=\"leased\"}"] - mt["shinken_pool_queued"]), mt
            parent = next(e for e in ids if on[e] == ub)
            kids = await m.fork(parent, 2)
            assert all(s.error is None for s in kids), [s.error for s in kids]
            assert {m.clients[m.server_of(s.env_id)].url for s in kids} == {ub}

            # b's pod goes (as at a scale-down), its server dies; a new pod c comes.
            c = start_server(tmp, pool=1, token=a.srv.token)
            try:
                kubectl("delete", "pod", "b", "-n", NS, "--wait=false")
                make_pod("c", port_of(c.srv.url))
                b.stop(signal.SIGKILL)
                steps = await m.step([{"env_id": e, "action": WAIT} for e in ids])
                by = {s.env_id: s for s in steps}
                for e in ids:
                    if on[e] == ub:
                        assert isinstance(by[e].error, TransportError) and by[e].error.env_id == e, by[e]
                    else:
                        assert by[e].error is None, by[e].error
                more = await m.reset([{"task": task_id}] * 4)
                assert all(s.error is None for s in more), [s.error for s in more]
                placed = [m.clients[m.server_of(s.env_id)].url for s in more]
                assert ub not in placed and c.srv.url in placed, placed
                assert m.servers() == [ua, c.srv.url]
                await m.close_envs([e for e in ids if on[e] == ua] + [s.env_id for s in more])
            finally:
                kubectl("delete", "pod", "c", "-n", NS, "--ignore-not-found", "--wait=false")
                c.cleanup()
        finally:
            await m.aclose()

    asyncio.run(go())
