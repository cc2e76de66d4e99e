"""shinken: the trainer's client for a Shinken envserver.

    import shinken
    env = shinken.Env("http://127.0.0.1:8700", task="xterm-hello-file")
    obs, info = env.reset()
    obs, reward, terminated, truncated, info = env.step({"verb": "click", "x": 10, "y": 20})

The core is asyncio (AsyncClient, AsyncEnv); Client, Env and VectorEnv are
its sync face. A list of URLs spreads envs over several servers
(AsyncMultiClient); shinken.agent is a multi-turn agent loop and shinken.verl
its verl AgentLoop. With gymnasium importable, Env and VectorEnv are its Env and
VectorEnv, and ``shinken/Desktop-v0`` is registered. See README.md.
"""

from .aenv import AsyncEnv
from .aio import AsyncClient, Slot
from .client import Client
from .env import Env
from .errors import *  # noqa: F401,F403 - the typed exceptions are public API
from .errors import __all__ as _errors_all
from .frames import Frame, FrameCache, decode
from .multi import AsyncMultiClient, connect
from .spaces import ActionSpace, FrameSpace, ModelText
from .trajectory import Step, Trajectory, episodes, to_verl_row, to_verl_rows
from .vector import AutoresetMode, VectorEnv
from .wire import PROTOCOL
from . import registration as _registration

__version__ = "0.2.0"

__all__ = ["AsyncClient", "AsyncEnv", "AsyncMultiClient", "connect", "Client", "Slot", "Env", "VectorEnv", "AutoresetMode", "Frame",
           "FrameCache", "decode", "ActionSpace", "FrameSpace", "ModelText", "Step", "Trajectory",
           "episodes", "to_verl_row", "to_verl_rows", "PROTOCOL", *_errors_all]

_registration.register()
