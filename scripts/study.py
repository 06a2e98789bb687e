"""tune.py's study, shared by processes on one storage: opening it, counting its trials, failing
the trials of processes that are gone, and deciding whether another trial may start."""
from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Callable

import optuna
import sqlalchemy

from a2c_ppo_acktr.settings.arguments import Parser

HEARTBEAT_S = 10  # a trial whose process (elsewhere) stopped beating for 2 of these is failed
PROCESS = f"{socket.gethostname()}:{os.getpid()}"  # on this machine, a gone one is failed at once
WAIT_S = 1.0
RACE_TRIES = 5


def finished(study, running: bool = False) -> int:
    states = [optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED]
    states += [optuna.trial.TrialState.RUNNING] if running else []
    return len(study.get_trials(deepcopy=False, states=states))


def surplus(study, number: int, n_trials: int) -> bool:
    """Whether trial ``number`` is beyond the study's budget: ``n_trials`` trials numbered below it
    have finished or are running. Two processes that find room at the same moment each start a
    trial; the later one gives way."""
    states = [optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED,
              optuna.trial.TrialState.RUNNING]
    return sum(t.number < number for t in study.get_trials(deepcopy=False, states=states)) \
        >= n_trials


def fail_dead(study, storage) -> None:
    """Fail the running trials whose tune.py is gone: on this machine at once (its pid), elsewhere
    once their heartbeat is stale. A kill -9 loses its trial, not the study's budget."""
    optuna.storages.fail_stale_trials(study)
    for t in study.get_trials(deepcopy=False, states=[optuna.trial.TrialState.RUNNING]):
        host, _, pid = t.user_attrs.get("process", "").rpartition(":")
        if host == PROCESS.rpartition(":")[0] and pid.isdigit() and not alive(int(pid)):
            trial_id = storage.get_trial_id_from_study_id_trial_number(
                storage.get_study_id_from_name(study.study_name), t.number)
            storage.set_trial_state_values(trial_id, optuna.trial.TrialState.FAIL)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        pass
    return True


def room(study, storage, n_trials: int, stopped: Callable[[], bool]) -> bool:
    """Whether another trial may start: while trials running elsewhere may end the study, wait for
    them; False once ``n_trials`` trials have finished, or ``stopped()``."""
    waited = False
    while not stopped():
        fail_dead(study, storage)
        if finished(study) >= n_trials:
            return False
        if finished(study, running=True) < n_trials:
            return True
        if not waited:
            print("waiting for the trials of other processes, which may end the study", flush=True)
            waited = True
        time.sleep(WAIT_S)
    return False


def hide_password(text: str, url: str) -> str:
    """``text`` with the password of the URL ``url`` (``scheme://user:password@host``) shown as
    ``***``, wherever it appears: a line on a terminal or in a log must not hold it."""
    password = re.match(r"[^:/]+://[^:/@]*:([^@]*)@", url)
    return text.replace(password.group(1), "***") if password and password.group(1) else text


def open_study(p: Parser, name: str, url: str):
    """The study ``name`` in ``url`` (made if new) and its storage; one line and exit 2 where the
    storage fails. Processes that start together on a new storage race to create its tables (the
    loser's insert fails): it tries again."""
    connect = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}  # shared file
    for attempt in range(RACE_TRIES):
        try:
            storage = optuna.storages.RDBStorage(url, engine_kwargs=connect,
                                                 heartbeat_interval=HEARTBEAT_S)
            return optuna.create_study(study_name=name, storage=storage, direction="maximize",
                                       sampler=optuna.samplers.TPESampler(),
                                       pruner=optuna.pruners.MedianPruner(),
                                       load_if_exists=True), storage
        except Exception as e:  # SQLAlchemy's and the database driver's errors, of many kinds
            raced = isinstance(e, sqlalchemy.exc.IntegrityError) or "already exists" in str(e)
            if not raced or attempt == RACE_TRIES - 1:
                why = str(e).splitlines()[0] if str(e) else type(e).__name__
                p.error(hide_password(f"--storage {url}: {why}", url))
            time.sleep(WAIT_S)
