"""The public API is type-hinted: every parameter and return annotated, and the hints resolve.

``PUBLIC`` names what a researcher calls; ``MODULES`` are swept for every other public function,
class method and property they define, so a new one without hints fails here too.
"""
import importlib
import inspect
import typing

import pytest

from a2c_ppo_acktr.algo import A2C_ACKTR, PPO, KFACOptimizer, LinearDecay
from a2c_ppo_acktr.algo.gail import Discriminator, ExpertDataset
from a2c_ppo_acktr.envs import (
    DummyVecEnv,
    RunningMeanStd,
    VecNormalize,
    VecPyTorch,
    VecPyTorchFrameStack,
    get_vec_normalize,
    make_env,
    make_vec_envs,
    merge_normalizer,
    normalizer_delta,
    normalizer_state,
)
from a2c_ppo_acktr.evaluation import evaluate, run_episodes
from a2c_ppo_acktr.model import Policy, make_policy
from a2c_ppo_acktr.storage import RolloutStorage

PUBLIC = {
    "make_policy": make_policy,
    "Policy.__init__": Policy.__init__,
    "Policy.act": Policy.act,
    "Policy.get_value": Policy.get_value,
    "Policy.evaluate_actions": Policy.evaluate_actions,
    "Policy.is_recurrent": Policy.is_recurrent.fget,
    "Policy.recurrent_hidden_state_size": Policy.recurrent_hidden_state_size.fget,
    "RolloutStorage.__init__": RolloutStorage.__init__,
    "RolloutStorage.to": RolloutStorage.to,
    "RolloutStorage.insert": RolloutStorage.insert,
    "RolloutStorage.after_update": RolloutStorage.after_update,
    "RolloutStorage.compute_returns": RolloutStorage.compute_returns,
    "RolloutStorage.feed_forward_generator": RolloutStorage.feed_forward_generator,
    "RolloutStorage.recurrent_generator": RolloutStorage.recurrent_generator,
    "PPO.__init__": PPO.__init__,
    "PPO.update": PPO.update,
    "A2C_ACKTR.__init__": A2C_ACKTR.__init__,
    "A2C_ACKTR.update": A2C_ACKTR.update,
    "KFACOptimizer.__init__": KFACOptimizer.__init__,
    "KFACOptimizer.step": KFACOptimizer.step,
    "Discriminator.__init__": Discriminator.__init__,
    "Discriminator.update": Discriminator.update,
    "Discriminator.predict_reward": Discriminator.predict_reward,
    "ExpertDataset.__init__": ExpertDataset.__init__,
    "make_vec_envs": make_vec_envs,
    "make_env": make_env,
    "DummyVecEnv.step": DummyVecEnv.step,
    "VecNormalize.__init__": VecNormalize.__init__,
    "VecNormalize.step": VecNormalize.step,
    "VecPyTorch.step": VecPyTorch.step,
    "VecPyTorchFrameStack.__init__": VecPyTorchFrameStack.__init__,
    "RunningMeanStd.update": RunningMeanStd.update,
    "get_vec_normalize": get_vec_normalize,
    "normalizer_state": normalizer_state,
    "normalizer_delta": normalizer_delta,
    "merge_normalizer": merge_normalizer,
    "evaluate": evaluate,
    "run_episodes": run_episodes,
    "LinearDecay.__call__": LinearDecay.__call__,
    "PPO.adjust_lr": PPO.adjust_lr,
    "A2C_ACKTR.adjust_lr": A2C_ACKTR.adjust_lr,
}

MODULES = [
    "a2c_ppo_acktr.model", "a2c_ppo_acktr.storage", "a2c_ppo_acktr.distributions",
    "a2c_ppo_acktr.utils", "a2c_ppo_acktr.evaluation", "a2c_ppo_acktr.run.playback",
    "curves", "a2c_ppo_acktr.algo.ppo", "a2c_ppo_acktr.algo.a2c_acktr", "a2c_ppo_acktr.algo.agent",
    "a2c_ppo_acktr.algo.kfac", "a2c_ppo_acktr.algo.gail", "a2c_ppo_acktr.envs.make",
    "a2c_ppo_acktr.envs.vec_env", "a2c_ppo_acktr.envs.normalize", "a2c_ppo_acktr.envs.torch_vec",
    "a2c_ppo_acktr.envs.single", "a2c_ppo_acktr.envs.ale", "a2c_ppo_acktr.envs.native",
    "a2c_ppo_acktr.envs.episodes", "a2c_ppo_acktr.envs.shmem", "a2c_ppo_acktr.realtime.env",
    "a2c_ppo_acktr.realtime.drone", "a2c_ppo_acktr.rollout", "a2c_ppo_acktr.sampling.async_thread",
    "a2c_ppo_acktr.sampling.ddp", "a2c_ppo_acktr.sampling.ray_learner", "a2c_ppo_acktr.run.history",
    "a2c_ppo_acktr.speed",
]
DUNDERS = ("__init__", "__len__", "__getitem__")


def _public_callables(module_name):
    """name -> function: the public functions, methods and properties ``module_name`` defines."""
    mod = importlib.import_module(module_name)
    found = {}
    for name, obj in vars(mod).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
            continue
        if inspect.isfunction(obj):
            found[name] = obj
        elif inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") and attr not in DUNDERS:
                    continue
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if isinstance(member, property):
                    member = member.fget
                if inspect.isfunction(member) and member.__module__ == mod.__name__:
                    found[f"{name}.{attr}"] = member
    return found


def _missing_annotations(fn):
    """Parameters (but self, cls, *args, **kwargs) and the return that have no annotation."""
    sig = inspect.signature(fn)
    missing = [p.name for p in sig.parameters.values()
               if p.name not in ("self", "cls")
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               and p.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


def _all_public():
    found = dict(PUBLIC)
    for module_name in MODULES:
        for name, fn in _public_callables(module_name).items():
            found.setdefault(f"{module_name}.{name}", fn)
    return found


ALL = _all_public()


def test_the_sweep_finds_the_api():
    """The module sweep sees the classes' methods (it would pass vacuously otherwise)."""
    assert "a2c_ppo_acktr.model.Policy.act" in ALL
    assert "a2c_ppo_acktr.storage.RolloutStorage.insert" in ALL
    assert "a2c_ppo_acktr.envs.make.make_vec_envs" in ALL
    assert len(ALL) > 150


def test_the_check_flags_a_missing_hint():
    def unhinted(self, x, y: int, *args, **kwargs):
        return x

    def hinted(self, x: int, *args: int, **kwargs: str) -> int:
        return x

    assert _missing_annotations(unhinted) == ["x", "return"]
    assert _missing_annotations(hinted) == []


@pytest.mark.parametrize("name", sorted(ALL))
def test_annotated(name):
    assert _missing_annotations(ALL[name]) == [], f"{name} lacks type hints"


@pytest.mark.parametrize("name", sorted(ALL))
def test_hints_resolve(name):
    hints = typing.get_type_hints(ALL[name])  # raises on a broken forward reference
    assert "return" in hints


def test_original_interfaces_kept():
    """The positional order the original's users call with."""
    def params(fn):
        return list(inspect.signature(fn).parameters)

    assert params(RolloutStorage)[:5] == ["num_steps", "num_processes", "obs_shape",
                                          "action_space", "recurrent_hidden_state_size"]
    assert params(Policy)[:4] == ["obs_shape", "action_space", "base", "base_kwargs"]
    assert params(make_vec_envs)[:7] == ["env_name", "seed", "num_processes", "gamma", "log_dir",
                                         "device", "allow_early_resets"]
    assert params(Policy.act) == ["self", "inputs", "rnn_hxs", "masks", "deterministic"]
    assert params(PPO.update) == params(A2C_ACKTR.update) == ["self", "rollouts"]
