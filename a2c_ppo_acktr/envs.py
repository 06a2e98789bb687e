"""Environment construction, vectorization, normalization and torch conversion.

Layers, innermost first (``make_vec_envs`` builds the whole stack)::

    make_env thunk           gym env + Monitor (+ DeepMind Atari wrappers, CHW images, seeding)
    DummyVecEnv/ShmemVecEnv  numpy batch of N envs with same-step autoreset
    VecNormalize             running obs / discounted-return normalization (vector obs only)
    VecPyTorch               numpy <-> torch on ``device``
    VecPyTorchFrameStack     frame stacking on ``device`` (images, or when asked)

Autoreset is *same-step*: when env i terminates or truncates, its real last observation goes to
``infos[i]["final_obs"]``, the env is reset at once and the returned ``obs[i]`` is the first
observation of the next episode, so no transition straddles two episodes.
"""
import copyreg
import difflib
import io
import json
import mmap
import multiprocessing as mp
import os
import pickle
import signal
import tempfile
import traceback
from multiprocessing import reduction

import cloudpickle
import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.atari_wrappers import (
    ClipRewardEnv,
    EpisodicLifeEnv,
    FireResetEnv,
    MaxAndSkipEnv,
    NoopResetEnv,
    WarpFrame,
)
from stable_baselines3.common.monitor import Monitor

from a2c_ppo_acktr.realtime import RealTimeEnv

VEC_ENV_KINDS = ("auto", "dummy", "shmem")


# ----------------------------------------------------------------------------- single envs

_ale_registered = False


def _register_ale():
    """Register the ALE ids with gymnasium (gymnasium 1.x no longer does it on its own)."""
    global _ale_registered
    if not _ale_registered:
        try:
            import ale_py
        except ImportError:
            return
        gym.register_envs(ale_py)
        _ale_registered = True


def _env_spec(env_id):
    """``gym.spec(env_id)``, registering the Atari ids on a miss; a one-line ValueError if unknown."""
    for attempt in range(2):
        try:
            return gym.spec(env_id)
        except gym.error.Error:
            if attempt == 0:
                _register_ale()  # ale_py is imported only when the id is not a stock one
    close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ValueError(f"unknown env id {env_id!r}{hint}")


def _is_atari(spec):
    return "ale_py" in str(spec.entry_point)


class TransposeImage(gym.ObservationWrapper):
    """HWC image observations -> CHW, the layout torch convolutions expect."""

    def __init__(self, env):
        super().__init__(env)
        space = env.observation_space
        self.observation_space = spaces.Box(
            space.low.transpose(2, 0, 1), space.high.transpose(2, 0, 1), dtype=space.dtype)

    def observation(self, observation):
        return observation.transpose(2, 0, 1)


class SeedFirstReset(gym.Wrapper):
    """Seeds the env's first ``reset`` (gymnasium seeds through reset, not ``env.seed``)."""

    def __init__(self, env, seed):
        super().__init__(env)
        self._seed = seed

    def reset(self, *, seed=None, options=None):
        if seed is None:
            seed, self._seed = self._seed, None
        return self.env.reset(seed=seed, options=options)


def _monitor_t_start(path):
    """``t_start`` in the JSON header of an existing monitor file, or None."""
    try:
        with open(path) as f:
            return float(json.loads(f.readline()[1:])["t_start"])
    except (OSError, ValueError, KeyError):
        return None


def make_env(env_id, seed, rank, log_dir, allow_early_resets, render_mode=None, monitor_append=False,
             env_kwargs=None):
    """Return a thunk building env ``rank``: gym env, Monitor, Atari preprocessing, CHW images.

    The id is checked now (ValueError if unknown); the env itself is built when the thunk is
    called, possibly in a worker process (thunks are cloudpickled there). ``env_kwargs`` go to
    ``gym.make`` (they override ``render_mode`` and the Atari ``frameskip`` set here).
    """
    spec = _env_spec(env_id)
    atari = _is_atari(spec)

    def _thunk():
        kwargs = {}
        if atari:
            _register_ale()  # a fresh worker process has not registered them yet
            if spec.kwargs.get("frameskip", 1) != 1:
                kwargs["frameskip"] = 1  # e.g. ALE/*-v5: MaxAndSkipEnv does the skipping
        env = gym.make(env_id, **{"render_mode": render_mode, **kwargs, **(env_kwargs or {})})
        if atari:
            env = NoopResetEnv(env, noop_max=30)
            env = MaxAndSkipEnv(env, skip=4)
        if log_dir is not None:
            # Inside EpisodicLife, so the CSV holds whole games with raw (unclipped) rewards.
            filename = os.path.join(log_dir, str(rank))
            t_start = _monitor_t_start(filename + ".monitor.csv") if monitor_append else None
            env = Monitor(env, filename, allow_early_resets=allow_early_resets,
                          override_existing=not monitor_append)
            if t_start is not None:
                env.t_start = t_start  # appended rows continue the file's clock
        if atari:
            env = EpisodicLifeEnv(env)
            if "FIRE" in env.unwrapped.get_action_meanings():
                env = FireResetEnv(env)
            env = WarpFrame(env, width=84, height=84)
            env = ClipRewardEnv(env)
        shape = env.observation_space.shape
        if shape is not None and len(shape) == 3 and shape[2] in (1, 3):
            env = TransposeImage(env)
        env = SeedFirstReset(env, seed + rank)
        env.action_space.seed(seed + rank)
        return env

    return _thunk


# ----------------------------------------------------------------------------- numpy vector envs

def _step_block(envs, actions, obs, rewards, terminated, truncated):
    """Step ``envs`` with same-step autoreset, writing row j of each output array; return infos.

    Shared by DummyVecEnv and the ShmemVecEnv workers so both give bit-identical results.
    """
    infos = []
    for j, env in enumerate(envs):
        try:
            o, r, term, trunc, info = env.step(actions[j])
            if term or trunc:
                info["final_obs"] = np.array(o)  # a copy: the env may reuse its buffer
                o, _ = env.reset()
        except Exception as e:
            e.env_index = j  # lets ShmemVecEnv name the env that failed
            raise
        obs[j] = o
        rewards[j] = r
        terminated[j] = term
        truncated[j] = trunc
        infos.append(info)
    return infos


def _pause_block(envs):
    """Hold real-time envs still (their interface's ``wait``) until the next step; others: no-op."""
    for env in envs:
        if isinstance(env.unwrapped, RealTimeEnv):
            env.unwrapped.wait()


def _benchmark_block(envs):
    """``RealTimeEnv.benchmarks()`` of each real-time env; None for the others."""
    return [env.unwrapped.benchmarks() if isinstance(env.unwrapped, RealTimeEnv) else None
            for env in envs]


def _reset_block(envs, obs):
    for j, env in enumerate(envs):
        try:
            obs[j], _ = env.reset()
        except Exception as e:
            e.env_index = j
            raise


class DummyVecEnv:
    """Runs N envs one after the other in this process (numpy in, numpy out)."""

    def __init__(self, env_fns):
        self.envs = [fn() for fn in env_fns]
        self.num_envs = len(self.envs)
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space

    def reset(self):
        """Reset all envs; returns obs (N, *obs_shape)."""
        obs = np.empty((self.num_envs, *self.observation_space.shape), self.observation_space.dtype)
        _reset_block(self.envs, obs)
        return obs

    def step(self, actions):
        """Returns obs (N, *obs_shape), rewards (N,) f32, terminated (N,), truncated (N,), infos."""
        n = self.num_envs
        # Same cast as the shared action buffer of ShmemVecEnv; a fresh array, as an env may keep it.
        actions = np.array(actions, dtype=self.action_space.dtype).reshape(n, *self.action_space.shape)
        obs = np.empty((n, *self.observation_space.shape), self.observation_space.dtype)
        rewards = np.empty(n, np.float32)
        terminated = np.empty(n, bool)
        truncated = np.empty(n, bool)
        infos = _step_block(self.envs, actions, obs, rewards, terminated, truncated)
        return obs, rewards, terminated, truncated, infos

    def pause(self):
        _pause_block(self.envs)

    def benchmarks(self):
        return _benchmark_block(self.envs)

    def render(self):
        return self.envs[0].render()

    def close(self):
        for env in self.envs:
            env.close()


def _shared_layout(n, observation_space, action_space):
    """Byte layout of the shared buffer: name -> (dtype, shape, offset); plus the total size."""
    fields = [("obs", observation_space.dtype, observation_space.shape),
              ("actions", action_space.dtype, action_space.shape),
              ("rewards", np.float32, ()), ("terminated", bool, ()), ("truncated", bool, ())]
    layout, offset = {}, 0
    for name, dtype, shape in fields:
        dtype = np.dtype(dtype)
        layout[name] = (dtype.str, (n, *shape), offset)
        offset += -(-n * int(np.prod(shape)) * dtype.itemsize // 64) * 64  # 64-byte aligned
    return layout, max(offset, 1)


def _shared_views(buf, layout, lo=0, hi=None):
    """numpy views (rows lo:hi) on the shared buffer, keyed like the layout."""
    return {name: np.ndarray(shape, dtype, buffer=buf, offset=offset)[lo:hi]
            for name, (dtype, shape, offset) in layout.items()}


class _RemoteError:
    """What a worker sends back instead of a result when one of its envs raises."""

    def __init__(self, env_index, message, tb):
        self.env_index, self.message, self.traceback = env_index, message, tb


def _reduce_numpy_scalar(x):
    return type(x), (x.item(),)


# numpy scalars (MuJoCo infos are full of them) pickle ~2.5x faster this way; same type and value.
_DISPATCH_TABLE = copyreg.dispatch_table.copy()
_DISPATCH_TABLE.update({t: _reduce_numpy_scalar
                        for t in (np.float64, np.float32, np.int64, np.int32, np.bool_)})


def _send(conn, obj):
    """conn.send(obj), with the faster pickling of numpy scalars."""
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _DISPATCH_TABLE
    pickler.dump(obj)
    conn.send_bytes(buf.getbuffer())


def _worker(conn, env_fns_blob, first_index):
    """Worker process running envs first_index .. first_index + len(env_fns) - 1."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # on Ctrl-C the parent closes us in order
    envs, index = [], first_index
    try:
        for fn in cloudpickle.loads(env_fns_blob):
            envs.append(fn())
            index += 1
        conn.send((envs[0].observation_space, envs[0].action_space))
        layout = conn.recv()
        fd = reduction.recv_handle(conn)
        buf = mmap.mmap(fd, 0)
        os.close(fd)
        v = _shared_views(buf, layout, first_index, first_index + len(envs))
        while True:
            cmd = conn.recv_bytes()
            if cmd == b"s":
                infos = _step_block(envs, v["actions"].copy(), v["obs"], v["rewards"],
                                    v["terminated"], v["truncated"])
                _send(conn, infos if any(infos) else None)  # usually all empty: send nothing
            elif cmd == b"r":
                _reset_block(envs, v["obs"])
                conn.send(None)
            elif cmd == b"p":
                _pause_block(envs)
                conn.send(None)
            elif cmd == b"b":
                conn.send(_benchmark_block(envs))
            elif cmd == b"v":
                conn.send(envs[0].render())
            elif cmd == b"c":
                break
    except (EOFError, ConnectionError):
        pass  # the parent is gone
    except Exception as e:
        index = first_index + getattr(e, "env_index", index - first_index)
        try:
            conn.send(_RemoteError(index, f"{type(e).__name__}: {e}", traceback.format_exc()))
        except OSError:
            pass
    finally:
        for env in envs:
            try:
                env.close()
            except Exception:
                pass


def _mp_context():
    """forkserver where available: fork is unsafe once torch has started threads, and a
    forkserver that has already imported this module (torch, gymnasium) starts workers fast."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])  # no effect once the server runs; harmless then
    return ctx


def _anonymous_file(size):
    """File descriptor of an unnamed file of ``size`` bytes (freed once the last user closes it)."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("a2c_ppo_acktr-shmem")
    else:
        with tempfile.TemporaryFile() as f:
            fd = os.dup(f.fileno())
    os.ftruncate(fd, size)
    return fd


class ShmemVecEnv:
    """N envs in ``num_workers`` subprocesses, each running a contiguous block of envs.

    Observations, actions, rewards, terminated and truncated live in one shared-memory buffer;
    the pipes carry only one-byte commands and the (usually empty) info lists. A failing env
    raises RuntimeError here, naming its index, and closes the workers. Workers start through a
    forkserver, so a script creating one needs the usual ``if __name__ == "__main__":`` guard.
    """

    def __init__(self, env_fns, num_workers=None):
        self.num_envs = n = len(env_fns)
        num_workers = max(1, min(n, num_workers or _num_cpus()))
        bounds = np.linspace(0, n, num_workers + 1).round().astype(int)
        self._blocks = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
        self._conns, self._procs, self.closed = [], [], False
        ctx = _mp_context()
        for lo, hi in self._blocks:
            parent_conn, child_conn = ctx.Pipe()  # a socket pair: can pass the buffer's fd
            proc = ctx.Process(target=_worker, args=(child_conn, cloudpickle.dumps(env_fns[lo:hi]), lo),
                               daemon=True)
            proc.start()
            child_conn.close()
            self._conns.append(parent_conn)
            self._procs.append(proc)
        # Workers build their envs in parallel; then the buffer, sized from the spaces, goes out.
        self.observation_space, self.action_space = [self._recv(w) for w in range(num_workers)][0]
        layout, size = _shared_layout(n, self.observation_space, self.action_space)
        fd = _anonymous_file(size)
        try:
            for conn, proc in zip(self._conns, self._procs):
                conn.send(layout)
                reduction.send_handle(conn, fd, proc.pid)
            self._buf = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self._views = _shared_views(self._buf, layout)

    def _recv(self, w):
        """Reply of worker ``w``; on a worker error or death, close everything and raise."""
        try:
            reply = self._conns[w].recv()
        except (EOFError, ConnectionError):
            lo, hi = self._blocks[w]
            self._procs[w].join(1.0)
            self.close()
            raise RuntimeError(f"ShmemVecEnv worker for envs {lo}..{hi - 1} died "
                               f"(exit code {self._procs[w].exitcode})") from None
        if isinstance(reply, _RemoteError):
            self.close()
            raise RuntimeError(f"env {reply.env_index} failed in a ShmemVecEnv worker: {reply.message}\n"
                               f"worker traceback:\n{reply.traceback}")
        return reply

    def _check_open(self):
        if self.closed:
            raise RuntimeError("ShmemVecEnv is closed")

    def _broadcast(self, cmd):
        """Send a one-byte command to every worker; return their replies in worker order."""
        self._check_open()
        for conn in self._conns:
            conn.send_bytes(cmd)
        return [self._recv(w) for w in range(len(self._conns))]

    def reset(self):
        """Reset all envs; returns obs (N, *obs_shape)."""
        self._broadcast(b"r")
        return self._views["obs"].copy()

    def step(self, actions):
        """Returns obs (N, *obs_shape), rewards (N,) f32, terminated (N,), truncated (N,), infos."""
        self._check_open()
        v = self._views
        v["actions"][:] = np.asarray(actions).reshape(v["actions"].shape)
        infos = []
        for block, (lo, hi) in zip(self._broadcast(b"s"), self._blocks):
            infos.extend(block if block is not None else [{} for _ in range(hi - lo)])
        # Copies: the workers overwrite the buffer on the next step.
        return (v["obs"].copy(), v["rewards"].copy(), v["terminated"].copy(), v["truncated"].copy(),
                infos)

    def pause(self):
        self._broadcast(b"p")

    def benchmarks(self):
        return [b for block in self._broadcast(b"b") for b in block]

    def render(self):
        self._check_open()
        self._conns[0].send_bytes(b"v")
        return self._recv(0)

    @property
    def pids(self):
        """Worker process ids (for resource measurements)."""
        return [p.pid for p in self._procs]

    def close(self):
        if self.closed:
            return
        self.closed = True
        for conn in self._conns:
            try:
                conn.send_bytes(b"c")
            except OSError:
                pass  # that worker is already gone
        for proc in self._procs:
            proc.join(2.0)
            if proc.is_alive():
                proc.terminate()
                proc.join()
        for conn in self._conns:
            conn.close()


# ----------------------------------------------------------------------------- normalization

class RunningMeanStd:
    """Running mean / variance of a stream of batches (parallel algorithm, as baselines / SB3)."""

    def __init__(self, epsilon=1e-4, shape=()):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = epsilon

    def update(self, x):
        """x: (batch, *shape)."""
        # np.mean / np.var go through Python-level wrappers (~10-25 us each on a batch of 8);
        # the same arithmetic with ufunc reductions, in place where it can be, is ~5x cheaper,
        # and runs twice per step.
        n = x.shape[0]
        batch_mean = np.add.reduce(x, axis=0, dtype=np.float64)
        batch_mean /= n
        centred = x - batch_mean
        centred *= centred
        batch_var = np.add.reduce(centred, axis=0)
        batch_var /= n
        self.update_from_moments(batch_mean, batch_var, n)

    def update_from_moments(self, batch_mean, batch_var, batch_count):
        delta = batch_mean - self.mean
        tot_count = self.count + batch_count
        m2 = self.var * self.count
        m2 += batch_var * batch_count
        m2 += np.square(delta) * (self.count * batch_count / tot_count)
        m2 /= tot_count
        self.mean = self.mean + delta * (batch_count / tot_count)
        self.var = m2
        self.count = tot_count

    def state_dict(self):
        return {"mean": torch.from_numpy(np.array(self.mean)),
                "var": torch.from_numpy(np.array(self.var)), "count": float(self.count)}

    def load_state_dict(self, d):
        self.mean = d["mean"].numpy().astype(np.float64)
        self.var = d["var"].numpy().astype(np.float64)
        self.count = float(d["count"])


def normalizer_delta(before, after):
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


def merge_normalizer(state, deltas):
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


class VecEnvWrapper:
    """Base of the wrappers below: what a wrapper does not change goes to ``self.venv``."""

    def __init__(self, venv):
        self.venv = venv
        self.num_envs = venv.num_envs
        self.observation_space = venv.observation_space
        self.action_space = venv.action_space

    def pause(self):
        """Real-time envs hold still (default action, clock stopped) until the next step."""
        self.venv.pause()

    def benchmarks(self):
        """Per env: its timing statistics (``RealTimeEnv.benchmarks()``) or None (not real-time)."""
        return self.venv.benchmarks()

    def render(self):
        return self.venv.render()

    def close(self):
        self.venv.close()


def _clip(x, bound):
    """``np.clip(x, -bound, bound)`` as float32, in place on the fresh float64 array ``x``
    (two ufunc calls: ``np.clip``'s Python-level wrapper costs more than the work here)."""
    np.maximum(x, -bound, out=x)
    np.minimum(x, bound, out=x)
    return x.astype(np.float32)


class VecNormalize(VecEnvWrapper):
    """Normalizes observations by running mean/std and rewards by the std of the discounted return.

    Numerically the same as SB3's VecNormalize. ``eval()`` freezes the statistics; the
    ``final_obs`` in infos is normalized too (without updating them).
    """

    def __init__(self, venv, ob=True, ret=True, clip_obs=10., clip_reward=10., gamma=0.99, epsilon=1e-8):
        super().__init__(venv)
        self.ob_rms = RunningMeanStd(shape=self.observation_space.shape) if ob else None
        self.ret_rms = RunningMeanStd(shape=()) if ret else None
        self.clip_obs, self.clip_reward = clip_obs, clip_reward
        self.gamma, self.epsilon = gamma, epsilon
        self.returns = np.zeros(self.num_envs)  # (N,) discounted return so far, float64
        self.training = True
        self.raw_obs = None  # the last un-normalized observations (gail_experts/generate.py)

    def train(self):
        self.training = True

    def eval(self):
        self.training = False

    def normalize_obs(self, obs):
        """Normalize (and clip) without updating the statistics; returns float32."""
        if self.ob_rms is None:
            return obs
        rms = self.ob_rms
        return _clip((obs - rms.mean) / np.sqrt(rms.var + self.epsilon), self.clip_obs)

    def _obs(self, obs):
        self.raw_obs = obs  # a fresh array from the vec env: no copy needed to keep it
        if self.ob_rms is not None and self.training:
            self.ob_rms.update(obs)
        return self.normalize_obs(obs)

    def reset(self):
        self.returns = np.zeros(self.num_envs)
        return self._obs(self.venv.reset())

    def step(self, actions):
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

    def state_dict(self):
        """Running statistics as tensors / floats (safe for ``torch.load(weights_only=True)``)."""
        pairs = (("ob_rms", self.ob_rms), ("ret_rms", self.ret_rms))
        return {name: rms.state_dict() for name, rms in pairs if rms is not None}

    def load_state_dict(self, d):
        for name in ("ob_rms", "ret_rms"):
            rms = getattr(self, name)
            if rms is not None and name in d:
                rms.load_state_dict(d[name])


def get_vec_normalize(venv):
    """The VecNormalize in the ``.venv`` chain of ``venv``, or None."""
    while venv is not None:
        if isinstance(venv, VecNormalize):
            return venv
        venv = getattr(venv, "venv", None)
    return None


def normalizer_state(venv):
    """``state_dict()`` of the VecNormalize in ``venv``'s chain (for checkpoints), or None."""
    vec_norm = get_vec_normalize(venv)
    return vec_norm.state_dict() if vec_norm is not None else None


# ----------------------------------------------------------------------------- torch side

class VecPyTorch(VecEnvWrapper):
    """numpy vector env -> torch tensors on ``device``.

    Observations: uint8 for images (the CNN scales them), float32 otherwise. ``step`` returns
    obs (N, *obs_shape), reward (N, 1) float32, terminated (N,) bool, truncated (N,) bool, infos
    (``final_obs`` converted to a tensor on ``device`` too).
    """

    def __init__(self, venv, device):
        super().__init__(venv)
        self.device = torch.device(device)
        self._on_cpu = self.device.type == "cpu"  # then from_numpy is all: no copy, no .to()
        self._squeeze_actions = isinstance(self.action_space, spaces.Discrete)
        # The Gaussian policy is unbounded; the env gets its sample clipped to the Box (MuJoCo's
        # control cost would otherwise charge for the excess), while the rollout keeps the
        # unclipped sample so that its log-probability stays exact (as SB3 and CleanRL do).
        self._clip = isinstance(self.action_space, spaces.Box)

    def _to_torch(self, array, keep_dtype=False):
        t = torch.from_numpy(np.asarray(array))  # no copy on the CPU
        if not keep_dtype and t.dtype not in (torch.uint8, torch.float32):
            t = t.float()
        return t if self._on_cpu else t.to(self.device, non_blocking=True)

    def reset(self):
        return self._to_torch(self.venv.reset())

    def step(self, actions):
        actions = actions.cpu().numpy()
        if self._squeeze_actions and actions.ndim == 2:
            actions = actions.reshape(-1)  # (N, 1) long -> (N,)
        if self._clip:  # a fresh array: the env may keep it
            actions = np.minimum(np.maximum(actions, self.action_space.low), self.action_space.high)
        obs, reward, terminated, truncated, infos = self.venv.step(actions)
        for info in infos:
            if "final_obs" in info:
                info["final_obs"] = self._to_torch(info["final_obs"])
        reward = np.asarray(reward, np.float32).reshape(-1, 1)  # (N, 1)
        return (self._to_torch(obs), self._to_torch(reward), self._to_torch(terminated, True),
                self._to_torch(truncated, True), infos)


class VecPyTorchFrameStack(VecEnvWrapper):
    """Stacks the last ``nstack`` observations along dim 1 (channels) on ``device``.

    The stack of an env whose episode ended is zeroed but for the new first frame; its
    ``final_obs`` becomes the previous stack shifted by one plus the final frame. Each step
    returns a new tensor, so callers may keep the returned observations.
    """

    def __init__(self, venv, nstack, device):
        super().__init__(venv)
        self.nstack = nstack
        space = venv.observation_space
        self.shape_dim0 = space.shape[0]
        reps = (nstack,) + (1,) * (len(space.shape) - 1)
        self.observation_space = spaces.Box(np.tile(space.low, reps), np.tile(space.high, reps),
                                            dtype=space.dtype)
        dtype = torch.uint8 if space.dtype == np.uint8 else torch.float32
        self.stacked_obs = torch.zeros((self.num_envs, *self.observation_space.shape), dtype=dtype,
                                       device=torch.device(device))

    def reset(self):
        obs = self.venv.reset()
        self.stacked_obs = torch.zeros_like(self.stacked_obs)
        self.stacked_obs[:, -self.shape_dim0:] = obs
        return self.stacked_obs

    def step(self, actions):
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


# ----------------------------------------------------------------------------- factory

def _num_cpus():
    """CPUs this process may run on (the affinity mask, which os.cpu_count() ignores)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


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


def check_env_kwargs(env_id, env_kwargs):
    """Build and close one env with ``env_kwargs``: a bad key is a one-line ValueError here, not a
    traceback from a worker process."""
    try:
        gym.make(env_id, **env_kwargs).close()
    except (TypeError, ValueError) as e:  # TypeError: unknown key; ValueError: rejected value
        raise ValueError(f"{env_id} rejects env kwargs {env_kwargs}: {str(e).splitlines()[0]}") from None


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
