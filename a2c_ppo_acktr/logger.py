"""What a run reports: the scalar log (CSV + TensorBoard when installed) and a live progress line."""
import csv
import math
import os
import sys
import time


class ScalarLogger:
    """Appends one row of scalars per call to ``<log_dir>/<filename>``.

    The first row fixes the CSV columns; later rows may omit columns (left empty) but may not add
    new ones, so the file stays one table any CSV reader loads. With ``append=True`` an existing
    file is continued (a resumed run) instead of replaced.
    """

    def __init__(self, log_dir, filename="progress.csv", tensorboard=True, append=False):
        os.makedirs(log_dir, exist_ok=True)
        self.path = os.path.join(log_dir, filename)
        self._file = None
        self._writer = None
        self._fields = None
        if append and os.path.exists(self.path):
            with open(self.path, newline="") as f:
                header = next(csv.reader(f), None)
            if header:
                self._fields = header
                self._file = open(self.path, "a", newline="")
                self._writer = csv.DictWriter(self._file, fieldnames=self._fields)
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is optional
                SummaryWriter = None
            if SummaryWriter is not None:
                self._tb = SummaryWriter(os.path.join(log_dir, "tb"))

    def log(self, row, step):
        if self._writer is None:
            self._fields = list(row)
            self._file = open(self.path, "w", newline="")
            self._writer = csv.DictWriter(self._file, fieldnames=self._fields)
            self._writer.writeheader()
        unknown = set(row) - set(self._fields)
        if unknown:
            raise KeyError(f"columns {sorted(unknown)} are not in {self.path}'s header")
        self._writer.writerow(row)
        self._file.flush()
        if self._tb is not None:
            for key, value in row.items():
                if isinstance(value, (int, float)) and not math.isnan(value):
                    self._tb.add_scalar(key, value, step)

    def close(self):
        if self._file is not None:
            self._file.close()
        if self._tb is not None:
            self._tb.close()


class ProgressLine:
    """One self-overwriting status line (steps, fps, recent return, ETA) on a terminal.

    Does nothing when the stream is not a TTY: log files get only the periodic log blocks.
    """

    def __init__(self, total_steps, stream=None):
        self.total = total_steps
        self.stream = stream or sys.stdout
        self.enabled = self.stream.isatty()
        self._shown = False

    def update(self, steps, fps, mean_return):
        if not self.enabled:
            return
        frac = min(steps / self.total, 1.0)
        bar = "#" * int(20 * frac) + "-" * (20 - int(20 * frac))
        eta = (self.total - steps) / fps if fps > 0 else float("nan")
        eta = time.strftime("%H:%M:%S", time.gmtime(eta)) if math.isfinite(eta) else "?"
        ret = f"{mean_return:.1f}" if math.isfinite(mean_return) else "-"
        self.stream.write(f"\r[{bar}] {steps:,}/{self.total:,} steps  {fps:,.0f} fps  "
                          f"return {ret}  ETA {eta} ")
        self.stream.flush()
        self._shown = True

    def clear(self):
        """Erase the line before other output is printed."""
        if self._shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._shown = False
