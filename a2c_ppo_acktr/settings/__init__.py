"""A run's settings: the command line (``arguments``) and what it resolves to in layers (``resolve``:
main.py's defaults, a ``--recipe`` (``recipes``), a ``--config`` file (``config_file``) or a resumed
run's saved flags, the command line), each value checked as it is read (``checks``), into the frozen
``config.Config``; the flags as a table (``flag_table``). The entry points use it."""
