"""``make_vec_envs``: the one entry point that builds the whole env stack, and the choice of
vector-env backend (``auto``)."""
import torch
from gymnasium.envs.registration import EnvSpec

from a2c_ppo_acktr.envs.ale import SUPPORTED_KWARGS, AleVecEnv, ale_vector_available
from a2c_ppo_acktr.envs.blocks import DummyVecEnv
from a2c_ppo_acktr.envs.envpool import EnvpoolVecEnv, envpool_kwargs
from a2c_ppo_acktr.envs.ids import env_spec, is_atari, is_mujoco
from a2c_ppo_acktr.envs.native import NativeVecEnv, has_native
from a2c_ppo_acktr.envs.normalize import VecNormalize
from a2c_ppo_acktr.envs.shmem import ShmemVecEnv
from a2c_ppo_acktr.envs.single import check_env_kwargs, make_env
from a2c_ppo_acktr.envs.threads import ThreadVecEnv
from a2c_ppo_acktr.envs.torch_vec import VecPyTorch, VecPyTorchFrameStack
from a2c_ppo_acktr.envs.vec_env import VecEnv, VecEnvWrapper, num_cpus, space_shape
from a2c_ppo_acktr.envs.watch import watch
from a2c_ppo_acktr.errors import ConfigError

VEC_ENV_KINDS = ("auto", "dummy", "shmem", "threads", "ale", "ale-pipelined", "native", "envpool")
_announced: set[tuple[str, str]] = set()


def _auto_vec_env(spec: EnvSpec, num_envs: int, render_mode: str | None,
                  env_kwargs: dict | None = None) -> str:
    """The backend ``auto`` picks; docs/benchmarks.md has the measurements behind it. ALE's
    vector env only where it can do what is asked: no rendering, only the env kwargs it takes."""
    ale_can = render_mode is None and set(env_kwargs or ()) <= set(SUPPORTED_KWARGS)
    if ale_can and is_atari(spec) and ale_vector_available():
        # Two halves overlap the policy's forward with ALE's stepping; that needs a second CPU.
        return "ale-pipelined" if num_envs % 2 == 0 and num_cpus() > 1 else "ale"
    # Subprocesses only pay off when 3+ CPUs step envs far costlier than a pipe round trip:
    # Atari, MuJoCo, not classic control / toy text (docs/benchmarks.md, "Measured code choices").
    cheap = str(spec.entry_point).startswith(("gymnasium.envs.classic_control",
                                              "gymnasium.envs.toy_text"))
    if num_envs > 1 and not cheap and num_cpus() > 2:
        return "shmem"
    # On 2 CPUs, MuJoCo's physics steps outside the GIL: a thread per CPU, no process.
    return "threads" if num_envs > 1 and num_cpus() == 2 and is_mujoco(spec) else "dummy"


def _announce(env_name: str, kind: str, why: str = "") -> None:
    """One line, once per process, when ``auto`` leaves the classic per-env stack."""
    if (env_name, kind) not in _announced:
        _announced.add((env_name, kind))
        print(f"envs: {env_name} on --vec-env {kind} (auto{why})", flush=True)


def _check_backend(kind: str, spec: EnvSpec, env_name: str, render_mode: str | None,
                   num_envs: int, video: bool, env_kwargs: dict | None = None) -> None:
    if kind.startswith("ale") and not is_atari(spec):
        raise ConfigError(f"--vec-env {kind} runs Atari ids only, not {env_name}")
    if kind.startswith("ale") and not ale_vector_available():
        raise ConfigError(f"--vec-env {kind} needs ale-py >= 0.11 (AtariVectorEnv)")
    if kind == "ale-pipelined" and num_envs % 2:
        raise ConfigError(f"--vec-env ale-pipelined steps two halves: --num-processes {num_envs} "
                         "is not even")
    if kind == "native" and not has_native(spec):
        raise ConfigError(f"--vec-env native: {env_name} has no vector entry point")
    if kind == "envpool":
        envpool_kwargs(env_name, env_kwargs)  # the id and kwargs EnvPool takes
    if render_mode is not None:
        raise ConfigError(f"--vec-env {kind} does not render; use --vec-env dummy")
    if video:
        raise ConfigError(f"--capture-video: --vec-env {kind} does not render; use --vec-env "
                          "dummy or shmem (auto picks one of them)")


def make_vec_envs(env_name: str, seed: int, num_processes: int, gamma: float | None,
                  log_dir: str | None, device: torch.device | str, allow_early_resets: bool, *,
                  num_frame_stack: int | None = None, vec_env: str = "auto",
                  render_mode: str | None = None, monitor_append: bool = False,
                  num_workers: int | None = None, env_kwargs: dict | None = None,
                  first_rank: int = 0, episodic_life: bool = True,
                  video_prefix: str | None = None, env_timeout: float | None = None,
                  scale_actions: bool = False) -> VecPyTorch | VecPyTorchFrameStack:
    """Build the full stack: N envs -> backend -> VecNormalize (vector obs) -> VecPyTorch
    -> VecPyTorchFrameStack (images: ``num_frame_stack`` or 4; vectors: only if given).

    The result speaks torch on ``device``: ``reset() -> obs (N, *obs_shape)``, ``step(actions)
    -> obs, reward (N, 1), terminated (N,), truncated (N,), infos`` (``torch_vec.VecPyTorch``).
    ``vec_env``: ``dummy`` / ``threads`` / ``shmem`` (the classic per-env stack, here / in a thread
    per CPU / in worker processes), ``ale``
    (``ale.AleVecEnv``), ``native`` (``native.NativeVecEnv``), ``envpool`` (MuJoCo ids,
    ``envpool.EnvpoolVecEnv``) or ``auto`` (``_auto_vec_env``; never ``envpool``). ``gamma`` None
    normalizes observations only (evaluation); ``log_dir`` None writes no monitor files; ``env_kwargs`` go
    to ``gym.make``. Env i has rank ``first_rank + i``: seed ``seed + rank``, monitor file
    ``<rank>.monitor.csv``. ``episodic_life=False`` (evaluation): a lost life ends no episode on ``ale``,
    which FIREs after it; the classic Atari stack always ends the learner's episode there.
    ``video_prefix``: env rank 0 records videos (``single.record_video``), on ``dummy`` or ``shmem`` only.
    A step or reset of a user's env (not ``ale``) that has not returned for a minute is said in one line;
    ``env_timeout`` seconds (None: never) stop it with ``watch.EnvTimeout`` (``envs/watch.py``).
    ``scale_actions``: the policy's Box actions are in [-1, 1], mapped onto the env's bounds
    (``VecPyTorch``).
    """
    if vec_env not in VEC_ENV_KINDS:
        raise ConfigError(f"unknown vec_env {vec_env!r}; expected one of {', '.join(VEC_ENV_KINDS)}")
    spec = env_spec(env_name)
    if vec_env == "auto":
        vec_env = _auto_vec_env(spec, num_processes, render_mode, env_kwargs)
        if video_prefix and vec_env.startswith("ale"):
            vec_env = _auto_vec_env(spec, num_processes, "rgb_array", env_kwargs)
            _announce(env_name, vec_env, "; --capture-video: ALE's vector env does not render")
        elif vec_env != "dummy":
            _announce(env_name, vec_env)
    if vec_env in ("ale", "ale-pipelined", "native", "envpool"):
        _check_backend(vec_env, spec, env_name, render_mode, num_processes, bool(video_prefix),
                       env_kwargs)
    elif env_kwargs:
        check_env_kwargs(env_name, env_kwargs)

    if vec_env.startswith("ale"):
        groups = 2 if vec_env == "ale-pipelined" else 1
        envs: VecEnv = AleVecEnv(env_name, num_processes, seed, first_rank, log_dir, monitor_append,
                                 env_kwargs, episodic_life, num_frame_stack or 4, groups,
                                 threads=max(1, min(num_processes // groups, num_cpus() // groups)))
    elif vec_env == "envpool":
        envs = EnvpoolVecEnv(env_name, num_processes, seed, first_rank, log_dir, monitor_append,
                             env_kwargs)
    elif vec_env == "native":
        envs = NativeVecEnv(env_name, num_processes, seed, first_rank, log_dir, monitor_append,
                            env_kwargs)
    else:
        env_fns = [make_env(env_name, seed, first_rank + i, log_dir, allow_early_resets,
                            render_mode, monitor_append, env_kwargs, video_prefix)
                   for i in range(num_processes)]
        envs = (ShmemVecEnv(env_fns, num_workers) if vec_env == "shmem"
                else ThreadVecEnv(env_fns, num_workers) if vec_env == "threads"
                else DummyVecEnv(env_fns))
    watch(envs, env_name, env_timeout)  # not ALE's or EnvPool's: their own C++ envs

    if len(space_shape(envs.observation_space)) == 1:
        envs = VecNormalize(envs, gamma=gamma) if gamma is not None else VecNormalize(envs, ret=False)
    try:
        torch_envs = VecPyTorch(envs, device, scale_actions)
    except ConfigError:
        envs.close()
        raise
    if vec_env.startswith("ale"):  # ALE stacked the frames already
        return torch_envs
    if num_frame_stack is not None:
        return VecPyTorchFrameStack(torch_envs, num_frame_stack, device)
    if len(space_shape(torch_envs.observation_space)) == 3:
        return VecPyTorchFrameStack(torch_envs, 4, device)
    return torch_envs


def frame_channels(envs: VecEnvWrapper) -> int | None:
    """Channels of one frame where ``envs`` (``make_vec_envs``'s) stack frames so that each
    step's stack is the last one shifted by a frame plus the new one (zeros plus the new one
    where an episode ended), else None. ``workers.pack_frames`` relies on exactly that."""
    if isinstance(envs, VecPyTorchFrameStack):
        return envs.shape_dim0 if envs.nstack > 1 else None
    venv = getattr(envs, "venv", None)
    if isinstance(venv, AleVecEnv):
        return venv.frame_channels
    return None
