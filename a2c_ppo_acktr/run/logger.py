"""What a run reports: the scalar log (CSV + TensorBoard when installed) and a live progress line."""
import csv
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Optional, TextIO

import numpy as np

from a2c_ppo_acktr.errors import LogError

if TYPE_CHECKING:  # tensorboard is optional: imported where a logger is made
    from torch.utils.tensorboard import SummaryWriter


class ScalarLogger:
    """Appends one row of scalars per call to ``<log_dir>/<filename>``.

    The first row fixes the CSV columns; later rows may omit columns (left empty). A row with a
    new column (a run resumed by a version that logs more) rewrites the file, atomically, with the
    column added and the earlier rows' cells empty, so it stays one table any CSV reader loads.
    With ``append=True`` an existing file is continued (a resumed run) instead of replaced.
    ``hparams``: a run's config (settings/resolve.py), shown in TensorBoard's HPARAMS tab. ``also``
    gets each row's ``scalars`` and step too (W&B: run/tracking.py).
    """

    def __init__(self, log_dir: str, filename: str = "progress.csv", tensorboard: bool = True,
                 append: bool = False, hparams: Optional[dict] = None,
                 also: Optional[Callable[[dict, int], None]] = None) -> None:
        self._also = also
        os.makedirs(log_dir, exist_ok=True)
        self.path = os.path.join(log_dir, filename)
        self._file: Optional[IO[str]] = None
        self._writer: Optional[csv.DictWriter[str]] = None
        self._fields: Optional[list[str]] = None
        self._failed = False  # a row could not be written (``close`` then cannot flush it)
        if append and os.path.exists(self.path):
            with open(self.path, newline="") as f:
                header = next(csv.reader(f), None)
            if header:
                self._fields = header
                self._file = open(self.path, "a", newline="")
                self._writer = csv.DictWriter(self._file, fieldnames=self._fields)
        self._tb: Optional[SummaryWriter] = None
        if tensorboard:
            try:
                from torch.utils import tensorboard as tb
            except ImportError:  # tensorboard is optional
                pass
            else:
                self._tb = tb.SummaryWriter(os.path.join(log_dir, "tb"))
                if hparams is not None:
                    # run_name ".": into tb/ itself, beside the scalars, not a subdirectory
                    self._tb.add_hparams(tensorboard_hparams(hparams), {}, run_name=".")

    def log(self, row: Mapping[str, float | str], step: int) -> None:
        try:
            self._log(row, step)
        except OSError as e:  # a full disk: named, for one line
            self._failed = True
            raise LogError(f"cannot write {self.path}: {e.strerror or e}") from e

    def _log(self, row: Mapping[str, float | str], step: int) -> None:
        if self._writer is None:
            self._fields = list(row)
            self._file = open(self.path, "w", newline="")
            self._writer = csv.DictWriter(self._file, fieldnames=self._fields)
            self._writer.writeheader()
        assert self._fields is not None and self._file is not None  # set with the writer
        unknown = [k for k in row if k not in self._fields]
        if unknown:
            self._widen(self._fields + unknown)
        assert self._writer is not None and self._file is not None
        self._writer.writerow(row)
        self._file.flush()
        if self._tb is not None:
            for key, value in scalars(row).items():
                self._tb.add_scalar(key, value, step)
        if self._also is not None:
            self._also(scalars(row), step)

    def _widen(self, fields: list[str]) -> None:
        """Rewrite the file with the header ``fields`` (the old columns first), then append."""
        assert self._file is not None
        self._file.close()
        with open(self.path, newline="") as f:
            rows = list(csv.DictReader(f))
        tmp = self.path + ".tmp"
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._fields = fields
        self._file = open(self.path, "a", newline="")
        self._writer = csv.DictWriter(self._file, fieldnames=fields)

    def close(self) -> None:
        try:
            if self._file is not None:
                self._file.close()
            if self._tb is not None:
                self._tb.close()
        except OSError:  # its row unwritten by ``log`` once more (a full disk): said there
            if not self._failed:
                raise


def scalars(row: Mapping[str, float | str]) -> dict[str, float]:
    """The numbers of ``row``, not NaN (a metric its algorithm has not) or empty (no episode
    ended yet): what TensorBoard and W&B plot."""
    return {k: v for k, v in row.items() if isinstance(v, (int, float)) and not math.isnan(v)}


def tensorboard_hparams(config: dict) -> dict:
    """A run's config as the flat {name: int | float | str | bool} TensorBoard's hparams take."""
    flat = {**config["flags"], **{f"version/{k}": v for k, v in config["versions"].items()},
            **{f"git/{k}": v for k, v in config["git"].items()}}
    return {k: v if isinstance(v, (int, float, str, bool)) else
            " ".join(map(str, v)) if isinstance(v, list) else str(v) for k, v in flat.items()}


class ProgressLine:
    """One self-overwriting status line (steps, fps, recent return, ETA) on a terminal.

    Does nothing when the stream is not a TTY: log files get only the periodic log blocks.
    """

    def __init__(self, total_steps: int, stream: Optional[TextIO] = None,
                 enabled: bool = True) -> None:
        self.total = total_steps
        self.stream = stream or sys.stdout
        self.enabled = enabled and self.stream.isatty()
        self._shown = False

    def update(self, steps: int, fps: float, mean_return: float) -> None:
        if not self.enabled:
            return
        frac = min(steps / self.total, 1.0)
        bar = "#" * int(20 * frac) + "-" * (20 - int(20 * frac))
        seconds = (self.total - steps) / fps if fps > 0 else float("nan")
        eta = time.strftime("%H:%M:%S", time.gmtime(seconds)) if math.isfinite(seconds) else "?"
        ret = f"{mean_return:.1f}" if math.isfinite(mean_return) else "-"
        self.stream.write(f"\r[{bar}] {steps:,}/{self.total:,} steps  {fps:,.0f} fps  "
                          f"return {ret}  ETA {eta} ")
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        """Erase the line before other output is printed."""
        if self._shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._shown = False


RETURN_COLUMNS = ("mean_return", "median_return", "min_return", "max_return")


def progress_row(update: int, env_steps: int, fps: int, returns: list[float],
                 stats: Mapping[str, float], lr: float, elapsed: float, **extra: float) -> dict:
    """One row of ``progress.csv``; ``returns``: raw returns of the last finished episodes (none
    yet, e.g. just after ``--resume``: empty cells rather than NaN); ``stats``: every statistic
    the agent's update and the reward models returned, each a column; ``extra``: the
    collector's columns."""
    rewards = np.array(returns)
    returns_stats = {
        "mean_return": float(np.mean(rewards)), "median_return": float(np.median(rewards)),
        "min_return": float(np.min(rewards)), "max_return": float(np.max(rewards))
    } if returns else dict.fromkeys(RETURN_COLUMNS, "")
    return {"update": update, "timesteps": env_steps, "fps": fps, **returns_stats, **stats,
            "lr": lr, "time": elapsed, **extra}


# The agent's statistics on the console (name, label, format), where the row has them.
REPORTED = (("entropy", " entropy", ".4f"), ("value_loss", "value loss", ".4f"),
            ("action_loss", "action loss", ".4f"), ("approx_kl", "approx kl", ".4f"),
            ("clip_fraction", "clip fraction", ".3f"), ("kl_clip_scale", "kl-clip scale", ".3f"))


def format_report(row: dict, episodes: int) -> str:
    """The periodic log block of ``main.py`` for a ``progress_row`` (``episodes``: how many
    finished episodes the returns are over): a curated few of its columns (progress.csv has them
    all); optional lines appear when their columns do."""
    lines = [f"Updates {row['update']}, num timesteps {row['timesteps']}, FPS {row['fps']} ",
             f" Last {episodes} training episodes: mean/median reward "
             f"{row['mean_return']:.1f}/{row['median_return']:.1f}, min/max reward "
             f"{row['min_return']:.1f}/{row['max_return']:.1f}" if episodes
             else " No training episode has ended yet",
             ", ".join(f"{label} {row[name]:{form}}" for name, label, form in REPORTED
                       if name in row)]
    if "time_step_duration_mean" in row:  # real-time envs
        lines.append(f" real-time time-outs {row['timeouts']}, time step "
                     f"{1e3 * row['time_step_duration_mean']:.1f}±"
                     f"{1e3 * row['time_step_duration_dev']:.1f} ms, in step "
                     f"{1e3 * row['step_time_mean']:.1f} ms, inference "
                     f"{1e3 * row['inference_time_mean']:.1f} ms")
    if row.get("policy_lag") or row.get("sampler_stalls"):  # asynchronous sampling
        lines.append(f" policy lag {row['policy_lag']} update(s), "
                     f"sampler stalls {row['sampler_stalls']}")
    if "gail_loss" in row:
        lines.append(f" gail loss {row['gail_loss']:.4f}, expert / policy accuracy "
                     f"{row['gail_expert_acc']:.2f} / {row['gail_policy_acc']:.2f}")
    return "\n".join(lines)
