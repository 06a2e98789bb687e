"""Scalar log of a run: a CSV (``progress.csv``) in the log dir, and TensorBoard when installed."""
import csv
import math
import os


class ScalarLogger:
    """Appends one row of scalars per call; the first row fixes the CSV columns.

    Later rows may omit columns (left empty) but may not add new ones, so the file stays one
    well-formed table that any CSV reader or pandas can load.
    """

    def __init__(self, log_dir, filename="progress.csv", tensorboard=True):
        os.makedirs(log_dir, exist_ok=True)
        self.path = os.path.join(log_dir, filename)
        self._file = None
        self._writer = None
        self._fields = None
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
