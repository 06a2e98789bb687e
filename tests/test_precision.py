"""--precision bf16 (``Policy(precision="bf16")``): the base runs in bfloat16 autocast, its gradients
agree with fp32's, and what is computed from its outputs (log-probabilities, values, losses,
optimizer state, checkpoints) stays fp32. The CLI refuses bf16 on a CPU that would emulate it.

The library takes bf16 on any CPU (emulated, it computes the same numbers, slowly), so these
tests run here; only main.py asks for native bf16.
"""
import pytest
import torch
from gymnasium import spaces

from a2c_ppo_acktr import speed
from a2c_ppo_acktr.algo import A2C_ACKTR, PPO
from a2c_ppo_acktr.errors import ConfigError
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.run import build
from a2c_ppo_acktr.run.checkpoint import load_checkpoint
from tests.test_compile import KINDS, collect
from tests.test_main import SHORT, expect_exit_2, run

# bf16's gradient g against fp32's g0, per parameter tensor: the relative error
# |g - g0| / max(|g0|, 1% of the whole gradient's norm) (the floor: a tensor whose gradient nearly
# cancels out, such as the value bias's, is held to an absolute error); and the cosine similarity
# of the whole gradients. bf16 keeps 8 significant bits (rounding 2^-9 = 0.2%), and the errors grow
# with the depth a gradient flows back through; in the CNN, rounding also flips ReLUs near zero.
# Measured over seeds 1-4: at most 0.058 (MLP), 0.025 (GRU), 0.143 (CNN, the first conv); the
# cosine at least 0.9945. On CUDA the fp32 reference's convolutions may run in TF32 (10 bits);
# the same bounds held on an H200.
MAX_RELATIVE_ERROR = {"mlp": 0.1, "gru": 0.1, "cnn": 0.25}
MIN_COSINE = 0.99


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA"))]


def twins(kind, device="cpu"):
    """An fp32 policy and a bf16 copy of it (the same fp32 weights)."""
    obs_shape, _, space, base_kwargs = KINDS[kind]
    torch.manual_seed(0)
    fp32 = Policy(obs_shape, space, base_kwargs=base_kwargs).to(device)
    bf16 = Policy(obs_shape, space, base_kwargs=base_kwargs, precision="bf16").to(device)
    bf16.load_state_dict(fp32.state_dict())
    return fp32, bf16


def ppo_gradients(policy, rollouts):
    """The gradient of PPO's loss on the whole rollout (one minibatch), per parameter."""
    agent = PPO(policy, 0.2, 1, 1, 0.5, 0.01, lr=1e-3, eps=1e-5, max_grad_norm=0.5)
    advantages = rollouts.returns[:-1] - rollouts.value_preds[:-1]
    if policy.is_recurrent:
        batch = next(rollouts.recurrent_generator(advantages, 1))
    else:
        batch = next(rollouts.feed_forward_generator(advantages, 1))
    loss, stats = agent.loss(batch)
    assert loss.dtype == stats.dtype == torch.float32
    policy.zero_grad()
    loss.backward()
    return {name: p.grad.clone() for name, p in policy.named_parameters()}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", KINDS)
def test_bf16_gradients_agree_with_fp32(kind, device):
    fp32, bf16 = twins(kind, device)
    rollouts = collect(fp32, kind, seed=1, device=torch.device(device))
    expected, got = ppo_gradients(fp32, rollouts), ppo_gradients(bf16, rollouts)
    whole = torch.cat([g.flatten() for g in expected.values()])
    for name, g0 in expected.items():
        g = got[name]
        assert g.dtype == torch.float32, name
        error = (g - g0).norm() / max(g0.norm(), 0.01 * whole.norm())
        assert error <= MAX_RELATIVE_ERROR[kind], (name, error)
        # Not trivially equal: the base did compute in bf16 (the GRU runs in fp32 on the CPU).
        if name.startswith("base.") and "critic_linear" not in name and "gru" not in name:
            assert not torch.equal(g, g0), name
    cosine = torch.nn.functional.cosine_similarity(
        torch.cat([got[name].flatten() for name in expected]), whole, dim=0)
    assert cosine >= MIN_COSINE


def test_bf16_runs_the_base_in_bf16_and_keeps_the_rest_fp32():
    fp32, bf16 = twins("mlp")
    seen = {}
    bf16.base.actor[0].register_forward_hook(lambda m, i, out: seen.update(hidden=out.dtype))
    obs, hxs, masks = torch.randn(16, 3), torch.zeros(16, 1), torch.ones(16, 1)
    value, action, log_prob, _ = bf16.act(obs, hxs, masks)
    assert seen["hidden"] == torch.bfloat16
    assert value.dtype == log_prob.dtype == action.dtype == torch.float32
    values, log_probs, entropy, _ = bf16.evaluate_actions(obs, hxs, masks, action)
    assert values.dtype == log_probs.dtype == entropy.dtype == torch.float32
    # The value head computes in fp32 from the (bf16) features: not rounded to bf16 after it.
    with torch.autocast("cpu", dtype=torch.bfloat16):
        features = bf16.base.critic(obs)
    assert features.dtype == torch.bfloat16
    expected = bf16.base.critic_linear(features.float())
    assert torch.equal(bf16.get_value(obs, hxs, masks), expected)
    assert not torch.equal(expected, expected.bfloat16().float())


@pytest.mark.parametrize("algo", ["ppo", "a2c", "acktr"])
def test_bf16_updates_keep_weights_optimizer_state_and_kfac_statistics_fp32(algo):
    _, policy = twins("mlp")
    rollouts = collect(policy, "mlp", seed=1)
    if algo == "ppo":
        agent = PPO(policy, 0.2, 2, 2, 0.5, 0.01, lr=1e-3, eps=1e-5, max_grad_norm=0.5)
    else:
        agent = A2C_ACKTR(policy, 0.5, 0.01, lr=7e-4, eps=1e-5, alpha=0.99, max_grad_norm=0.5,
                          acktr=algo == "acktr")
    for _ in range(2):
        losses = agent.update(rollouts)
        assert all(isinstance(x, float) and x == x for x in losses.values())
    assert all(t.dtype == torch.float32 for t in policy.state_dict().values())
    state = [t for s in agent.optimizer.state.values() for t in s.values()
             if isinstance(t, torch.Tensor) and t.is_floating_point()]
    assert state and all(t.dtype == torch.float32 and t.isfinite().all() for t in state)
    if algo == "acktr":  # its running factors and eigenbases, per Linear / Conv2d layer
        kfac = [s for s in agent.optimizer.state.values() if "m_aa" in s]
        assert len(kfac) == 6 and all(s["Q_g"].dtype == torch.float32 for s in kfac)


def test_unknown_precision_is_refused():
    with pytest.raises(ConfigError, match="unknown precision 'fp16'"):
        Policy((3,), spaces.Discrete(2), precision="fp16")


def test_native_bf16_is_read_from_the_cpu_flags(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    for flags, native in [("fpu sse2 avx2 fma", False), ("avx2 avx512f avx512_bf16", True),
                          ("avx2 amx_bf16 amx_tile", True), ("avx512_bf16x", False)]:
        cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
        assert speed.cpu_has_native_bf16(str(cpuinfo)) is native, flags
    assert speed.cpu_has_native_bf16(str(tmp_path / "absent")) is False


@pytest.mark.skipif(speed.cpu_has_native_bf16(), reason="this CPU has native bf16")
def test_cli_refuses_bf16_on_this_cpu_in_one_line(tmp_path, capsys):
    expect_exit_2(capsys, SHORT + ["--precision", "bf16", "--no-cuda", "--log-dir",
                                   str(tmp_path / "l"), "--save-dir", str(tmp_path / "s")],
                  "--precision bf16 needs a CPU with native bf16 (avx512_bf16 or AMX); this one "
                  "has neither")
    assert not (tmp_path / "l").exists() and not (tmp_path / "s").exists()


def test_bf16_run_trains_and_saves_fp32(tmp_path, monkeypatch, capsys):
    """main.py with --precision bf16, the CPU check answered yes: the run's policy is bf16, its
    checkpoint fp32 and loadable by an fp32 policy."""
    monkeypatch.setattr(speed, "cpu_has_native_bf16", lambda: True)
    built, policy_for = [], build.policy_for
    monkeypatch.setattr(build, "policy_for", lambda *a: built.append(policy_for(*a)) or built[-1])
    paths = run(tmp_path, SHORT + ["--algo", "ppo", "--num-mini-batch", "2", "--precision", "bf16",
                                   "--no-cuda"])
    assert built[0].precision == "bf16"
    ckpt = load_checkpoint(paths.checkpoint)
    assert all(t.dtype == torch.float32 for t in ckpt["actor_critic"].values())
    assert "precision" not in ckpt["policy_kwargs"]
    Policy((4,), spaces.Discrete(2)).load_state_dict(ckpt["actor_critic"])


@pytest.mark.slow
def test_a_resumed_run_may_change_its_precision(tmp_path, monkeypatch, capsys):
    """The precision is how the network computes, not what the run is: --resume may change it
    (e.g. on a machine without native bf16), saying so in the log."""
    monkeypatch.setattr(speed, "cpu_has_native_bf16", lambda: True)
    argv = SHORT + ["--algo", "ppo", "--num-mini-batch", "2", "--no-cuda", "--precision", "bf16"]
    run(tmp_path, argv)
    capsys.readouterr()
    paths = run(tmp_path, argv + ["--resume", "--num-env-steps", "320", "--precision", "fp32"])
    assert "resume: --precision fp32 (saved bf16): the network's arithmetic" in capsys.readouterr().out
    assert load_checkpoint(paths.checkpoint)["env_steps"] == 320
