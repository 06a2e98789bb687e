"""DDP learners: ``torchrun --nproc_per_node K main.py ...`` runs K copies of the training loop.

Each rank steps its own ``num_processes`` envs (ranks ``rank * P ..`` of one big run), collects
its own rollout and runs the unchanged update on it. The ranks stay one learner: gradients are
averaged inside every ``backward()`` (``average_gradients``), the normalization statistics merged
after every rollout (``sync_normalizer``), and rank 0 alone cleans the run directories, logs,
saves and evaluates. ACKTR and ``--value-norm`` (statistics per rank: the ranks' steps would
differ) and ``--num-workers`` are refused. Details: docs/scale-out.md, "DDP learners with torchrun".

Faults: a rank that stops on a failure (``stopping``) writes its line into the process group's
store, then closes its connections, so the ranks waiting for it in a collective stop at once
with ``RankError`` (which the lead says in one line: rank, steps, what failed); a rank that ends
without a word (killed) breaks the collectives too, and is named by its pid. Under torchrun a
rank ends with torchrun, even a SIGKILLed one (SIGTERM: the ranks stop together, rank 0 saves).
"""
import importlib
import os
import signal
import socket
import time
from collections.abc import Callable
from typing import Any, Optional

import torch
import torch.distributed as dist
from torch.autograd import Variable

from a2c_ppo_acktr.envs import get_vec_normalize, merge_normalizer, normalizer_delta
from a2c_ppo_acktr.envs.processes import die_with_parent
from a2c_ppo_acktr.errors import RankError, first_line
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.rollout import Collector
from a2c_ppo_acktr.storage import RolloutStorage

KEYS = "a2c_ppo_acktr/"  # this module's keys in the process group's store
LOST_S = 3.0  # s to find which rank broke a collective, before saying only that one did


class DDP:
    """This process's place among the ranks, and the collectives main.py needs."""

    def __init__(self, cuda: bool) -> None:
        self.rank, self.world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        if cuda:
            torch.cuda.set_device(local_rank)
            self.device = torch.device("cuda", local_rank)
        else:
            self.device = torch.device("cpu")
        if "TORCHELASTIC_RUN_ID" in os.environ:  # torchrun's rank: it ends with torchrun, even a
            die_with_parent(signal.SIGTERM)  # SIGKILLed one (and stops as on torchrun's SIGTERM)
        # The optimizers import torch._dynamo on first use. Imported after init_process_group, it
        # keeps references to the default group that destroy_process_group does not drop, so
        # gloo's worker threads outlive close() and could abort the interpreter at exit
        # ("terminate called without an active exception"; how often: docs/benchmarks.md,
        # "Measured code choices"). Imported first, it takes none.
        importlib.import_module("torch._dynamo")
        # gloo on CPU; nccl moves GPU tensors without a trip through the host.
        dist.init_process_group("nccl" if cuda else "gloo")
        self._norm_base: dict | None = None
        self._pending = None
        self.failed = False  # this rank stopped on a failure, or saw another's: no barrier at close
        self.speaks = self.is_lead  # says why the ranks stop: the lead, or the next if it is gone
        self.store = dist.distributed_c10d._get_default_store()
        self.store.set(f"{KEYS}pid/{self.rank}", f"{socket.gethostname()} {os.getpid()}")

    @classmethod
    def from_env(cls, cuda: bool) -> "DDP | None":
        """A DDP when launched by torchrun (it sets RANK and WORLD_SIZE), else None. What the
        ranks cannot run together is refused with the flags (settings/checks.py)."""
        if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
            return None
        return cls(cuda)

    @property
    def is_lead(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        self._together(dist.barrier)

    def any(self, flag: bool) -> bool:
        """``flag`` of any rank, on every rank: a Ctrl-C that reached one rank stops them all at
        the same update (a rank that went on alone would wait in the next collective forever)."""
        t = torch.tensor([float(flag)], device=self.device)
        self._together(dist.all_reduce, t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def _together(self, collective: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``collective(*args, **kwargs)``; a rank that has stopped or ended breaks it (gloo:
        "Connection closed by peer"): ``RankError`` saying which rank, and why."""
        try:
            return collective(*args, **kwargs)
        except RuntimeError as e:
            raise self._lost(e) from None

    def _lost(self, error: RuntimeError) -> RankError:
        """Why a collective failed: the line of a rank that stopped on a failure (``stopping``),
        else the rank whose process has ended, else the collective's own error."""
        self.failed = True
        _ignore_sigterm()
        others = [r for r in range(self.world_size) if r != self.rank]
        deadline = time.monotonic() + LOST_S
        while True:  # a killed rank's connections close as it exits, before it has ended
            told = [line for line in (self._read(f"failed/{r}") for r in others) if line]
            if told:
                return RankError(told[0])
            gone = {r: where.split()[1] for r in others
                    if (where := self._read(f"pid/{r}")) and _ended(where)}
            if gone:
                # the lead gone, the next rank says why (open_run)
                self.speaks = all(r in gone for r in range(self.rank))
                return RankError(", ".join(f"rank {r} (pid {pid})" for r, pid in gone.items())
                                 + " ended without saying why (killed, or its process crashed)")
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        cause = first_line(error)[:300]
        return RankError(f"the ranks lost touch: {type(error).__name__}: {cause}")

    def _read(self, key: str) -> Optional[str]:
        """The store's value of ``key`` (under ``KEYS``), None if unset or the store is gone."""
        try:
            if self.store.check([KEYS + key]):
                return self.store.get(KEYS + key).decode()
        except RuntimeError:  # the store's host (rank 0 without torchrun) has ended
            pass
        return None

    def stopping(self, line: Optional[str], env_steps: int,
                 error: Optional[BaseException] = None) -> Optional[str]:
        """This rank stops on a failure: ``line`` (None: ``error`` is traced back). The other
        ranks stop too: they are told why (the store), then this rank's connections close,
        ending their collectives at once. -> the line for the lead to say: ``line`` naming this
        rank and its steps (for a ``RankError``, another rank's failure: ``line`` as it is)."""
        self.failed = True
        _ignore_sigterm()
        if isinstance(error, RankError):  # told by the rank that failed
            return line
        what = line or (f"{type(error).__name__}: {first_line(error)}"
                        f" (traced back by rank {self.rank})")
        told = f"rank {self.rank} at {env_steps:,} steps: {what}"
        try:
            self.store.set(f"{KEYS}failed/{self.rank}", told)
        except RuntimeError:  # the store's host has ended: the collectives fail anyway
            pass
        if dist.is_initialized():
            dist.destroy_process_group()
        return told if line is not None else None

    def average_gradients(self, module: torch.nn.Module) -> None:
        """Start all ranks from rank 0's parameters; from then on every backward through
        ``module`` ends with its gradients averaged over the ranks (one flat all-reduce).

        A hook on each parameter's gradient accumulation queues the all-reduce as a callback of
        the autograd engine, which runs it once the whole backward is done: one collective per
        backward rather than one per parameter.
        """
        for p in module.parameters():
            self._together(dist.broadcast, p.data, src=0)
        params = [p for p in module.parameters() if p.requires_grad]

        def all_reduce():
            self._pending = None
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
            flat = torch.cat([g.reshape(-1) for g in grads])
            self._together(dist.all_reduce, flat)
            flat /= self.world_size
            for p, mean in zip(params, flat.split([p.numel() for p in params])):
                if p.grad is None:
                    p.grad = mean.view_as(p)
                else:  # in place: the agent's gradients are views into one tensor (FlatParams)
                    p.grad.copy_(mean.view_as(p))

        def queue(_param):
            if self._pending is None:
                self._pending = True
                Variable._execution_engine.queue_callback(all_reduce)

        for p in params:
            p.register_post_accumulate_grad_hook(queue)

    def share_normalizer(self, envs: Any) -> None:
        """Remember the statistics all ranks hold now (fresh, or loaded from the same checkpoint):
        what ``sync_normalizer`` measures each rank's new data against."""
        vec_norm = get_vec_normalize(envs)
        self._norm_base = vec_norm.state_dict() if vec_norm is not None else None

    def sync_normalizer(self, envs: Any) -> None:
        """Merge what every rank's normalizer saw since the last sync; all ranks load the result."""
        if self._norm_base is None:
            return
        vec_norm = get_vec_normalize(envs)
        assert vec_norm is not None  # share_normalizer found it (self._norm_base)
        deltas: list[Any] = [None] * self.world_size  # all_gather_object fills in each rank's
        self._together(dist.all_gather_object, deltas,
                       normalizer_delta(self._norm_base, vec_norm.state_dict()))
        self._norm_base = merge_normalizer(self._norm_base, deltas)
        vec_norm.load_state_dict(self._norm_base)

    def close(self) -> None:
        if not self.failed:
            try:  # no rank tears its connections down while another still uses them
                self.barrier()
            except RankError:  # another rank failed as it ended: this one's run is done
                pass
        if dist.is_initialized():
            dist.destroy_process_group()


def _ignore_sigterm() -> None:
    """From now on torchrun's SIGTERM, which it sends the other ranks once one has failed, is
    ignored: this rank is ending already, with its own status and line (main thread only)."""
    try:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except ValueError:  # not the main thread
        pass


def _ended(where: str) -> bool:
    """Whether the process at ``where`` ("host pid") has ended; False if it is on another host."""
    host, _, pid = where.partition(" ")
    if host != socket.gethostname():
        return False
    if os.path.isdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rpartition(")")[2].split()[0] in ("Z", "X")  # a zombie has ended
        except OSError:
            return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's: alive
        pass
    return False


class DDPCollector(Collector):
    """This rank's envs fill its rollout; then the ranks merge their normalizer statistics, so
    every rank normalizes the next rollout alike."""

    inexact = "torchrun: rank 0 saves the learner, not the envs of the ranks"

    def __init__(self, ddp: DDP, envs: Any, *args: Any, **kwargs: Any) -> None:
        self.ddp = ddp
        ddp.share_normalizer(envs)  # before the first reset, whose observations count too
        super().__init__(envs, *args, **kwargs)

    def collect(self, actor_critic: Policy) -> RolloutStorage:
        rollouts = super().collect(actor_critic)
        self.ddp.sync_normalizer(self.envs)  # all ranks' statistics merged, as one normalizer's
        return rollouts
