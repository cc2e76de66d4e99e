"""Gymnasium registration: ``gymnasium.make("shinken/Desktop-v0", url=..., task=...)``.

Registered on import of shinken when gymnasium is importable (and silently
skipped when it is not). The env is a live desktop: its frames and infos
(timings, pointer) differ between identical runs, so it is registered
``nondeterministic=True``. ``gymnasium.make_vec(..., vectorization_mode=
"vector_entry_point")`` builds shinken.VectorEnv: one batched request per
step for all envs, instead of one request per env.
"""

from __future__ import annotations

ENV_ID = "shinken/Desktop-v0"


def register() -> bool:
    """Registers ENV_ID (idempotent); False when gymnasium is not importable."""
    try:
        import gymnasium
    except ImportError:
        return False
    if ENV_ID in gymnasium.registry:
        return True
    gymnasium.register(
        id=ENV_ID,
        entry_point="shinken.env:Env",
        vector_entry_point="shinken.vector:VectorEnv",
        nondeterministic=True,
        disable_env_checker=False,
    )
    return True
