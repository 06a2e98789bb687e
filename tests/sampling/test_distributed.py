"""DDP learners (a2c_ppo_acktr/sampling/ddp.py): 2 CPU ranks (gloo) spawned as torchrun would."""
import csv
import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

import main
from a2c_ppo_acktr.run.checkpoint import load_checkpoint
from a2c_ppo_acktr.sampling.ddp import DDP

WORLD = 2
P, T, UPDATES = 2, 8, 4
ARGV = ["--algo", "ppo", "--env-name", "CartPole-v1", "--num-processes", str(P), "--num-steps",
        str(T), "--num-mini-batch", "2", "--ppo-epoch", "2", "--use-gae", "--vec-env", "dummy",
        "--use-proper-time-limits", "--log-interval", "1",
        "--num-env-steps", str(WORLD * P * T * UPDATES)]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank, ports, tmp):
    """One rank: the gradient check on a toy model, then a main.py run; results to files."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(ports[0]))
    torch.manual_seed(rank)  # different start: average_gradients must broadcast rank 0's
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    ddp = DDP(cuda=False)
    ddp.average_gradients(model)
    data = torch.Generator().manual_seed(0)
    x, y = torch.randn(2 * WORLD, 3, generator=data), torch.randn(2 * WORLD, 1, generator=data)
    shard = slice(2 * rank, 2 * rank + 2)
    ((model(x[shard]) - y[shard]) ** 2).mean().backward()
    torch.save({"params": model.state_dict(), "grads": [p.grad for p in model.parameters()],
                "x": x, "y": y}, os.path.join(tmp, f"toy{rank}.pt"))
    ddp.close()

    os.environ["MASTER_PORT"] = str(ports[1])
    captured = {}
    average = DDP.average_gradients

    def spy(self, module):
        captured["model"] = module
        average(self, module)

    DDP.average_gradients = spy
    log_dir, save_dir = os.path.join(tmp, "logs"), os.path.join(tmp, "models")
    assert main.main(ARGV + ["--log-dir", log_dir, "--save-dir", save_dir]) == 0
    torch.save(captured["model"].state_dict(), os.path.join(tmp, f"policy{rank}.pt"))
    with open(os.path.join(tmp, f"threads{rank}.txt"), "w") as f:
        f.write("\n".join(_thread_names()))


def _thread_names():
    return [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("ddp"))
    mp.spawn(_rank, args=([_free_port(), _free_port()], tmp), nprocs=WORLD)
    return tmp


@pytest.mark.slow
def test_gradients_are_the_mean_over_ranks(two_ranks):
    """Each rank's gradient after backward on its shard = the full-batch gradient (the loss is
    a mean over equal shards), computed here without DDP from rank 0's parameters."""
    toy = [torch.load(os.path.join(two_ranks, f"toy{r}.pt")) for r in range(WORLD)]
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    model.load_state_dict(toy[0]["params"])
    ((model(toy[0]["x"]) - toy[0]["y"]) ** 2).mean().backward()
    for r in range(WORLD):
        for key in toy[0]["params"]:
            assert torch.equal(toy[r]["params"][key], toy[0]["params"][key])  # broadcast
        for got, want in zip(toy[r]["grads"], (p.grad for p in model.parameters())):
            torch.testing.assert_close(got, want)


def test_ranks_stay_one_learner(two_ranks):
    """After 4 PPO updates both ranks hold identical parameters; rank 0 alone logged and saved,
    with the step count and normalization statistics of both ranks' envs."""
    policies = [torch.load(os.path.join(two_ranks, f"policy{r}.pt")) for r in range(WORLD)]
    for key, value in policies[0].items():
        assert torch.equal(policies[1][key], value), key
    ckpt = load_checkpoint(os.path.join(two_ranks, "models", "ppo", "CartPole-v1_seed1.pt"))
    for key, value in policies[0].items():
        assert torch.equal(ckpt["actor_critic"][key], value), key
    assert ckpt["env_steps"] == WORLD * P * T * UPDATES
    # Every rank's first observations and steps, plus the prior count.
    assert ckpt["obs_rms"]["ob_rms"]["count"] == pytest.approx(1e-4 + WORLD * P * (1 + T * UPDATES))
    logs = os.path.join(two_ranks, "logs", "ppo", "CartPole-v1_seed1")
    assert sorted(f for f in os.listdir(logs) if f.endswith(".monitor.csv")) == [
        f"{i}.monitor.csv" for i in range(WORLD * P)]
    with open(os.path.join(logs, "progress.csv")) as f:
        steps = [int(r["timesteps"]) for r in csv.DictReader(f)]
    assert steps == [WORLD * P * T * (j + 1) for j in range(UPDATES)]


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads Linux's /proc")
def test_process_group_is_gone_after_the_run(two_ranks):
    """main.main's DDP.close() ends gloo's threads: a group kept alive past it (torch._dynamo,
    imported after init_process_group, holds references to it) let a gloo thread release a
    Python tensor during interpreter shutdown, which aborted the rank ("terminate called
    without an active exception") in about 1 torchrun run of 15."""
    for rank in range(WORLD):
        with open(os.path.join(two_ranks, f"threads{rank}.txt")) as f:
            names = f.read().split()
        assert not [n for n in names if "gloo" in n], names


def test_what_torchrun_cannot_run_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    dirs = ["--log-dir", str(tmp_path / "l"), "--save-dir", str(tmp_path / "s")]
    for extra, needle in [(["--algo", "acktr"], "--algo acktr cannot run under torchrun"),
                          (["--num-workers", "2"], "exclude each other"),
                          (["--async-rollouts"], "--async-rollouts cannot run under torchrun"),
                          (["--gail"], "--gail cannot run under torchrun"),
                          (["--algo", "ppo", "--value-norm"], "--value-norm cannot run under torchrun")]:
        with pytest.raises(SystemExit) as exc:
            main.main(["--env-name", "CartPole-v1"] + extra + dirs)
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, err


@pytest.mark.slow
def test_sigterm_to_torchrun_stops_all_ranks_and_rank_0_saves(tmp_path):
    """torchrun starts each rank in a session of its own and forwards a SIGTERM it gets (from
    its process group) to them: the ranks stop after the same update, rank 0 saves. torchrun
    itself then reports the signal in its own words and exit status."""
    import signal
    import sys

    from tests.run.test_cli import TINY, assert_saved, signal_run

    argv = TINY + ["--num-env-steps", "10000000", "--save-interval", "100000"]
    _, err = signal_run(tmp_path, argv, signal.SIGTERM, group=True, updates=2, launcher=(
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"),
        env={"TMPDIR": str(tmp_path)})  # torchrun's log directory: in the test's, not in /tmp
    ours = [line for line in err.splitlines(keepends=True) if line.startswith("interrupted")]
    assert len(ours) == 1, err
    assert_saved(ours[0], 64)
