"""The torch side of the stack: numpy <-> tensors on a device, and frame stacking."""
from typing import cast

import numpy as np
import torch
from gymnasium import spaces

from a2c_ppo_acktr.envs.vec_env import GroupedVecEnv, VecEnv, VecEnvWrapper
from a2c_ppo_acktr.errors import ConfigError

# What ``VecPyTorch.step`` returns: obs (N, *obs_shape) on the device, reward (N, 1) float32 on the
# device, terminated (N,) and truncated (N,) numpy bool, infos.
TorchStepResult = tuple[torch.Tensor, torch.Tensor, np.ndarray, np.ndarray, list[dict]]

def to_device(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """numpy -> tensor on ``device``. On the CPU no copy at all; on CUDA through pinned memory
    and asynchronously (``non_blocking``): a copy from pageable memory would wait for the GPU
    to finish its queued work first. The pinned block comes from torch's caching host
    allocator, which does not hand it out again before the copy has completed."""
    t = torch.from_numpy(np.asarray(array))
    if device.type == "cpu":
        return t
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def check_scalable(space: spaces.Space) -> None:
    """``--scale-actions`` needs bounded Box actions: a one-line ``ConfigError`` otherwise."""
    if not isinstance(space, spaces.Box) or not space.is_bounded():
        raise ConfigError(f"--scale-actions maps actions in [-1, 1] onto bounded Box actions; "
                          f"this env's are {space}: drop --scale-actions")


def scale_action(action: np.ndarray, box: spaces.Box) -> np.ndarray:
    """``action`` in [-1, 1] (N, A) -> the same point of ``box``'s bounds, in its dtype."""
    return (box.low + (box.high - box.low) * (action + 1.0) / 2.0).astype(box.dtype, copy=False)


class VecPyTorch(VecEnvWrapper[VecEnv]):
    """numpy vector env -> torch tensors on ``device``.

    Observations: uint8 for images (the CNN scales them on ``device``), float32 otherwise; they
    and the rewards cross to the device once per step without waiting for it (``to_device``).
    ``step`` returns obs (N, *obs_shape), reward (N, 1) float32, terminated (N,) and truncated
    (N,) numpy bool, infos (``final_obs`` converted to a tensor on ``device`` too). The flags stay
    on the host as the vector env made them: the collector turns them into masks there (numpy
    ops on N flags cost less than torch's), with no device sync.
    ``send``/``recv`` step one group of a grouped env (``num_groups`` > 1, e.g. ``AleVecEnv``).
    Box actions are clipped to the Box; with ``scale_actions`` they are in [-1, 1], clipped
    there and mapped onto the Box (``scale_action``).
    """

    def __init__(self, venv: VecEnv, device: torch.device | str,
                 scale_actions: bool = False) -> None:
        super().__init__(venv)
        self.device = torch.device(device)
        self.num_groups = getattr(venv, "num_groups", 1)
        self._squeeze_actions = isinstance(self.action_space, spaces.Discrete)
        # The Gaussian policy is unbounded; the env gets its sample clipped to the Box (MuJoCo's
        # control cost would otherwise charge for the excess), while the rollout keeps the
        # unclipped sample so that its log-probability stays exact (as SB3 and CleanRL do).
        self._clip = self.action_space if isinstance(self.action_space, spaces.Box) else None
        self._scale = scale_actions
        if scale_actions:
            check_scalable(self.action_space)

    def _to_torch(self, array: np.ndarray) -> torch.Tensor:
        t = to_device(array, self.device)
        return t if t.dtype in (torch.uint8, torch.float32) else t.float()

    def reset(self) -> torch.Tensor:
        return self._to_torch(self.venv.reset())

    def _actions(self, actions: torch.Tensor) -> np.ndarray:
        array = actions.cpu().numpy()  # the step's one wait for the device
        if self._squeeze_actions and array.ndim == 2:
            array = array.reshape(-1)  # (N, 1) long -> (N,)
        if self._clip is None:
            return array
        if self._scale:  # [-1, 1] -> [low, high]
            return scale_action(np.minimum(np.maximum(array, -1.0), 1.0), self._clip)
        return np.minimum(np.maximum(array, self._clip.low), self._clip.high)  # a fresh array

    def _results(self, obs: np.ndarray, reward: np.ndarray, terminated: np.ndarray,
                 truncated: np.ndarray, infos: list[dict]) -> TorchStepResult:
        for info in infos:
            if "final_obs" in info:
                info["final_obs"] = self._to_torch(info["final_obs"])
        reward = np.asarray(reward, np.float32).reshape(-1, 1)  # (N, 1)
        return (self._to_torch(obs), self._to_torch(reward), np.asarray(terminated, bool),
                np.asarray(truncated, bool), infos)

    def step(self, actions: torch.Tensor) -> TorchStepResult:
        """``actions`` (N, 1) or (N, A), as ``Policy.act`` returns them."""
        return self._results(*self.venv.step(self._actions(actions)))

    def _grouped(self) -> GroupedVecEnv:
        # Only called on an env with groups (``num_groups`` > 1), as the collector does.
        return cast(GroupedVecEnv, self.venv)

    def send(self, actions: torch.Tensor, group: int = 0) -> None:
        self._grouped().send(self._actions(actions), group)

    def recv(self, group: int = 0) -> TorchStepResult:
        return self._results(*self._grouped().recv(group))

    def group_slice(self, group: int) -> slice:
        return self._grouped().group_slice(group)


class VecPyTorchFrameStack(VecEnvWrapper[VecPyTorch]):
    """Stacks the last ``nstack`` observations along dim 1 (channels) on ``device``.

    The stack of an env whose episode ended is zeroed but for the new first frame; its
    ``final_obs`` becomes the previous stack shifted by one plus the final frame. Each step
    returns a new tensor, so callers may keep the returned observations.
    """

    def __init__(self, venv: VecPyTorch, nstack: int, device: torch.device | str) -> None:
        super().__init__(venv)
        self.nstack = nstack
        space = venv.observation_space
        assert isinstance(space, spaces.Box), f"frames are stacked from a Box, not {space}"
        self.shape_dim0 = space.shape[0]
        reps = (nstack,) + (1,) * (len(space.shape) - 1)
        box = spaces.Box(np.tile(space.low, reps), np.tile(space.high, reps), dtype=space.dtype)
        self.observation_space = box
        dtype = torch.uint8 if space.dtype == np.uint8 else torch.float32
        self.stacked_obs = torch.zeros((self.num_envs, *box.shape), dtype=dtype,
                                       device=torch.device(device))

    def reset(self) -> torch.Tensor:
        obs = self.venv.reset()
        self.stacked_obs = torch.zeros_like(self.stacked_obs)
        self.stacked_obs[:, -self.shape_dim0:] = obs
        return self.stacked_obs

    def step(self, actions: torch.Tensor) -> TorchStepResult:
        obs, reward, terminated, truncated, infos = self.venv.step(actions)
        c, prev = self.shape_dim0, self.stacked_obs
        stacked = torch.cat((prev[:, c:], obs), dim=1)  # (N, nstack * C, ...), a new tensor
        # Episode ends are read from the infos (always set on done) to avoid a device sync.
        for i, info in enumerate(infos):
            if "final_obs" in info:
                info["final_obs"] = torch.cat((prev[i, c:], info["final_obs"].to(prev.dtype)), dim=0)
                stacked[i, :-c] = 0
        self.stacked_obs = stacked
        return stacked, reward, terminated, truncated, infos


# What ``make_vec_envs`` builds: the torch side of a stack.
TorchVecEnv = VecPyTorch | VecPyTorchFrameStack
