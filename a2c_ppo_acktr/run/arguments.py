"""The command line of ``main.py``: the original's flags, names and defaults, plus new ones
(``python main.py --help`` lists them all; docs/details.md says which are new and where each is
explained)."""
import argparse
import os
import sys
from typing import NoReturn, Optional

import torch

from a2c_ppo_acktr.algo import ALGOS
from a2c_ppo_acktr.algo.gail import REWARDS as GAIL_REWARDS
from a2c_ppo_acktr.algo.ppo import ADVANTAGE_NORMS
from a2c_ppo_acktr.config import Config
from a2c_ppo_acktr.envs import VEC_ENV_KINDS
from a2c_ppo_acktr.errors import Error, program
from a2c_ppo_acktr.model import ACTIVATIONS, INITS, PRECISIONS
from a2c_ppo_acktr.run import recipes
from a2c_ppo_acktr.run.checks import check_args, check_outputs, check_precision, parse_env_kwargs
from a2c_ppo_acktr.run.checks import count as _count
from a2c_ppo_acktr.run.config import resolve
from a2c_ppo_acktr.run.settings import config_from_args


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``fail``), not the usage and then the error,
    and which takes no abbreviations: ``--num-env 1024`` is an error, not ``--num-env-steps``."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see --help)", prog=self.prog)


def build_parser() -> Parser:
    p = Parser(description="A2C, PPO, ACKTR and GAIL for gymnasium environments")
    p.add_argument("--algo", default="a2c", metavar="{" + ",".join(ALGOS) + "}",
                   help="algorithm: " + " | ".join(ALGOS) + " (acktr uses K-FAC's own lr 0.25, "
                   "momentum 0.9, kl-clip 0.001 (the --kfac-* options) and ignores --lr, --eps, "
                   "--alpha, --max-grad-norm)")
    p.add_argument("--lr", type=float, default=7e-4, help="learning rate (default: 7e-4)")
    p.add_argument("--eps", type=float, default=1e-5,
                   help="RMSprop / Adam optimizer epsilon (default: 1e-5)")
    p.add_argument("--alpha", type=float, default=0.99, help="RMSprop optimizer alpha (default: 0.99)")
    p.add_argument("--gamma", type=float, default=0.99, help="discount factor (default: 0.99)")
    p.add_argument("--use-gae", action="store_true", default=False,
                   help="use generalized advantage estimation")
    p.add_argument("--gae-lambda", type=float, default=0.95, help="GAE lambda (default: 0.95)")
    p.add_argument("--entropy-coef", type=float, default=0.01,
                   help="entropy term coefficient (default: 0.01)")
    p.add_argument("--value-loss-coef", type=float, default=0.5,
                   help="value loss coefficient (default: 0.5)")
    p.add_argument("--max-grad-norm", type=float, default=0.5,
                   help="max norm of the gradients (default: 0.5)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default: 1)")
    p.add_argument("--cuda-deterministic", action="store_true", default=False,
                   help="sets flags for determinism when using CUDA (potentially slow!)")
    p.add_argument("--num-processes", type=_count, default=16,
                   help="how many training environments to run in parallel (default: 16)")
    p.add_argument("--num-steps", type=_count, default=5,
                   help="number of forward steps per environment per update (default: 5)")
    p.add_argument("--ppo-epoch", type=_count, default=4, help="number of PPO epochs (default: 4)")
    p.add_argument("--num-mini-batch", type=_count, default=32,
                   help="number of PPO minibatches (default: 32)")
    p.add_argument("--clip-param", type=float, default=0.2, help="PPO clip parameter (default: 0.2)")
    p.add_argument("--log-interval", type=_count, default=10,
                   help="log interval, one log per n updates (default: 10)")
    p.add_argument("--save-interval", type=_count, default=100,
                   help="save interval, one save per n updates (default: 100)")
    p.add_argument("--save-history", type=_count, default=None, metavar="N",
                   help="also keep a permanent copy of the checkpoint every N updates, as "
                   "<save-dir>/<algo>/<env>_seed<seed>_history/<steps>.pt (default: none)")
    p.add_argument("--eval-interval", type=_count, default=None,
                   help="eval interval, one eval per n updates (default: None)")
    p.add_argument("--num-env-steps", type=_count, default=int(10e6),
                   help="number of environment steps to train (default: 10e6)")
    p.add_argument("--env-name", default="PongNoFrameskip-v4",
                   help="gymnasium environment id (default: PongNoFrameskip-v4)")
    p.add_argument("--log-dir", default="/tmp/gym",
                   help="directory for monitor files and the scalar log (default: /tmp/gym)")
    p.add_argument("--save-dir", default="./trained_models/",
                   help="directory to save the model in (default: ./trained_models/)")
    p.add_argument("--no-cuda", action="store_true", default=False, help="disables CUDA training")
    p.add_argument("--use-proper-time-limits", action="store_true", default=False,
                   help="bootstrap episodes cut by a time limit from their final observation")
    p.add_argument("--recurrent-policy", action="store_true", default=False,
                   help="use a recurrent (GRU) policy")
    p.add_argument("--use-linear-lr-decay", action="store_true", default=False,
                   help="decay the learning rate linearly to 0 at --lr-decay-horizon")
    p.add_argument("--lr-decay-horizon", type=_count, default=None, metavar="STEPS",
                   help="env steps at which --use-linear-lr-decay reaches 0 (default: the run's "
                   "--num-env-steps when it started; kept when a resumed run is extended)")
    p.add_argument("--recipe", default=None, metavar="{" + ",".join(recipes.RECIPES) + "}",
                   help="set the flags of a named recipe for --env-name, its --num-env-steps "
                   "budget included: original (the original's command) | tuned (a2c_ppo_acktr/"
                   "run/recipes.py; the run's log says what it set); flags given on the command "
                   "line win, wherever they stand. Envs: " + ", ".join(recipes.ENVS))
    p.add_argument("--resume", nargs="?", const=True, default=False, metavar="RUN",
                   help="continue a run with its saved flags (only --num-env-steps, output and "
                   "device flags may change): RUN is its log directory or checkpoint; bare, the "
                   "run this command names. Logs are appended")
    p.add_argument("--overwrite", action="store_true", default=False,
                   help="start a new run even if --save-dir / --log-dir hold one (replacing it)")
    p.add_argument("--vec-env", default="auto", metavar="{" + ",".join(VEC_ENV_KINDS) + "}",
                   help="vectorization: " + " | ".join(VEC_ENV_KINDS)
                   + " (auto: ale for Atari ids, else chosen per env from measurements; see "
                   "README, backends)")
    p.add_argument("--env-kwargs", nargs="+", default=[], metavar="KEY=VALUE",
                   help="keyword arguments for gym.make, e.g. time_step_duration=0.02 "
                   "ep_max_length=200 (values: numbers, True/False, None, or text); saved in the "
                   "checkpoint, so evaluation and enjoy.py build the same env")
    p.add_argument("--async-rollouts", action="store_true", default=False,
                   help="sample the next rollout while the learner updates on the previous one "
                   "(policy lag of one update; real-time envs never pause): in a background "
                   "thread, or with --num-workers on the Ray workers. In a thread, runs are "
                   "reproducible from --seed")
    # GAIL (algo/gail.py): the discriminator's reward replaces the env's; works with every --algo.
    p.add_argument("--gail", action="store_true", default=False,
                   help="imitate the expert trajectories in --gail-experts-dir with GAIL")
    p.add_argument("--gail-experts-dir", default="./gail_experts",
                   help="directory holding trajs_<env-name>.pt (default: ./gail_experts)")
    p.add_argument("--gail-batch-size", type=_count, default=128,
                   help="GAIL discriminator batch size (default: 128)")
    p.add_argument("--gail-epoch", type=_count, default=5,
                   help="discriminator epochs per update (default: 5)")
    p.add_argument("--gail-warmup-updates", type=_count, default=10,
                   help="updates that train the discriminator --gail-warmup-epoch epochs instead, "
                   "after which observation normalization is frozen (default: 10)")
    p.add_argument("--gail-warmup-epoch", type=_count, default=100,
                   help="discriminator epochs per warm-up update (default: 100)")
    p.add_argument("--gail-reward", default="airl", metavar="{" + ",".join(GAIL_REWARDS) + "}",
                   help="learned reward: airl = log D - log(1 - D) (the original's) | "
                   "gail = -log(1 - D) (default: airl)")
    # Scale-out (sampling/ray_actors.py, sampling/ddp.py).
    p.add_argument("--num-workers", type=_count, default=0,
                   help="sample on this many Ray rollout workers, each with --num-processes envs "
                   "(default: 0, sample in this process; needs pip install -r requirements-ray.txt)")
    p.add_argument("--ray-address", default=None,
                   help="join this Ray cluster (e.g. 10.0.0.5:6379) instead of starting a local "
                   "Ray on 127.0.0.1")
    p.add_argument("--check-rollouts", action="store_true", default=False,
                   help="debug: workers also send a checksum of each rollout as they saw it and "
                   "the learner checks the one it rebuilt against it")
    # Network and PPO-loss options of tuned recipes (a2c_ppo_acktr/run/recipes.py); the defaults are
    # the original's.
    g = p.add_argument_group("network and loss options")
    g.add_argument("--hidden-size", type=_count, default=None,
                   help="width of the hidden layers (default: 64 for the MLP, 512 for the CNN)")
    g.add_argument("--activation", choices=sorted(ACTIVATIONS), default=None,
                   help="hidden activation (default: tanh for the MLP, relu for the CNN)")
    g.add_argument("--log-std-init", type=float, default=0.0,
                   help="initial log standard deviation of Box (Gaussian) actions (default: 0)")
    g.add_argument("--action-mean-gain", type=float, default=1.0,
                   help="orthogonal-init gain of the layer giving the mean of Box (Gaussian) "
                   "actions (default: 1, the original's; SB3 and CleanRL use 0.01)")
    g.add_argument("--init", choices=INITS, default="orthogonal",
                   help="layer initialization: orthogonal (the original's) or default "
                   "(PyTorch's, as SB3's ortho_init=False) (default: orthogonal)")
    g.add_argument("--advantage-norm", choices=ADVANTAGE_NORMS, default="batch",
                   help="PPO: standardize advantages over the whole rollout (the original's), "
                   "over each minibatch (SB3, CleanRL) or not at all (default: batch)")
    g.add_argument("--desired-kl", type=float, default=None, metavar="KL",
                   help="PPO: adapt the learning rate after each epoch to keep the approximate "
                   "KL near KL (x1.5 below KL/2, /1.5 above 2 KL; rl_games' adaptive schedule), "
                   "starting from --lr (default: none, --lr as given or decayed)")
    g.add_argument("--recompute-advantages", action="store_true", default=False,
                   help="PPO: before each epoch after the first, compute the values, returns and "
                   "advantages again with the current network (DI-engine's and Tianshou's "
                   "recompute_adv); feed-forward policies only (default: once per update)")
    g.add_argument("--value-norm", action="store_true", default=False,
                   help="PPO: the value head predicts in units of the returns' running standard "
                   "deviation, its loss computed there (DI-engine's value_norm) (default: off)")
    g.add_argument("--no-clipped-value-loss", action="store_true", default=False,
                   help="PPO: plain squared value error instead of the original's value loss "
                   "clipped by --clip-param (SB3's default)")
    # ACKTR's optimizer (a2c_ppo_acktr/algo/kfac.py); the defaults are the original's.
    g = p.add_argument_group("ACKTR (K-FAC) options")
    g.add_argument("--kfac-lr", type=float, default=None,
                   help="ACKTR: K-FAC's learning rate; --use-linear-lr-decay decays it (default: "
                   "0.25; --lr is A2C's and PPO's)")
    g.add_argument("--kfac-kl-clip", type=float, default=None, metavar="KL",
                   help="ACKTR: the trust region: a step whose predicted KL, lr^2 * the natural "
                   "gradient . the gradient, exceeds KL is scaled down to it (default: 0.001)")
    g.add_argument("--kfac-damping", type=float, default=None,
                   help="ACKTR: added to the Fisher factors' eigenvalue products before they are "
                   "inverted (default: 0.01)")
    g.add_argument("--kfac-split-bias", action="store_true", default=None,
                   help="ACKTR: each layer's bias in a Fisher block of its own, as the original's "
                   "K-FAC (default: one more input of its layer's block, as OpenAI baselines')")
    # How fast the learner runs, not what it computes (a2c_ppo_acktr/speed.py).
    g = p.add_argument_group("speed options")
    g.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="bf16: the policy's network (not its heads, losses, optimizer or "
                   "checkpoints) runs in bfloat16 autocast, acting and updating; needs a CPU with "
                   "AVX512-BF16 or AMX, or a GPU of compute capability 8.0+ (default: fp32)")
    g.add_argument("--compile", action="store_true", default=False,
                   help="torch.compile the act step and the update's loss and backward (CUDA "
                   "graphs on a GPU); the first update compiles for a while (a2c, ppo)")
    # CleanRL's flags (run/config_file.py, run/tracking.py).
    g = p.add_argument_group("config file, videos and tracking")
    g.add_argument("--config", dest="config_file", default=None, metavar="PATH",
                   help="start a new run with the flags of a JSON file: another run's config.json "
                   "(or its log directory) or {\"flag\": value, ...}; flags given on the command "
                   "line win (default: none)")
    g.add_argument("--capture-video", action="store_true", default=False,
                   help="record videos of training env 0 (gymnasium's RecordVideo: episodes 0, 1, "
                   "8, 27, ..., 1000, 2000, ...) into <log dir of the run>/videos/; needs pip "
                   "install -e .[video]")
    g.add_argument("--track", action="store_true", default=False,
                   help="log the config and every scalar of progress.csv and eval.csv to Weights & "
                   "Biases; needs pip install -e .[wandb] and wandb login (or WANDB_MODE=offline)")
    g.add_argument("--wandb-project-name", default="a2c_ppo_acktr",
                   help="the W&B project of --track (default: a2c_ppo_acktr)")
    g.add_argument("--wandb-entity", default=None,
                   help="the W&B entity (team or user) of --track (default: your default entity)")
    return p


def fail(message: str, prog: Optional[str] = None) -> NoReturn:
    """One line on stderr and exit status 2: bad input is explained, never a traceback."""
    print(f"{prog or program()}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def warn(message: str) -> None:
    """One line on stderr about a setting that runs, but not as one might expect."""
    print(f"{program()}: warning: {message}", file=sys.stderr)


def get_args(argv: Optional[list[str]] = None,
             parser: Optional[Parser] = None) -> argparse.Namespace:
    """main.py's arguments: defaults, --recipe, the saved flags on --resume, the command line
    (run/config.py); checked, with ``notes`` and ``config`` for the run's log and files.
    ``parser``: ``build_parser()``'s, its defaults perhaps changed (a checkpoint's flags)."""
    try:
        args = resolve(parser or build_parser(), argv)
        args.warnings = check_args(args)
        check_outputs(args)
        args.env_kwargs = parse_env_kwargs(args.env_kwargs)
    except Error as e:
        fail(str(e))
    if args.no_cuda:
        # CPU only, in this process and its env / Ray workers. torch itself asks for CUDA on
        # every optimizer step (is a CUDA graph being captured?): with a GPU visible that
        # initializes the driver and a context. Hidden, and counted through NVML, it does neither.
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    args.cuda = not args.no_cuda and torch.cuda.is_available()  # only now: it initializes CUDA
    try:
        check_precision(args.precision, args.cuda)
    except Error as e:
        fail(str(e))
    return args


def get_config(argv: Optional[list[str]] = None, parser: Optional[Parser] = None) -> Config:
    """main.py's frozen configuration: ``config_from_args(get_args(argv, parser))``."""
    return config_from_args(get_args(argv, parser))
