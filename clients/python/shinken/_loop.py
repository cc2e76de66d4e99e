"""The private event-loop thread that runs the sync API's coroutines.

Why a thread and not run_until_complete per call: a trainer calls the sync
API from several threads at once (one per episode in a verl-style loop, or a
thread pool stepping envs), and from inside programs that already run an event
loop (notebooks, async trainers); run_until_complete can do neither. One
long-lived loop also keeps the connection pool warm across calls. Each sync
call is one hop to this loop and back (tens of microseconds), and calls from
different threads proceed concurrently on it.

One loop serves every sync client of the process; a forked child starts its
own on first use (the parent's thread does not exist there).
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import os
import threading
from typing import Any, Awaitable, Optional, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: Optional[asyncio.AbstractEventLoop] = None
_thread: Optional[threading.Thread] = None
_pid = 0


def loop() -> asyncio.AbstractEventLoop:
    """The running background loop (started on first use, per process)."""
    global _loop, _thread, _pid
    with _lock:
        if _loop is None or _pid != os.getpid() or _thread is None or not _thread.is_alive():
            lp = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(lp)
                lp.call_soon(ready.set)
                lp.run_forever()

            t = threading.Thread(target=run, name="shinken-loop", daemon=True)
            t.start()
            ready.wait(10)
            _loop, _thread, _pid = lp, t, os.getpid()
        return _loop


def in_loop_thread() -> bool:
    return _thread is not None and threading.current_thread() is _thread


def submit(coro: Awaitable[T]) -> "cf.Future[T]":
    """Schedules coro on the loop; returns a concurrent Future."""
    return asyncio.run_coroutine_threadsafe(coro, loop())  # type: ignore[arg-type]


def run(coro: Awaitable[T]) -> T:
    """Runs coro on the loop and waits for it. An interrupt (Ctrl-C) in the
    waiting thread cancels the coroutine, so no request is left orphaned."""
    if in_loop_thread():
        close = getattr(coro, "close", None)
        if close:
            close()
        raise RuntimeError("the sync shinken API was called from its own event loop; "
                           "use shinken.AsyncClient / AsyncEnv in async code")
    fut = submit(coro)
    try:
        return fut.result()
    except BaseException:
        fut.cancel()
        raise


def wait_any(futs: Any, timeout: Optional[float] = None) -> Any:
    return cf.wait(futs, timeout=timeout, return_when=cf.FIRST_COMPLETED)
