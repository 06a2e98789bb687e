"""The vector-env backends (dummy, shmem, threads, ale, native) under one contract, ale against the classic
stack, the pipelined collector, and the device upload."""
import csv
import json
import os

import numpy as np
import pytest
import torch

from a2c_ppo_acktr.envs import (
    AleVecEnv,
    DummyVecEnv,
    NativeVecEnv,
    frame_channels,
    make_env,
    make_vec_envs,
    single,
    to_device,
)
from a2c_ppo_acktr.envs import ids as env_ids
from a2c_ppo_acktr.envs import make as make_module
from a2c_ppo_acktr.rollout import collect_rollout, episode_masks
from a2c_ppo_acktr.run import build
from a2c_ppo_acktr.sampling import ray_actors as workers
from a2c_ppo_acktr.settings.arguments import get_config
from a2c_ppo_acktr.storage import RolloutStorage
from tests.test_main import expect_exit_2, run

PONG = "PongNoFrameskip-v4"
BREAKOUT = "BreakoutNoFrameskip-v4"  # 5 lives, ~25 random steps each: life losses come fast
# (env id, backend, env kwargs): episodes are cut short by a time limit so that truncations show.
BACKENDS = [
    ("CartPole-v1", "dummy", {"max_episode_steps": 12}),
    ("CartPole-v1", "shmem", {"max_episode_steps": 12}),
    ("CartPole-v1", "threads", {"max_episode_steps": 12}),
    ("CartPole-v1", "native", {"max_episode_steps": 12}),
    (BREAKOUT, "dummy", {"max_num_frames_per_episode": 480}),
    (BREAKOUT, "ale", {"max_num_frames_per_episode": 480}),
]
N = 2


def _monitor_rows(log_dir, rank):
    with open(os.path.join(log_dir, f"{rank}.monitor.csv")) as f:
        lines = f.read().splitlines()
    header = json.loads(lines[0][1:])
    assert "t_start" in header and lines[1] == "r,l,t"
    return header, [(float(r["r"]), int(r["l"])) for r in csv.DictReader(lines[1:])]


@pytest.mark.slow
@pytest.mark.parametrize("env_id,kind,kwargs", BACKENDS, ids=lambda x: x if isinstance(x, str) else "")
def test_backend_contract(env_id, kind, kwargs, tmp_path):
    atari = env_id == BREAKOUT
    envs = make_vec_envs(env_id, 3, N, 0.99, str(tmp_path), "cpu", False, vec_env=kind,
                         env_kwargs=kwargs)
    steps = 300 if atari else 60
    rng = np.random.default_rng(0)
    episodes, learner_ends, since = {0: [], 1: []}, 0, np.zeros(N, int)
    clipped = np.zeros(N)
    try:
        obs = envs.reset()
        shape = (4, 84, 84) if atari else (4,)
        assert obs.shape == (N, *shape) and envs.observation_space.shape == shape
        for _ in range(steps):
            actions = torch.from_numpy(rng.integers(envs.action_space.n, size=(N, 1)))
            obs, reward, term, trunc, infos = envs.step(actions)
            assert obs.shape == (N, *shape) and obs.dtype == (torch.uint8 if atari else torch.float32)
            assert reward.shape == (N, 1) and reward.dtype == torch.float32
            assert isinstance(term, np.ndarray) and term.dtype == trunc.dtype == np.bool_
            masks, bad_masks, _ = episode_masks(term, trunc)
            since += 1
            clipped += reward[:, 0].numpy()
            for i in range(N):
                ended = bool(term[i] or trunc[i])
                assert masks[i, 0] == (not ended)
                assert bad_masks[i, 0] == (not (trunc[i] and not term[i]))
                assert ("final_obs" in infos[i]) == ended  # same-step autoreset
                if ended:
                    learner_ends += 1
                    assert infos[i]["final_obs"].shape == shape
                    if atari:  # a fresh stack: the new episode's first frame only
                        assert not obs[i, :-1].any() and obs[i, -1].any()
                        assert infos[i]["final_obs"][-1].any()
                if "episode" in infos[i]:
                    ep = infos[i]["episode"]
                    assert ended and set(ep) == {"r", "l", "t"}
                    episodes[i].append((ep["r"], ep["l"]))
                    if atari:
                        assert set(np.unique(reward.numpy())) <= {-1.0, 0.0, 1.0}
                        assert ep["r"] >= clipped[i]  # raw score: bricks are worth 1 to 7
                        assert ep["l"] >= since[i]    # (dummy also counts its reset steps)
                    else:
                        assert ep == {**ep, "r": since[i], "l": since[i]}  # 1 a step
                        assert ep["l"] <= 12 and (ep["l"] == 12 or term[i])
                    since[i], clipped[i] = 0, 0.0
    finally:
        envs.close()
    games = sum(len(e) for e in episodes.values())
    assert games >= 2
    if atari:
        assert learner_ends > games  # a lost life ends the learner's episode, not the game
    for rank in range(N):
        header, rows = _monitor_rows(str(tmp_path), rank)
        assert header["env_id"] == env_id and rows == episodes[rank]


@pytest.mark.slow
@pytest.mark.parametrize("env_id,kind", [("ALE/Breakout-v5", "dummy"), ("ALE/Breakout-v5", "ale"),
                                         ("CartPole-v1", "native")])
def test_backend_seeds(env_id, kind):
    """Same seed, same run; env i of rank r is seeded seed + r (native: one RNG for the batch)."""
    def trace(seed, n, first_rank=0, steps=40):
        envs = make_vec_envs(env_id, seed, n, None, None, "cpu", False, vec_env=kind,
                             first_rank=first_rank)
        rng = np.random.default_rng(0)
        actions = torch.from_numpy(rng.integers(envs.action_space.n, size=(steps, 2, 1)))
        try:
            out = [envs.reset()]
            for a in actions[:, first_rank:first_rank + n]:  # v5: sticky actions use the seed
                out.append(envs.step(a)[0])
        finally:
            envs.close()
        return torch.stack(out)

    a = trace(7, 2)
    assert torch.equal(a, trace(7, 2))
    assert not torch.equal(a, trace(8, 2))
    if kind != "native":
        assert torch.equal(a[:, 1:], trace(7, 1, first_rank=1))


def _play(venv, actions, inject, frames=None):
    """Step ``venv`` (1 env) through ``actions``; ``inject(info, terminated)`` gives the actions
    to take first after an episode end; ``frames``: a list to append the newest frame (84, 84) of
    every step that does not end an episode to. -> [(agent step, terminated, truncated, episode)]."""
    events, first = [], inject(None, False)
    for t, a in enumerate(actions):
        for extra in first:
            venv.step(np.array([extra]))
        obs, _, term, trunc, infos = venv.step(np.array([a]))
        first = []
        if frames is not None and not (term[0] or trunc[0]):
            frames.append(np.array(obs[0, -1]))
        if term[0] or trunc[0]:
            events.append((t, bool(term[0]), bool(trunc[0]), infos[0].get("episode", {}).get("r"),
                           infos[0].get("episode", {}).get("l")))
            first = inject(infos[0], term[0])
        if sum(e[3] is not None for e in events) == 2:
            break
    return events


def _play_aligned(game, steps, monkeypatch, log_dir=None, env_kwargs=None):
    """The same ``steps`` random actions on the classic stack (dummy) and on ale, their resets
    aligned: the classic noop starts (1-30 frames) are turned off, and ALE (no noops, no FIRE at
    reset) is given the classic resets' actions as steps of its own: FIRE then action 2 at a
    game's start (FireResetEnv), a noop, FIRE, 2 after a lost life (EpisodicLifeEnv,
    FireResetEnv), which the classic Monitor counts in ``l``. -> (theirs, ours, their frames,
    our frames): ``_play``'s events and newest frames of each."""
    monkeypatch.setattr(single, "NoopResetEnv", lambda env, noop_max: env)
    classic = DummyVecEnv([make_env(game, 0, 0, log_dir, False, env_kwargs=env_kwargs)])
    ale = AleVecEnv(game, 1, seed=0, noop_max=0, fire_reset=False)
    actions = np.random.default_rng(0).integers(classic.action_space.n, size=steps)
    try:
        classic.reset()
        ale.reset()
        their_frames, our_frames = [], []
        theirs = _play(classic, actions, lambda info, term: [], their_frames)
        ours = _play(ale, actions, lambda info, term: [1, 2] if info is None or "episode" in info
                     else [0, 1, 2], our_frames)
    finally:
        classic.close()
        ale.close()
    return theirs, ours, their_frames, our_frames


@pytest.mark.slow
@pytest.mark.parametrize("game", [BREAKOUT, "SpaceInvadersNoFrameskip-v4"])
def test_ale_plays_the_classic_stacks_games(game, tmp_path, monkeypatch):
    """ale and the classic stack (dummy) give the same episode ends and raw game scores for the
    same actions once their resets are aligned (``_play_aligned``). The learner sees the same
    pixels: every step's newest 84x84 frame is equal."""
    theirs, ours, their_frames, our_frames = _play_aligned(game, 2000, monkeypatch, str(tmp_path))
    assert sum(e[3] is not None for e in theirs) == 2 and any(e[3] is None for e in theirs)
    assert ours == theirs
    assert len(our_frames) == len(their_frames) > 200
    assert np.array_equal(np.stack(our_frames), np.stack(their_frames))


@pytest.mark.slow
def test_ale_sees_pongs_frames_as_the_classic_stack_within_its_flicker(monkeypatch):
    """Pong: ALE takes the max of two grayscale frames, the classic stack (MaxAndSkipEnv, then
    WarpFrame) the grayscale of the max of two RGB frames; they differ only where the agent's
    paddle moved between the two (columns 73-75), in at most 1% of a frame's pixels by at most
    16 gray levels (docs/notes.md, the backend parity)."""
    theirs, ours, their_frames, our_frames = _play_aligned(PONG, 300, monkeypatch)
    assert ours == theirs == []  # no game ends in 300 steps
    diff = np.abs(np.stack(our_frames).astype(np.int16) - np.stack(their_frames))
    assert 0 < diff.max() <= 16
    assert (diff > 0).mean(axis=(1, 2)).max() <= 0.01
    assert set(np.nonzero(diff)[2].tolist()) == {73, 74, 75}


@pytest.mark.slow
def test_classic_stack_with_gray_frames_sees_pong_as_ale(monkeypatch):
    """``--env-kwargs obs_type=grayscale`` on the classic stack: the max over two frames taken in
    grayscale, as ALE takes it, gives ALE's Pong frames pixel for pixel."""
    theirs, ours, their_frames, our_frames = _play_aligned(PONG, 300, monkeypatch,
                                                           env_kwargs={"obs_type": "grayscale"})
    assert ours == theirs == []
    assert len(our_frames) == len(their_frames) == 300
    assert np.array_equal(np.stack(our_frames), np.stack(their_frames))


@pytest.mark.slow
def test_ale_evaluation_plays_whole_games():
    envs = AleVecEnv(BREAKOUT, 2, seed=0, episodic_life=False)
    rng = np.random.default_rng(0)
    games = 0
    try:
        envs.reset()
        for _ in range(400):
            _, _, term, trunc, infos = envs.step(rng.integers(4, size=2))
            for i in np.flatnonzero(term | trunc):
                assert "episode" in infos[i]  # no episode end but the game's
                games += 1
    finally:
        envs.close()
    assert games >= 2


@pytest.mark.slow
def test_ale_takes_every_seed_main_py_takes():
    """ALE's seeds are int32; --seed goes to 2**32 - 1 and env i adds i (issue #52: the seeds
    past 2**31 - 1 were a TypeError at the first reset). Below, the seeds are ALE's own."""
    firsts = []
    for seed in (2**32 - 1, 2**31 - 1, 0, 2**31):
        envs = AleVecEnv(BREAKOUT, 2, seed=seed)
        try:
            firsts.append(envs.reset())
        finally:
            envs.close()
    assert np.array_equal(firsts[2], firsts[3])  # 2**31 wraps to 0


@pytest.mark.slow
def test_ale_evaluation_serves_after_a_lost_life():
    """Whole games FIRE after each lost life (the classic stack's FireResetEnv does at its
    EpisodicLifeEnv's resets): a policy that never fires loses its five balls and the game ends,
    where it would wait out the frame limit after its first. Training never replaces an action."""
    limit = 40_000  # frames: 10,000 agent steps
    envs = AleVecEnv(BREAKOUT, 1, seed=0, episodic_life=False,
                     env_kwargs={"max_num_frames_per_episode": limit})
    try:
        envs.reset()
        for _ in range(limit // 4):
            _, _, term, trunc, infos = envs.step(np.zeros(1, np.int64))  # NOOP only
            if term[0] or trunc[0]:
                break
    finally:
        envs.close()
    assert term[0] and not trunc[0] and infos[0]["episode"]["l"] < 2_000
    training = AleVecEnv(BREAKOUT, 1, seed=0)
    assert training._groups[0].fire is None
    training.close()


class _Deterministic(torch.nn.Module):
    """A stand-in policy whose actions and values are functions of the observation."""

    recurrent_hidden_state_size = 1

    def __init__(self):
        super().__init__()
        self.threads = set()  # intra-op threads seen while acting

    def get_value(self, obs, hxs, masks):
        return obs.float().mean(dim=(1, 2, 3))[:, None]

    def act(self, obs, hxs, masks):
        self.threads.add(torch.get_num_threads())
        value = self.get_value(obs, hxs, masks)
        action = (obs[:, -1].float().sum(dim=(1, 2)) % 4).long()[:, None] ^ (masks > 0).long()
        return value, action, -value, hxs + masks

    act_step = act  # what a rollout calls (Policy.act_step)


@pytest.mark.slow
def test_pipelined_collection_fills_the_same_storage(two_threads):
    """Two groups stepped in turn (the policy acting on one while the other steps) give the
    rollout that one group gives: same transitions, masks, bootstrap values, layout; and the
    frames pack for the Ray workers (``workers.pack_frames``) and unpack exactly. The policy
    acts on one intra-op thread there (ALE's threads have the other cores), the update's
    threads come back after."""
    stores, threads = [], []
    for groups in (1, 2):
        venv = AleVecEnv(BREAKOUT, 4, seed=0, groups=groups,
                         env_kwargs={"max_num_frames_per_episode": 200})
        envs = make_module.VecPyTorch(venv, "cpu")
        store = RolloutStorage(60, 4, (4, 84, 84), venv.action_space, 1, obs_dtype=torch.uint8)
        store.obs[0].copy_(envs.reset())
        returns, policy = [], _Deterministic()
        collect_rollout(envs, policy, store, returns, True)
        envs.close()
        stores.append(store)
        threads.append(policy.threads)
        assert torch.get_num_threads() == 2
        assert len(returns) == 4 and (store.bootstrap_values != 0).any()
    for name in RolloutStorage._fields:
        assert torch.equal(getattr(stores[0], name), getattr(stores[1], name)), name
    assert threads == [{2}, {1}]
    assert frame_channels(envs) == 1
    out = {name: getattr(stores[1], name).clone() for name in workers.FIELDS}
    workers.pack_frames(out, 1)
    assert torch.equal(workers.unpack_frames(out), stores[1].obs)


@pytest.mark.slow
def test_gray_frames_train_evaluate_and_enjoy_on_the_classic_stack(tmp_path, capsys):
    """``--env-kwargs obs_type=grayscale``, which ALE's vector env does not take: training on
    the classic stack, and the evaluations (``auto``) and enjoy.py pick the classic stack too."""
    import enjoy

    argv = ["--algo", "ppo", "--env-name", BREAKOUT, "--vec-env", "dummy", "--num-processes",
            "2", "--num-steps", "16", "--num-mini-batch", "2", "--ppo-epoch", "1",
            "--eval-interval", "2", "--num-env-steps", "160", "--env-kwargs", "obs_type=grayscale",
            "max_num_frames_per_episode=200"]
    paths = run(tmp_path, argv)
    assert os.path.exists(os.path.join(paths.eval_dir, "0.monitor.csv"))
    assert "on --vec-env ale" not in capsys.readouterr().out
    assert enjoy.main(["--load-dir", paths.checkpoint, "--episodes", "1", "--no-render"]) == 0


@pytest.mark.slow
def test_ale_training_evaluation_resume_and_enjoy(tmp_path, capsys, monkeypatch, one_thread):
    import enjoy

    # One intra-op thread: on a busy 2-core machine waking a team of two costs more than the
    # tiny CNN batches here gain (see sampling/async_thread.py).
    monkeypatch.setattr(build, "DEFAULT_THREADS", 1)

    argv = ["--algo", "ppo", "--env-name", BREAKOUT, "--vec-env", "ale", "--num-processes", "2",
            "--num-steps", "16", "--num-mini-batch", "2", "--ppo-epoch", "1", "--log-interval", "1",
            "--eval-interval", "2", "--env-kwargs", "max_num_frames_per_episode=200"]
    paths = run(tmp_path, argv + ["--num-env-steps", "160"])
    log_dir = paths.log_dir
    first = [_monitor_rows(log_dir, r)[1] for r in range(2)]
    assert os.path.exists(os.path.join(paths.eval_dir, "0.monitor.csv"))
    run(tmp_path, argv + ["--num-env-steps", "320", "--resume"])
    for rank in range(2):
        header, rows = _monitor_rows(log_dir, rank)
        assert rows[:len(first[rank])] == first[rank] and len(rows) > len(first[rank])
    assert enjoy.main(["--load-dir", paths.checkpoint, "--episodes", "1", "--no-render"]) == 0
    assert "episode 1: return" in capsys.readouterr().out


@pytest.mark.slow
def test_ale_worker_packs_and_checks_its_rollouts():
    cfg = get_config(["--env-name", BREAKOUT, "--num-processes", "2", "--num-steps", "16",
                      "--num-workers", "1", "--check-rollouts", "--vec-env", "ale"])
    worker = workers.RolloutWorker(0, cfg.workers)
    worker.start(seed=0, torch_seed=0, log_dir=None, monitor_append=False)
    snapshot = {"weights": worker.policy.state_dict(), "obs_rms": None, "version": 0}
    rollout = worker.sample(snapshot)
    worker.envs.close()
    assert rollout["frames"].shape == (16, 2, 1, 84, 84)
    rollout["obs"] = workers.unpack_frames(rollout)
    assert workers.checksums(rollout) == rollout["checksums"]


@pytest.mark.slow
def test_auto_picks_ale_for_atari_and_says_so(capsys, monkeypatch):
    spec = env_ids.env_spec("ALE/Pong-v5")
    monkeypatch.setattr(make_module, "num_cpus", lambda: 2)
    assert make_module._auto_vec_env(spec, 8, None) == "ale-pipelined"
    assert make_module._auto_vec_env(spec, 7, None) == "ale"  # no two equal halves
    assert not make_module._auto_vec_env(spec, 8, "rgb_array").startswith("ale")  # no render
    # a kwarg ALE does not take (obs_type=grayscale: ALE's frames on the classic stack)
    assert not make_module._auto_vec_env(spec, 8, None, {"obs_type": "grayscale"}).startswith("ale")
    assert make_module._auto_vec_env(spec, 8, None, {"repeat_action_probability": 0.25}) == "ale-pipelined"
    monkeypatch.setattr(make_module, "num_cpus", lambda: 1)
    assert make_module._auto_vec_env(spec, 8, None) == "ale"  # no second CPU to overlap on
    make_module._announced.clear()
    for _ in range(2):
        make_vec_envs("ALE/Pong-v5", 0, 1, None, None, "cpu", True).close()
    assert capsys.readouterr().out.count("on --vec-env ale (auto)") == 1


def test_backend_misuse_is_one_line(tmp_path, capsys):
    argv = ["--env-name", "CartPole-v1", "--log-dir", str(tmp_path / "l"), "--save-dir",
            str(tmp_path / "s"), "--num-env-steps", "80", "--num-processes", "2"]
    expect_exit_2(capsys, argv + ["--vec-env", "ale"], "Atari ids only")
    expect_exit_2(capsys, argv + ["--vec-env", "native", "--env-name", "Pendulum-v1"],
                  "no vector entry point")
    expect_exit_2(capsys, argv + ["--vec-env", "ale", "--env-name", BREAKOUT, "--env-kwargs",
                                  "mode=1"], "mode")
    expect_exit_2(capsys, argv + ["--vec-env", "dummy", "--env-name", BREAKOUT, "--env-kwargs",
                                  "obs_type=ram"], "obs_type rgb or grayscale, not 'ram'")
    assert not (tmp_path / "l").exists() and not (tmp_path / "s").exists()


def test_native_resets_in_the_same_step():
    envs = NativeVecEnv("CartPole-v1", 3, seed=0, env_kwargs={"max_episode_steps": 5})
    try:
        envs.reset()
        ends = 0
        for _ in range(30):
            obs, _, term, trunc, infos = envs.step(np.ones(3, np.int64))
            for i in np.flatnonzero(term | trunc):
                ends += 1
                assert np.abs(obs[i]).max() <= 0.05  # a reset state, drawn as the env draws it
                assert not np.array_equal(infos[i]["final_obs"], obs[i])
                assert infos[i]["episode"]["l"] <= 5
    finally:
        envs.close()
    assert ends >= 6


def test_uploads_pin_only_for_cuda(monkeypatch):
    array = np.arange(6, dtype=np.uint8)
    t = to_device(array, torch.device("cpu"))
    assert t.data_ptr() == array.ctypes.data  # no copy on the CPU
    calls = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: calls.append("pin") or self)
    monkeypatch.setattr(torch.Tensor, "to", lambda self, device, non_blocking=False:
                        calls.append((torch.device(device).type, non_blocking)) or self)
    to_device(array, torch.device("cpu"))
    to_device(array, torch.device("meta"))
    assert calls == [("meta", False)]
    to_device(array, torch.device("cuda"))
    assert calls[1:] == ["pin", ("cuda", True)]
