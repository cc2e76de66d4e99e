"""shinken: the trainer's client for a Shinken envserver.

    import shinken
    env = shinken.Env("http://127.0.0.1:8080", task="xterm-hello-file")
    obs, info = env.reset()
    obs, reward, terminated, truncated, info = env.step({"verb": "click", "x": 10, "y": 20})

See README.md for the vectorized and multi-turn (verl-style) loops.
"""

from .client import Client, Slot
from .env import Env, VectorEnv
from .errors import *  # noqa: F401,F403 - the typed exceptions are public API
from .errors import __all__ as _errors_all
from .frames import FrameCache, decode
from .spaces import ActionSpace, FrameSpace
from .trajectory import Step, Trajectory, episodes, to_verl_row, to_verl_rows
from .wire import PROTOCOL

__version__ = "0.1.0"

__all__ = ["Client", "Slot", "Env", "VectorEnv", "FrameCache", "decode", "ActionSpace", "FrameSpace",
           "Step", "Trajectory", "episodes", "to_verl_row", "to_verl_rows", "PROTOCOL", *_errors_all]
