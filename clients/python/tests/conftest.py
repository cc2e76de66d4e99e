"""Test fixtures: a real envserver, built from this checkout and started for
the test session (or the one at $SHINKEN_URL).

Binaries come from $SHINKEN_BIN (a directory holding envserver and guestd, as
`make test-python` passes) or are built with `go build` into a temp dir. The
server runs the process provider on loopback with a token, writes its URL to
an addr file when ready (waited for with a deadline), and is stopped at the
end of the session.
"""

import json
import os
import pathlib
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "clients" / "python"))
# $SHINKEN_GYMNASIUM_PATH: directories (os.pathsep-separated) holding an
# unpacked Gymnasium source tree and its small dependencies, for hosts without
# an installed gymnasium; the gymnasium tests skip when neither is there.
for _p in reversed([p for p in os.environ.get("SHINKEN_GYMNASIUM_PATH", "").split(os.pathsep) if p]):
    sys.path.insert(0, _p)

START_TIMEOUT_S = 240  # a cold start boots the warm pool (Xvfb + WM + apps per sandbox)
STOP_TIMEOUT_S = 60


class Server:
    """A running envserver: its base URL, bearer token and log file."""

    def __init__(self, url, token=None, log=None):
        self.url, self.token, self.log = url, token, log

    def log_tail(self, n=4000):
        if self.log and self.log.exists():
            return self.log.read_text(errors="replace")[-n:]
        return ""


def _build(bindir):
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not on PATH and $SHINKEN_BIN is unset: cannot build envserver")
    for cmd in ("envserver", "guestd"):
        if not (ROOT / "cmd" / cmd).is_dir():
            pytest.skip(f"cmd/{cmd} is not in this checkout yet")
        subprocess.run([go, "build", "-o", str(bindir / cmd), f"./cmd/{cmd}"], cwd=ROOT, check=True,
                       timeout=600)


class Proc:
    """An envserver process this test session started (stop() ends it)."""

    def __init__(self, proc, srv, state):
        self.proc, self.srv, self.state = proc, srv, state

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the session this fixture started
                self.proc.wait(10)

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.state, ignore_errors=True)


def binaries(tmp):
    """The directory holding envserver and guestd ($SHINKEN_BIN, or built)."""
    if os.environ.get("SHINKEN_BIN"):
        return pathlib.Path(os.environ["SHINKEN_BIN"])
    bindir = tmp / "bin"
    if not (bindir / "envserver").exists():
        bindir.mkdir(exist_ok=True)
        _build(bindir)
    return bindir


def start_server(tmp, *, listen="127.0.0.1:0", pool=None, token=None, tasks=None, config=None):
    """Starts an envserver (process provider) and waits for its addr file;
    ``tasks`` is its task directory (default: the shipped tasks), ``config``
    a config file (default: the shipped settings)."""
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not on PATH (Debian package xvfb): the sandboxes need it")
    bindir = binaries(tmp)
    token = token or secrets.token_hex(16)
    addr = tmp / f"addr-{secrets.token_hex(4)}"
    log = tmp / f"envserver-{secrets.token_hex(4)}.log"
    # Sandbox sockets live under the state dir and a unix socket path is capped
    # at 108 bytes, so the state dir gets a short name of its own.
    state = pathlib.Path(tempfile.mkdtemp(prefix="shk"))
    argv = [str(bindir / "envserver"), "--listen", listen,
            "--pool", str(pool or os.environ.get("SHINKEN_TEST_POOL", "4")), "--provider", "process",
            "--addr-file", str(addr), "--token", token, "--tasks", str(tasks or ROOT / "configs" / "tasks"),
            "--state", str(state)]
    if config:
        argv += ["--config", str(config)]
    with open(log, "wb") as logf:
        proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_die_with_parent)
    srv = Server(None, token, log)
    p = Proc(proc, srv, state)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not addr.exists() or not addr.read_text().strip():
        if proc.poll() is not None:
            p.cleanup()
            pytest.fail(f"envserver exited with {proc.returncode} before serving:\n{srv.log_tail()}")
        if time.monotonic() > deadline:
            p.cleanup()
            pytest.fail(f"envserver wrote no addr file within {START_TIMEOUT_S}s:\n{srv.log_tail()}")
        time.sleep(0.1)
    srv.url = addr.read_text().strip()
    return p


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    if os.environ.get("SHINKEN_URL"):
        yield Server(os.environ["SHINKEN_URL"].rstrip("/"), os.environ.get("SHINKEN_TOKEN"))
        return
    # A SIGTERM to pytest (e.g. from `timeout`) unwinds through this fixture's
    # finally instead of leaving the server and its sandboxes behind.
    prev = signal.signal(signal.SIGTERM, _raise_interrupt)
    p = None
    try:
        p = start_server(tmp_path_factory.mktemp("envserver"))
        yield p.srv
    finally:
        if p is not None:
            p.cleanup()
        signal.signal(signal.SIGTERM, prev)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _die_with_parent():
    """In the child before exec: ask Linux to SIGTERM it when pytest dies."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@pytest.fixture(scope="session")
def tasks():
    """The one-instance tasks of the suite as files: id → task dict (with
    solution and wrong solutions). A family that draws from its seed has
    templates for solutions; the Go task checker plays its instances'."""
    out = {}
    for p in sorted((ROOT / "configs" / "tasks").glob("*.json")):
        t = json.loads(p.read_text())
        if "id" not in t or t.get("params"):  # the check record; a family of many instances
            continue
        out[t["id"]] = t
    return out


@pytest.fixture(scope="session")
def task_id(tasks):
    """The task most tests run: xterm-hello-file (a static xterm: no blinking
    caret, so unchanged screens hash the same), else the first task."""
    return "xterm-hello-file" if "xterm-hello-file" in tasks else sorted(tasks)[0]
