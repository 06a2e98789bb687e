"""A run's files and its checkpoint: where they go, atomic save, weights-only load, checks, the
run's components saved and restored (``checkpoint_state``, ``restore``), and the policy rebuilt
from a checkpoint.

A run is keyed by (algo, env id, seed)::

    <log-dir>/<algo>/<env>_seed<seed>/        monitor CSVs, progress.csv, tb/, workers.log
    <log-dir>/<algo>/<env>_seed<seed>/eval/   evaluation monitor CSVs and eval.csv
    <save-dir>/<algo>/<env>_seed<seed>.pt     the checkpoint, replaced by each save
    <save-dir>/<algo>/<env>_seed<seed>_history/<steps>.pt
                                              permanent copies (--save-history N), never removed
                                              but by --overwrite

('/' in the env id becomes '_': ``envs/ids.env_file_name``). Every error here is a
``CheckpointError`` with a one-line message, which the entry points turn into their ``fail`` line.
"""
import glob
import os
import time
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Optional

import gymnasium as gym
import torch

from a2c_ppo_acktr.algo.agent import Stateful
from a2c_ppo_acktr.config import Config
from a2c_ppo_acktr.envs import TorchVecEnv, get_vec_normalize
from a2c_ppo_acktr.envs.ids import env_file_name
from a2c_ppo_acktr.envs.vec_env import space_shape
from a2c_ppo_acktr.errors import CheckpointError, ConfigError, first_line
from a2c_ppo_acktr.evaluation import freeze_normalization
from a2c_ppo_acktr.files import save_atomic, save_json
from a2c_ppo_acktr.model import Policy, make_policy, policy_kwargs
from a2c_ppo_acktr.rollout import Collector
from a2c_ppo_acktr.run.resume import exact_state

save_checkpoint = save_atomic  # a checkpoint is one atomic torch.save of plain values
CONFIG_FILE = "config.json"  # in the run's log dir: what it resolved to (settings/resolve.py)

# What enjoy.py / generate.py need from a checkpoint to rebuild its policy.
POLICY_KEYS = ("actor_critic", "obs_rms", "env_name", "obs_shape", "recurrent_policy")
# The keys of the run's own in a checkpoint, beside its components' (``checkpoint_state``);
# "optimizer" is where checkpoints before the components kept the agent's optimizer.
RESERVED = ("obs_rms", "env_steps", "torch_rng", "env_name", "env_kwargs", "scale_actions",
            "algo", "seed", "obs_shape", "action_space", "recurrent_policy", "policy_kwargs",
            "saved_at", "config", "exact", "optimizer")


class RunPaths(NamedTuple):
    log_dir: str
    eval_dir: str
    checkpoint: Optional[str]  # None when saving is off (--save-dir '')


def run_paths(args: Any) -> RunPaths:
    """The files of the run ``args`` describes: anything with main.py's log_dir, save_dir, algo,
    env_name and seed (a ``RunConfig``, or the flags while they are resolved)."""
    name = f"{env_file_name(args.env_name)}_seed{args.seed}"
    log_dir = os.path.normpath(os.path.join(os.path.expanduser(args.log_dir), args.algo, name))
    checkpoint = None
    if args.save_dir != "":
        checkpoint = os.path.normpath(os.path.join(os.path.expanduser(args.save_dir), args.algo,
                                                   name + ".pt"))
    return RunPaths(log_dir, os.path.join(log_dir, "eval"), checkpoint)


def write_config(config: dict, log_dir: str) -> str:
    """Write ``config`` to ``<log_dir>/config.json`` atomically; -> its path."""
    path = os.path.join(log_dir, CONFIG_FILE)
    save_json(config, path)
    return path


def history_path(checkpoint: str, env_steps: int) -> str:
    """Where ``--save-history`` keeps the copy of ``checkpoint`` made after ``env_steps`` steps."""
    return os.path.join(checkpoint[:-len(".pt")] + "_history", f"{env_steps}.pt")


def history(directory: str) -> list[tuple[int, str]]:
    """The (env steps, path) of a ``--save-history`` directory's checkpoints, oldest first."""
    found = [(int(name[:-3]), os.path.join(directory, name)) for name in os.listdir(directory)
             if name.endswith(".pt") and name[:-3].isdigit()]
    return sorted(found)


def verify_checkpoint(path: str) -> None:
    """``CheckpointError`` if the file at ``path`` is a damaged zip (torch's format): an entry
    whose bytes no longer match the CRC-32 torch stored when it wrote them, or a broken
    directory; or if it is an exported policy (``deploy/export.py``'s .pt2), not a checkpoint.
    Files that are no zip at all are left to ``torch.load``."""
    try:
        with zipfile.ZipFile(path) as z:
            if any(name.endswith("/archive_format") for name in z.namelist()):
                raise CheckpointError(f"{path} is an exported policy (torch.export.load reads "
                                      "it), not a checkpoint of main.py: give the .pt it was "
                                      "exported from")
            bad = z.testzip()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as e:
        with open(path, "rb") as f:
            if f.read(4) != b"PK\x03\x04":  # not a zip: torch.load says what it is
                return
        raise CheckpointError(f"checkpoint {path} is damaged: its zip structure is broken ({e})") from None
    if bad is not None:
        raise CheckpointError(f"checkpoint {path} is damaged: its part {bad} does not match the "
                              "checksum saved with it (the file changed after it was written)")


def load_checkpoint(path: str, map_location: str = "cpu") -> dict:
    """Read a checkpoint written by ``save_checkpoint``, verified first (``verify_checkpoint``);
    never unpickles code."""
    # a symbolic link: its target named, as the file read is another than the one asked for
    shown = f"{path} (a symbolic link to {os.path.realpath(path)})" if os.path.islink(path) else path
    if not os.path.isfile(path):
        what = "a directory" if os.path.isdir(path) else "no file" if os.path.islink(path) else ""
        raise CheckpointError(f"no checkpoint at {shown}" + (f": {what} is there" if what else ""))
    try:
        verify_checkpoint(path)
    except OSError as e:
        raise CheckpointError(f"cannot read checkpoint {shown}: {e.strerror or e}") from None
    try:
        with warnings.catch_warnings():  # e.g. on a raw pickle, before the error below says it
            warnings.simplefilter("ignore")
            return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # torch explains in paragraphs: name the kind of failure only
        what = ("it pickles Python objects, which are never loaded" if "GLOBAL" in str(e)
                else "corrupt or not a torch file")
        raise CheckpointError(f"cannot read checkpoint {shown}: {what}") from e


def check_checkpoint(ckpt: dict, path: str, env_name: str, obs_shape: Sequence[int],
                     action_space: gym.Space) -> None:
    """Raise ``CheckpointError`` unless ``ckpt`` was saved for this env and these spaces."""
    expected = {"env_name": env_name, "obs_shape": list(obs_shape),
                "action_space": str(action_space)}
    for key, want in expected.items():
        got = ckpt.get(key, want if key == "action_space" else None)  # older files lack it
        if got != want:
            raise CheckpointError(f"checkpoint {path} is for {key} {got!r}, expected {want!r}")


def env_options(ckpt: dict) -> dict[str, Any]:
    """``make_vec_envs``'s keywords that rebuild the run's envs (``EnvConfig.options``), from its
    checkpoint; older files lack them: the defaults."""
    return {"env_kwargs": ckpt.get("env_kwargs"), "scale_actions": bool(ckpt.get("scale_actions"))}


def checkpoint_state(cfg: Config, components: Mapping[str, Stateful],
                     envs: Collector | TorchVecEnv, env_steps: int, obs_rms: Optional[dict]) -> dict:
    """Everything needed to rebuild and resume the run, as tensors and plain values: each
    component's ``state_dict`` under its name (``run_components``) and the run's own
    keys (``RESERVED``)."""
    return {
        **{name: component.state_dict() for name, component in components.items()},
        "obs_rms": obs_rms,
        "env_steps": env_steps,
        "torch_rng": torch.get_rng_state(),
        "env_name": cfg.env.env_name,
        **cfg.env.options,  # env_kwargs, scale_actions: evaluation and enjoy.py build the same envs
        "algo": cfg.algo.algo,
        "seed": cfg.env.seed,
        "obs_shape": list(space_shape(envs.observation_space)),
        "action_space": str(envs.action_space),
        "recurrent_policy": cfg.policy.recurrent,
        "policy_kwargs": policy_kwargs(cfg.policy),  # the network's shape, for enjoy.py
        "saved_at": time.time(),  # wall clock: --resume drops the log rows written after it
        "config": cfg.record,  # the run's flags, versions, commit (settings/resolve.py): --resume
        # The envs' and RNGs' states, for an exact resume (run/resume.py), if envs is a Collector
        "exact": exact_state(envs) if isinstance(envs, Collector) else None,
    }


def component_states(ckpt: dict, components: Mapping[str, Any]) -> dict[str, Any]:
    """Each component's state in ``ckpt`` by name (None where it holds none), read from where
    older versions put it: the agent's optimizer under "optimizer", and A2C's RMSprop state as one
    tensor for all parameters (``FlatParams``' layout, before the agents stepped plain
    parameters)."""
    states = {name: ckpt.get(name) for name in components}
    if "agent" in components and states["agent"] is None and "optimizer" in ckpt:
        states["agent"] = {"optimizer": _separate(ckpt["optimizer"],
                                                  components["agent"].optimizer.param_groups)}
    return states


# FlatParams' layout: each parameter's segment started a multiple of ALIGN bytes after the last.
ALIGN = 64


def _separate(state: dict, groups: list[dict]) -> dict:
    """An optimizer state of one flat tensor laid out as ``FlatParams`` laid the parameters of
    ``groups`` (one group), as the state of those parameters; any other state as it is."""
    params, saved = groups[0]["params"] if len(groups) == 1 else [], state["param_groups"]
    if not (len(saved) == 1 and len(saved[0]["params"]) == 1 < len(params)):
        return state
    flat = state["state"].get(saved[0]["params"][0], {})
    offsets = [0]
    for p in params:
        per_align = max(1, ALIGN // p.element_size())
        offsets.append(offsets[-1] + -(-p.numel() // per_align) * per_align)
    parts: dict[int, dict] = {i: {} for i in range(len(params))}
    for key, value in flat.items():
        if key == "step":
            for entries in parts.values():
                entries[key] = value.clone()
            continue
        if value.numel() != offsets[-1]:
            raise ValueError(f"the optimizer state holds {value.numel()} values per state tensor, "
                             f"the network's parameters laid out as one tensor {offsets[-1]}")
        for i, (p, offset) in enumerate(zip(params, offsets)):
            part = parts[i][key] = torch.empty_like(p.detach())  # its strides: channels_last too
            order = sorted(range(p.dim()), key=lambda d: -p.stride()[d])
            part.permute(order).view(-1).copy_(value[offset:offset + p.numel()])
    return {"state": parts if flat else {},
            "param_groups": [{**saved[0], "params": list(range(len(params)))}]}


def run_components(actor_critic: Policy, agent: Stateful,
                   reward_models: Mapping[str, Stateful]) -> dict[str, Stateful]:
    """What of the run learns or adapts, by checkpoint key: the policy (under the key enjoy.py
    reads), the agent, the reward models. ``checkpoint_state`` saves each one's ``state_dict``,
    ``restore`` loads it back; neither names them."""
    components: dict[str, Stateful] = {"actor_critic": actor_critic, "agent": agent,
                                       **reward_models}
    clash = sorted(set(components) & set(RESERVED))
    if clash:
        raise ValueError(f"component names {', '.join(clash)} are checkpoint keys of the run's own")
    return components


def restore(ckpt: dict, path: str, env_name: str, obs_shape: Sequence[int], envs: Any,
            components: Mapping[str, Stateful]) -> None:
    """Load the checkpoint ``ckpt`` (read from ``path``) into the run's ``components`` and the
    normalizer of ``envs`` (a vector env, or the Ray workers), and torch's RNG; ``CheckpointError``
    (one line, "--resume: ...") unless it was saved for ``env_name``, these observations
    (``obs_shape``) and actions, and holds a state of each component."""
    try:
        check_checkpoint(ckpt, path, env_name, obs_shape, envs.action_space)
        states = component_states(ckpt, components)
        for name, component in components.items():
            if states.get(name) is None:
                raise CheckpointError(f"{path} was trained without {name!r} (it holds no state "
                                      "of it)")
            component.load_state_dict(states[name])
    except (CheckpointError, RuntimeError, ValueError, KeyError) as e:
        raise CheckpointError(f"--resume: {first_line(e)}") from None
    if ckpt["obs_rms"] is not None:
        vec_norm = get_vec_normalize(envs)
        assert vec_norm is not None  # the checkpoint's env (checked above) normalizes
        vec_norm.load_state_dict(ckpt["obs_rms"])
    torch.set_rng_state(ckpt["torch_rng"])


def find_checkpoint(load_dir: str, env_name: Optional[str], algo: Optional[str] = None,
                    seed: Optional[int] = None) -> str:
    """The checkpoint ``load_dir`` designates: the file itself, or the one checkpoint of
    ``env_name`` in ``load_dir`` (a ``<save-dir>/<algo>``, the original's form) or in its
    ``<algo>/`` directories (a ``--save-dir``). Both ``<env>_seed<seed>.pt`` and the original's
    ``<env>.pt`` count; ``algo`` / ``seed`` narrow the choice, and of several seeds the newest
    checkpoint is the one."""
    if os.path.isfile(load_dir) or load_dir.endswith(".pt"):
        return load_dir
    if env_name is None:
        raise CheckpointError("--env-name is needed when --load-dir is a directory")
    stem = glob.escape(env_file_name(env_name))
    names = [f"{stem}_seed{seed}.pt"] if seed is not None else [f"{stem}_seed*.pt", f"{stem}.pt"]
    found = sorted({path for d in (glob.escape(load_dir), os.path.join(glob.escape(load_dir), "*"))
                    for name in names for path in glob.glob(os.path.join(d, name))})
    if algo is not None:
        found = [p for p in found if os.path.basename(os.path.dirname(p)) == algo]
    if len({os.path.dirname(p) for p in found}) > 1:  # several algos: variants, not seeds
        raise CheckpointError(
            f"several checkpoints for {env_name} in {load_dir}: {', '.join(found)}; choose with "
            "--algo, --train-seed or the file's path as --load-dir")
    if len(found) > 1:  # seeds of one run: the newest (``train_seeds`` names the others)
        return max(found, key=os.path.getmtime)
    if not found:
        where = os.path.join(load_dir, algo or "<algo>",
                             f"{env_file_name(env_name)}_seed{'*' if seed is None else seed}.pt")
        raise CheckpointError(f"no checkpoint for {env_name} in {load_dir} (looked for {where}; "
                              "main.py saves <save-dir>/<algo>/<env-name>_seed<seed>.pt)")
    return found[0]


def train_seeds(path: str) -> list[int]:
    """The ``--seed`` of each checkpoint beside ``path`` of the same algo and env, sorted."""
    stem = os.path.basename(path)[:-len(".pt")]
    stem = stem[:stem.rindex("_seed")] if "_seed" in stem else stem
    prefix = os.path.join(os.path.dirname(path), stem + "_seed")
    tails = [p[len(prefix):-len(".pt")] for p in glob.glob(glob.escape(prefix) + "*.pt")]
    return sorted(int(t) for t in tails if t.isdigit())


def load_policy_checkpoint(path: str, env_name: Optional[str] = None) -> dict:
    """A checkpoint of main.py holding a policy, for ``env_name`` when given."""
    ckpt = load_checkpoint(path)
    if not isinstance(ckpt, dict) or not all(k in ckpt for k in POLICY_KEYS):
        raise CheckpointError(f"{path} is not a checkpoint saved by main.py "
                              f"(expected keys {', '.join(POLICY_KEYS)})")
    if env_name is not None and ckpt["env_name"] != env_name:
        raise CheckpointError(f"{path} holds a policy for {ckpt['env_name']}, not for --env-name "
                              f"{env_name}")
    return ckpt


def build_policy(ckpt: dict, path: str, envs: TorchVecEnv) -> Policy:
    """The checkpoint's policy for ``envs`` (built for its env), in eval mode, with ``envs``'
    normalizer frozen at the training run's statistics."""
    obs_shape, action_space = space_shape(envs.observation_space), envs.action_space
    check_checkpoint(ckpt, path, ckpt["env_name"], obs_shape, action_space)
    # Checkpoints from before --hidden-size etc. have no "policy_kwargs": the original's network.
    kwargs = ckpt.get("policy_kwargs", {"base_kwargs": {"recurrent": ckpt["recurrent_policy"]}})
    try:
        policy = make_policy(obs_shape, action_space, kwargs)
    except ConfigError as e:  # settings of a newer version of this package
        raise CheckpointError(f"{path}: {e}") from None
    try:
        policy.load_state_dict(ckpt["actor_critic"])
    except RuntimeError as e:  # "Error(s) in loading state_dict for Policy:\n\tsize mismatch ..."
        first = " ".join(str(e).split("\n", 1)[-1].split()).split(". ")[0]
        raise CheckpointError(f"the policy in {path} does not fit {ckpt['env_name']} (observations "
                              f"{obs_shape}, actions {action_space}): {first}") from None
    freeze_normalization(envs, ckpt["obs_rms"])
    return policy.eval()
