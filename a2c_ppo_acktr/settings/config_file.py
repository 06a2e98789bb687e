"""Flags from a JSON file: a run's ``config.json`` (``--resume RUN``, ``--config``) or one written
by hand (``--config``): ``{"flags": {...}}`` as a run writes it, or the flags alone,
``{"env_name": "CartPole-v1", "lr": 0.001}`` (``num-env-steps`` and ``--num-env-steps`` name
``num_env_steps`` too). Every key and value is checked as the command line checks its flags."""
import argparse
import difflib
import json
import os
import stat
from typing import Any

from a2c_ppo_acktr.errors import ConfigError
from a2c_ppo_acktr.run.checkpoint import CONFIG_FILE

MAX_BYTES = 1 << 20  # a run's config.json is a few KB


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """A JSON object as a dict, refusing a key given twice (``json`` would keep the last)."""
    obj: dict = {}
    for key, value in pairs:
        if key in obj:
            raise _DuplicateKey(key)
        obj[key] = value
    return obj


def read_flags(path: str, flag: str) -> dict:
    """The flags of the JSON file at ``path`` (a directory: its config.json), unchecked;
    ``ConfigError`` naming ``flag`` where it is missing, not JSON or holds no object of flags."""
    if not path:
        raise ConfigError(f"{flag} is empty: give a config.json or the log directory of a run")
    file = os.path.join(path, CONFIG_FILE) if os.path.isdir(path) else path
    try:
        info = os.stat(file)
        if not stat.S_ISREG(info.st_mode):  # /dev/zero, a pipe: never read to the end
            raise ConfigError(f"{flag}: {file} is not a regular file")
        if info.st_size > MAX_BYTES:
            raise ConfigError(f"{flag}: {file} holds {info.st_size:,} bytes; a file of flags "
                              f"holds at most {MAX_BYTES:,}")
        with open(file, encoding="utf-8") as f:
            data = json.loads(f.read(MAX_BYTES + 1), object_pairs_hook=_unique_keys)
    except ConfigError:
        raise
    except FileNotFoundError:
        raise ConfigError(f"{flag}: no file {file}") from None
    except _DuplicateKey as e:
        raise ConfigError(f"{flag}: {file} gives {e.args[0]!r} twice; JSON keeps only the last, "
                          "so say which one you mean") from None
    except ValueError as e:  # JSONDecodeError, or bytes that are not text
        raise ConfigError(f"{flag}: {file} is not JSON: {e}") from None
    except RecursionError:  # arrays or objects nested thousands deep: no file of flags
        raise ConfigError(f"{flag}: {file} nests its values too deep to be a file of flags "
                          "(a flag's value is a number, a string or a list of them)") from None
    except OSError as e:
        raise ConfigError(f"{flag}: cannot read {file}: {e.strerror or e}") from None
    flags = data.get("flags", data) if isinstance(data, dict) else None
    if not isinstance(flags, dict):
        raise ConfigError(f"{flag}: {file} holds no object of flags: expected a run's config.json "
                          '({"flags": {...}}) or {"<flag>": <value>, ...}')
    return flags


def _convert(action: argparse.Action, value: Any) -> Any:
    """``value`` as the command line would turn it into ``action``'s value; ValueError if bad."""
    if action.nargs == 0:  # a switch: --recurrent-policy
        if isinstance(value, bool) or value is None and action.default is None:
            return value
        raise ValueError("expected true or false")
    if value is None:
        if action.default is None:
            return value
        raise ValueError(f"expected a value (default: {action.default!r})")
    if action.nargs in ("+", "*"):
        if not isinstance(value, list):
            raise ValueError("expected a list")
        return [_one(action, v) for v in value]
    return _one(action, value)


def _one(action: argparse.Action, value: Any) -> Any:
    convert = action.type if callable(action.type) else None  # None: the text as it is
    what = getattr(convert, "__name__", "text")
    if isinstance(value, (dict, list)) or isinstance(value, bool) and convert is not None or \
            convert is None and not isinstance(value, str):
        raise ValueError(f"expected {what}")
    try:
        converted = convert(str(value)) if convert is not None else value
    except argparse.ArgumentTypeError as e:  # the parser's own types say what they expect
        raise ValueError(str(e)) from None
    except ValueError:
        raise ValueError(f"expected {what}") from None
    if action.choices is not None and converted not in action.choices:
        raise ValueError(f"expected one of {', '.join(map(str, action.choices))}")
    return converted


def file_flags(parser: argparse.ArgumentParser, path: str, not_settable: tuple) -> dict:
    """{destination: value} of the flags in the file at ``path`` (``--config``), each checked as
    the command line checks it; ``ConfigError`` naming the first bad key or value."""
    flags = read_flags(path, "--config")
    actions = {}  # by destination and by option name: num_env_steps, config (--config's)
    for a in parser._actions:
        if a.option_strings and a.dest != "help":
            for name in [a.dest] + [o.lstrip("-").replace("-", "_") for o in a.option_strings]:
                actions[name] = a
    checked = {}
    for key, value in flags.items():
        action = actions.get(str(key).lstrip("-").replace("-", "_"))
        if action is None:
            close = difflib.get_close_matches(str(key), [a.dest for a in actions.values()
                                                         if a.dest not in not_settable], n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"--config {path}: unknown flag {key!r}{hint}; the file holds "
                              "main.py's flags, as in a run's config.json")
        flag = action.option_strings[0]
        if action.dest in not_settable:
            raise ConfigError(f"--config {path}: {flag} is no flag of a run's config: give it "
                              "on the command line")
        try:
            checked[action.dest] = _convert(action, value)
        except ValueError as e:
            raise ConfigError(f"--config {path}: {flag} {json.dumps(value)}: {e}") from None
    return checked
