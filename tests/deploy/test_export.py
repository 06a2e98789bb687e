"""deploy/export.py: the exported policy, loaded by torch alone in a process that never imports
a2c_ppo_acktr, acts as enjoy.py's deterministic play does on the same observations; bad input is
one line, exit status 2, nothing written."""
import argparse
import contextlib
import importlib.util
import io
import os
import re
import subprocess
import sys
import tomllib

import numpy as np
import pytest
import torch

from a2c_ppo_acktr.deploy import export
from a2c_ppo_acktr.deploy.playback import play_envs
from a2c_ppo_acktr.envs import get_vec_normalize, make_vec_envs, normalizer_state
from a2c_ppo_acktr.evaluation import run_episodes
from a2c_ppo_acktr.model import make_policy, policy_kwargs
from a2c_ppo_acktr.run.build import make_agent
from a2c_ppo_acktr.run.checkpoint import (
    build_policy,
    checkpoint_state,
    find_checkpoint,
    load_policy_checkpoint,
    run_components,
    save_checkpoint,
)
from a2c_ppo_acktr.settings.arguments import config_from_args, get_args

HAVE_ONNX = all(importlib.util.find_spec(m) for m in export.ONNX_PACKAGES)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Runs in a fresh interpreter: torch alone loads each exported file and acts on its observations
# (one at a time with the hidden state for a recurrent policy; as one batch otherwise).
LOAD_AND_ACT = """
import json, sys
import torch
for policy_file, data_file, out_file in zip(*[iter(sys.argv[1:])] * 3):
    meta = {"policy.json": ""}
    policy = torch.export.load(policy_file, extra_files=meta).module()
    meta = json.loads(meta["policy.json"])
    data = torch.load(data_file, weights_only=True)
    with torch.no_grad():
        if meta["recurrent"]:
            hidden, actions = torch.zeros(1, meta["hidden_size"]), []
            for t in range(len(data["obs"])):
                action, hidden = policy(data["obs"][t:t + 1], hidden, data["masks"][t:t + 1])
                actions.append(action)
            actions = torch.cat(actions)
        else:
            actions = policy(data["obs"])
    torch.save({"actions": actions, "meta": meta}, out_file)
assert "a2c_ppo_acktr" not in sys.modules, "the exported policy needed the training code"
"""


def make_checkpoint(path, env_name, *flags, obs_rms=None, edit=None):
    """A checkpoint as main.py saves it, of a freshly built policy (``edit`` changes it first)."""
    args = get_args(["--env-name", env_name, "--vec-env", "dummy", *flags])
    torch.manual_seed(args.seed)
    envs = make_vec_envs(env_name, 0, 1, None, None, "cpu", False, vec_env="dummy")
    cfg = config_from_args(args)
    policy = make_policy(envs.observation_space.shape, envs.action_space, policy_kwargs(cfg.policy))
    if edit is not None:
        with torch.no_grad():
            edit(policy)
    components = run_components(policy, make_agent(cfg.algo, policy), {})
    save_checkpoint(checkpoint_state(cfg, components, envs, 100, obs_rms), path)
    envs.close()
    return str(path)


def play(path, steps, monkeypatch, noise=0):
    """enjoy.py's deterministic play of the checkpoint at ``path`` for ``steps`` steps (its env,
    its policy, the run's frozen normalizer, run_episodes) -> {"obs": the policy's inputs before
    normalization (T, *obs_shape), "normalized": after it, "sent": the actions the env received
    (T, ...), "masks": (T, 1), 0 where an episode started}.

    ``noise`` random frames (images only) follow the played ones, with the policy's deterministic
    ``act`` on them: a fresh CNN takes nearly the same action on every frame of a game's start,
    which would leave its argmax untested."""
    ckpt = load_policy_checkpoint(path)
    with play_envs(argparse.Namespace(env_name=ckpt["env_name"], seed=1), ckpt) as envs:
        policy = build_policy(ckpt, path, envs)
        vec_norm = get_vec_normalize(envs)
        raw, normalized, sent, masks = [], [], [], [0.0]
        reset, step = envs.reset, envs.step

        def seen(obs):
            raw.append(torch.as_tensor(vec_norm.raw_obs.copy()) if vec_norm else obs.clone())
            normalized.append(obs.clone())
            return obs

        def recording_step(action):
            obs, reward, terminated, truncated, infos = step(action)
            masks.append(0.0 if bool(terminated | truncated) else 1.0)
            return seen(obs), reward, terminated, truncated, infos

        inner = envs
        while not hasattr(inner, "envs"):  # the DummyVecEnv: what it gets, the gym env gets
            inner = inner.venv
        inner_step = inner.step
        monkeypatch.setattr(envs, "reset", lambda: seen(reset()))
        monkeypatch.setattr(envs, "step", recording_step)
        monkeypatch.setattr(inner, "step", lambda a: (sent.append(np.array(a)), inner_step(a))[1])
        run_episodes(policy, envs, 10**6, deterministic=True, max_steps=steps)
    raw, normalized, sent = raw[:steps], normalized[:steps], [torch.from_numpy(np.concatenate(sent))]
    if noise:
        frames = torch.randint(0, 256, (noise, *raw[0].shape[1:]), dtype=torch.uint8,
                               generator=torch.Generator().manual_seed(0))
        with torch.inference_mode():
            _, action, _, _ = policy.act(frames, torch.zeros(noise, 1), torch.ones(noise, 1), True)
        raw, normalized, sent = raw + [frames], normalized + [frames], sent + [action.squeeze(1)]
    return {"obs": torch.cat(raw), "normalized": torch.cat(normalized), "sent": torch.cat(sent),
            "masks": torch.tensor(masks[:steps] + [1.0] * noise).unsqueeze(1)}


def cheetah_normalizer():
    """A training normalizer of HalfCheetah after 50 random steps, some of its variances made
    tiny so that those observations reach the clip at 10."""
    envs = make_vec_envs("HalfCheetah-v5", 0, 1, 0.99, None, "cpu", False, vec_env="dummy")
    envs.reset()
    for _ in range(50):
        envs.step(torch.rand(1, 6) * 2 - 1)
    obs_rms = normalizer_state(envs)
    envs.close()
    obs_rms["ob_rms"]["var"][:3] *= 1e-6
    return obs_rms


def sharpen(scale):
    """A fresh policy's action head is near uniform (gain 0.01): scaled, its argmax varies."""
    return lambda policy: policy.dist.linear.weight.mul_(scale)


def centre_cnn_head(policy):
    """A fresh CNN's features share one large component (ReLUs), so that its argmax is the same
    on every frame: the head's bias takes out its mean over random frames."""
    frames = torch.randint(0, 256, (64, 4, 84, 84), dtype=torch.uint8)
    _, features, _ = policy.base(frames, None, None)
    head = policy.dist.linear
    head.bias.copy_(-head(features).mean(0) + head.bias)


# name: (env id, main.py flags, checkpoint settings, export flags, steps played, noise frames)
CASES = {
    "cartpole": ("CartPole-v1", [], {"edit": sharpen(100)}, [], 60, 0),
    "cheetah": ("HalfCheetah-v5", [], {"obs_rms": "cheetah"}, ["--out", "deploy/cheetah.pt2"], 40, 0),
    "pong": ("PongNoFrameskip-v4", [], {"edit": centre_cnn_head}, [], 30, 20),
    "gru": ("CartPole-v1", ["--recurrent-policy"], {"edit": sharpen(100)}, [], 80, 0),
    "multidiscrete": ("tests.toy_envs:MultiDiscreteTarget-v0", [], {"edit": sharpen(100)}, [], 30, 0),
    # Pendulum's Box is [-2, 2]: a mean of 0.5 is sent as 1, one past 1 as 2.
    "scaled": ("Pendulum-v1", ["--scale-actions"], {"edit": lambda p: p.dist.fc_mean.weight.mul_(3)},
               [], 40, 0),
}


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """For each case: a checkpoint, exported by the CLI, played by enjoy.py's code, and the
    exported file's actions on the same observations, computed in one fresh process that loads
    torch alone. -> {name: play's record + "actions", "meta", "printed", "dir", "checkpoint"}."""
    runs, argv = {}, []
    for name, (env_name, flags, settings, export_flags, steps, noise) in CASES.items():
        d = tmp_path_factory.mktemp(name)
        if settings.get("obs_rms") == "cheetah":
            settings = {**settings, "obs_rms": cheetah_normalizer()}
        ckpt = make_checkpoint(d / f"{env_name.split(':')[-1]}_seed1.pt", env_name, *flags, **settings)
        printed = io.StringIO()
        with contextlib.chdir(d), contextlib.redirect_stdout(printed):
            assert export.main([ckpt, *export_flags]) == 0
        out = str(d / export_flags[1]) if export_flags else ckpt[:-len(".pt")] + ".pt2"
        with pytest.MonkeyPatch.context() as monkeypatch:
            runs[name] = {**play(ckpt, steps, monkeypatch, noise), "printed": printed.getvalue(),
                          "dir": str(d), "checkpoint": ckpt, "file": out}
        torch.save({"obs": runs[name]["obs"], "masks": runs[name]["masks"]}, d / "obs.pt")
        argv += [out, str(d / "obs.pt"), str(d / "actions.pt")]
    subprocess.run([sys.executable, "-c", LOAD_AND_ACT, *argv], check=True,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})
    for run in runs.values():
        run.update(torch.load(os.path.join(run["dir"], "actions.pt"), weights_only=True))
    return runs


@pytest.mark.slow
def test_cartpole_exported_next_to_its_checkpoint_acts_as_enjoy(deployed):
    run = deployed["cartpole"]
    assert run["printed"].startswith(f"wrote {run['file']}; policy = torch.export.load(path)")
    assert find_checkpoint(run["dir"], "CartPole-v1") == run["checkpoint"]  # still the only one
    assert run["actions"].dtype == torch.int64 and torch.equal(run["actions"], run["sent"])
    assert set(run["sent"].tolist()) == {0, 1}  # both actions taken: the comparison can tell
    assert run["meta"]["env_name"] == "CartPole-v1" and run["meta"]["obs_shape"] == [4]


def test_halfcheetah_folds_in_the_normalizer_and_the_action_clip(deployed):
    run = deployed["cheetah"]
    assert os.path.isfile(run["file"])  # --out in a directory that did not exist
    obs, normalized, sent = run["obs"], run["normalized"], run["sent"]
    assert obs.dtype == torch.float64 and not torch.allclose(obs.float(), normalized)
    assert (normalized.abs() == 10).any() and (normalized.abs() < 10).any()
    assert (sent.abs() == 1).any() and (sent.abs() < 1).any()  # some actions clipped, some not
    assert run["actions"].dtype == torch.float32 and run["actions"].shape == sent.shape == (40, 6)
    torch.testing.assert_close(run["actions"], sent, rtol=1e-5, atol=1e-6)


def test_scaled_actions_are_mapped_onto_the_box_as_the_env_received_them(deployed):
    run = deployed["scaled"]
    ckpt = load_policy_checkpoint(run["checkpoint"])
    with play_envs(argparse.Namespace(env_name="Pendulum-v1", seed=1), ckpt) as envs:
        policy = build_policy(ckpt, run["checkpoint"], envs)
    obs = run["normalized"]
    with torch.inference_mode():
        _, mean, _, _ = policy.act(obs, torch.zeros(len(obs), 1), run["masks"], True)
    sent = run["sent"]  # what Pendulum received, from enjoy.py's envs
    torch.testing.assert_close(sent, 2 * mean.clamp(-1, 1).reshape(sent.shape), rtol=1e-5, atol=1e-6)
    assert (sent.abs() == 2).any() and ((sent.abs() > 1) & (sent.abs() < 2)).any()
    torch.testing.assert_close(run["actions"], sent, rtol=1e-5, atol=1e-6)
    assert run["meta"]["action"] == "(N, A) float32 Gaussian mean, in [-1, 1] mapped onto the action space"


def test_pong_takes_the_stacked_uint8_frames(deployed):
    run = deployed["pong"]
    assert run["obs"].dtype == torch.uint8 and run["obs"].shape == (50, 4, 84, 84)
    assert torch.equal(run["actions"], run["sent"])
    assert len(set(run["sent"].tolist())) > 2
    assert run["meta"]["obs"].startswith("(N, 4, 84, 84) uint8")


def test_recurrent_policy_carries_its_hidden_state(deployed):
    run = deployed["gru"]
    assert (run["masks"][1:] == 0).any()  # an episode ended: the state was reset mid-sequence
    assert run["meta"]["recurrent"] and run["meta"]["hidden_size"] == 64
    assert torch.equal(run["actions"], run["sent"])
    assert set(run["sent"].tolist()) == {0, 1}


def test_multidiscrete_gives_an_index_per_dimension(deployed):
    run = deployed["multidiscrete"]
    assert run["actions"].dtype == torch.int64 and run["actions"].shape == (30, 2)
    assert torch.equal(run["actions"], run["sent"])
    assert len(set(map(tuple, run["sent"].tolist()))) > 1
    assert run["meta"]["action"] == "(N, D) int64, an index per dimension"


def fails(capsys, where, *argv):
    """export.main(argv) exits 2 with one line on stderr and writes nothing in ``where``; -> that
    line."""
    before = sorted(os.listdir(where))
    with pytest.raises(SystemExit) as exc:
        export.main([str(a) for a in argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(f"{export.PROG}: error: "), err
    assert sorted(os.listdir(where)) == before
    return err


def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys):
    assert "no checkpoint at" in fails(capsys, tmp_path, tmp_path / "missing.pt")
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    assert "not a torch file" in fails(capsys, tmp_path, tmp_path / "notes.txt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "weights.pt")
    assert "not a checkpoint saved by main.py" in fails(capsys, tmp_path, tmp_path / "weights.pt")
    ckpt = make_checkpoint(tmp_path / "cartpole.pt", "CartPole-v1")
    err = fails(capsys, tmp_path, ckpt, "--out", tmp_path / "notes.txt" / "policy.pt2")
    assert "cannot write" in err and "not a writable directory" in err
    assert "it is a directory" in fails(capsys, tmp_path, ckpt, "--out", tmp_path)
    assert "invalid choice" in fails(capsys, tmp_path, ckpt, "--format", "tflite")


def test_onnx_without_onnx_says_what_to_install(deployed, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxscript", None)  # as if not installed: find_spec -> None
    run = deployed["cartpole"]
    err = fails(capsys, run["dir"], run["checkpoint"], "--format", "onnx")
    assert "onnxscript missing here): pip install -e .[onnx]" in err


def test_the_onnx_extra_holds_what_onnx_export_needs():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert {re.split("[<>=]", r)[0] for r in extras["onnx"]} == set(export.ONNX_PACKAGES)


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_ONNX, reason="needs onnx and onnxscript")
def test_onnx_acts_as_pt2(deployed, tmp_path):
    import onnx
    from onnx.reference import ReferenceEvaluator

    run = deployed["gru"]
    out = str(tmp_path / "gru.onnx")
    assert export.main([run["checkpoint"], "--format", "onnx", "--out", out]) == 0
    obs, hidden = run["obs"][:5], torch.randn(5, 64)
    masks = torch.tensor([[0.0], [1.0], [1.0], [0.0], [1.0]])
    want = torch.export.load(run["file"]).module()(obs, hidden, masks)
    got = ReferenceEvaluator(out).run(
        None, {"obs": obs.numpy(), "hidden": hidden.numpy(), "mask": masks.numpy()})
    assert np.array_equal(got[0], want[0].numpy())
    np.testing.assert_allclose(got[1], want[1].numpy(), rtol=1e-5, atol=1e-6)
    props = {p.key: p.value for p in onnx.load(out).metadata_props}
    assert props["env_name"] == "CartPole-v1" and props["hidden_size"] == "64"
