"""A run's configuration in parts, one per layer: frozen, typed, built once from the resolved
flags (``settings/arguments.make_config``) and never changed after. Each layer takes its own part (or plain
arguments), never the whole and never the argparse ``Namespace``; what a Ray actor needs travels
as ``WorkerConfig``, small and picklable.

Each field of a part that is a flag is that flag's one declaration (``flag.flag``): the parser,
the checks, the resume rules and docs/details.md's table derive from it (docs/design.md, "Flags:
declared once"). One module per part or two (``algo``, ``env``, ``models``, ``run``), as together they pass
300 lines. This package imports nothing of the rest but ``errors``: every layer may import it.
"""
import functools
import json
from dataclasses import dataclass, replace
from typing import Optional

from a2c_ppo_acktr.config.algo import AlgoConfig, ReturnsConfig
from a2c_ppo_acktr.config.env import EnvConfig, Pairs, PolicyConfig, SamplingConfig
from a2c_ppo_acktr.config.flag import Flag, declared
from a2c_ppo_acktr.config.models import ModelsConfig
from a2c_ppo_acktr.config.run import GailConfig, RunConfig

# Config's parts by its field names: where the flags are declared (a test may put a part with
# one more flag in its place).
PARTS: dict[str, type] = {"algo": AlgoConfig, "returns": ReturnsConfig, "env": EnvConfig,
                          "policy": PolicyConfig, "sampling": SamplingConfig, "gail": GailConfig,
                          "models": ModelsConfig, "run": RunConfig}


def declarations() -> tuple[Flag, ...]:
    """Every flag of main.py, in --help's order, each with its part."""
    return _declarations(tuple(PARTS.items()))


@functools.lru_cache(maxsize=8)
def _declarations(parts: tuple[tuple[str, type], ...]) -> tuple[Flag, ...]:
    found = [replace(spec, part=name) for name, part in parts for _, spec in declared(part)]
    return tuple(sorted(found, key=lambda spec: (spec.at, spec.order)))


@dataclass(frozen=True)
class WorkerConfig:
    """What a Ray rollout worker or evaluator needs: its envs, the policy, rollouts' length."""

    env: EnvConfig
    policy: PolicyConfig
    sampling: SamplingConfig
    gamma: float  # the envs' return normalization
    use_proper_time_limits: bool


@dataclass(frozen=True)
class Config:
    """The whole configuration: the parts, and what the run's start says and saves."""

    algo: AlgoConfig
    returns: ReturnsConfig
    env: EnvConfig
    policy: PolicyConfig
    sampling: SamplingConfig
    gail: Optional[GailConfig]
    models: ModelsConfig  # the run's auxiliary and reward models' flags (run.build.REWARD_MODELS)
    run: RunConfig
    notes: tuple[str, ...] = ()     # lines the run's log starts with (recipe, resumed changes)
    warnings: tuple[str, ...] = ()  # settings that run, but not as one might expect
    record_json: str = "{}"         # config.json's content (settings/resolve.py's run_config)

    @property
    def record(self) -> dict:
        """What goes to config.json and the checkpoint's "config": a fresh copy, plain values."""
        return json.loads(self.record_json)

    @property
    def workers(self) -> WorkerConfig:
        return WorkerConfig(self.env, self.policy, self.sampling, self.returns.gamma,
                            self.returns.use_proper_time_limits)


__all__ = ["AlgoConfig", "Config", "EnvConfig", "GailConfig", "ModelsConfig", "Pairs", "PolicyConfig",
           "ReturnsConfig", "RunConfig", "SamplingConfig", "WorkerConfig", "declarations"]
