"""The seam's "storage" mechanism: ``RolloutStorage.insert`` on CPU storage as numpy assignments
through views of the tensors (at one step's size a numpy assignment costs a fraction of a torch
index and copy; the same values, written to the same memory).

``host_writes(rollouts)`` gives a storage the class ``HostStorage``, whose ``insert`` is
``RolloutStorage.insert``'s writes in numpy. That copy follows ``storage.py``'s ``insert`` as
written when it was made: where ``insert`` has changed since (``INSERT_SOURCE``, its source's
hash), the storage keeps its own ``insert`` and this mechanism is off, so an edit to
``insert`` is never undone here (tests/test_speed.py says when the copy needs updating).
"""
import hashlib
import inspect

import numpy as np
import torch

from a2c_ppo_acktr.storage import RolloutStorage

# sha256 of ``inspect.getsource(RolloutStorage.insert)``, the ``insert`` HostStorage copies.
INSERT_SOURCE = "0cdb2baab0445645"
_FIELDS = ("obs", "recurrent_hidden_states", "masks", "bad_masks", "actions", "action_log_probs",
           "value_preds", "rewards", "bootstrap_values")


def insert_source() -> str:
    """The hash ``INSERT_SOURCE`` is compared with: of ``RolloutStorage.insert``'s source now."""
    return hashlib.sha256(inspect.getsource(RolloutStorage.insert).encode()).hexdigest()[:16]


def _host(x: torch.Tensor) -> np.ndarray:
    """``x`` as numpy: a view of a CPU tensor, else a copy (one that requires grad, or on a GPU)."""
    try:
        return x.numpy()
    except (RuntimeError, TypeError):
        return x.detach().cpu().numpy()


class HostStorage(RolloutStorage):
    """A CPU ``RolloutStorage`` whose ``insert`` writes through numpy views of its tensors."""

    def _numpy(self) -> dict[str, np.ndarray] | None:
        """numpy views of the tensors, made at the first insert (None on a GPU)."""
        views = self.__dict__.get("_views")
        if views is None and self.obs.device.type == "cpu":
            views = self.__dict__["_views"] = {k: getattr(self, k).numpy() for k in _FIELDS}
        return views

    def to(self, device: torch.device | str) -> "HostStorage":
        self.__dict__.pop("_views", None)  # of the tensors it replaces
        return super().to(device)

    def __getstate__(self) -> dict:
        # The views are not state: a copy (deepcopy, pickle) makes its own of its own tensors.
        return {k: v for k, v in self.__dict__.items() if k != "_views"}

    def insert(self, obs: torch.Tensor, recurrent_hidden_states: torch.Tensor,
               actions: torch.Tensor, action_log_probs: torch.Tensor, value_preds: torch.Tensor,
               rewards: torch.Tensor, masks: torch.Tensor, bad_masks: torch.Tensor, *,
               bootstrap_values: torch.Tensor | None = None, columns: slice = slice(None),
               advance: bool = True) -> None:
        v, s, c = self._numpy(), self.step, columns
        if v is None:
            return super().insert(obs, recurrent_hidden_states, actions, action_log_probs,
                                  value_preds, rewards, masks, bad_masks,
                                  bootstrap_values=bootstrap_values, columns=columns,
                                  advance=advance)
        v["obs"][s + 1, c] = _host(obs)
        v["recurrent_hidden_states"][s + 1, c] = _host(recurrent_hidden_states)
        v["masks"][s + 1, c] = _host(masks)
        v["bad_masks"][s + 1, c] = _host(bad_masks)
        v["actions"][s, c] = _host(actions)
        v["action_log_probs"][s, c] = _host(action_log_probs)
        v["value_preds"][s, c] = _host(value_preds)
        v["rewards"][s, c] = _host(rewards)
        v["bootstrap_values"][s, c] = 0 if bootstrap_values is None else _host(bootstrap_values)
        if advance:
            self.step = (s + 1) % self.num_steps


def host_writes(rollouts: RolloutStorage) -> bool:
    """Make ``rollouts`` a ``HostStorage``; -> whether it did (not for a storage on a GPU, of a
    subclass, or where ``RolloutStorage.insert`` is not the one ``HostStorage`` copies)."""
    if (type(rollouts) is not RolloutStorage or rollouts.obs.device.type != "cpu"
            or insert_source() != INSERT_SOURCE):
        return False
    rollouts.__class__ = HostStorage
    return True
