"""``make_vec_envs``: the one entry point that builds the whole env stack."""
from a2c_ppo_acktr.envs.normalize import VecNormalize
from a2c_ppo_acktr.envs.shmem import ShmemVecEnv
from a2c_ppo_acktr.envs.single import _env_spec, check_env_kwargs, make_env
from a2c_ppo_acktr.envs.torch_vec import VecPyTorch, VecPyTorchFrameStack
from a2c_ppo_acktr.envs.vec_env import DummyVecEnv, _num_cpus

VEC_ENV_KINDS = ("auto", "dummy", "shmem")


def _auto_vec_env(spec, num_envs):
    # scripts/bench_envs.py, 8 envs, random actions, env steps/s (median of 3 alternating rounds)
    # on the 2-vCPU dev VM:
    #   CartPole-v1         dummy 92k    shmem 29k    (SB3 DummyVecEnv 65k, SubprocVecEnv 6.3k)
    #   HalfCheetah-v5      dummy 14k    shmem 9.2k   (SB3 DummyVecEnv 9.0k, SubprocVecEnv 3.7k)
    #   Hopper-v5           dummy 5.2k   shmem 4.2k
    #   PongNoFrameskip-v4  dummy 1.5k   shmem 1.4k
    # Two vCPUs there give little parallel speed-up and cross-CPU wake-ups are slow, so dummy
    # wins everywhere. Subprocesses can only pay off when 3+ CPUs step envs far costlier than a
    # pipe round trip (~40 us): Atari, MuJoCo, not classic control / toy text (~5 us a step).
    cheap = str(spec.entry_point).startswith(("gymnasium.envs.classic_control",
                                              "gymnasium.envs.toy_text"))
    return "shmem" if num_envs > 1 and not cheap and _num_cpus() > 2 else "dummy"


def make_vec_envs(env_name, seed, num_processes, gamma, log_dir, device, allow_early_resets,
                  num_frame_stack=None, vec_env="auto", render_mode=None, monitor_append=False,
                  num_workers=None, env_kwargs=None, first_rank=0):
    """Build the full stack: N envs -> Dummy/ShmemVecEnv -> VecNormalize (vector obs) -> VecPyTorch
    -> VecPyTorchFrameStack (images: ``num_frame_stack`` or 4; vectors: only if given).

    ``env_kwargs`` go to ``gym.make`` (e.g. a real-time env's config). Env i has rank
    ``first_rank + i``: seed ``seed + rank``, monitor file ``<rank>.monitor.csv``. Ray workers and
    DDP ranks offset it so that their envs and files are those of one big run.
    """
    if vec_env not in VEC_ENV_KINDS:
        raise ValueError(f"unknown vec_env {vec_env!r}; expected one of {', '.join(VEC_ENV_KINDS)}")
    spec = _env_spec(env_name)
    if env_kwargs:
        check_env_kwargs(env_name, env_kwargs)
    env_fns = [make_env(env_name, seed, first_rank + i, log_dir, allow_early_resets, render_mode,
                        monitor_append, env_kwargs)
               for i in range(num_processes)]
    if vec_env == "auto":
        vec_env = _auto_vec_env(spec, num_processes)
    envs = ShmemVecEnv(env_fns, num_workers) if vec_env == "shmem" else DummyVecEnv(env_fns)

    if len(envs.observation_space.shape) == 1:
        envs = VecNormalize(envs, gamma=gamma) if gamma is not None else VecNormalize(envs, ret=False)
    envs = VecPyTorch(envs, device)
    if num_frame_stack is not None:
        envs = VecPyTorchFrameStack(envs, num_frame_stack, device)
    elif len(envs.observation_space.shape) == 3:
        envs = VecPyTorchFrameStack(envs, 4, device)
    return envs
