"""What a run sends beyond its log files, with CleanRL's flags: videos of training env 0
(``--capture-video``, gymnasium's ``RecordVideo``) and Weights & Biases (``--track``).

``--track`` starts one W&B run per start of a run (a resumed run is a new one, its steps going on),
named after the run's directory, its files in ``<log dir of the run>/wandb/``; its config is the
run's ``config.json``, and every row of ``progress.csv`` (and of ``eval.csv``, as ``eval/...``)
is logged against ``global_step``, the env steps. wandb is imported only here, only then.
"""
import os
import shutil
from collections.abc import Mapping
from typing import Any, Optional

from a2c_ppo_acktr.config import RunConfig
from a2c_ppo_acktr.errors import ConfigError
from a2c_ppo_acktr.run.checkpoint import RunPaths

VIDEO_DIR = "videos"


def video_prefix(paths: RunPaths, env_steps: int) -> str:
    """Where env 0's videos go: ``<run>/videos/rl-video-episode-<n>.mp4``; a resumed run's episodes
    count from 0 again, so its names say where it resumed."""
    name = f"rl-video-resumed-at-{env_steps}" if env_steps else "rl-video"
    return os.path.join(paths.log_dir, VIDEO_DIR, name)


class Tracker:
    """A W&B run: ``log`` sends a row's scalars (``logger.scalars``), ``close`` finishes it."""

    def __init__(self, run: Any) -> None:
        self.run = run

    def log(self, scalars: Mapping[str, float], step: int, prefix: str = "") -> None:
        self.run.log({"global_step": step, **{prefix + k: v for k, v in scalars.items()}})

    def close(self) -> None:
        self.run.finish()


def start_tracking(cfg: RunConfig, record: dict, paths: RunPaths) -> Optional[Tracker]:
    """The W&B run of ``--track`` (None without it); ``ConfigError`` in one line where W&B cannot
    start (not logged in, no network), its files removed."""
    if not cfg.track:
        return None
    import wandb

    folder = os.path.join(paths.log_dir, "wandb")
    new_folder = not os.path.exists(folder)
    config = {**record["flags"], **{k: v for k, v in record.items() if k != "flags"}}
    try:
        run = wandb.init(project=cfg.wandb_project_name, entity=cfg.wandb_entity, config=config,
                         name=os.path.relpath(paths.log_dir, cfg.log_dir), dir=paths.log_dir)
    except (wandb.errors.Error, OSError) as e:
        if new_folder:
            shutil.rmtree(folder, ignore_errors=True)
        raise ConfigError(f"--track: W&B did not start: {str(e).splitlines()[0]} (wandb login, or "
                          "WANDB_MODE=offline to log here and wandb sync later)") from None
    run.define_metric("*", step_metric="global_step")
    return Tracker(run)
