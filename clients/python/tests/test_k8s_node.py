"""k8s:// on a real single node (make test-k8s-node starts it: kubelet,
containerd, two envserver pods from deploy/kubernetes/deployment as two
hostNetwork Deployments, a and b; deploy/kubernetes/test/node_test.go).
Skipped without $SHINKEN_K8S_NODE_KUBECONFIG.

The failover run: the client finds both pods and spreads 8 envs; a's pod
is deleted mid-episode (grace 1 s: the server is killed, not drained); a's
envs fail typed as infrastructure while b's go on; the Deployment brings a
back (a new pod, same node and port), the client lists it again, sees the
new pod UID at a's address and places new envs on it; a's lost episodes
are read back from the new pod (the state is a hostPath), with the steps
they had. Then a's server is killed outright (SIGKILL, no drain): its envs
fail typed, the kubelet restarts the container in the same pod, the client
places on it again, and the killed episodes read back as
sandbox_died/server_restart. Then a rolling update of b that drains: a step in flight when
b's pod gets SIGTERM completes, b's envs then fail typed, the new pod
takes new envs. Prints MEASURE lines."""

import asyncio
import json
import os
import subprocess
import time
import types

import pytest

from shinken import k8s
from shinken.errors import ShinkenError
from shinken.multi import connect

KC = os.environ.get("SHINKEN_K8S_NODE_KUBECONFIG", "")
pytestmark = pytest.mark.skipif(not KC, reason="make test-k8s-node runs this on a real node")

NS = os.environ.get("SHINKEN_K8S_NODE_NS", "shinken")
URL = f"k8s://{NS}/shinken-node-test"
WAIT = {"verb": "wait", "ms": 50}


def kubectl(*args, input=None, check=True):
    r = subprocess.run([os.environ["SHINKEN_K8S_KUBECTL"], "--kubeconfig", KC, *args], input=input,
                       capture_output=True, text=True, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {r.stdout}{r.stderr}")
    return r.stdout


def pods(name):
    """(pod name, uid, ready) of deployment name's pods, not being deleted."""
    out = json.loads(kubectl("get", "pods", "-n", NS, "-l", f"shinken-node-test={name}", "-o", "json"))
    return [(p["metadata"]["name"], p["metadata"]["uid"], k8s.pod_ready(p)) for p in out["items"]
            if not p["metadata"].get("deletionTimestamp")]


def measure(what, value, unit):
    print(f"MEASURE {what}: {value:.2f} {unit}", flush=True)


def test_failover_and_rolling_update(monkeypatch):
    monkeypatch.setenv("KUBECONFIG", KC)
    token = os.environ["SHINKEN_K8S_NODE_TOKEN"]
    task = "xterm-hello-file"

    async def step_all(m, ids):
        return {s.env_id: s for s in await m.step([{"env_id": e, "action": WAIT} for e in ids])}

    async def step_or_fail(m, ids):
        """step_all where a lone server's failure (which raises) fails each env."""
        try:
            return await step_all(m, ids)
        except ShinkenError as e:
            return {x: types.SimpleNamespace(error=e) for x in ids}

    async def go_on(m, ids):
        """Steps envs that must go on; an episode at its step limit starts
        again on the same env (its server's). Returns the steps done."""
        r = await step_all(m, ids)
        over = [e for e, s in r.items() if s.error is not None and s.error.code == "episode_over"]
        bad = {e: s.error for e, s in r.items() if s.error is not None and e not in over}
        assert not bad, f"envs that must go on failed: {bad!r}"
        if over:
            again = await m.reset([{"env_id": e, "task": task} for e in over])
            assert all(s.error is None for s in again), [s.error for s in again]
        return len(r) - len(over)

    async def go():
        m = connect(URL, token, rediscover_s=3600)  # only failures list the pods again
        try:
            assert len(m.servers()) == 2, m.servers()
            (pa, uid_a, _), = pods("a")
            (pb, uid_b, _), = pods("b")
            urls = {n: u for n, u in k8s.ready_servers(json.loads(kubectl("get", "pods", "-n", NS, "-l",
                                                                          "shinken-node-test", "-o", "json")))}
            ua, ub = urls[pa], urls[pb]
            slots = await m.reset([{"task": task}] * 8)
            assert all(s.error is None for s in slots), [s.error for s in slots]
            ids = [s.env_id for s in slots]
            on = {e: m.clients[m.server_of(e)].url for e in ids}
            assert sorted(on.values()) == sorted([ua] * 4 + [ub] * 4), on
            eps = {s.env_id: s.episode_id for s in slots}
            for _ in range(2):
                r = await step_all(m, ids)
                assert all(s.error is None for s in r.values()), [s.error for s in r.values()]

            # a's pod dies mid-episode (SIGTERM, SIGKILL 1 s later).
            t0 = time.monotonic()
            kubectl("delete", "pod", pa, "-n", NS, "--grace-period=1", "--wait=false")
            live, lost, b_steps = [e for e in ids if on[e] == ua], {}, 0
            while live:
                r, n = await asyncio.gather(step_or_fail(m, live), go_on(m, [e for e in ids if on[e] == ub]))
                b_steps += n
                for e, s in r.items():
                    if s.error is not None:
                        lost[e] = s.error
                live = [e for e in live if e not in lost]
                assert time.monotonic() - t0 < 60, "a's envs still answer 60 s after its pod was deleted"
                await asyncio.sleep(0.05)
            t_fail = time.monotonic() - t0
            assert set(lost) == {e for e in ids if on[e] == ua}
            for e, err in lost.items():
                assert isinstance(err, ShinkenError) and err.fault == "infrastructure", (e, repr(err))
            measure("a's envs all failed after the pod delete", t_fail, "s")

            # The Deployment brings a back: same node and port, a new pod.
            while True:
                ps = pods("a")
                if ps and ps[0][1] != uid_a and ps[0][2]:
                    break
                b_steps += await go_on(m, [e for e in ids if on[e] == ub])  # b goes on meanwhile
                assert time.monotonic() - t0 < 240, f"a's replacement not Ready 240 s after the delete: {ps}"
                await asyncio.sleep(0.5)
            t_ready = time.monotonic() - t0
            measure("delete → replacement pod Ready (API)", t_ready, "s")
            for e in lost:  # dropped as infrastructure: the trainer retries those jobs
                m.placement.pop(e, None)
            more = await m.reset([{"task": task}] * 4)
            t_used = time.monotonic() - t0
            assert all(s.error is None for s in more), [s.error for s in more]
            placed = [m.clients[m.server_of(s.env_id)].url for s in more]
            assert placed.count(ua) >= 1, placed
            measure("delete → new envs placed on a's replacement (client)", t_used, "s")
            r = await step_all(m, [s.env_id for s in more])
            assert all(s.error is None for s in r.values()), [s.error for s in r.values()]
            measure("episodes lost on a (the deleted pod)", len(lost), "episodes")
            measure("episodes lost on b", 0, "episodes")
            measure("steps on b while a was away", b_steps, "steps")
            # a's lost episodes, read from the new pod (same state hostPath):
            # closed by the killed server's shutdown where it got that far
            # in its 1 s, else recovered from their journals as
            # sandbox_died/server_restart.
            ca = m.clients[[c.url for c in m.clients].index(ua)]
            reasons = []
            for e in lost:
                ep = await ca.episode(eps[e])
                reasons.append((ep.get("exit_reason"), ep.get("exit_detail"), ep.get("ended_at") is not None,
                                len(ep.get("steps") or [])))
                if len(reasons) == 1:
                    print("episode keys:", sorted(ep), flush=True)
            print("MEASURE a's lost episodes as the new pod reads them (exit reason, detail, ended, steps):",
                  reasons, flush=True)
            assert all(r[3] >= 2 for r in reasons), reasons  # the steps it replied before the delete

            # a's server crashes (SIGKILL, no drain): the kubelet restarts its
            # container in the same pod (same UID, restartCount 1), which
            # recovers the open episodes from their journals.
            eps2 = {s.env_id: s.episode_id for s in more}
            on_a2 = [s.env_id for s in more if m.clients[m.server_of(s.env_id)].url == ua]
            assert on_a2, "no env on a's replacement"
            (live_a,) = [p for p in json.loads(kubectl("get", "pods", "-n", NS, "-l", "shinken-node-test=a", "-o",
                                                       "json"))["items"] if not p["metadata"].get("deletionTimestamp")]
            cid = live_a["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
            t2 = time.monotonic()
            subprocess.run(["ctr", "-a", os.environ["SHINKEN_K8S_NODE_CTR_ADDRESS"], "-n", "k8s.io", "tasks", "kill",
                            "-s", "SIGKILL", cid], check=True, capture_output=True, timeout=30)
            live, lost2 = list(on_a2), {}
            while live:
                r = await step_or_fail(m, live)
                lost2.update({e: s.error for e, s in r.items() if s.error is not None})
                live = [e for e in live if e not in lost2]
                assert time.monotonic() - t2 < 30, "a's envs still answer 30 s after its server was killed"
                await asyncio.sleep(0.05)
            assert all(err.fault == "infrastructure" for err in lost2.values()), lost2
            measure("a's envs all failed after SIGKILL of its server", time.monotonic() - t2, "s")
            while True:
                p = json.loads(kubectl("get", "pod", live_a["metadata"]["name"], "-n", NS, "-o", "json"))
                if k8s.pod_ready(p) and p["status"]["containerStatuses"][0].get("restartCount", 0) >= 1:
                    break
                assert time.monotonic() - t2 < 120, "a's container not restarted and Ready 120 s after the kill"
                await asyncio.sleep(0.2)
            measure("kill → a's container restarted and Ready (same pod)", time.monotonic() - t2, "s")
            more2 = await m.reset([{"task": task}] * 2)
            assert all(s.error is None for s in more2), [s.error for s in more2]
            assert ua in [m.clients[m.server_of(s.env_id)].url for s in more2]
            measure("kill → new envs placed on the restarted server (client)", time.monotonic() - t2, "s")
            reasons2 = []
            for e in lost2:
                ep = await ca.episode(eps2[e])
                reasons2.append((ep.get("exit_reason"), ep.get("exit_detail")))
            print("MEASURE a's killed episodes as the restarted server reads them:", reasons2, flush=True)
            assert all(r == ("sandbox_died", "server_restart") for r in reasons2), reasons2
            more = [s for s in more if s.env_id not in lost2] + list(more2)

            # A rolling update of b drains: a step in flight completes.
            on_b = [e for e in ids if on[e] == ub]
            fresh = await m.reset([{"env_id": e, "task": task} for e in on_b])  # full step budgets
            assert all(s.error is None for s in fresh), [s.error for s in fresh]
            step = asyncio.ensure_future(m.step([{"env_id": on_b[0], "action": {"verb": "wait", "ms": 15000}}]))
            await asyncio.sleep(0.5)
            t1 = time.monotonic()
            kubectl("rollout", "restart", "deployment/shinken-envserver-b", "-n", NS)

            def terminating():
                out = json.loads(kubectl("get", "pods", "-n", NS, "-l", "shinken-node-test=b", "-o", "json"))
                return any(p["metadata"]["uid"] == uid_b and p["metadata"].get("deletionTimestamp")
                           for p in out["items"])
            while not terminating():
                assert time.monotonic() - t1 < 12, "b's old pod not terminating 12 s after the restart"
                await asyncio.sleep(0.1)
            measure("rollout restart → b's old pod terminating", time.monotonic() - t1, "s")
            assert not step.done(), "the long step ended before b's pod was told to stop"
            done = await step
            assert done[0].error is None, f"the step in flight during the drain: {done[0].error!r}"
            measure("the step in flight at SIGTERM completed, after", time.monotonic() - t1, "s")
            # Once the old server stops taking requests, b's envs fail typed.
            rest, failed = on_b[1:], {}
            while rest:
                r = await step_or_fail(m, rest)
                for e, s in r.items():
                    if s.error is not None and getattr(s.error, "code", None) == "episode_over":
                        try:
                            (s, ) = await m.reset([{"env_id": e, "task": task}])
                        except ShinkenError as err:
                            s = types.SimpleNamespace(error=err)
                    if s.error is not None:
                        failed[e] = s.error
                rest = [e for e in rest if e not in failed]
                assert time.monotonic() - t1 < 120, "b's envs still answer 120 s into its rolling update"
                await asyncio.sleep(0.2)
            for e, err in failed.items():
                assert err.fault == "infrastructure", (e, repr(err))
            kubectl("rollout", "status", "deployment/shinken-envserver-b", "-n", NS, "--timeout=240s")
            measure("rolling update of b (restart → rollout complete)", time.monotonic() - t1, "s")
            for e in on_b:
                m.placement.pop(e, None)
            await m.rediscover()
            more_b = await m.reset([{"task": task}] * 4)
            assert all(s.error is None for s in more_b), [s.error for s in more_b]
            assert ub in [m.clients[m.server_of(s.env_id)].url for s in more_b]
            (_, uid_b2, _), = pods("b")
            assert uid_b2 != uid_b
            await m.close_envs([s.env_id for s in more + more_b])
        finally:
            await m.aclose()

    asyncio.run(go())
