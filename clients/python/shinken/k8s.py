"""Envservers found through the Kubernetes API: ``k8s://`` URLs.

``k8s://<namespace>/<label selector>[?port=<name or number>]`` names the
envservers that are the ready pods of a namespace matching a label selector,
for example ``k8s://shinken/app.kubernetes.io/name=shinken-envserver``. The
first ``/`` ends the namespace; the rest (up to ``?``) is the selector, as
``kubectl -l`` takes it, percent-decoded (``%20`` for a space in a set-based
selector such as ``tier in (a,b)``).

A pod is a server when its phase is ``Running``, its ``Ready`` condition is
true and it is not being deleted. Its URL is ``http://<podIP>:<port>``
(``hostIP`` when the pod runs with ``hostNetwork``); the port is its
container port named ``http`` (docs/kubernetes.md), or the one the
``port`` query names, or the number it gives.

The pods are listed with one HTTPS GET of
``/api/v1/namespaces/{ns}/pods?labelSelector=...`` using the standard library
only, with the first credentials found: inside a pod, its service account
(``/var/run/secrets/kubernetes.io/serviceaccount``, ``$KUBERNETES_SERVICE_HOST``
and ``$KUBERNETES_SERVICE_PORT``); otherwise the current context of
``$KUBECONFIG`` (its first file) or ``~/.kube/config``: ``server``,
``certificate-authority(-data)``, ``client-certificate(-data)`` with
``client-key(-data)``, ``token`` or ``tokenFile``, ``insecure-skip-tls-verify``.
Exec and auth-provider plugins are refused, naming them.

``K8sMultiClient`` is an ``AsyncMultiClient`` over the servers found, and
``shinken.multi.connect`` builds one for a ``k8s://`` URL. It lists the pods
again when a server fails, when no server is live, and at most every
``rediscover_s`` seconds before placing new envs: new pods join placement,
pods gone, unready or being deleted leave it (even while they still answer).
Envs stay on the server that holds them; forks stay beside their parent.
When a new server process answers at a server's address (a DaemonSet's or a
hostNetwork Deployment's replacement on the same node and port: a new pod
UID; or the same pod's container restarted after a crash),
the server is live again at once, and the envs it held fail as
``SandboxDied`` (infrastructure): their sandboxes went with the old pod.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from .aio import AsyncClient, Slot, resolve_url_token
from .errors import SandboxDied, ShinkenError, TransportError
from .multi import AsyncMultiClient

__all__ = ["K8sTarget", "KubeAPI", "DiscoveryError", "K8sMultiClient", "parse_url", "is_k8s_url",
           "ready_servers", "pod_url", "pod_ready", "discover", "load_kubeconfig"]

SCHEME = "k8s://"
SERVICEACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_PORT = "http"


class DiscoveryError(ShinkenError):
    """The Kubernetes API could not be asked (no credentials, refused,
    unauthorized) or its answer could not be read."""

    fault = "infrastructure"


# -- the URL ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class K8sTarget:
    namespace: str
    selector: str
    port: str = DEFAULT_PORT  # a container port's name, or a number

    def __str__(self) -> str:
        q = "" if self.port == DEFAULT_PORT else "?port=" + urllib.parse.quote(self.port)
        return f"{SCHEME}{self.namespace}/{urllib.parse.quote(self.selector, safe='=,!/.-_')}{q}"


def is_k8s_url(url: Any) -> bool:
    return isinstance(url, str) and url.startswith(SCHEME)


def parse_url(url: str) -> K8sTarget:
    """K8sTarget of ``k8s://<namespace>/<label selector>[?port=...]``."""
    if not is_k8s_url(url):
        raise ValueError(f"{url!r}: want {SCHEME}<namespace>/<label selector>")
    rest = url[len(SCHEME):]
    rest, _, query = rest.partition("?")
    ns, sep, selector = rest.partition("/")
    selector = urllib.parse.unquote(selector).strip()
    if not sep or not ns or not selector:
        raise ValueError(f"{url!r}: want {SCHEME}<namespace>/<label selector> (both non-empty)")
    if len(ns) > 63 or not all(c.isdigit() or c == "-" or ("a" <= c <= "z") for c in ns) \
            or ns[0] == "-" or ns[-1] == "-":
        raise ValueError(f"{url!r}: namespace {ns!r} is not a DNS label")
    port = DEFAULT_PORT
    for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True):
        if k != "port" or not v:
            raise ValueError(f"{url!r}: unknown or empty query parameter {k!r} (only port=<name or number>)")
        port = v
    if port.isdigit() and not 0 < int(port) < 65536:
        raise ValueError(f"{url!r}: port {port} out of range")
    return K8sTarget(ns, selector, port)


# -- which pods are servers ----------------------------------------------------------------------------


def pod_ready(pod: Dict[str, Any]) -> bool:
    """Running, condition Ready true, not being deleted."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    st = pod.get("status") or {}
    if st.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])


def pod_url(pod: Dict[str, Any], port: str = DEFAULT_PORT) -> Optional[str]:
    """http://<podIP or hostIP under hostNetwork>:<port>, or None when the
    pod has no address yet or no such container port."""
    spec, st = pod.get("spec") or {}, pod.get("status") or {}
    ip = st.get("hostIP") if spec.get("hostNetwork") else st.get("podIP")
    if not ip:
        return None
    if port.isdigit():
        num: Optional[int] = int(port)
    else:
        num = None
        for c in spec.get("containers") or []:
            for p in c.get("ports") or []:
                if p.get("name") == port and p.get("containerPort"):
                    num = int(p["containerPort"])
                    break
            if num is not None:
                break
        if num is None:
            return None
    host = f"[{ip}]" if ":" in ip else ip
    return f"http://{host}:{num}"


def ready_servers(pod_list: Dict[str, Any], port: str = DEFAULT_PORT) -> List[Tuple[str, str]]:
    """(pod name, URL) of each ready pod of a PodList that has a URL, by
    name; a URL two pods share is listed once."""
    out: List[Tuple[str, str]] = []
    seen = set()
    for pod in sorted(pod_list.get("items") or [], key=lambda p: (p.get("metadata") or {}).get("name", "")):
        if not pod_ready(pod):
            continue
        u = pod_url(pod, port)
        if u and u not in seen:
            seen.add(u)
            out.append(((pod.get("metadata") or {}).get("name", ""), u))
    return out


# -- the API ----------------------------------------------------------------------------------------


class KubeAPI:
    """Just enough of a Kubernetes API client: GET a path, JSON back."""

    def __init__(self, server: str, *, ca_file: Optional[str] = None, ca_data: Optional[bytes] = None,
                 cert_file: Optional[str] = None, key_file: Optional[str] = None,
                 cert_data: Optional[bytes] = None, key_data: Optional[bytes] = None,
                 token: Optional[str] = None, token_file: Optional[str] = None,
                 insecure: bool = False, timeout: float = 10.0):
        if not server.startswith(("https://", "http://")):
            server = "https://" + server
        self.server = server.rstrip("/")
        self.token, self.token_file, self.timeout = token, token_file, timeout
        self.ctx: Optional[ssl.SSLContext] = None
        if self.server.startswith("https://"):
            ctx = ssl.create_default_context(cafile=ca_file,
                                             cadata=ca_data.decode() if ca_data else None)
            if insecure:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            if cert_data or key_data:
                if not (cert_data and key_data):
                    raise DiscoveryError("kubeconfig: client-certificate-data needs client-key-data")
                _load_chain_data(ctx, cert_data, key_data)
            elif cert_file or key_file:
                if not (cert_file and key_file):
                    raise DiscoveryError("kubeconfig: client-certificate needs client-key")
                ctx.load_cert_chain(cert_file, key_file)
            self.ctx = ctx

    @classmethod
    def in_cluster(cls, sa_dir: str = SERVICEACCOUNT_DIR) -> "KubeAPI":
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
        if not host or not port:
            raise DiscoveryError("not in a pod: $KUBERNETES_SERVICE_HOST/_PORT unset")
        if ":" in host:
            host = f"[{host}]"
        return cls(f"https://{host}:{port}", ca_file=os.path.join(sa_dir, "ca.crt"),
                   token_file=os.path.join(sa_dir, "token"))

    @classmethod
    def from_kubeconfig(cls, path: Optional[str] = None, context: Optional[str] = None) -> "KubeAPI":
        return cls(**load_kubeconfig(path, context))

    @classmethod
    def auto(cls) -> "KubeAPI":
        """In-cluster credentials inside a pod, the kubeconfig otherwise."""
        if os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.exists(os.path.join(SERVICEACCOUNT_DIR, "token")):
            return cls.in_cluster()
        return cls.from_kubeconfig()

    def get(self, path: str, query: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        url = self.server + path + ("?" + urllib.parse.urlencode(query) if query else "")
        req = urllib.request.Request(url, headers={"Accept": "application/json"})
        tok = self.token
        if self.token_file:  # re-read: projected tokens rotate
            with open(self.token_file) as f:
                tok = f.read().strip()
        if tok:
            req.add_header("Authorization", "Bearer " + tok)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.ctx) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            body = e.read()[:512].decode("utf-8", "replace")
            try:
                body = json.loads(body).get("message", body)
            except ValueError:
                pass
            raise DiscoveryError(f"GET {path}: HTTP {e.code}: {body}") from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise DiscoveryError(f"GET {self.server}{path}: {e}") from None

    def pods(self, namespace: str, selector: str) -> Dict[str, Any]:
        return self.get(f"/api/v1/namespaces/{urllib.parse.quote(namespace)}/pods", {"labelSelector": selector})


def _load_chain_data(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """ssl loads a client certificate from files only: a private directory,
    removed at once."""
    with tempfile.TemporaryDirectory(prefix="shinken-k8s-") as d:
        cf, kf = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        for p, b in ((cf, cert), (kf, key)):
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(b)
        ctx.load_cert_chain(cf, kf)


def discover(url: str, api: Optional[KubeAPI] = None) -> List[str]:
    """The URLs of the ready envservers a k8s:// URL names, by pod name."""
    t = parse_url(url)
    api = api or KubeAPI.auto()
    return [u for _, u in ready_servers(api.pods(t.namespace, t.selector), t.port)]


# -- kubeconfig ---------------------------------------------------------------------------------------


def load_kubeconfig(path: Optional[str] = None, context: Optional[str] = None) -> Dict[str, Any]:
    """KubeAPI's keyword arguments from a kubeconfig's context (default: its
    current-context). Relative file paths are the kubeconfig's directory's."""
    if path is None:
        env = os.environ.get("KUBECONFIG", "")
        path = next((p for p in env.split(os.pathsep) if p), "") or os.path.expanduser("~/.kube/config")
    try:
        with open(path) as f:
            cfg = parse_yaml(f.read()) or {}
    except OSError as e:
        raise DiscoveryError(f"kubeconfig {path}: {e}") from None
    except ValueError as e:
        raise DiscoveryError(f"kubeconfig {path}: {e}") from None
    base = os.path.dirname(os.path.abspath(path))

    def named(kind: str, name: Optional[str], field: str) -> Dict[str, Any]:
        for item in cfg.get(kind) or []:
            if item.get("name") == name:
                return item.get(field) or {}
        raise DiscoveryError(f"kubeconfig {path}: no {kind[:-1]} named {name!r}")

    ctx_name = context or cfg.get("current-context")
    if not ctx_name:
        raise DiscoveryError(f"kubeconfig {path}: no current-context")
    ctx = named("contexts", ctx_name, "context")
    cluster = named("clusters", ctx.get("cluster"), "cluster")
    user = named("users", ctx.get("user"), "user") if ctx.get("user") else {}
    for plugin in ("exec", "auth-provider"):
        if user.get(plugin):
            raise DiscoveryError(f"kubeconfig {path}: user {ctx.get('user')!r} uses an {plugin} plugin, "
                                 "which shinken.k8s does not run; use a token, a client certificate or a "
                                 "kubeconfig of a service account")
    if not cluster.get("server"):
        raise DiscoveryError(f"kubeconfig {path}: cluster {ctx.get('cluster')!r} has no server")

    def file(v: Optional[str]) -> Optional[str]:
        return None if not v else v if os.path.isabs(v) else os.path.join(base, v)

    def data(v: Optional[str]) -> Optional[bytes]:
        return base64.b64decode(v) if v else None

    return dict(
        server=cluster["server"],
        ca_file=file(cluster.get("certificate-authority")),
        ca_data=data(cluster.get("certificate-authority-data")),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        cert_file=file(user.get("client-certificate")),
        key_file=file(user.get("client-key")),
        cert_data=data(user.get("client-certificate-data")),
        key_data=data(user.get("client-key-data")),
        token=user.get("token"),
        token_file=file(user.get("tokenFile")),
    )


def parse_yaml(text: str) -> Any:
    """The YAML a kubeconfig is written in: JSON, or block mappings and
    sequences of plain or quoted scalars (with empty ``{}``/``[]``), which
    is what kubectl writes. Anything else (anchors, block scalars, flow
    collections with content) raises ValueError."""
    if text.lstrip().startswith(("{", "[")):
        return json.loads(text)
    lines: List[Tuple[int, str]] = []
    for raw in text.splitlines():
        s = _strip_comment(raw).rstrip()
        if not s.strip() or s.strip() in ("---", "..."):
            continue
        if "\t" in s[:len(s) - len(s.lstrip())]:
            raise ValueError("tab in indentation")
        lines.append((len(s) - len(s.lstrip()), s.strip()))
    if not lines:
        return None
    v, i = _node(lines, 0, lines[0][0])
    if i != len(lines):
        raise ValueError(f"unexpected indentation at {lines[i][1]!r}")
    return v


def _strip_comment(s: str) -> str:
    q = None
    for k, c in enumerate(s):
        if q:
            if c == q:
                q = None
        elif c in "'\"" and (k == 0 or s[k - 1] in " :-[{,"):
            q = c
        elif c == "#" and (k == 0 or s[k - 1] in " \t"):
            return s[:k]
    return s


def _is_item(s: str) -> bool:
    return s == "-" or s.startswith("- ")


def _node(lines: List[Tuple[int, str]], i: int, indent: int) -> Tuple[Any, int]:
    return _seq(lines, i, indent) if _is_item(lines[i][1]) else _map(lines, i, indent)


def _seq(lines: List[Tuple[int, str]], i: int, indent: int) -> Tuple[List[Any], int]:
    out: List[Any] = []
    while i < len(lines) and lines[i][0] == indent and _is_item(lines[i][1]):
        rest = lines[i][1][1:].lstrip()
        if not rest:
            if i + 1 < len(lines) and lines[i + 1][0] > indent:
                v, i = _node(lines, i + 1, lines[i + 1][0])
            else:
                v, i = None, i + 1
        elif _is_item(rest) or _split_key(rest) is not None:
            # "- key: value": a mapping (or sequence) whose first line starts here.
            sub = indent + len(lines[i][1]) - len(rest)
            lines = lines[:i] + [(sub, rest)] + lines[i + 1:]
            v, i = _node(lines, i, sub)
        else:
            v, i = _scalar(rest), i + 1
        out.append(v)
    return out, i


def _map(lines: List[Tuple[int, str]], i: int, indent: int) -> Tuple[Dict[str, Any], int]:
    out: Dict[str, Any] = {}
    while i < len(lines) and lines[i][0] == indent and not _is_item(lines[i][1]):
        kv = _split_key(lines[i][1])
        if kv is None:
            raise ValueError(f"want key: value, got {lines[i][1]!r}")
        k, rest = kv
        if rest:
            v, i = _scalar(rest), i + 1
        elif i + 1 < len(lines) and (lines[i + 1][0] > indent or
                                     (lines[i + 1][0] == indent and _is_item(lines[i + 1][1]))):
            v, i = _node(lines, i + 1, lines[i + 1][0])
        else:
            v, i = None, i + 1
        out[k] = v
    return out, i


def _split_key(s: str) -> Optional[Tuple[str, str]]:
    if s[:1] in "'\"":
        end = s.find(s[0], 1)
        if end < 0 or not s[end + 1:].startswith(":"):
            return None
        key, rest = s[1:end], s[end + 2:]
    else:
        k = s.find(": ")
        if k < 0:
            if not s.endswith(":"):
                return None
            k = len(s) - 1
        key, rest = s[:k], s[k + 1:]
    if rest and not rest.startswith(" "):
        return None
    return key.strip(), rest.strip()


def _scalar(s: str) -> Any:
    if s[:1] == '"':
        if not s.endswith('"') or len(s) < 2:
            raise ValueError(f"unterminated string {s!r}")
        return json.loads(s)
    if s[:1] == "'":
        if not s.endswith("'") or len(s) < 2:
            raise ValueError(f"unterminated string {s!r}")
        return s[1:-1].replace("''", "'")
    if s == "{}":
        return {}
    if s == "[]":
        return []
    if s[:1] in "{[&*!|>":
        raise ValueError(f"unsupported YAML in a kubeconfig: {s!r}")
    if s in ("null", "~", "Null", "NULL"):
        return None
    if s in ("true", "True", "TRUE"):
        return True
    if s in ("false", "False", "FALSE"):
        return False
    return s


# -- the client ----------------------------------------------------------------------------------------


class K8sMultiClient(AsyncMultiClient):
    """An AsyncMultiClient over the ready envservers a k8s:// URL names,
    found again as pods come and go (see the module doc).

    ``api`` is the KubeAPI to ask (default: KubeAPI.auto()); ``rediscover_s``
    bounds how stale the server list may get before new envs are placed.
    """

    def __init__(self, url: str, token: Optional[str] = None, *, api: Optional[KubeAPI] = None,
                 rediscover_s: float = 30.0, revive_s: float = 10.0, **kw: Any):
        self.target = parse_url(url)
        self.api = api or KubeAPI.auto()
        self.rediscover_s = rediscover_s
        self._kw = kw
        self._found_uids: Dict[str, str] = {}
        urls = self._list()
        if not urls:
            raise DiscoveryError(f"{self.target}: no ready envserver (no pod Running and Ready with a "
                                 f"container port {self.target.port!r})")
        super().__init__(urls, token, revive_s=revive_s, **kw)
        self._token = self.clients[0].token
        self._gone: set = set()  # server indices no longer among the ready pods
        self._listed = time.monotonic()
        self._stale = False
        self._lock: Optional[asyncio.Lock] = None
        self._uids: Dict[int, str] = {i: self._found_uids.get(_norm(c.url), "") for i, c in enumerate(self.clients)}
        self._lost: Dict[str, ShinkenError] = {}  # env id → why: its pod was replaced

    def _list(self) -> List[str]:
        pl = self.api.pods(self.target.namespace, self.target.selector)
        uid = {(p.get("metadata") or {}).get("name", ""): _incarnation(p) for p in pl.get("items") or []}
        found = ready_servers(pl, self.target.port)
        self._found_uids = {_norm(u): uid.get(name, "") for name, u in found}
        return [u for _, u in found]

    def servers(self) -> List[str]:
        """The URLs of the servers now in placement."""
        return [self.clients[i].url for i in self._live()]

    async def rediscover(self) -> List[str]:
        """Lists the pods again: new servers join, servers whose pod is gone
        or unready leave placement. Returns the ready servers' URLs; an API
        failure keeps the last list and raises DiscoveryError."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            found = await asyncio.to_thread(self._list)
            known = {_norm(c.url): i for i, c in enumerate(self.clients)}
            for u in found:
                if _norm(u) not in known:
                    u2, t = resolve_url_token(u, self._token)
                    self.clients.append(AsyncClient(u2, t, **self._kw))
                    known[_norm(u)] = len(self.clients) - 1
            now = {_norm(u) for u in found}
            self._gone = {i for u, i in known.items() if u not in now}
            for u in now:
                i, uid = known[u], self._found_uids.get(u, "")
                old = self._uids.get(i, "")
                if old and uid and old != uid:  # a new server process at this address: new pod or restart
                    self._dead.pop(i, None)
                    for env, j in list(self.placement.items()):
                        if j == i:
                            del self.placement[env]
                            self._lost[env] = SandboxDied(
                                f"env server {self.clients[i].url} lost: its pod was replaced or restarted",
                                env_id=env,
                                detail={"server": self.clients[i].url})
                if uid:
                    self._uids[i] = uid
            self._listed = time.monotonic()
            self._stale = False
            return found

    async def step(self, steps: Any, observe: Any = None, *, timeout: Optional[float] = None) -> List[Slot]:
        """As AsyncMultiClient.step; an env whose pod was replaced fails as
        SandboxDied."""
        steps = list(steps)
        lost = getattr(self, "_lost", {})
        if not any(s["env_id"] in lost for s in steps):
            return await super().step(steps, observe, timeout=timeout)
        rest = [s for s in steps if s["env_id"] not in lost]
        got = iter(await super().step(rest, observe, timeout=timeout) if rest else [])
        return [Slot(env_id=s["env_id"], error=lost[s["env_id"]]) if s["env_id"] in lost else next(got)
                for s in steps]

    async def close_envs(self, env_ids: Any, *, timeout: Optional[float] = None) -> List[str]:
        ids = list(env_ids)
        for e in ids:
            getattr(self, "_lost", {}).pop(e, None)
        return await super().close_envs(ids, timeout=timeout)

    def _live(self) -> List[int]:
        gone = getattr(self, "_gone", ())
        return [i for i in super()._live() if i not in gone]

    def _mark_dead(self, i: int) -> None:
        super()._mark_dead(i)
        self._stale = True  # a server lost: look again before the next placement

    async def _revive(self) -> None:
        if self._stale or not self._live() or time.monotonic() - self._listed >= self.rediscover_s:
            try:
                await self.rediscover()
            except DiscoveryError:
                pass  # the API is away: place on what was found last
        await super()._revive()


def _incarnation(pod: Dict[str, Any]) -> str:
    """The server process a pod stands for: its UID and its containers'
    restarts (a crash restarts the container in the same pod)."""
    uid = (pod.get("metadata") or {}).get("uid", "")
    if not uid:
        return ""
    restarts = sum(int(c.get("restartCount") or 0) for c in (pod.get("status") or {}).get("containerStatuses") or [])
    return f"{uid}/{restarts}"


def _norm(url: str) -> str:
    return url.rstrip("/")


def connect_k8s(url: str, token: Optional[str] = None, **kw: Any) -> K8sMultiClient:
    """A K8sMultiClient for a k8s:// URL (shinken.multi.connect calls this)."""
    return K8sMultiClient(url, token, **kw)


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m shinken.k8s k8s://<namespace>/<selector>``: the ready
    servers' URLs, one a line (for tools that take plain URLs, such as the
    Go rollout command's repeated --server)."""
    import sys
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m shinken.k8s k8s://<namespace>/<label selector>[?port=...]", file=sys.stderr)
        return 2
    try:
        for u in discover(args[0]):
            print(u)
    except (ValueError, DiscoveryError) as e:
        print(f"shinken.k8s: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
