"""A run's directories (``checkpoint.run_paths``): checked before anything is created, created
once the inputs are valid, and removed again when the run fails to start; and the run's lock,
held by the one process that trains it."""
import contextlib
import csv
import errno
import fcntl
import glob
import os
import tempfile
from collections.abc import Callable

from a2c_ppo_acktr.config import RunConfig
from a2c_ppo_acktr.envs.ids import env_file_name
from a2c_ppo_acktr.envs.monitor import monitor_t_start
from a2c_ppo_acktr.errors import ConfigError, LogError
from a2c_ppo_acktr.files import remove_stale_temporaries
from a2c_ppo_acktr.run.checkpoint import RunPaths, history, history_path

# What a run writes into its log directory (eval/ included); --overwrite removes these only.
RUN_FILES = ("*.monitor.csv", "progress.csv", "workers.log", "config.json",
             os.path.join("tb", "events.out.*"), os.path.join("videos", "*.mp4"),
             os.path.join("eval", "*.monitor.csv"), os.path.join("eval", "eval.csv"))


PATH_MAX, NAME_MAX = 4096, 255  # Linux's; the longest path and name a call takes

# In the log directory: held (flock) by the process training the run, for as long as it lives:
# the OS releases it when the process ends, however it ends. It holds that process's pid.
LOCK_FILE = "run.lock"
_locks: dict[str, tuple[int, bool]] = {}  # lock file -> its descriptor, removed on close?


def checkpoint_lock(checkpoint: str) -> str:
    """The lock file of the run writing ``checkpoint`` (hidden beside it): two runs of one
    --save-dir and key but other --log-dir would otherwise both write the one file."""
    return os.path.join(os.path.dirname(checkpoint), f".{os.path.basename(checkpoint)}.lock")


def _lock(path: str, create: bool, busy: Callable[[str, str], str], text: str = "",
          transient: bool = False) -> None:
    """Hold the lock file ``path`` (made with ``create``; without it, only if the file exists),
    writing this process's pid and ``text`` into it (a ``transient`` one is removed on release);
    ``ConfigError`` ``busy(pid, text)`` of the process that holds it."""
    key = os.path.realpath(path)
    if key in _locks:
        return
    while True:
        try:
            fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        except FileNotFoundError:
            return  # no lock: no process trains the run
        except OSError as e:
            raise ConfigError(f"cannot lock the run at {path}: {e.strerror or e}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").split("\n", 1)
            os.close(fd)
            pid, what = holder[0].strip() or "?", holder[1].strip() if len(holder) > 1 else ""
            raise ConfigError(busy(pid, what)) from None
        try:  # the file we locked is still the one at ``path``, not one its holder removed
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    _locks[key] = (fd, transient)
    if create:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{text}".encode(), 0)


def lock_run(paths: RunPaths, create: bool) -> None:
    """Hold the locks of the run at ``paths``: its log directory's and its checkpoint's; made
    with ``create`` (else held only where they exist). ``ConfigError`` naming the process that
    trains the run, or writes its checkpoint, first."""
    lock = os.path.join(paths.log_dir, LOCK_FILE)
    _lock(lock, create, lambda pid, _: (
        f"{paths.log_dir} is being trained by process {pid} (it holds {lock}): a second start, "
        "--resume or --overwrite of it waits until that process has ended (another --seed "
        "starts a run beside it)"))
    if paths.checkpoint is not None and os.path.isdir(os.path.dirname(paths.checkpoint)):
        lock = checkpoint_lock(paths.checkpoint)
        _lock(lock, create, lambda pid, log_dir: (
            f"{paths.checkpoint} is being written by process {pid}, the run logging to "
            f"{log_dir or '?'} (it holds {lock}): two runs cannot share a checkpoint; give this "
            "one another --save-dir, or wait until that process has ended"),
            text=paths.log_dir, transient=True)


class RunLocks:
    """``close()`` releases the run locks this process holds (``main.main`` returns: a test may
    start the run again in the same process); a checkpoint's lock file goes with it."""

    def close(self) -> None:
        while _locks:
            path, (fd, remove) = _locks.popitem()
            if remove:
                with contextlib.suppress(OSError):
                    os.remove(path)
            os.close(fd)


def check_dir(path: str, flag: str) -> None:
    """``ConfigError`` unless ``path`` is, or can be created as, a directory this process may
    write (of a path the system takes)."""
    what = f"{flag} cannot hold the run's files at {path}" if flag in ("--log-dir", "--save-dir") \
        else f"{flag} {path}"
    encoded = os.fsencode(os.path.abspath(path))
    longest = max((len(part) for part in encoded.split(b"/")), default=0)
    if len(encoded) >= PATH_MAX or longest > NAME_MAX:
        raise ConfigError(f"{what}: the path is too long ({len(encoded):,} bytes, a name of "
                          f"{longest}; this system takes {PATH_MAX - 1:,} and {NAME_MAX})")
    existing = path
    while not os.path.lexists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing) or "."
    try:
        os.stat(existing)
    except OSError as e:  # a symbolic link to nowhere, or to itself
        why = "a symbolic link loop" if e.errno == errno.ELOOP else "a broken symbolic link"
        raise ConfigError(f"{what}: {existing} is {why}") from None
    if not os.path.isdir(existing):
        raise ConfigError(f"{what}: {existing} is a file, not a directory")
    try:  # an unnamed file, gone at once (os.access lets root pass /proc, /sys, a read-only fs)
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as e:
        raise ConfigError(f"{what}: {existing} is not writable ({e.strerror})") from None


def _run_files(log_dir):
    return [f for pattern in RUN_FILES
            for f in glob.glob(os.path.join(glob.escape(log_dir), pattern))]


def _history_files(paths: RunPaths) -> list:
    """The ``--save-history`` copies of the run's checkpoint (of an earlier run with its key)."""
    if paths.checkpoint is None:
        return []
    directory = os.path.dirname(history_path(paths.checkpoint, 0))
    return [path for _, path in history(directory)] if os.path.isdir(directory) else []


def check_run(cfg: RunConfig, paths: RunPaths) -> None:
    """``ConfigError`` unless the run can start: its directories writable, a checkpoint for --resume, and
    no other run of the same algo, env and seed replaced without --overwrite."""
    check_dir(paths.log_dir, "--log-dir")
    if paths.checkpoint is not None:
        check_dir(os.path.dirname(paths.checkpoint), "--save-dir")
    lock_run(paths, create=False)  # held from here where the run has lock files: one writer
    saved = paths.checkpoint is not None and os.path.exists(paths.checkpoint)
    logged = bool(_history_files(paths) or glob.glob(
        os.path.join(glob.escape(paths.log_dir), "*.monitor.csv")))
    if cfg.resume:
        if paths.checkpoint is None:
            raise ConfigError("--resume: this run saves no checkpoint (--save-dir is empty)")
        check_logs(paths.log_dir)
        if not saved:
            old = os.path.join(os.path.dirname(paths.checkpoint or ""),
                               env_file_name(cfg.env_name) + ".pt")
            hint = (f" ({old} is a run saved under the original's name: rename it to resume it)"
                    if paths.checkpoint and os.path.isfile(old) else "")
            again = (f"{paths.log_dir} holds the logs of a run that saved none: --overwrite "
                     "instead of --resume starts it again" if logged
                     else "start a new run without --resume")
            raise ConfigError(f"--resume: no checkpoint at {paths.checkpoint}{hint}; {again}")
    elif not cfg.overwrite and (saved or logged):
        what = ("pass --resume to continue it or --overwrite to replace it" if saved else
                "it saved no checkpoint to --resume: pass --overwrite to replace it")
        raise ConfigError(f"{paths.checkpoint if saved else paths.log_dir} already holds a run "
                          f"of --algo {cfg.algo} on {cfg.env_name} with --seed {cfg.seed}; "
                          f"{what} (another --seed starts a run beside it)")


def _damaged(path: str) -> str | None:
    """Why the log file at ``path`` (a monitor file, progress.csv, eval.csv) cannot be continued
    by a resumed run, or None. An empty file can (it is started again), and a last line cut by a
    kill mid-write can (the resumed run drops it); a whole line that is no row of numbers cannot:
    it would be dropped, and the file is not rewritten but by its own run."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            lines = f.read().split("\n")[:-1]  # whole lines: the last, cut or empty, is not one
    except UnicodeDecodeError:
        return "it is not text"
    except OSError as e:
        return f"it cannot be read: {e.strerror or e}"
    if not lines:
        return None
    try:
        rows = list(csv.reader(lines[1:] if path.endswith(".monitor.csv") else lines))
    except csv.Error as e:
        return f"it is not a CSV table: {e}"
    if path.endswith(".monitor.csv"):
        if monitor_t_start(path) is None or not rows or rows[0][:3] != ["r", "l", "t"]:
            return "it lacks the monitor header (a JSON line, then r,l,t)"
        columns, first = [0, 1, 2], 3
    elif not rows or "timesteps" not in rows[0]:
        return "its first line is no header naming timesteps"
    else:
        columns, first = [rows[0].index("timesteps")], 2
    for n, row in enumerate(rows[1:], first):
        try:
            [float(row[c]) for c in columns]
        except (ValueError, IndexError):
            return f"its line {n} ({lines[n - 1][:40]!r}) is not a row of numbers (remove it)"
    return None


def check_logs(log_dir: str) -> None:
    """``LogError`` naming the first of a run's log files that a resumed run cannot continue
    (``_damaged``), before any of them is changed."""
    for path in sorted(_run_files(log_dir)):
        if path.endswith(".csv") and (why := _damaged(path)) is not None:
            raise LogError(f"--resume: {path} is damaged: {why}; move it away to resume without "
                           "its rows, or --overwrite to start the run again")


def _rewrite_kept(path: str, head: int, keep) -> int:
    """Rewrite ``path`` atomically with its first ``head`` lines and the later lines ``keep(line)``
    accepts (a line it cannot parse, e.g. cut by a kill mid-write, is dropped); -> the number of
    lines dropped."""
    def kept_line(line):
        try:
            return line.endswith("\n") and keep(line)
        except (ValueError, IndexError, StopIteration):
            return False
    with open(path, newline="") as f:
        lines = f.readlines()
    kept = lines[:head] + [line for line in lines[head:] if kept_line(line)]
    if len(kept) < len(lines):
        tmp = path + ".trim"
        with open(tmp, "w", newline="") as f:
            f.writelines(kept)
        os.replace(tmp, path)
    return len(lines) - len(kept)


def drop_rows_after(log_dir: str, checkpoint: dict) -> int:
    """Drop the log rows a run wrote after its checkpoint (it was killed before the next save):
    episodes that ended after ``checkpoint["saved_at"]`` and progress / eval rows past its
    ``env_steps``, so a resumed run's logs hold each step once. -> the rows dropped."""
    saved_at, steps = checkpoint.get("saved_at"), checkpoint["env_steps"]
    dropped = 0
    for path in _run_files(log_dir):
        if path.endswith(".monitor.csv") and saved_at is not None:  # older checkpoints lack it
            t_start = monitor_t_start(path)
            if t_start is None:  # not a monitor file this run can read: left alone
                continue
            # rows are r,l,t with t seconds after the header's t_start
            dropped += _rewrite_kept(path, 2, lambda line, t0=t_start: t0 + float(
                line.rsplit(",", 1)[1]) <= saved_at)
        elif os.path.basename(path) in ("progress.csv", "eval.csv"):
            with open(path, newline="") as f:
                header = next(csv.reader(f), [])
            if "timesteps" in header:
                col = header.index("timesteps")
                dropped += _rewrite_kept(path, 1, lambda line, col=col: int(float(
                    next(csv.reader([line]))[col])) <= steps)
    return dropped


def make_run_dirs(cfg: RunConfig, paths: RunPaths, resumed: dict | None) -> list:
    """Create the run's directories (eval/ only for --eval-interval); a new run starts from no
    files of an earlier one, a resumed run from its logs as they were at its checkpoint, and no
    temporaries of a killed save are kept. -> the directories created here, outermost first, for
    ``abandon``."""
    wanted = [paths.log_dir] + ([paths.eval_dir] if cfg.eval_interval is not None else [])
    if paths.checkpoint is not None:
        wanted.append(os.path.dirname(paths.checkpoint))
    created: list[str] = []
    for directory in wanted:
        new = []
        parent = directory
        while not os.path.isdir(parent):
            new.append(parent)
            parent = os.path.dirname(parent) or "."
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as e:
            abandon(paths, created, resumed=True)
            raise ConfigError(f"cannot create {directory}: {e.strerror or e}") from None
        created.extend(reversed(new))
    try:
        lock_run(paths, create=True)  # before a file of the run is changed
    except ConfigError:  # another start of the same run, or of its checkpoint, came first
        abandon(paths, created, resumed=True)
        raise
    if not resumed:
        for f in _run_files(paths.log_dir) + _history_files(paths):
            os.remove(f)
    elif dropped := drop_rows_after(paths.log_dir, resumed):
        print(f"dropped {dropped} log rows written after the checkpoint (the run stopped "
              "before its next save)")
    if paths.checkpoint is not None:
        for tmp in remove_stale_temporaries(paths.checkpoint):
            print(f"removed {tmp}, left by a save that was killed")
    return created


def abandon(paths: RunPaths, created: list, resumed: bool) -> None:
    """Undo a run that failed to start: the files a new run wrote, then the directories created
    for it if nothing else is in them. A resumed run's files are kept (it appended to them)."""
    if not resumed:
        for f in _run_files(paths.log_dir):
            os.remove(f)
    lock = os.path.join(paths.log_dir, LOCK_FILE)
    if os.path.realpath(lock) in _locks and paths.log_dir in created:
        os.remove(lock)  # the directory made for it goes too
    if paths.checkpoint is not None and (fd := _locks.pop(os.path.realpath(
            checkpoint_lock(paths.checkpoint)), (None,))[0]) is not None:
        os.remove(checkpoint_lock(paths.checkpoint))
        os.close(fd)
    for directory in [os.path.join(paths.log_dir, d) for d in ("tb", "videos")] + created[::-1]:
        try:
            os.rmdir(directory)
        except OSError:  # not empty (another run's files) or already gone
            pass


def left_behind(paths: RunPaths, saved_steps: int | None) -> str:
    """What a run that stops on a failure leaves: its last checkpoint, or nothing (main.py then
    undoes a run that saved nothing, as one that failed to start)."""
    if not paths.checkpoint:
        return "nothing saved (--save-dir is empty)"
    if saved_steps is None:
        return "nothing saved yet, so the run's files are removed: it can start again"
    return (f"keeping the last saved checkpoint {paths.checkpoint} ({saved_steps:,} steps): "
            "--resume continues it, --overwrite starts the run again")
