"""Typed exceptions mapped from the wire error codes (aci.Codes on the Go side).

Every whole-request failure arrives as an HTTP status plus
``{"error": {"code", "message", "detail"?}}``; a per-env failure inside a batch
arrives as ``{"env_id", "error": {...}}`` in that env's result slot. Both become
an instance of the class registered for the code, so callers write
``except shinken.PoolExhausted:`` rather than matching strings.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Type

__all__ = [
    "ShinkenError", "BadRequest", "PayloadTooLarge", "BatchTooLarge", "Unauthorized",
    "NotFound", "InvalidAction", "UnknownVerb", "DialectError", "Unsupported",
    "PoolExhausted", "SandboxDied", "Timeout", "EpisodeOver", "Internal",
    "Busy", "DisplayError", "TooLarge", "ScorerError", "AgentError", "StaleElementRef", "CheckpointLimit", "ChecksumMismatch",
    "TransportError", "StepTimeout", "ProtocolError", "NotScored",
    "BatchError", "CODES", "error_from_wire",
]


class ShinkenError(Exception):
    """Base of every error the client raises.

    ``code`` is the wire code (``None`` for client-side failures), ``message`` the
    server's text, ``detail`` its optional structured detail, ``status`` the HTTP
    status of a whole-request failure (``None`` for a per-env error) and
    ``env_id`` the env a per-env error belongs to.
    """

    code: Optional[str] = None
    http_status: Optional[int] = None  # the status aci.Codes maps this code to
    # Whose failure it is, as aci.Codes says: "request" (the caller's),
    # "agent" (the policy's), "task" (the verifier's), "infrastructure"
    # (the server's, the pool's, the sandbox's, the network's: a runner
    # drops or retries, never trains on it); None where no code applies.
    fault: Optional[str] = None

    def __init__(self, message: str = "", *, code: Optional[str] = None, detail: Any = None,
                 status: Optional[int] = None, env_id: Optional[str] = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.detail = detail
        self.status = status
        self.env_id = env_id

    def __str__(self) -> str:
        s = f"{self.code}: {self.message}" if self.code else self.message
        if self.env_id:
            s = f"env {self.env_id}: {s}"
        return s

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r}, env_id={self.env_id!r})"

    def __reduce__(self) -> Any:
        # Every attribute travels (Ray, multiprocessing): the default reduce
        # re-calls __init__ with args only, which loses them or fails.
        return (_restore, (type(self), self.args, dict(self.__dict__)))


def _restore(cls: Type["ShinkenError"], args: Any, state: Dict[str, Any]) -> "ShinkenError":
    e = cls.__new__(cls)
    Exception.__init__(e, *args)
    e.__dict__.update(state)
    return e


class BadRequest(ShinkenError):
    """The request was malformed (bad msgpack/JSON, unknown field, bad value)."""
    code, http_status, fault = "bad_request", 400, "request"


class PayloadTooLarge(ShinkenError):
    """The body exceeded the server's max_body_bytes."""
    code, http_status, fault = "payload_too_large", 413, "request"


class BatchTooLarge(ShinkenError):
    """The batch exceeded the server's max_batch."""
    code, http_status, fault = "batch_too_large", 413, "request"


class Unauthorized(ShinkenError):
    """Missing or wrong bearer token."""
    code, http_status, fault = "unauthorized", 401, "request"


class NotFound(ShinkenError):
    """Unknown task, env, episode or route."""
    code, http_status, fault = "not_found", 404, "request"


class InvalidAction(ShinkenError):
    """A known verb with bad arguments (off-screen point, missing text, ...)."""
    code, http_status, fault = "invalid_action", 422, "agent"


class UnknownVerb(ShinkenError):
    """A verb outside the agent vocabulary."""
    code, http_status, fault = "unknown_verb", 422, "agent"


class DialectError(ShinkenError):
    """Model text that the dialect parser could not turn into actions; nothing ran."""
    code, http_status, fault = "dialect_error", 422, "agent"


class Unsupported(ShinkenError):
    """The provider cannot do this (e.g. fork without snapshots)."""
    code, http_status, fault = "unsupported", 501, "request"


class PoolExhausted(ShinkenError):
    """No sandbox became free within the server's bounded wait."""
    code, http_status, fault = "pool_exhausted", 503, "infrastructure"


class SandboxDied(ShinkenError):
    """The env's sandbox died; the episode is over."""
    code, http_status, fault = "sandbox_died", 502, "infrastructure"


class Timeout(ShinkenError):
    """A server-side deadline passed."""
    code, http_status, fault = "timeout", 504, "infrastructure"


class EpisodeOver(ShinkenError):
    """A step on an env whose episode already ended; reset it first."""
    code, http_status, fault = "episode_over", 409, "request"


class Internal(ShinkenError):
    """A server bug or an unclassified failure."""
    code, http_status, fault = "internal", 500, "infrastructure"


class Busy(ShinkenError):
    """Guest concurrency limit reached (surfaces through info.error)."""
    code, http_status, fault = "busy", 503, "infrastructure"


class DisplayError(ShinkenError):
    """The sandbox's X server is wedged or gone (surfaces through info.error)."""
    code, http_status, fault = "display_error", 502, "infrastructure"


class TooLarge(ShinkenError):
    """A value over its cap, e.g. clipboard text (surfaces through info.error)."""
    code, http_status, fault = "too_large", 413, "agent"


class ScorerError(ShinkenError):
    """The task's verifier gave no valid verdict; its output is in ``detail``."""
    code, http_status, fault = "scorer_error", 502, "task"


class NotScored(ShinkenError):
    """The step ended the episode without a score (the server's reward is
    null: ``scorer_error``, ``sandbox_died``; docs/api.md, "Rewards"): there
    is no reward to return, and a 0 would be trained on. ``exit_reason``
    says why; ``obs`` and ``info`` are the step's, ``terminated`` and
    ``truncated`` its flags. Client-side (no wire code); picklable like
    every ShinkenError. Drop the episode's sample."""

    def __init__(self, message: str = "", *, exit_reason: str = "", obs: Any = None,
                 info: Optional[Dict[str, Any]] = None, terminated: bool = False, truncated: bool = False,
                 **kw: Any):
        super().__init__(message, **kw)
        self.exit_reason, self.obs, self.info = exit_reason, obs, info or {}
        self.terminated, self.truncated = terminated, truncated


class AgentError(ShinkenError):
    """The agent broke what it acted on (its session, its processes); never retried."""
    code, http_status, fault = "agent_error", 422, "agent"


class StaleElementRef(ShinkenError):
    """An element ref (``e12``) that no longer resolves; observe again (``observe.a11y``) for current ids."""
    code, http_status, fault = "stale_element_ref", 409, "agent"


class CheckpointLimit(ShinkenError):
    """A new checkpoint would exceed the server's count or bytes of checkpoints
    (``limits.max_checkpoints``, ``limits.max_checkpoint_bytes``); delete some."""
    code, http_status, fault = "checkpoint_limit", 429, "request"


class ChecksumMismatch(ShinkenError):
    """A file's bytes do not have the sha256 named for them (a put whose data
    changed on the way, or a get the client checked on arrival)."""
    code, http_status, fault = "checksum_mismatch", 422, "request"


class TransportError(ShinkenError):
    """The HTTP exchange itself failed (refused after retries, reset, timed out).

    ``sent`` tells whether the request may have reached the server: when it is
    True the client resends only a step carrying a request_id (which the
    server never runs twice), since a step may already have run.
    ``timed_out`` says the client's own deadline passed.
    """

    fault = "infrastructure"  # no code: the network's or the server's process

    def __init__(self, message: str, *, sent: bool, timed_out: bool = False, **kw: Any):
        super().__init__(message, **kw)
        self.sent = sent
        self.timed_out = timed_out


class StepTimeout(TransportError):
    """A step got no reply within the client's deadline, resends included.

    The step may still have run on the server. The client finds out what
    happened from the episode's trajectory before raising: ``ran`` is True
    (``record`` is the recorded trajectory Step: its reward, actions, error),
    False (the server recorded no such step: nothing ran) or None (the server
    could not be asked). The env is left needing a reset either way: its
    screen after the step was never observed.
    """

    def __init__(self, message: str, *, ran: Optional[bool] = None, record: Any = None,
                 episode_id: Optional[str] = None, step_index: Optional[int] = None, **kw: Any):
        kw.setdefault("sent", True)
        kw.setdefault("timed_out", True)
        super().__init__(message, **kw)
        self.ran = ran
        self.record = record
        self.episode_id = episode_id
        self.step_index = step_index


class ProtocolError(ShinkenError):
    """The server's reply broke the wire contract (e.g. a frame neither sent nor cached)."""

    fault = "infrastructure"


class BatchError(ShinkenError):
    """One or more envs of a VectorEnv call failed.

    ``errors`` maps the env index to its exception; ``result`` holds the whole
    call's result with the failed slots filled by placeholders (obs None,
    reward 0, truncated True), so the envs that succeeded are not lost.
    """

    def __init__(self, errors: Dict[int, ShinkenError], result: Any = None):
        first = next(iter(errors.values()))
        super().__init__(f"{len(errors)} env(s) failed; first: {first}", code=first.code)
        self.errors = errors
        self.result = result


#: Every wire code → its exception class.
CODES: Dict[str, Type[ShinkenError]] = {
    cls.code: cls for cls in (
        BadRequest, PayloadTooLarge, BatchTooLarge, Unauthorized, NotFound, InvalidAction,
        UnknownVerb, DialectError, Unsupported, PoolExhausted, SandboxDied, Timeout,
        EpisodeOver, Internal, Busy, DisplayError, TooLarge, ScorerError, AgentError,
        StaleElementRef, CheckpointLimit, ChecksumMismatch,
    )
}


def error_from_wire(err: Any, *, status: Optional[int] = None,
                    env_id: Optional[str] = None) -> ShinkenError:
    """Builds the typed exception for a wire ``{code, message, detail?}`` map.

    An unknown code becomes a plain ShinkenError carrying that code, so a newer
    server's code is never lost or misreported as another.
    """
    if not isinstance(err, dict):
        return ProtocolError(f"malformed error object: {err!r}", status=status, env_id=env_id)
    code = err.get("code")
    cls = CODES.get(code, ShinkenError) if isinstance(code, str) else ShinkenError
    return cls(str(err.get("message", "")), code=code if isinstance(code, str) else None,
               detail=err.get("detail"), status=status, env_id=env_id)
