"""What runs reached: their episodes read back from the monitor files (``episodes``), scored by a
named metric (``metrics``), put on one scale across envs (``reference_scores``) and aggregated over
seeds with confidence intervals (``stats``); a run's policy history as a curve (``history``). The
scripts (plot, compare, benchmark, tune) use it; a run never does."""
