"""The parts of a run's life around the math: GAIL's reward model and the run itself (which run,
how long, its files, device, output, and how this start treats it)."""
from dataclasses import dataclass
from typing import Optional

from a2c_ppo_acktr.config.flag import COUNT, COUNT_0, flag

SPEED, FILES = "speed options", "config file, videos and tracking"  # --help's groups
OUTPUT = "output only"  # what a resumed run changes with an interval or tracking flag


@dataclass(frozen=True)
class GailConfig:
    """GAIL's discriminator and its schedule (``--gail-*``); ``--gail`` itself: whether the run
    has one (``Config.gail`` is None without)."""

    # algo/gail.py: the discriminator's reward replaces the env's; works with every --algo.
    enabled: bool = flag(False, "imitate the expert trajectories in --gail-experts-dir with GAIL",
                         dest="gail", at=37)
    experts_dir: str = flag("./gail_experts", "directory holding trajs_<env-name>.pt (default: "
                            "./gail_experts)", dest="gail_experts_dir", nonempty=True,
                            absolute=True, at=38)
    batch_size: int = flag(128, "GAIL discriminator batch size (default: 128)",
                           dest="gail_batch_size", takes=COUNT, at=39)
    epoch: int = flag(5, "discriminator epochs per update (default: 5)", dest="gail_epoch",
                      takes=COUNT, at=40)
    warmup_updates: int = flag(
        10, "updates that train the discriminator --gail-warmup-epoch epochs instead, after which "
        "observation normalization is frozen (default: 10)", dest="gail_warmup_updates",
        takes=COUNT_0, at=41)
    warmup_epoch: int = flag(100, "discriminator epochs per warm-up update (default: 100)",
                             dest="gail_warmup_epoch", takes=COUNT, at=42)
    reward: str = flag("airl", "learned reward: airl = log D - log(1 - D) (the original's) | "
                       "gail = -log(1 - D) (default: airl)", dest="gail_reward",
                       choices="a2c_ppo_acktr.algo.gail:REWARDS", at=43)


@dataclass(frozen=True)
class RunConfig:
    """A run's life around the math: which run it is (``algo``, ``env_name``, ``seed``: its
    files), how long, where its files go, the device, output and how this start treats the run.
    The fields without a flag are another part's flags (``algo``, ``env_name``, ``seed``) or
    computed when the configuration is built (``whole_steps``, ``cuda``)."""

    algo: str
    env_name: str
    seed: int
    whole_steps: int  # --num-env-steps rounded down to whole updates (settings/resolve.py's whole_updates)
    cuda: bool        # not --no-cuda, and a GPU is there
    num_env_steps: int = flag(int(10e6), "number of environment steps to train (default: 10e6)",
                              takes=COUNT, at=22, may_change="the run trains on to the new total "
                                                             "(none if it is already past it)")
    log_interval: int = flag(10, "log interval, one log per n updates (default: 10)",
                             takes=COUNT, at=18, may_change=OUTPUT)
    save_interval: int = flag(100, "save interval, one save per n updates (default: 100)",
                              takes=COUNT, at=19, may_change=OUTPUT)
    save_history: Optional[int] = flag(
        None, "also keep a permanent copy of the checkpoint every N updates, as <save-dir>/<algo>/"
        "<env>_seed<seed>_history/<steps>.pt (default: none)", takes=COUNT, metavar="N", at=20,
        may_change=OUTPUT)
    eval_interval: Optional[int] = flag(None, "eval interval, one eval per n updates (default: "
                                        "None)", takes=COUNT, at=21, may_change=OUTPUT)
    final_eval_episodes: int = flag(
        10, "at the run's end, play N episodes deterministically with the normalization frozen, "
        "each on its own env, into <log dir of the run>/final_eval.json (compare.py --metric "
        "final-det); 0 turns it off (default: 10)", takes=COUNT_0, metavar="N", at=70,
        may_change=OUTPUT)
    log_dir: str = flag("/tmp/gym", "directory for monitor files and the scalar log (default: "
                        "/tmp/gym)", nonempty=True, absolute=True, at=24,
                        may_change="the run's files were moved")
    save_dir: str = flag("./trained_models/", "directory to save the model in (default: "
                         "./trained_models/)", absolute=True, at=25,
                         may_change="the run's files were moved")
    no_cuda: bool = flag(False, "disables CUDA training", at=26,
                         may_change="the device only: the weights and optimizer state load onto it")
    cuda_deterministic: bool = flag(False, "sets flags for determinism when using CUDA "
                                    "(potentially slow!)", at=12, may_change="the device only")
    compile: bool = flag(
        False, "torch.compile the act step and the update's loss and backward (CUDA graphs on a "
        "GPU); the first update compiles for a while (a2c, ppo)", group=SPEED, at=62,
        may_change="how the act step and the loss run, not what they compute")
    recipe: Optional[str] = flag(
        None, "set the flags of a named recipe for --env-name, its --num-env-steps budget "
        "included: original (the original's command) | tuned (a2c_ppo_acktr/settings/recipes.py; the "
        "run's log says what it set); flags given on the command line win, wherever they stand. "
        "Envs: {a2c_ppo_acktr.settings.recipes:ENVS}", choices="a2c_ppo_acktr.settings.recipes:RECIPES",
        refuse="use", at=31)
    # How this start treats the run and where its flags come from, not what the run is.
    resume: bool | str = flag(
        False, "continue a run with its saved flags (only --num-env-steps, output and device "
        "flags may change): RUN is its log directory or checkpoint; bare, the run this command "
        "names. Logs are appended", nargs="?", const=True, metavar="RUN", nonempty=True,
        saved=False, at=32)
    overwrite: bool = flag(False, "start a new run even if --save-dir / --log-dir hold one "
                           "(replacing it)", saved=False, at=33)
    config_file: Optional[str] = flag(
        None, "start a new run with the flags of a JSON file: another run's config.json (or its "
        "log directory) or {\"flag\": value, ...}; flags given on the command line win (default: "
        "none)", name="--config", metavar="PATH", saved=False, group=FILES, at=63)
    # CleanRL's flags (run/tracking.py)
    capture_video: bool = flag(
        False, "record videos of training env 0 (gymnasium's RecordVideo: episodes 0, 1, 8, 27, "
        "..., 1000, 2000, ...) into <log dir of the run>/videos/; needs pip install -e .[video]",
        group=FILES, at=64, may_change=OUTPUT)
    track: bool = flag(
        False, "log the config and every scalar of progress.csv and eval.csv to Weights & Biases; "
        "needs pip install -e .[wandb] and wandb login (or WANDB_MODE=offline)", group=FILES,
        at=65, may_change=OUTPUT)
    wandb_project_name: str = flag("a2c_ppo_acktr", "the W&B project of --track (default: "
                                   "a2c_ppo_acktr)", group=FILES, at=66, may_change=OUTPUT)
    wandb_entity: Optional[str] = flag(None, "the W&B entity (team or user) of --track (default: "
                                       "your default entity)", group=FILES, at=67,
                                       may_change=OUTPUT)
