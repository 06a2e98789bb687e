"""What the learner makes of its Ray workers' failures (a2c_ppo_acktr/sampling/ray_faults.py),
without Ray: the errors stand in for Ray's (``cause``: the exception raised in the worker)."""
from a2c_ppo_acktr.envs import watch
from a2c_ppo_acktr.errors import EnvError
from a2c_ppo_acktr.sampling import ray_faults
from a2c_ppo_acktr.sampling.ray_faults import Failures, Waiting, describe, signature

RAISED = EnvError("env 1 (MyEnv-v0) failed in step: RuntimeError: boom (its traceback above)",
                  "Traceback (most recent call last):\n  ...\nRuntimeError: boom\n")


class TaskError(Exception):
    """As ``ray.exceptions.RayTaskError``: the worker's exception in ``cause``."""

    def __init__(self, cause):
        super().__init__(f"ray::RolloutWorker.sample() (pid=4242, ip=127.0.0.1)\n  {cause}")
        self.cause = cause


class ActorDied(Exception):
    """As Ray's error for a worker whose process died: ids and pids in its text."""


def died(pid):
    return ActorDied(f"The actor {pid:032x} is unavailable: The actor is temporarily "
                     f"unavailable: RpcError: connection reset (pid {pid})")


def test_a_raised_env_error_is_its_own_line_and_a_death_rays_last():
    assert describe(TaskError(RAISED)) == "env 1 (MyEnv-v0) failed in step: RuntimeError: boom"
    assert describe(TaskError(KeyError("x"))) == "KeyError: 'x'"
    assert describe(died(17)).startswith("ActorDied: The actor ")


def test_one_failure_is_the_same_whatever_its_ids_pids_and_env():
    assert signature(describe(died(17))) == signature(describe(died(9000)))
    other = EnvError("env 0 (MyEnv-v0) failed in step: RuntimeError: boom (its traceback above)")
    assert signature(describe(TaskError(RAISED))) == signature(describe(TaskError(other)))
    assert signature("RuntimeError: boom") != signature("RuntimeError: bang")


def test_an_env_that_keeps_failing_stops_the_run_at_its_third_failure():
    """Restarted twice, in fresh envs; the third time within the window stops the run, with the
    env's traceback and one line that says so."""
    failures = Failures()
    assert failures.verdict(0, TaskError(RAISED), 1, update=2) is None
    assert failures.verdict(1, TaskError(RAISED), 1, update=4) is None
    stop = failures.verdict(0, TaskError(RAISED), 1, update=6)
    assert isinstance(stop, EnvError) and stop.details == RAISED.details
    assert str(stop) == ("Ray rollout worker 0: env 1 (MyEnv-v0) failed in step: RuntimeError: "
                         "boom (its traceback above): the same failure 3 times within 5 updates, "
                         "each time in fresh envs")


def test_failures_far_apart_or_unlike_are_restarted():
    failures = Failures()
    for update in (0, ray_faults.WINDOW, 2 * ray_faults.WINDOW, 3 * ray_faults.WINDOW):
        assert failures.verdict(0, TaskError(RAISED), 1, update) is None
    for update, error in enumerate([TaskError(KeyError("x")), died(5), TaskError(RAISED)]):
        assert failures.verdict(1, error, 1, 4 * ray_faults.WINDOW + update) is None


def test_one_worker_failing_again_and_again_for_one_update_stops():
    failures = Failures()
    errors = [TaskError(KeyError(key)) for key in "abcd"]  # unlike one another
    for attempt, error in enumerate(errors[:-1], 1):
        assert failures.verdict(0, error, attempt, update=3) is None
    stop = failures.verdict(0, errors[-1], ray_faults.MAX_FAILURES + 1, update=3)
    assert str(stop) == "Ray rollout worker 0 failed 4 times in a row for update 3: KeyError: 'd'"


def test_an_env_past_env_timeout_stops_at_once():
    timeout = watch.EnvTimeout("env 0 of Hangs-v0: step did not return within --env-timeout 5 s")
    stop = Failures().verdict(1, TaskError(timeout), 1, update=0)
    assert str(stop) == ("Ray rollout worker 1: env 0 of Hangs-v0: step did not return within "
                         "--env-timeout 5 s")


def test_a_rollout_not_back_is_warned_once_per_worker(capsys, monkeypatch):
    """As a hung env in-process (envs/watch.py): after WARN_AFTER_S, once."""
    waiting = Waiting("Hangs-v0", 2, None)
    waiting.check([0, 1])
    assert capsys.readouterr().err == ""  # before the limit
    monkeypatch.setattr(watch, "WARN_AFTER_S", 0.0)
    waiting.check([1])
    waiting.check([0, 1])
    first, second = capsys.readouterr().err.splitlines()
    assert first.endswith(": warning: Ray rollout worker 1 (envs 2..3) of Hangs-v0: sample has not "
                          "returned for 0 s; Ctrl-C stops the run (--env-timeout stops it)")
    assert second.endswith("Ray rollout worker 0 (envs 0..1) of Hangs-v0: sample has not returned "
                           "for 0 s; Ctrl-C stops the run (--env-timeout stops it)")
    Waiting("Hangs-v0", 1, 30.0).check([2])
    assert capsys.readouterr().err.endswith(
        "Ray rollout worker 2 (env 2) of Hangs-v0: sample has not returned for 0 s; Ctrl-C stops "
        "the run (--env-timeout stops it at 30 s)\n")

