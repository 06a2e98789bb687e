"""--compile (a2c_ppo_acktr/speed.py): the compiled act step and loss give eager's actions,
log-probabilities, losses and updated weights; nothing compiles again after the first update;
a compiled run's checkpoint loads into an eager policy; a compiled run learns CartPole.

Compiling takes tens of seconds on a small CPU: the networks are tiny, and each test compiles
its functions once and reuses them. Tolerance against eager: the same discrete actions, and
everything else within ``torch.testing.assert_close(rtol=1e-4, atol=1e-5)`` (the compiled kernels
sum in another order); under bf16 autocast within 1e-2 (bf16 rounds to 2^-9 relative, and the
compiled kernels round other intermediates than eager's).
"""
import copy
import functools

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch._dynamo.utils import counters

from a2c_ppo_acktr import speed
from a2c_ppo_acktr.algo import A2C_ACKTR, PPO
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.rollout import _act
from a2c_ppo_acktr.run.checkpoint import load_checkpoint
from a2c_ppo_acktr.storage import RolloutStorage
from tests.test_main import CARTPOLE_PPO, SHORT, expect_exit_2, monitor_returns, run

CPU = torch.device("cpu")
T, N = 8, 4
TOLERANCES = {"fp32": dict(rtol=1e-4, atol=1e-5), "bf16": dict(rtol=1e-2, atol=1e-2),
              "cuda": dict(rtol=1e-3, atol=1e-4)}  # cuDNN picks its algorithms per call
close = functools.partial(torch.testing.assert_close, **TOLERANCES["fp32"])
# (obs shape, observation dtype, action space, base kwargs): tiny versions of the three bases.
KINDS = {
    "mlp": ((3,), torch.float32, spaces.Box(-1.0, 1.0, (2,)), {"hidden_size": 8}),
    "cnn": ((1, 84, 84), torch.uint8, spaces.Discrete(3), {"hidden_size": 16}),
    "gru": ((3,), torch.float32, spaces.Discrete(3), {"hidden_size": 8, "recurrent": True}),
}


def twins(kind, precision="fp32", device=CPU):
    """An eager policy and a copy of it whose act step is compiled."""
    obs_shape, _, space, base_kwargs = KINDS[kind]
    torch.manual_seed(0)
    eager = Policy(obs_shape, space, base_kwargs=base_kwargs, precision=precision).to(device)
    compiled = copy.deepcopy(eager)
    speed.compile_policy(compiled, device)
    return eager, compiled


def collect(policy, kind, seed, device=CPU):
    """A rollout of random observations, episode ends and rewards (the same for every policy
    and ``seed``), acted on by ``policy``'s act step with the torch seed ``seed``."""
    obs_shape, obs_dtype, space, _ = KINDS[kind]
    rollouts = RolloutStorage(T, N, obs_shape, space, policy.recurrent_hidden_state_size,
                              obs_dtype=obs_dtype).to(device)
    data = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    for step in range(T + 1):
        obs = torch.rand(N, *obs_shape, generator=data) * (255 if kind == "cnn" else 1)
        if step == 0:
            rollouts.obs[0].copy_(obs)
            continue
        value, action, log_prob, hxs = _act(policy, rollouts, step - 1, slice(None))
        masks = (torch.rand(N, 1, generator=data) > 0.3).float()
        rollouts.insert(obs, hxs, action, log_prob, value, torch.randn(N, 1, generator=data),
                        masks, torch.ones(N, 1))
    rollouts.compute_returns(torch.zeros(N, 1, device=device), True, 0.99, 0.95)
    return rollouts


def assert_same_rollout(a, b, close=close):
    # Sampled from the same random numbers: the same discrete actions, Gaussian ones as close as
    # the means they add the noise to.
    if a.actions.dtype == torch.long:
        assert torch.equal(a.actions, b.actions)
    for name in ("actions", "action_log_probs", "value_preds", "returns", "recurrent_hidden_states"):
        close(getattr(b, name), getattr(a, name))


def assert_same_weights(eager, compiled, close=close):
    for (name, p), q in zip(eager.named_parameters(), compiled.parameters()):
        close(q, p, msg=lambda m, name=name: f"{name}: {m}")


@pytest.fixture(autouse=True)
def compiles_alone():
    """Each test starts with nothing compiled, as it does alone or first on an xdist worker:
    Dynamo caches what it compiled per function (``Policy.act``, ``loss``), not per policy, so
    an earlier test's compile would otherwise spare a later one its own. And each leaves
    Inductor's ``compile_threads`` as it found it, for the compiles after it."""
    from torch._inductor import config

    torch._dynamo.reset()
    threads = config.compile_threads
    yield
    assert config.compile_threads == threads


def no_recompiles(steps):
    """Run ``steps`` (callables) with recompiling an error; -> graphs compiled meanwhile (a
    function compiled for the first time counts too: compile each before)."""
    graphs = counters["stats"]["unique_graphs"]
    with torch._dynamo.config.patch(error_on_recompile=True):
        for step in steps:
            step()
    return counters["stats"]["unique_graphs"] - graphs


@pytest.mark.slow
@pytest.mark.parametrize("kind, precision", [(kind, "fp32") for kind in KINDS] + [("mlp", "bf16")])
def test_compiled_ppo_equals_eager(kind, precision):
    close = functools.partial(torch.testing.assert_close, **TOLERANCES[precision])
    eager, compiled = twins(kind, precision)
    rollouts = collect(eager, kind, seed=1)
    assert_same_rollout(rollouts, collect(compiled, kind, seed=1), close)

    # 32 samples (4 envs for the GRU) in 3 minibatches of 10 (of 1 env): the rest is left out,
    # so every minibatch has the same shape.
    agents = [PPO(policy, 0.2, 2, 3, 0.5, 0.01, lr=1e-3, eps=1e-5, max_grad_norm=0.5,
                  lr_decay_horizon=10 * T * N) for policy in (eager, compiled)]
    speed.compile_agent(agents[1], CPU)
    losses = []
    for agent in agents:
        torch.manual_seed(2)  # the same minibatches
        losses.append(agent.update(rollouts))
        assert all(isinstance(x, float) for x in losses[-1])
    close(torch.tensor(losses[1]), torch.tensor(losses[0]))
    close(torch.tensor(list(agents[1].stats.values())), torch.tensor(list(agents[0].stats.values())))
    assert_same_weights(eager, compiled, close)

    # Later rollouts and updates (with a new learning rate each) run what was compiled.
    def one_more(j):
        agents[1].adjust_lr(j * T * N)
        agents[1].update(collect(compiled, kind, seed=3 + j))
    assert no_recompiles([functools.partial(one_more, j) for j in (1, 2)]) == 0
    assert not any(key.startswith("_orig_mod") for key in compiled.state_dict())


@pytest.mark.slow
def test_compiled_a2c_equals_eager():
    eager, compiled = twins("mlp")
    rollouts = collect(eager, "mlp", seed=1)
    # The act step compiles here, not in the rollout no_recompiles watches.
    assert_same_rollout(rollouts, collect(compiled, "mlp", seed=1))
    agents = [A2C_ACKTR(policy, 0.5, 0.01, lr=7e-4, eps=1e-5, alpha=0.99, max_grad_norm=0.5)
              for policy in (eager, compiled)]
    speed.compile_agent(agents[1], CPU)
    losses = [agent.update(rollouts) for agent in agents]
    close(torch.tensor(losses[1]), torch.tensor(losses[0]))
    assert_same_weights(eager, compiled)
    assert no_recompiles([lambda: agents[1].update(collect(compiled, "mlp", seed=2))]) == 0


def test_acktr_is_refused():
    policy = Policy((3,), spaces.Discrete(2))
    with pytest.raises(ValueError, match="ACKTR cannot be compiled"):
        speed.compile_agent(A2C_ACKTR(policy, 0.5, 0.01, acktr=True), CPU)


@pytest.mark.slow
def test_compiled_run_says_its_compile_time_and_its_checkpoint_loads_eagerly(tmp_path, capsys):
    paths = run(tmp_path, SHORT + ["--algo", "ppo", "--num-mini-batch", "2", "--compile"])
    out = capsys.readouterr().out
    assert out.count("torch.compile: ") == 1 and " s compiling the act step and the update" in out
    ckpt = load_checkpoint(paths.checkpoint)
    assert not any("_orig_mod" in key for key in ckpt["actor_critic"])
    policy = Policy((4,), spaces.Discrete(2))
    policy.load_state_dict(ckpt["actor_critic"])  # strict: the same keys, no compiled wrapper


@pytest.mark.parametrize("argv, needle", [
    (["--algo", "acktr"], "--compile does not support --algo acktr"),
    (["--async-rollouts"], "with --async-rollouts another thread or process acts"),
    (["--num-workers", "2"], "with --num-workers another thread or process acts"),
])
def test_unsupported_combinations_are_refused_in_one_line(tmp_path, capsys, argv, needle):
    expect_exit_2(capsys, ["--compile"] + argv + ["--log-dir", str(tmp_path / "l"),
                                                  "--save-dir", str(tmp_path / "s")], needle)
    assert not (tmp_path / "l").exists() and not (tmp_path / "s").exists()


@pytest.mark.slow
def test_compiled_ppo_solves_cartpole(tmp_path):
    """test_main's CartPole check (the README's command) with --compile."""
    paths = run(tmp_path, CARTPOLE_PPO + ["--seed", "1", "--log-interval", "50", "--compile"])
    returns = monitor_returns(paths.log_dir)
    assert np.mean(returns[-20:]) >= 475, returns[-20:]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_graph_act_step_samples_afresh_and_keeps_its_outputs():
    """On CUDA the act step replays a CUDA graph: each replay draws new random numbers (sampling
    from the policy's distribution), returns the log-probabilities of what it drew, and what it
    handed out survives the next replays."""
    cuda = torch.device("cuda")
    torch.manual_seed(0)
    eager = Policy((3,), spaces.Discrete(5), base_kwargs={"hidden_size": 8}).to(cuda)
    compiled = copy.deepcopy(eager)
    speed.compile_policy(compiled, cuda)
    n, replays = 64, 150
    obs = torch.randn(1, 3, device=cuda).expand(n, 3).contiguous()  # one state, n draws a replay
    hxs, masks = torch.zeros(n, 1, device=cuda), torch.ones(n, 1, device=cuda)
    with torch.inference_mode():
        acted = [compiled.act_step(obs, hxs, masks) for _ in range(replays)]  # the first record
        every_action = torch.arange(5, device=cuda).view(5, 1)
        _, log_probs, _, _ = eager.evaluate_actions(obs[:5], hxs[:5], masks[:5], every_action)
    probs = log_probs.exp().view(5)
    actions = torch.cat([a[1] for a in acted]).view(-1)  # each replay's own, not the last one's
    assert len({tuple(a[1].view(-1).tolist()) for a in acted}) > replays // 2
    frequencies = torch.bincount(actions, minlength=5).float() / actions.numel()
    assert (frequencies - probs).abs().max() < 0.03  # 9,600 draws: standard error < 0.0052
    for _, action, log_prob, _ in acted[-3:]:
        with torch.inference_mode():
            _, expected, _, _ = eager.evaluate_actions(obs, hxs, masks, action)
        close(log_prob, expected)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("kind", KINDS)
def test_cuda_graph_ppo_update_equals_eager(kind):
    """On CUDA the loss and its backward replay as CUDA graphs: eager's losses and weights, and
    nothing recorded or compiled again in later rollouts and updates."""
    cuda = torch.device("cuda")
    close = functools.partial(torch.testing.assert_close, **TOLERANCES["cuda"])
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        eager, compiled = twins(kind, device=cuda)
        rollouts = collect(eager, kind, seed=1, device=cuda)
        collect(compiled, kind, seed=1, device=cuda)  # the act step warms up and records
        agents = [PPO(policy, 0.2, 2, 3, 0.5, 0.01, lr=1e-3, eps=1e-5, max_grad_norm=0.5)
                  for policy in (eager, compiled)]
        speed.compile_agent(agents[1], cuda)
        losses = []
        for agent in agents:
            torch.manual_seed(2)
            losses.append(agent.update(rollouts))
        close(torch.tensor(losses[1]), torch.tensor(losses[0]))
        assert_same_weights(eager, compiled, close)

        def one_more(j):
            agents[1].update(collect(compiled, kind, 3 + j, cuda))
        assert no_recompiles([functools.partial(one_more, j) for j in range(3)]) == 0


def test_a_compile_that_fails_in_the_workers_runs_again_in_this_process(capsys):
    """Where Inductor's worker processes cannot see the GPU, the compile goes again with
    ``compile_threads`` 1 and says so in one line; other errors pass through."""
    from torch._inductor import config

    calls = []

    def compiled(x):
        calls.append(config.compile_threads)
        if config.compile_threads > 1:
            raise RuntimeError(f"backend failed: RuntimeError: {speed.WORKER_FAILURE}")
        return x + 1
    # config.patch, not monkeypatch: monkeypatch's undo deletes the setting (the config module
    # keeps its values outside its __dict__), and every later compile in the process fails.
    with config.patch(compile_threads=4):
        assert speed.in_process_on_worker_failure(compiled)(1) == 2
        assert calls == [4, 1] and config.compile_threads == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["torch.compile: Inductor's compile workers failed (Could not find an active GPU "
                   "backend); compiling in this process"]

    def broken(x):
        raise RuntimeError("another failure")
    with pytest.raises(RuntimeError, match="another failure"):
        speed.in_process_on_worker_failure(broken)(1)
