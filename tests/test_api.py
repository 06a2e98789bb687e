"""The public API is type-hinted: every parameter and return annotated, and the hints resolve.

``PUBLIC`` names what a researcher calls; ``MODULES`` (every module of the package, found from its
file tree, and the scripts' ``curves``) are swept for every other public function, class method and
property they define, so a new function or module without hints fails here too.
"""
import importlib
import inspect
import typing
from pathlib import Path

import pytest

import a2c_ppo_acktr
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

def _package_modules():
    """Every module of the package, from its file tree (``run/`` and ``sampling/`` are namespace
    packages, which ``pkgutil.walk_packages`` would miss), so that a new module is swept unasked."""
    root = Path(a2c_ppo_acktr.__file__).parent
    return sorted(".".join(("a2c_ppo_acktr", *path.relative_to(root).with_suffix("").parts))
                  for path in root.rglob("*.py") if path.stem not in ("__init__", "__main__"))


MODULES = [*_package_modules(), "curves"]
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
    """Parameters (but self, cls, *args, **kwargs, and the ``_ray_trace_ctx`` that ``ray.remote``
    adds to an actor class's methods once a run in this process has made one) and the return that
    have no annotation."""
    sig = inspect.signature(fn)
    missing = [p.name for p in sig.parameters.values()
               if p.name not in ("self", "cls", "_ray_trace_ctx")
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


def test_the_sweep_covers_every_module():
    """The modules are found from the file tree, namespace packages included (it would pass
    vacuously if it found none)."""
    assert "a2c_ppo_acktr.settings.arguments" in MODULES
    assert "a2c_ppo_acktr.sampling.ray_actors" in MODULES
    assert "a2c_ppo_acktr.algo.ppo" in MODULES and "a2c_ppo_acktr.envs.make" in MODULES
    assert not any(name.endswith(("__init__", "__main__")) for name in MODULES)
    assert len(MODULES) > 40


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
