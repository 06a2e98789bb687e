"""Train an on-policy agent: ``python main.py --algo ppo --env-name CartPole-v1 ...``.

The loop (``train``) is the algorithm box of the papers: collect ``num_steps`` transitions from
``num_processes`` envs, bootstrap from the last observation, compute returns (GAE or n-step),
update the agent, then log / save / evaluate. How the envs are stepped (in this process, in a
thread, in Ray workers, on torchrun ranks) is chosen once, as the run is opened, as a
``Collector``; what the run does around the loop (its files, signals, one-line errors) is
``run/start.py``'s, and the process's set-up ``run/process.py``'s.
"""
# ruff: noqa: E402  (the process is set up before the slow imports below)
import sys

if __name__ == "__main__":  # first, before any import of the package (gymnasium, torch: seconds)
    import gc
    import signal
    gc.disable()  # until the imports' objects are frozen (process.imported)
    signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))

    def out_of_memory(kind, error, tb, default=sys.excepthook):  # ulimit -v below their needs
        text = str(error)
        if isinstance(error, MemoryError) or isinstance(error, OSError | ImportError) and (
                "failed to map segment" in text or "Cannot allocate memory" in text):
            print(f"main.py: error: out of memory ({type(error).__name__}: {text or 'no memory'})"
                  "; this process may not use what it needs: raise its limit (ulimit -v)",
                  file=sys.stderr)
        else:
            default(kind, error, tb)
    sys.excepthook = out_of_memory
    import resource
    # Near the imports' own needs, a native library's unchecked allocation crashes the process
    # (SIGSEGV) or CPython fails without an exception: refused before, as below them.
    limit, needs = resource.getrlimit(resource.RLIMIT_AS)[0], 1 << 30
    if limit != resource.RLIM_INFINITY and limit < needs:
        print(f"main.py: error: out of memory (ulimit -v is {limit >> 10:,} KiB, below the "
              f"{needs >> 10:,} KiB that torch and the envs' libraries take); this process may "
              "not use what it needs: raise its limit (ulimit -v)", file=sys.stderr)
        sys.exit(1)
    from a2c_ppo_acktr.run import process
    process.importing()  # from here a signal ends the process in one line

import torch

# torch.optim's optimizers import torch._dynamo when first built (~2 s, ~120k objects): imported
# here, with the others, its objects are frozen out of the collector's walks (process.imported).
import torch._dynamo  # noqa: F401

from a2c_ppo_acktr.config import Config
from a2c_ppo_acktr.run.life import Run
from a2c_ppo_acktr.run.start import RunEnded, open_run
from a2c_ppo_acktr.settings.arguments import get_config


def main(argv: list[str] | None = None) -> int:
    """-> the exit status: 0 trained, 1 a failure mid-run, 128 + signal (bad input: exit 2)."""
    cfg = get_config(argv)  # every flag, checked: bad input is one line, nothing on disk
    try:
        with open_run(cfg) as run:  # built (undone on a failure), closed at the end
            return train(cfg, run)
    except RunEnded as e:  # said in one line: a signal while building, a failure mid-run, ...
        return e.status


def train(cfg: Config, run: Run) -> int:
    """The algorithm box; -> the exit status (0, 1 on a failure mid-run, 128 + signal)."""
    collector, actor_critic, agent = run.collector, run.actor_critic, run.agent
    for j in run.updates:
        agent.adjust_lr(j * run.steps_per_update)  # its schedule, e.g. --use-linear-lr-decay
        rollouts = collector.collect(actor_critic)  # in whichever sampling mode open_run chose
        # Async: the learner's current weights bootstrap, one update newer than the rollout's
        # value_preds; PPO's clipped value loss needs those old predictions anyway.
        with torch.inference_mode():
            next_value = actor_critic.get_value(
                rollouts.obs[-1], rollouts.recurrent_hidden_states[-1], rollouts.masks[-1])
        reward_stats: dict[str, float] = {}
        for reward_model in run.reward_models:  # e.g. GAIL's discriminator, trained on this
            reward_stats |= reward_model(rollouts, j)  # rollout, rewards it in place of the env
        rollouts.compute_returns(next_value, cfg.returns)
        stats = agent.update(rollouts)  # value_loss, action_loss, entropy, ...: all logged
        collector.sync(actor_critic, rollouts)  # the storage goes back, with the new weights
        status = run.after_update(j, {**stats, **reward_stats})  # check, stop?, save, log, ...
        if status is not None:
            return status
    return run.done()


if __name__ == "__main__":
    process.imported()  # the imports' objects frozen, out of the collector's walks
    sys.exit(main())
