"""A run's life around the math: the command line and its checks (``arguments``, ``checks``),
recipes, the settings saved with a run (``config``, ``config_file``), building a run (``build``),
its files (``rundir``, ``checkpoint``, ``history``), signals (``interrupt``), resuming
(``resume``), logging and tracking (``logger``, ``tracking``), playing and exporting a saved
policy (``playback``, ``export``). The entry points (main.py, enjoy.py) use it; nothing in the
core imports it."""
