"""The exact state of a vector-env stack, read at save time and written back at resume time (never
per step), as plain values: ``torch.load(weights_only=True)`` reads them.

Per layer of a classic env (``single.make_env``): its plain attributes (numpy arrays and scalars
with their dtype, ``np.random.Generator`` states), and innermost the simulator's state (MuJoCo's
``MjData`` with its integration state, an ALE game's ``cloneState(include_rng=True)``). Above the
envs: ``VecNormalize``'s running returns, the frame stack, ``NativeVecEnv``'s episode counters.
Only simulators and wrappers known to keep nothing else count as exact (``inexact_reason``);
``AleVecEnv``'s games and ``EnvpoolVecEnv``'s envs cannot be read. What resumes exactly:
docs/details.md, "Exact resume".
"""
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import RecordVideo

from a2c_ppo_acktr.envs.normalize import VecNormalize
from a2c_ppo_acktr.envs.torch_vec import VecPyTorch, VecPyTorchFrameStack

# Simulators whose whole state is their plain attributes, MjData or the ALE (by module).
EXACT_ENVS = ("gymnasium.envs.classic_control.", "gymnasium.envs.toy_text.",
              "gymnasium.envs.mujoco.", "ale_py.")
# Wrappers whose whole state is their plain attributes: gym.make's and make_env's.
EXACT_WRAPPERS = {
    "gymnasium.wrappers.common": ("TimeLimit", "OrderEnforcing", "PassiveEnvChecker"),
    "gymnasium.wrappers.transform_observation": ("FlattenObservation",),
    "stable_baselines3.common.monitor": ("Monitor",),
    "stable_baselines3.common.atari_wrappers": ("NoopResetEnv", "MaxAndSkipEnv", "EpisodicLifeEnv",
                                                "FireResetEnv", "ClipRewardEnv"),
    "a2c_ppo_acktr.envs.single": ("TransposeImage", "SeedFirstReset", "WarpFrameGray"),
}
# Plain attributes that are no state of the episode: Monitor's history of finished episodes
# (grows all run, read by nothing here) and its file's clock (the resumed file's own);
# MaxAndSkipEnv's scratch frames, overwritten by every step.
SKIP = {"episode_returns", "episode_lengths", "episode_times", "t_start", "_obs_buffer"}
_PLAIN = (type(None), bool, int, float, str)


class _Unplain(Exception):
    """A value that is not plain data (an object, a dict): not state this module keeps."""


def encode(value: Any) -> Any:
    """``value`` as plain values: numpy arrays and scalars as {dtype, shape, bytes}, generators
    as their bit generator's state; ``_Unplain`` for anything else."""
    if type(value) in _PLAIN:  # not isinstance: np.float64 is a float, np.str_ a str
        return value
    if isinstance(value, (np.ndarray, np.generic)) and value.dtype != object:
        return {"ndarray": value.dtype.str, "shape": list(np.shape(value)), "scalar":
                isinstance(value, np.generic), "bytes": np.ascontiguousarray(value).tobytes()}
    if isinstance(value, np.random.Generator):
        return {"generator": value.bit_generator.state}
    if isinstance(value, (list, tuple)):
        return type(value)(encode(v) for v in value)
    raise _Unplain


def decode(value: Any, current: Any = None) -> Any:
    """The value ``encode`` gave ``value`` for; a generator is set in place into ``current``."""
    if isinstance(value, dict) and "ndarray" in value:
        array = np.frombuffer(value["bytes"], np.dtype(value["ndarray"])).reshape(value["shape"])
        return array[()] if value["scalar"] else array.copy()
    if isinstance(value, dict) and "generator" in value:
        state = value["generator"]
        if not isinstance(current, np.random.Generator):
            current = np.random.Generator(getattr(np.random, state["bit_generator"])())
        current.bit_generator.state = state
        return current
    if isinstance(value, (list, tuple)):
        return type(value)(decode(v) for v in value)
    return value


def _layers(env: gym.Env) -> list:
    """``env``'s wrappers, outermost first, then its simulator; not ``RecordVideo``
    (``--capture-video``): it renders, which changes no episode, so a run resumes exactly
    whether it records or not."""
    layers = [env]
    while isinstance(layers[-1], gym.Wrapper):
        layers.append(layers[-1].env)
    return [layer for layer in layers if not isinstance(layer, RecordVideo)]


def inexact_reason(env: gym.Env) -> str | None:
    """Why ``env``'s state cannot be saved and restored exactly, or None."""
    for layer in _layers(env)[:-1]:
        cls = type(layer)
        if cls.__name__ not in EXACT_WRAPPERS.get(cls.__module__, ()):
            return f"the wrapper {cls.__module__}.{cls.__name__} may keep state this code cannot save"
    cls = type(env.unwrapped)
    if not cls.__module__.startswith(EXACT_ENVS):
        return f"the simulator of {cls.__module__}.{cls.__name__} cannot be saved"
    return None


def _attributes(layer: Any) -> dict:
    out = {}
    for name, value in vars(layer).items():
        if name not in SKIP:
            try:
                out[name] = encode(value)
            except _Unplain:
                pass
    return out


def _load_attributes(layer: Any, saved: dict) -> None:
    attrs = vars(layer)  # set in the instance's dict: class properties of the same name stay
    for name, value in saved.items():
        attrs[name] = decode(value, attrs.get(name))


def _mujoco_state(data: Any, model: Any) -> dict:
    import mujoco

    # Every array, not only the integration state: some envs read positions that the previous
    # step computed before they step.
    kind = mujoco.mjtState.mjSTATE_INTEGRATION
    state = np.empty(mujoco.mj_stateSize(model, kind))
    mujoco.mj_getState(model, data, state, kind)
    arrays = {}
    for name in dir(data):
        value = getattr(data, name) if not name.startswith("_") and name != "plugin_data" else None
        if isinstance(value, np.ndarray) and value.size:  # not plugin_data: pointers
            arrays[name] = encode(value)
    return {"integration": encode(state), "arrays": arrays}


def _load_mujoco_state(data: Any, model: Any, saved: dict) -> None:
    import mujoco

    for name, value in saved["arrays"].items():
        array = decode(value)
        target = getattr(data, name, None)
        # Arrays sized by this step's contacts may differ: the next step recomputes those.
        if isinstance(target, np.ndarray) and target.shape == array.shape:
            target[...] = array
    mujoco.mj_setState(model, data, decode(saved["integration"]), mujoco.mjtState.mjSTATE_INTEGRATION)


def env_state(env: gym.Env) -> list[dict]:
    """Per layer of ``env``, outermost first: its class, its plain attributes and, innermost,
    the simulator's state."""
    states = [{"class": type(layer).__name__, "attrs": _attributes(layer)} for layer in _layers(env)]
    base: Any = env.unwrapped  # a MuJoCo or ALE env, told apart by its attributes and module
    if hasattr(base, "data") and type(base.data).__name__ == "MjData":
        states[-1]["mujoco"] = _mujoco_state(base.data, base.model)
    elif type(base).__module__.startswith("ale_py."):
        states[-1]["ale"] = base.ale.cloneState(include_rng=True).serialize()
    return states


def load_env_state(env: gym.Env, states: list[dict]) -> None:
    """Put ``env`` back in the state ``env_state`` read (from an env built alike); ValueError
    if it is built otherwise."""
    layers = _layers(env)
    classes = [type(layer).__name__ for layer in layers]
    if classes != [s["class"] for s in states]:
        raise ValueError(f"the saved env is {' < '.join(s['class'] for s in states)}, this one "
                         f"{' < '.join(classes)}")
    for layer, saved in zip(layers, states):
        _load_attributes(layer, saved["attrs"])
    base: Any = env.unwrapped  # a MuJoCo or ALE env where the states say so
    if "mujoco" in states[-1]:
        _load_mujoco_state(base.data, base.model, states[-1]["mujoco"])
    if "ale" in states[-1]:
        import ale_py

        base.ale.restoreState(ale_py.ALEState(states[-1]["ale"]))


def capture_envs(envs: Sequence[gym.Env]) -> list[dict]:
    """Per env: ``{"layers": env_state}``, or ``{"inexact": reason}``."""
    out = []
    for env in envs:
        reason = inexact_reason(env)
        out.append({"inexact": reason} if reason else {"layers": env_state(env)})
    return out


def restore_envs(envs: Sequence[gym.Env], states: list[dict]) -> None:
    if len(envs) != len(states):
        raise ValueError(f"the checkpoint holds {len(states)} envs' states, this run has {len(envs)}")
    for env, state in zip(envs, states):
        load_env_state(env, state["layers"])


def _chain(venv: Any) -> list:
    """The layers of a vector-env stack, innermost (the backend) first."""
    chain = [venv]
    while hasattr(chain[-1], "venv"):
        chain.append(chain[-1].venv)
    return chain[::-1]


class Inexact(Exception):
    """The envs' state cannot be saved or restored exactly; ``str()`` says why, in a clause."""


def _native_reason(base: Any) -> str | None:
    cls = type(base.env)
    if hasattr(base.env, "env") or not cls.__module__.startswith(EXACT_ENVS):
        return f"--vec-env native: the vector env {cls.__name__} cannot be saved"
    return None


def _base_state(base: Any) -> dict:
    if getattr(base, "kind", None) == "native":
        reason = _native_reason(base)
        if reason:
            raise Inexact(reason)
        # NativeVecEnv itself, its numpy vector env and the running episodes of its monitor.
        return {"native": [_attributes(base), _attributes(base.env), _attributes(base.monitor)]}
    if hasattr(base, "env_states"):  # ShmemVecEnv: its workers read their envs
        states = base.env_states()
    elif hasattr(base, "envs"):  # DummyVecEnv
        states = capture_envs(base.envs)
    else:
        raise Inexact(f"--vec-env {getattr(base, 'kind', type(base).__name__)}: "
                      + getattr(base, "unsaveable", "ale-py's AtariVectorEnv cannot save or "
                                "restore its games"))
    reasons = [s["inexact"] for s in states if "inexact" in s]
    if reasons:
        raise Inexact(reasons[0])
    return {"envs": states}


def _load_base_state(base: Any, saved: dict) -> None:
    native = getattr(base, "kind", None) == "native"
    if native != ("native" in saved):
        raise Inexact("the checkpoint holds the envs of another --vec-env")
    if native:
        reason = _native_reason(base)
        if reason:
            raise Inexact(reason)
        if saved["native"][0]["num_envs"] != base.num_envs:
            raise Inexact(f"the checkpoint holds {saved['native'][0]['num_envs']} envs, this run "
                          f"{base.num_envs}")
        for layer, attrs in zip((base, base.env, base.monitor), saved["native"]):
            _load_attributes(layer, attrs)
    elif hasattr(base, "load_env_states"):
        base.load_env_states(saved["envs"])
    elif hasattr(base, "envs"):
        restore_envs(base.envs, saved["envs"])
    else:
        _base_state(base)  # raises, saying why


def vec_env_state(venv: Any) -> dict:
    """The state of ``make_vec_envs``' stack ``venv``, as plain values; ``Inexact`` where its
    backend or an env cannot give it. The normalizer's statistics are not in it (``obs_rms``)."""
    state: dict[str, Any] = {}
    for layer in _chain(venv):
        if isinstance(layer, VecPyTorchFrameStack):
            state["stacked_obs"] = layer.stacked_obs.cpu().clone()
        elif isinstance(layer, VecNormalize):
            state["normalizer"] = {"returns": encode(layer.returns), "training": layer.training,
                                   "raw_obs": encode(layer.raw_obs)}
        elif not isinstance(layer, VecPyTorch):
            state["base"] = _base_state(layer)
    return state


def load_vec_env_state(venv: Any, state: dict) -> None:
    """Put the stack ``venv`` (built alike, reset) back in ``state``; ``Inexact`` where it
    cannot, before anything above the envs is changed."""
    for layer in _chain(venv):
        if isinstance(layer, VecPyTorchFrameStack):
            layer.stacked_obs = state["stacked_obs"].to(layer.stacked_obs.device)
        elif isinstance(layer, VecNormalize):
            saved = state["normalizer"]
            layer.returns, layer.raw_obs = decode(saved["returns"]), decode(saved["raw_obs"])
            layer.training = saved["training"]
        elif not isinstance(layer, VecPyTorch):
            try:
                _load_base_state(layer, state["base"])
            except (ValueError, KeyError) as e:  # built otherwise than the saved run
                raise Inexact(f"the checkpoint's envs do not fit this run's: {e}") from None
