"""The part of a run's auxiliary and reward models (an intrinsic reward, a learned dynamics model
trained on the rollouts): their flags' home, as ``AlgoConfig`` is the agents'. GAIL's flags
stay ``GailConfig``'s (``--gail-*``, the original's).

A model's flag is a field here (``flag(...)``, as in ``algo.py``); its model is an entry of
``run.build.REWARD_MODELS``, which gets the whole ``Config`` and reads ``cfg.models``. Parsed,
checked, saved with the run and kept on ``--resume`` as every flag is."""
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelsConfig:
    """The flags of the run's auxiliary and reward models (none of the project's own: GAIL has
    ``GailConfig``); a researcher's model adds its own, e.g. an intrinsic reward's coefficient
    ``novelty_coef: float = flag(0.0, "...", takes=NON_NEGATIVE)``."""
