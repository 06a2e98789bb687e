"""Exact resume: what a checkpoint holds beyond the weights, the optimizer and the normalizer's
statistics so that a run stopped between updates and resumed goes on bit for bit as if it had
not stopped (on the CPU): the envs' states, where the next rollout starts, the recent episode
returns (``Collector.resume_state``) and the RNG states of numpy and Python (torch's is the
checkpoint's ``torch_rng``). Where the sampling mode or the backend cannot give it, the resumed
run starts new episodes from envs seeded anew and says so in one line (docs/details.md, "Exact
resume")."""
import random

import numpy as np
import torch

from a2c_ppo_acktr.envs.state import decode, encode
from a2c_ppo_acktr.rollout import Collector


def rng_state() -> dict:
    """numpy's global RNG and Python's ``random`` as plain values (torch's: ``torch_rng``)."""
    state = np.random.get_state(legacy=False)
    state["state"] = {**state["state"], "key": encode(state["state"]["key"])}
    return {"numpy": state, "python": random.getstate()}


def load_rng_state(saved: dict) -> None:
    state = dict(saved["numpy"])
    state["state"] = {**state["state"], "key": decode(state["state"]["key"])}
    np.random.set_state(state)
    random.setstate(saved["python"])


def exact_state(collector: Collector) -> dict:
    """The checkpoint's ``exact`` entry: ``{"inexact": why}`` where the run cannot resume exactly."""
    state = collector.resume_state()
    if "inexact" not in state:
        state["rng"] = rng_state()
    return state


def resume_exactly(collector: Collector, checkpoint: dict) -> str | None:
    """Put the run that ``collector`` samples for (built, restored from ``checkpoint``, envs
    reset) back where ``checkpoint`` was saved; -> None, or why it resumes approximately."""
    saved = checkpoint.get("exact")
    if saved is None:
        saved = {"inexact": "the checkpoint holds no env state (saved by an older version)"}
    reason = collector.load_resume_state(saved)
    if reason is None:
        if checkpoint["obs_rms"] is not None:  # again: the envs' reset has updated it since
            collector.normalizer.load_state_dict(checkpoint["obs_rms"])
        load_rng_state(saved["rng"])
        torch.set_rng_state(checkpoint["torch_rng"])  # as it was at the save, whatever ran since
    return reason
