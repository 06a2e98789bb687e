"""DDP learners: ``torchrun --nproc_per_node K main.py ...`` runs K copies of the training loop.

Each rank steps its own ``num_processes`` envs (ranks ``rank * P ..`` of one big run), collects
its own rollout and runs the unchanged update on it. The ranks stay one learner: gradients are
averaged inside every ``backward()`` (``average_gradients``), the normalization statistics merged
after every rollout (``sync_normalizer``), and rank 0 alone cleans the run directories, logs,
saves and evaluates. ACKTR and ``--value-norm`` (statistics per rank: the ranks' steps would
differ) and ``--num-workers`` are refused. Details: docs/scale-out.md, "DDP learners with torchrun".
"""
import importlib
import os
from typing import Any

import torch
import torch.distributed as dist
from torch.autograd import Variable

from a2c_ppo_acktr.envs import get_vec_normalize, merge_normalizer, normalizer_delta
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.rollout import Collector
from a2c_ppo_acktr.storage import RolloutStorage


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
        dist.barrier()

    def any(self, flag: bool) -> bool:
        """``flag`` of any rank, on every rank: a Ctrl-C that reached one rank stops them all at
        the same update (a rank that went on alone would wait in the next collective forever)."""
        t = torch.tensor([float(flag)], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def average_gradients(self, module: torch.nn.Module) -> None:
        """Start all ranks from rank 0's parameters; from then on every backward through
        ``module`` ends with its gradients averaged over the ranks (one flat all-reduce).

        A hook on each parameter's gradient accumulation queues the all-reduce as a callback of
        the autograd engine, which runs it once the whole backward is done: one collective per
        backward rather than one per parameter.
        """
        for p in module.parameters():
            dist.broadcast(p.data, src=0)
        params = [p for p in module.parameters() if p.requires_grad]

        def all_reduce():
            self._pending = None
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat)
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
        dist.all_gather_object(deltas, normalizer_delta(self._norm_base, vec_norm.state_dict()))
        self._norm_base = merge_normalizer(self._norm_base, deltas)
        vec_norm.load_state_dict(self._norm_base)

    def close(self) -> None:
        dist.barrier()  # no rank tears its connections down while another still uses them
        dist.destroy_process_group()


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
