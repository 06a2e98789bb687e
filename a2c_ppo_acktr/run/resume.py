"""Exact resume: what a checkpoint holds beyond the weights, the optimizer and the normalizer's
statistics so that a run stopped between updates and resumed goes on bit for bit as if it had
not stopped (on the CPU): the envs' states, where the next rollout starts, the recent episode
returns (``collector_state``) and the RNG states of numpy and Python (torch's is the
checkpoint's ``torch_rng``). Where the sampling mode or the backend cannot give it, the resumed
run starts new episodes from envs seeded anew and says so in one line (docs/details.md, "Exact
resume")."""
import random

import numpy as np
import torch

from a2c_ppo_acktr.envs import get_vec_normalize
from a2c_ppo_acktr.envs.state import Inexact, decode, encode, load_vec_env_state, vec_env_state
from a2c_ppo_acktr.rollout import Collector

# The storage's slot 0: where the next rollout starts.
SLOT0 = ("obs", "recurrent_hidden_states", "masks", "bad_masks")


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


def collector_state(collector: Collector) -> dict:
    """What resuming exactly needs of ``collector`` besides the weights and the normalizer's
    statistics, read between updates as plain values: the envs' state, the storage's slot 0 and
    the recent episode returns. ``{"inexact": why}`` where it cannot (``collector.inexact``, or
    the envs' backend), with the recent returns still: the log's mean of the last episodes goes on
    over them."""
    returns = list(collector.episode_returns)
    try:
        envs = vec_env_state(collector.envs) if collector.inexact is None else None
    except Inexact as e:
        return {"inexact": str(e), "episode_returns": returns}
    if envs is None:
        return {"inexact": collector.inexact, "episode_returns": returns}
    return {"envs": envs, "slot0": {k: getattr(collector.rollouts, k)[0].cpu().clone()
                                    for k in SLOT0},
            "episode_returns": returns, "timeouts": list(collector.timeouts)}


def load_collector_state(collector: Collector, state: dict) -> str | None:
    """Put ``collector`` (of a run built alike and just started) back to ``state``
    (``collector_state``'s); -> None, or why it cannot (the run then goes on from fresh
    episodes)."""
    if collector.inexact is not None or "inexact" in state:  # new episodes, the old ones' returns
        collector.episode_returns.extend(state.get("episode_returns", []))
        return collector.inexact or state["inexact"]
    slot0, rollouts = state["slot0"], collector.rollouts
    if any(slot0[k].shape != getattr(rollouts, k)[0].shape for k in SLOT0):
        return (f"the checkpoint holds {slot0['obs'].shape[0]} envs of observations "
                f"{tuple(slot0['obs'].shape[1:])}, this run {collector.num_envs} of "
                f"{tuple(rollouts.obs.shape[2:])}")
    try:
        load_vec_env_state(collector.envs, state["envs"])
    except Inexact as e:
        return str(e)
    for k in SLOT0:
        getattr(rollouts, k)[0].copy_(slot0[k])
    collector.episode_returns.extend(state["episode_returns"])
    collector.timeouts[:] = state["timeouts"]
    return None


def exact_state(collector: Collector) -> dict:
    """The checkpoint's ``exact`` entry: ``{"inexact": why}`` where the run cannot resume exactly."""
    state = collector_state(collector)
    if "inexact" not in state:
        state["rng"] = rng_state()
    return state


def resume_exactly(collector: Collector, checkpoint: dict) -> str | None:
    """Put the run that ``collector`` samples for (built, restored from ``checkpoint``, envs
    reset) back where ``checkpoint`` was saved; -> None, or why it resumes approximately."""
    saved = checkpoint.get("exact")
    if saved is None:
        saved = {"inexact": "the checkpoint holds no env state (saved by an older version)"}
    reason = load_collector_state(collector, saved)
    if reason is None:
        if checkpoint["obs_rms"] is not None:  # again: the envs' reset has updated it since
            normalizer = get_vec_normalize(collector.envs)
            assert normalizer is not None  # the checkpoint's envs normalize, as these (restore)
            normalizer.load_state_dict(checkpoint["obs_rms"])
        load_rng_state(saved["rng"])
        torch.set_rng_state(checkpoint["torch_rng"])  # as it was at the save, whatever ran since
    return reason
