"""The project's exceptions. Library code raises them with a one-line message; only the entry
points (``main.py``, ``enjoy.py``, ``scripts/``, ``gail_experts/``) turn them into the line
``<program>: error: <message>`` and exit status 2."""
import errno
import os
import re
import sys
from typing import NoReturn, Optional, TextIO


def say(line: str, stream: Optional[TextIO] = None) -> None:
    """``line`` and its end in one write to ``stream`` (stderr), flushed: under torchrun the
    ranks and torchrun share stderr, and ``print``'s two writes let their lines in between.
    Where there is no stderr (a process started with it closed), stdout, as ``print`` does."""
    stream = stream or sys.stderr or sys.stdout
    if stream is None:
        return
    stream.write(line + "\n")
    stream.flush()


def program() -> str:
    """The running script's name, for the first word of the lines it prints about itself."""
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "main.py"


def fail(message: str, prog: Optional[str] = None) -> NoReturn:
    """One line on stderr and exit status 2: bad input is explained, never a traceback."""
    say(f"{prog or program()}: error: {message}")
    raise SystemExit(2)


def warn(message: str) -> None:
    """One line on stderr about a setting that runs, but not as one might expect."""
    say(f"{program()}: warning: {message}")


class Error(Exception):
    """Input or state the user has to change; ``str(error)`` is one line that says what and how."""


class ConfigError(Error, ValueError):
    """Settings that cannot run: a value out of range, flags that exclude each other, an env id
    or space this code does not handle, a run directory that cannot be used."""


class CheckpointError(Error):
    """A checkpoint that is missing, unreadable, unwritable or belongs to another run."""


class LogError(Error):
    """A run's log files (monitor CSVs) missing or unreadable."""


class EnvError(Error, RuntimeError):
    """An env that failed: it raised in ``step`` / ``reset`` / its constructor, returned what its
    space does not allow, or its worker process died. ``str()`` is one line naming the env id,
    its index, the method and, where known, the fix; ``details`` the env's own traceback (text,
    '' if none), which an entry point prints once, before that line (``print_details``)."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details

    def __reduce__(self):  # pickled whole (a worker process sends it)
        return type(self), (str(self), self.details)


def first_line(error: object) -> str:
    """The first line of ``error``'s message ("" for none): what a one-line error quotes of it."""
    return (str(error).strip().splitlines() or [""])[0]


def print_details(error: BaseException) -> None:
    """The failing env's own traceback (``EnvError.details``) on stderr, if it has one."""
    details = getattr(error, "details", "")
    if details:
        sys.stderr.write(details if details.endswith("\n") else details + "\n")
        sys.stderr.flush()


class RankError(Error, RuntimeError):
    """Under torchrun: another rank stopped on a failure, or ended without a word (killed, or
    its process crashed), and this one stops too; ``str()`` names that rank and why."""


class GailError(ConfigError):
    """GAIL's expert data missing or not matching the env."""


def allocation_failure(error: BaseException) -> str | None:
    """How much memory an out-of-memory error of Python or torch (CPU: "DefaultCPUAllocator: can't
    allocate memory: you tried to allocate N bytes"; CUDA: "Tried to allocate 2.00 GiB") failed to
    get, for one line ("memory" where it does not say); None for any other error."""
    text = str(error)
    if not isinstance(error, MemoryError) and not (
            isinstance(error, RuntimeError)
            and ("can't allocate memory" in text or "out of memory" in text)):
        return None
    found = re.search(r"[Tt]ried to allocate (\d+) bytes", text)
    if found:
        gb = int(found.group(1)) / 1e9
        if gb < 0.1:  # a small allocation under a tight ulimit -v: not "0.0 GB"
            return f"{gb * 1e3:.1f} MB"
        return f"{gb:,.0f} GB" if gb >= 10 else f"{gb:.1f} GB"
    found = re.search(r"[Tt]ried to allocate ([\d.]+ \w+)", text)
    return found.group(1) if found else "memory"


def memory_limit() -> str:
    """Where memory ran out: the machine's, or the address space ``ulimit -v`` allows."""
    import resource
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit == resource.RLIM_INFINITY:
        return "this machine's memory"
    return f"this machine's memory or the {limit >> 10:,} KiB that ulimit -v allows"


# What a full or failing disk raises: the user frees space; not a bug to trace back.
STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO)


def failure_line(error: BaseException) -> str | None:
    """One line for an ``Error``, a disk's OSError (``STORAGE_ERRNOS``) or one of too many open
    files that stops a run; None for any other error, to be traced back."""
    if isinstance(error, Error):
        return str(error)
    if isinstance(error, OSError) and error.errno in (errno.EMFILE, errno.ENFILE):
        import resource
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return (f"too many open files ({error.strerror}; this process may open {soft:,}, "
                "ulimit -n): raise the limit, or run fewer envs (--num-processes)")
    if isinstance(error, OSError) and error.errno in STORAGE_ERRNOS:
        return f"{error.filename}: {error.strerror}" if error.filename else str(error)
    return None


def machine_failure(error: BaseException) -> str | None:
    """One line for an env's failure that is the machine's, not the env's code: a full disk, too
    many open files (``failure_line``), memory; None for any other, whose traceback is shown."""
    if isinstance(error, Error):
        return None
    if (line := failure_line(error)) is not None:
        return line
    first = first_line(error)
    if isinstance(error, MemoryError) or "allocate memory" in first:  # e.g. mujoco's FatalError
        return (f"{type(error).__name__}: {first or 'no memory'} (this machine's memory, or "
                "ulimit -v)")
    return None
