"""A checkpoint's deterministic policy as one file that runs with torch alone, for deployment.

Usage::

    python -m a2c_ppo_acktr.deploy.export CHECKPOINT [--out FILE] [--format pt2|onnx]

    python -m a2c_ppo_acktr.deploy.export trained_models/ppo/CartPole-v1_seed1.pt
    # -> trained_models/ppo/CartPole-v1_seed1.pt2; then, anywhere with torch:
    #    policy = torch.export.load("CartPole-v1_seed1.pt2").module(); action = policy(obs)

The file computes what ``enjoy.py`` does with deterministic actions, from the observation as
``make_vec_envs`` hands it to the policy before normalization (the run's statistics folded in):
``policy(obs) -> action`` for ``obs`` ``(N, *obs_shape)`` of the observation space's dtype (Atari:
uint8 ``(N, 4, 84, 84)``, the caller stacking frames), the action the distribution's mode (Box:
clipped to the space); a recurrent policy is ``policy(obs, hidden, mask) -> action, hidden``. The
inputs, outputs and formats in full: docs/details.md, "Exporting a policy" (``--format onnx``
needs the ``.[onnx]`` extra). Bad input is one line on stderr and exit status 2, with nothing
written.
"""
import argparse
import importlib.util
import json
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
from gymnasium import spaces

from a2c_ppo_acktr.deploy.playback import play_envs
from a2c_ppo_acktr.envs import Normalizer, get_vec_normalize
from a2c_ppo_acktr.envs.vec_env import space_shape
from a2c_ppo_acktr.errors import CheckpointError, ConfigError, Error, fail
from a2c_ppo_acktr.files import save_atomic
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.run.checkpoint import build_policy, env_options, load_policy_checkpoint

PROG = "a2c_ppo_acktr.deploy.export"
FORMATS = {"pt2": ".pt2", "onnx": ".onnx"}
ONNX_PACKAGES = ("onnx", "onnxscript")  # what torch.onnx.export needs: the .[onnx] extra


class DeployedPolicy(nn.Module):
    """``policy`` acting deterministically on raw observations: the frozen observation
    normalizer before it, the action space's bounds after it (see the module's docstring);
    ``scale_actions``: the run's ``--scale-actions``, its actions in [-1, 1] mapped onto them."""

    obs_mean: torch.Tensor  # buffers: the normalizer's statistics, the action bounds
    obs_std: torch.Tensor
    low: torch.Tensor
    high: torch.Tensor
    no_state: torch.Tensor

    def __init__(self, policy: Policy, normalizer: Normalizer | None,
                 action_space: spaces.Space, scale_actions: bool = False) -> None:
        super().__init__()
        self.scale = scale_actions
        self.base, self.dist = policy.base, policy.dist
        self.recurrent = policy.is_recurrent
        rms = normalizer.ob_rms if normalizer is not None else None
        self.normalize = rms is not None
        if normalizer is not None and rms is not None:  # float64, as VecNormalize normalizes
            self.register_buffer("obs_mean", torch.from_numpy(np.array(rms.mean, np.float64)))
            self.register_buffer("obs_std", torch.from_numpy(np.sqrt(rms.var + normalizer.epsilon)))
            self.clip_obs = float(normalizer.clip_obs)
        self.discrete = isinstance(action_space, spaces.Discrete)
        self.bounded = isinstance(action_space, spaces.Box)
        if isinstance(action_space, spaces.Box):
            self.register_buffer("low", torch.as_tensor(action_space.low, dtype=torch.float32))
            self.register_buffer("high", torch.as_tensor(action_space.high, dtype=torch.float32))
        self.register_buffer("no_state", torch.zeros(0))  # a feed-forward base ignores its state

    def forward(self, obs: torch.Tensor, hidden: torch.Tensor | None = None,
                mask: torch.Tensor | None = None
                ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        x = obs
        if self.normalize:
            x = ((obs.double() - self.obs_mean) / self.obs_std).clamp(-self.clip_obs, self.clip_obs)
            x = x.float()
        if not self.recurrent:
            hidden = mask = self.no_state
        _, features, hidden = self.base(x, hidden, mask)
        action = self.dist(features).mode()
        if self.discrete:
            action = action.squeeze(-1)  # (N, 1) -> (N,), the indices an env takes
        if self.bounded and self.scale:  # VecPyTorch's map: torch_vec.scale_action
            action = self.low + (self.high - self.low) * (action.clamp(-1.0, 1.0) + 1.0) / 2.0
        elif self.bounded:  # VecPyTorch's clip: np.minimum(np.maximum(a, low), high)
            action = torch.minimum(torch.maximum(action, self.low), self.high)
        return (action, hidden) if self.recurrent else action


def describe(ckpt: dict, module: DeployedPolicy, obs_space: spaces.Space, action_space: spaces.Space,
             hidden_size: int) -> dict:
    """What the exported file takes and gives: its metadata, and the closing message."""
    obs_shape = space_shape(obs_space)
    shape = "(N, " + ", ".join(str(d) for d in obs_shape) + ")"
    if len(obs_shape) == 3:
        obs = f"{shape} uint8, the last {obs_shape[0]} frames, oldest first"
    else:
        obs = f"{shape} {obs_space.dtype}, the env's raw observations" + (
            " (normalized inside)" if module.normalize else "")
    action = {spaces.Discrete: "(N,) int64 action index",
              spaces.Box: "(N, A) float32 Gaussian mean, " + (
                  "in [-1, 1] mapped onto the action space" if module.scale
                  else "clipped to the action space"),
              spaces.MultiDiscrete: "(N, D) int64, an index per dimension",
              spaces.MultiBinary: "(N, D) float32 0/1"}[type(action_space)]
    info = {"env_name": ckpt["env_name"], "algo": ckpt.get("algo"), "env_steps": ckpt.get("env_steps"),
            "obs_shape": list(obs_shape), "obs_dtype": str(obs_space.dtype),
            "action_space": ckpt.get("action_space"), "recurrent": module.recurrent,
            "call": "action = policy(obs)", "obs": obs, "action": action}
    if module.recurrent:
        info.update(call="action, hidden = policy(obs, hidden, mask)", hidden_size=hidden_size,
                    hidden=f"(N, {hidden_size}) float32, zeros at the start",
                    mask="(N, 1) float32, 0 where an episode starts, else 1")
    return info


def example_inputs(module: DeployedPolicy, obs_space: spaces.Space, hidden_size: int,
                   batch: int = 2) -> tuple[torch.Tensor, ...]:
    """Inputs to export with: a batch of 2, since torch.export takes a size of 1 for a constant."""
    obs = torch.as_tensor(np.stack([obs_space.sample() for _ in range(batch)]))
    if not module.recurrent:
        return (obs,)
    return obs, torch.zeros(batch, hidden_size), torch.ones(batch, 1)


def exported_program(module: DeployedPolicy, example: tuple) -> torch.export.ExportedProgram:
    """``module`` as a graph of torch operators, for any batch size; each input keeps its dtype."""
    batch = torch.export.Dim("batch", min=1)
    with warnings.catch_warnings():  # "GRU._flat_weights assigned during export": harmless here
        warnings.simplefilter("ignore", UserWarning)
        return torch.export.export(module, example, dynamic_shapes=tuple({0: batch} for _ in example))


def _pt2(program: torch.export.ExportedProgram, info: dict):
    def save(program, f):
        with warnings.catch_warnings():  # on the CNN's channels-last weights; they load exactly
            warnings.filterwarnings("ignore", "No complete tensor found")
            torch.export.save(program, f, extra_files={"policy.json": json.dumps(info, indent=1)})
    return program, save


def _onnx(program: torch.export.ExportedProgram, info: dict):
    import onnx  # check_format made sure it is there

    n = len(program.graph_signature.user_inputs)
    onnx_program = torch.onnx.export(program, input_names=["obs", "hidden", "mask"][:n],
                                     output_names=["action", "hidden"][:1 + (n > 1)], verbose=False)
    assert onnx_program is not None  # None only from the legacy exporter, which takes no ExportedProgram
    model = onnx_program.model_proto
    onnx.helper.set_model_props(model, {k: str(v) for k, v in info.items()})
    return model, lambda m, f: f.write(m.SerializeToString())


def check_format(fmt: str) -> None:
    """ConfigError unless ``fmt`` can be written here."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    missing = [m for m in ONNX_PACKAGES if importlib.util.find_spec(m) is None]
    if fmt == "onnx" and missing:
        raise ConfigError("--format onnx needs the packages onnx and onnxscript "
                          f"({' and '.join(missing)} missing here): pip install -e .[onnx]")


def check_out(out: str) -> None:
    """CheckpointError unless ``out`` can be written: not a directory, and its nearest existing
    ancestor a writable directory (missing directories below it are created)."""
    if os.path.isdir(out):
        raise CheckpointError(f"cannot write {out}: it is a directory")
    parent = os.path.dirname(os.path.abspath(out))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise CheckpointError(f"cannot write {out}: {parent} is not a writable directory")


def export_policy(path: str, out: str | None = None, fmt: str = "pt2") -> tuple[str, dict]:
    """Write the deterministic policy of the checkpoint at ``path`` to ``out`` (default: ``path``
    with the format's suffix); -> (``out``, its description). Bad input raises ``Error``."""
    check_format(fmt)
    ckpt = load_policy_checkpoint(path)
    out = out or os.path.splitext(path)[0] + FORMATS[fmt]
    check_out(out)
    # The env as enjoy.py builds it: its spaces check the checkpoint, its normalizer is frozen at
    # the run's statistics by build_policy.
    with play_envs(argparse.Namespace(env_name=ckpt["env_name"], seed=0), ckpt) as envs:
        policy = build_policy(ckpt, path, envs)
        module = DeployedPolicy(policy, get_vec_normalize(envs), envs.action_space,
                                env_options(ckpt)["scale_actions"]).eval()
        module.requires_grad_(False)  # no autograd graph behind the outputs where it is loaded
        obs_space, hidden_size = envs.observation_space, policy.recurrent_hidden_state_size
        info = describe(ckpt, module, obs_space, envs.action_space, hidden_size)
    example = example_inputs(module, obs_space, hidden_size)
    with torch.no_grad():
        exported, save = (_pt2 if fmt == "pt2" else _onnx)(exported_program(module, example), info)
    save_atomic(exported, out, save=save)
    return out, info


def main(argv: list[str] | None = None) -> int:
    from a2c_ppo_acktr.settings.arguments import Parser  # the entry point's parser

    p = Parser(prog=PROG, description="Write the deterministic policy of a checkpoint of main.py "
               "as a file that runs with torch alone")
    p.add_argument("checkpoint", help="a checkpoint saved by main.py (.pt)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="where to write (default: the checkpoint's path with .pt2 / .onnx)")
    p.add_argument("--format", default="pt2", choices=list(FORMATS),
                   help="pt2: torch.export's file, loaded by torch.export.load (default); onnx: "
                   "needs the onnx and onnxscript packages (pip install -e .[onnx])")
    args = p.parse_args(argv)
    try:
        out, info = export_policy(args.checkpoint, args.out, args.format)
    except Error as e:
        fail(str(e), prog=PROG)
    except KeyboardInterrupt:  # Ctrl-C: the atomic write left nothing behind
        print(f"{PROG}: interrupted: nothing written", file=sys.stderr)
        return 130
    if args.format == "pt2":
        print(f"wrote {out}; policy = torch.export.load(path).module(), then {info['call']}")
    else:
        print(f"wrote {out}; inputs {info['call'].split('(')[1].rstrip(')')}; outputs "
              f"{info['call'].split(' = ')[0]}")
    for name in ("obs", "hidden", "mask", "action"):
        if name in info:
            print(f"  {name}: {info[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
