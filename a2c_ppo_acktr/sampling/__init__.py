"""The sampling modes besides the in-process ``rollout.Collector``, each a ``Collector`` around
the same ``rollout.collect_rollout``: a thread that samples while the learner updates
(``async_thread``), Ray actors (``ray_learner``, ``ray_actors``) and DDP learner ranks under
torchrun (``ddp``)."""
