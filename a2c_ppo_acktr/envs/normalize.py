"""Running normalization of observations and returns (``VecNormalize``), and merging the
statistics of several copies (Ray workers, DDP ranks)."""
import warnings
from collections.abc import Sequence

import numpy as np
import torch
from gymnasium import spaces

from a2c_ppo_acktr.envs.vec_env import StepResult, VecEnv, VecEnvWrapper, space_shape
from a2c_ppo_acktr.errors import warn

# An env's NaN or inf passes through the statistics (numpy would warn at each step); the run
# stops on the non-finite loss they cause, in one line (run/life.py). A filter, as it costs
# nothing per call, where np.errstate would.
warnings.filterwarnings("ignore", category=RuntimeWarning, module=__name__)

_SAID: set[str] = set()  # the observation spaces found crossed (``VecNormalize._outside``)

# name -> (mean, var, count) of the data seen (``normalizer_delta``).
Moments = dict[str, tuple[np.ndarray, np.ndarray, float]]

class RunningMeanStd:
    """Running mean / variance of a stream of batches (parallel algorithm, as baselines / SB3)."""

    def __init__(self, epsilon: float = 1e-4, shape: tuple[int, ...] = ()) -> None:
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = epsilon

    def update(self, x: np.ndarray) -> None:
        """x: (batch, *shape)."""
        # Ufunc reductions, in place where they can be, rather than np.mean / np.var, whose
        # Python-level wrappers cost more than the arithmetic on a small batch; this runs twice
        # per step (docs/benchmarks.md, "Measured code choices").
        n = x.shape[0]
        batch_mean = np.add.reduce(x, axis=0, dtype=np.float64)
        batch_mean /= n
        centred = x - batch_mean
        centred *= centred
        batch_var = np.add.reduce(centred, axis=0)
        batch_var /= n
        self.update_from_moments(batch_mean, batch_var, n)

    def update_from_moments(self, batch_mean: np.ndarray, batch_var: np.ndarray,
                            batch_count: float) -> None:
        delta = batch_mean - self.mean
        tot_count = self.count + batch_count
        m2 = self.var * self.count
        m2 += batch_var * batch_count
        m2 += np.square(delta) * (self.count * batch_count / tot_count)
        m2 /= tot_count
        self.mean = self.mean + delta * (batch_count / tot_count)
        self.var = m2
        self.count = tot_count

    def state_dict(self) -> dict:
        """{"mean": tensor, "var": tensor, "count": float} (float64, ``weights_only``-safe)."""
        return {"mean": torch.from_numpy(np.array(self.mean)),
                "var": torch.from_numpy(np.array(self.var)), "count": float(self.count)}

    def load_state_dict(self, d: dict) -> None:
        self.mean = d["mean"].numpy().astype(np.float64)
        self.var = d["var"].numpy().astype(np.float64)
        self.count = float(d["count"])


def normalizer_delta(before: dict, after: dict) -> Moments:
    """The data a VecNormalize saw between two of its ``state_dict``s, as moments of its own.

    Inverts the parallel merge of ``RunningMeanStd.update_from_moments``: returns
    ``{name: (mean, var, count)}`` (numpy float64, float) of the new data alone, or an empty dict
    when nothing was seen. Scale-out copies of the normalizer (Ray workers, DDP ranks) start from
    the learner's statistics, run, and send back this delta; ``merge_normalizer`` adds the deltas
    of all copies to the learner's statistics, which then equal those of one normalizer fed every
    copy's data (the merge is exact and order-free up to float rounding).
    """
    delta = {}
    for name, a in after.items():
        b = before[name]
        n = a["count"] - b["count"]
        if n <= 0:
            continue
        mb, vb, nb = b["mean"].numpy(), b["var"].numpy(), b["count"]
        ma, va, na = a["mean"].numpy(), a["var"].numpy(), a["count"]
        mean = (na * ma - nb * mb) / n
        m2 = va * na - vb * nb - np.square(mean - mb) * nb * n / na
        delta[name] = (mean, np.maximum(m2 / n, 0.0), n)
    return delta


def merge_normalizer(state: dict, deltas: Sequence[Moments]) -> dict:
    """``state`` (a ``VecNormalize.state_dict``) with the data of each of ``deltas`` merged in."""
    merged = {}
    for name, s in state.items():
        rms = RunningMeanStd()
        rms.load_state_dict(s)
        for delta in deltas:
            if name in delta:
                rms.update_from_moments(*delta[name])
        merged[name] = rms.state_dict()
    return merged


def _clip(x: np.ndarray, bound: float) -> np.ndarray:
    """``np.clip(x, -bound, bound)`` as float32, in place on the fresh float64 array ``x``
    (two ufunc calls: ``np.clip``'s Python-level wrapper costs more than the work here)."""
    np.maximum(x, -bound, out=x)
    np.minimum(x, bound, out=x)
    return x.astype(np.float32)


class Normalizer:
    """Running statistics of observations and of the discounted return, and their use.

    What ``VecNormalize`` normalizes with, held alone where no env is stepped here: the Ray
    workers' learner keeps its copy of the workers' statistics in one. ``eval()`` freezes them.
    """

    def __init__(self, obs_shape: tuple[int, ...], ob: bool = True, ret: bool = True,
                 clip_obs: float = 10., clip_reward: float = 10., gamma: float = 0.99,
                 epsilon: float = 1e-8) -> None:
        self.ob_rms = RunningMeanStd(shape=obs_shape) if ob else None
        self.ret_rms = RunningMeanStd(shape=()) if ret else None
        self.clip_obs, self.clip_reward = clip_obs, clip_reward
        self.gamma, self.epsilon = gamma, epsilon
        self.training = True

    def train(self) -> None:
        self.training = True

    def eval(self) -> None:
        self.training = False

    def normalize_obs(self, obs: np.ndarray) -> np.ndarray:
        """Normalize (and clip) without updating the statistics; returns float32."""
        if self.ob_rms is None:
            return obs
        rms = self.ob_rms
        return _clip((obs - rms.mean) / np.sqrt(rms.var + self.epsilon), self.clip_obs)

    def state_dict(self) -> dict:
        """Running statistics as tensors / floats (safe for ``torch.load(weights_only=True)``)."""
        pairs = (("ob_rms", self.ob_rms), ("ret_rms", self.ret_rms))
        return {name: rms.state_dict() for name, rms in pairs if rms is not None}

    def load_state_dict(self, d: dict) -> None:
        for name in ("ob_rms", "ret_rms"):
            rms = getattr(self, name)
            if rms is not None and name in d:
                rms.load_state_dict(d[name])


class VecNormalize(VecEnvWrapper[VecEnv], Normalizer):
    """Normalizes observations by running mean/std and rewards by the std of the discounted return.

    Numerically the same as SB3's VecNormalize. ``eval()`` freezes the statistics; the
    ``final_obs`` in infos is normalized too (without updating them).
    """

    def __init__(self, venv: VecEnv, ob: bool = True, ret: bool = True, clip_obs: float = 10.,
                 clip_reward: float = 10., gamma: float = 0.99, epsilon: float = 1e-8) -> None:
        VecEnvWrapper.__init__(self, venv)
        Normalizer.__init__(self, space_shape(self.observation_space), ob, ret, clip_obs, clip_reward,
                            gamma, epsilon)
        self.returns = np.zeros(self.num_envs)  # (N,) discounted return so far, float64
        # The last un-normalized observations (gail_experts/generate.py).
        self.raw_obs: np.ndarray | None = None
        space = self.observation_space  # its finite float bounds, checked until one is crossed
        self._bounds = None
        if isinstance(space, spaces.Box) and space.dtype.kind == "f" and (
                np.isfinite(space.low).any() or np.isfinite(space.high).any()):
            self._bounds = (space.low, space.high)

    def _outside(self, obs: np.ndarray) -> None:
        """Say once per process that an env's observation left its Box: the policy takes it as it
        is, but the space the env declares (for scaling, for a reader of the run) is wrong."""
        low, high = self._bounds or (obs, obs)
        self._bounds = None
        env, i = np.argwhere((obs < low) | (obs > high))[0]
        if str(self.observation_space) not in _SAID:
            _SAID.add(str(self.observation_space))
            warn(f"env {env} returned an observation outside its observation space "
                 f"{self.observation_space} ({obs[env, i]:g} at index {i}; said once): widen "
                 "the space's bounds or clip the observation in the env")

    def _obs(self, obs: np.ndarray) -> np.ndarray:
        self.raw_obs = obs  # a fresh array from the vec env: no copy needed to keep it
        if self._bounds is not None and ((obs < self._bounds[0]) | (obs > self._bounds[1])).any():
            self._outside(obs)
        if self.ob_rms is not None and self.training:
            self.ob_rms.update(obs)
        return self.normalize_obs(obs)

    def reset(self) -> np.ndarray:
        self.returns = np.zeros(self.num_envs)
        return self._obs(self.venv.reset())

    def step(self, actions: np.ndarray) -> StepResult:
        """The wrapped env's step with obs normalized and rewards scaled (float32)."""
        obs, rewards, terminated, truncated, infos = self.venv.step(actions)
        obs = self._obs(obs)
        if self.ret_rms is not None:
            if self.training:
                self.returns *= self.gamma
                self.returns += rewards
                self.ret_rms.update(self.returns)
            rewards = _clip(rewards / np.sqrt(self.ret_rms.var + self.epsilon), self.clip_reward)
        for info in infos:
            if "final_obs" in info:
                info["final_obs"] = self.normalize_obs(info["final_obs"])
        self.returns[terminated | truncated] = 0.0
        return obs, rewards, terminated, truncated, infos


def get_vec_normalize(venv: object) -> "Normalizer | None":
    """The normalizer (a VecNormalize, or a Ray learner's ``Normalizer``) in the ``.venv`` chain
    of ``venv`` (a vector env, its wrapper, a Ray ``WorkerGroup``, None), or None."""
    while venv is not None:
        if isinstance(venv, Normalizer):
            return venv
        venv = getattr(venv, "venv", None)
    return None


def normalizer_state(venv: VecEnv | VecEnvWrapper) -> dict | None:
    """``state_dict()`` of the VecNormalize in ``venv``'s chain (for checkpoints), or None."""
    vec_norm = get_vec_normalize(venv)
    return vec_norm.state_dict() if vec_norm is not None else None
