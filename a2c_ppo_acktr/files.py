"""Files written whole or not at all: a checkpoint, an expert file, an exported policy
(``save_atomic``), config.json and final_eval.json (``save_json``); the temporaries a killed save
left, removed at the next start (``remove_stale_temporaries``).
"""
import glob
import json
import os
import secrets
from collections.abc import Callable
from typing import IO, Any

import torch

from a2c_ppo_acktr.errors import CheckpointError


def _temp_prefix(path):
    # Named after the checkpoint, so that start-up removes this run's leftovers only.
    return f".{os.path.basename(path)}.tmp-"


def os_error(error: BaseException) -> OSError | None:
    """The OSError that caused ``error``, itself or down its chain: torch's writer turns a failed
    write (disk full) into a RuntimeError raised while handling it."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, OSError):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def save_atomic(state: Any, path: str, save: Callable[[Any, IO[bytes]], object] | None = None) -> None:
    """Write ``state`` (tensors and plain values only) to ``path`` atomically, with ``save(state,
    file)`` (``torch.save``; ``torch.export.save`` for an exported policy).

    The data goes to ``.<name>.tmp-XXXX`` in the same directory, which is then renamed over
    ``path``, so a crash mid-write leaves the previous checkpoint intact. The file gets the mode
    the umask gives a new file, as ``open`` would. An OSError (disk full, no permission), also
    one a library wrapped in its own error, is a ``CheckpointError``.
    """
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        os.makedirs(directory, exist_ok=True)
        name = os.path.join(directory, _temp_prefix(path) + secrets.token_hex(4))
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
        tmp = name
        with os.fdopen(fd, "wb") as f:
            (save or torch.save)(state, f)  # looked up now: tests replace torch.save
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)
        cause = os_error(e) if isinstance(e, Exception) else None
        if cause is not None:
            raise CheckpointError(f"cannot write {path}: {cause.strerror or cause}") from e
        raise


def save_json(obj: Any, path: str) -> None:
    """``obj`` as indented JSON at ``path``, written atomically (``save_atomic``)."""
    save_atomic(obj, path, save=lambda o, f: f.write(json.dumps(o, indent=1).encode()))


def remove_stale_temporaries(path: str) -> list:
    """Delete the temporary files a killed ``save_checkpoint`` of ``path`` left; -> their paths."""
    pattern = os.path.join(glob.escape(os.path.dirname(os.path.abspath(path))),
                           glob.escape(_temp_prefix(path)) + "*")
    stale = glob.glob(pattern)
    for tmp in stale:
        os.remove(tmp)
    return stale
