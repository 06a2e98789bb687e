"""A run's life around the math: opening it for main.py's loop (``start``) and building what it is
made of (``build``), its steps after each update (``life``), its files and lock (``rundir``,
``checkpoint``), exact resume (``resume``), signals (``interrupt``) and the process around it
(``process``), what it reports (``logger``, ``tracking``). Its settings come from ``settings/``;
nothing in the core imports it."""
