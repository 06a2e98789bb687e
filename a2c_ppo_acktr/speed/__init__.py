"""How fast the learner runs, never what it computes: the speed seam (``speed_up``), bf16
autocast, ``torch.compile`` and malloc's thresholds (``keep_freed_memory``).

``speed_up(policy, agent)``, called once by ``run/start.py`` on the built objects, is
where every speed mechanism that is not a flag is applied, each on its own and each switchable
(``MECHANISMS``; the environment variable ``A2C_PPO_ACKTR_SPEED``: "all", the default, "none",
or a comma-separated list of names) so that a benchmark can weigh it A/B:

- ``optim``: Adam's and RMSprop's step through torch's functional API (``speed/optim.py``);
- ``flat``: parameters and gradients in one tensor each, RMSprop on it (``speed/flat.py``);
- ``layers``: module calls without ``Module.__call__``'s cost (``speed/layers.py``).

The core (model, distributions, storage, algo) is plain torch, and the same with or without them,
bit for bit (tests/test_speed_seam.py).

bf16 (``--precision bf16``) is ``Policy(precision="bf16")``: autocast around the base; it pays
only where the hardware computes in bf16 (``cpu_has_native_bf16``; CUDA from compute capability
8.0). ``--compile`` (``compile_policy``, ``compile_agent``) compiles the rollout's act step
(``Policy.act``) and the agent's ``loss`` with its backward, with static shapes and eager's random
numbers, on CUDA as CUDA graphs whose outputs the act step copies (the next replay overwrites
them); clipping and the optimizer step stay eager, and the eager code stays the reference. Why
each choice: docs/benchmarks.md, "Speed options: `--compile` and `--precision bf16`".
"""
import ctypes
import functools
import os
import types
from collections.abc import Callable

import torch

from a2c_ppo_acktr.algo import A2C_ACKTR, PPO, Agent
from a2c_ppo_acktr.algo.agent import BaseAgent
from a2c_ppo_acktr.errors import ConfigError, say
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.speed.flat import FlatParams, flatten
from a2c_ppo_acktr.speed.layers import direct_calls
from a2c_ppo_acktr.speed.optim import functional_step

MECHANISMS = ("optim", "flat", "layers")
SWITCH = "A2C_PPO_ACKTR_SPEED"  # the environment variable that chooses them


def mechanisms_from_env(value: str | None = None) -> set[str]:
    """The mechanisms ``value`` (by default ``$A2C_PPO_ACKTR_SPEED``) turns on: "all" (or unset),
    "none", or names from ``MECHANISMS`` separated by commas; ``ValueError`` for another name."""
    value = os.environ.get(SWITCH, "all") if value is None else value
    if value.strip() in ("", "all"):
        return set(MECHANISMS)
    names = {name.strip() for name in value.split(",")} - {"none", ""}
    unknown = sorted(names - set(MECHANISMS))
    if unknown:
        raise ValueError(f"{SWITCH}: unknown mechanism {', '.join(unknown)}; expected all, none or "
                         f"some of {', '.join(MECHANISMS)}")
    return names


ENABLED: set[str] = mechanisms_from_env()  # what speed_up applies; a benchmark may change it


def speed_up(policy: Policy, agent: Agent | None = None, *, compiled: bool = False) -> list[str]:
    """Apply the ``ENABLED`` mechanisms to the run's built ``policy`` and ``agent`` (None:
    nothing of it); -> the names of those applied. Each applies only where it
    computes exactly what the plain objects would (a researcher's optimizer, layer or loss is
    left to torch where a mechanism does not know it); ``compiled`` (``--compile``): not
    ``layers``, which compiled code has no use for."""
    applied = []
    optimizer = agent.optimizer if agent is not None else None
    if "optim" in ENABLED and optimizer is not None and functional_step(optimizer):
        applied.append("optim")
    if "flat" in ENABLED and agent is not None and (flat := flatten(agent.optimizer)):
        if (isinstance(agent, BaseAgent) and agent.max_grad_norm is not None
                and type(agent).clip_grad_norm is BaseAgent.clip_grad_norm  # not their own
                and len(flat.params) == len(agent.params)
                and all(p is q for p, q in zip(flat.params, agent.params))):
            _shadow(agent, "clip_grad_norm", functools.partial(flat_clip, agent, flat))
        applied.append("flat")
    if "layers" in ENABLED and not compiled:
        direct_calls(policy)
        applied.append("layers")
    return applied


# Where the kernel reports whether a CPU computes in bf16 natively (Linux).
CPUINFO = "/proc/cpuinfo"
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_has_native_bf16(cpuinfo: str = CPUINFO) -> bool:
    """True if the CPU has AVX512-BF16 or AMX-BF16 (``/proc/cpuinfo`` flags). Elsewhere bf16 is
    emulated: it runs, slower than fp32. False where there is no ``cpuinfo`` (macOS, Windows)."""
    try:
        with open(cpuinfo) as f:
            flags = {word for line in f if line.startswith("flags") for word in line.split()}
    except OSError:
        return False
    return any(flag in flags for flag in NATIVE_BF16_FLAGS)


def bf16_missing(cuda: bool) -> str | None:
    """What bf16 needs that this machine's CPU (or its GPU, with ``cuda``) lacks, or None."""
    if cuda:
        if torch.cuda.is_bf16_supported(including_emulation=False):
            return None
        return (f"a GPU with native bf16 (compute capability 8.0 or newer); this one "
                f"({torch.cuda.get_device_name()}) has none")
    if cpu_has_native_bf16():
        return None
    return "a CPU with native bf16 (avx512_bf16 or AMX); this one has neither"


def compile_fn(fn: Callable, device: torch.device) -> Callable:
    """``torch.compile(fn)`` as ``--compile`` does it: static shapes, eager's random numbers, and
    on CUDA, CUDA graphs (``mode="reduce-overhead"``, here as its option: mode and options
    cannot be given together), compiled in this process where Inductor's worker processes
    cannot (``in_process_on_worker_failure``)."""
    options: dict[str, str | int | bool | Callable] = {"fallback_random": True}
    if device.type != "cuda":
        return torch.compile(fn, dynamic=False, options=options)
    options["triton.cudagraphs"] = True
    return in_process_on_worker_failure(torch.compile(fn, dynamic=False, options=options))


# What Inductor's compile workers raise where Triton cannot see the GPU from a subprocess
# (triton-lang/triton#9578); compiling in the process that can see it avoids that.
WORKER_FAILURE = "Could not find an active GPU backend"


def in_process_on_worker_failure(compiled: Callable) -> Callable:
    """``compiled``, called again after switching Inductor to compile in this process (one line
    on stderr) if its compilation fails in the worker processes (``WORKER_FAILURE``)."""
    def call(*args, **kwargs):
        try:
            return compiled(*args, **kwargs)
        except Exception as e:
            from torch._inductor import config
            if WORKER_FAILURE not in str(e) or config.compile_threads == 1:
                raise
            config.compile_threads = 1
            say(f"torch.compile: Inductor's compile workers failed ({WORKER_FAILURE}); "
                "compiling in this process")
            return compiled(*args, **kwargs)
    return call


def flat_clip(agent: BaseAgent, flat: FlatParams) -> torch.Tensor:
    """``agent.clip_grad_norm()`` on its flat gradient (``--max-grad-norm`` read at each call)."""
    assert agent.max_grad_norm is not None
    return flat.clip_grad_norm(agent.max_grad_norm)


def _shadow(obj: object, method: str, fn: Callable) -> None:
    """Replace ``obj``'s ``method`` by ``fn`` on this instance only (its class keeps the method):
    a rebinding by name, which type checkers cannot follow, so done in this one place."""
    setattr(obj, method, fn)


def gru_segments_eager(policy: Policy) -> None:
    """Run a recurrent ``policy``'s GRU over a sequence's segments (``NNBase._gru_segments``)
    eagerly, on this instance: where the segments start depends on the data, and compiling it
    again for each pattern of episode ends costs more than it saves. Here rather than as a
    decorator in model.py: what only ``--compile`` needs stays out of the core."""
    base = policy.base
    if policy.is_recurrent and "_gru_segments" not in vars(base):
        # A method of the instance (not a function holding it): a deep copy binds its own.
        _shadow(base, "_gru_segments",
                types.MethodType(torch.compiler.disable(type(base)._gru_segments), base))


def compile_policy(policy: Policy, device: torch.device) -> None:
    """Replace ``policy.act_step``, what a rollout calls to act, by a compiled ``policy.act``
    (on this instance); its other methods, its parameters and its state dict are unchanged."""
    gru_segments_eager(policy)
    act = compile_fn(policy.act, device)
    if device.type != "cuda":
        _shadow(policy, "act_step", act)
        return

    def act_step(inputs: torch.Tensor, rnn_hxs: torch.Tensor, masks: torch.Tensor):
        # The graph's outputs are overwritten by its next replay: the rollout keeps copies.
        return tuple(t.clone() for t in act(inputs, rnn_hxs, masks))
    _shadow(policy, "act_step", act_step)


def compile_agent(agent: Agent, device: torch.device) -> None:
    """Compile ``agent.loss`` (PPO's, A2C's) in place; ``ConfigError`` for ACKTR."""
    if not isinstance(agent, (PPO, A2C_ACKTR)):
        raise ConfigError(f"--compile compiles PPO's and A2C's loss; {type(agent).__name__} "
                          "is neither")
    if isinstance(agent, A2C_ACKTR) and agent.acktr:
        raise ConfigError("ACKTR cannot be compiled: torch.compile cannot trace K-FAC's hooks")
    gru_segments_eager(agent.actor_critic)
    _shadow(agent, "loss", compile_fn(agent.loss, device))


def compile_seconds() -> float:
    """Seconds spent compiling in this process so far (forward and backward graphs)."""
    from torch._dynamo.utils import calculate_time_spent
    return calculate_time_spent().get("total_wall_time", 0.0)


# glibc's mallopt parameters (malloc.h) and the values set for them.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
TRIM_THRESHOLD = 256 << 20  # free memory kept at the heap's top before it goes back
MMAP_THRESHOLD = 32 << 20  # glibc's own upper bound for its dynamic threshold
MALLOC_ENV = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep the memory an update frees for the next one; -> whether it was
    set (False: not glibc, or the user set ``MALLOC_TRIM_THRESHOLD_`` / ``MALLOC_MMAP_THRESHOLD_``,
    which win).

    Each update allocates and frees tensors of megabytes (a minibatch's activations and their
    gradients). By default glibc hands the heap's free top back to the kernel above a threshold
    that moves with the sizes it has seen, so the next update faults the same pages in again,
    zeroed (docs/benchmarks.md, "On the CPU"). Fixed thresholds end that; the cost is up to
    ``TRIM_THRESHOLD`` of freed memory kept by the process.
    """
    if any(name in os.environ for name in MALLOC_ENV):
        return False
    try:
        libc = ctypes.CDLL(None)  # this process's symbols, libc's among them: no ldconfig child
    except OSError:
        return False
    if not hasattr(libc, "gnu_get_libc_version"):  # not glibc: its thresholds do not apply
        return False
    libc.mallopt.argtypes, libc.mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return all(libc.mallopt(param, value) == 1 for param, value in
               ((M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_MMAP_THRESHOLD, MMAP_THRESHOLD)))
