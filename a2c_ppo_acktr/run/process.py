"""``python main.py``'s process around its run: what it sets up before its imports (seconds, and
most of its memory) and after them.

``main.py`` itself first holds SIGINT / SIGTERM / SIGHUP, turns the garbage collector off and
makes a memory limit below what the imports need (``ulimit -v``) one line, before importing
anything of the package: importing any of its modules imports gymnasium, and the memory may run
out there. Then ``importing()``: a signal ends the process in one line
(``interrupt.exit_on_signals``). Once the imports are done, ``imported()``: their objects
(torch's, gymnasium's) live as long as the process, so they are frozen out of the cyclic
collector's sight (no collection walks them: not while importing, not during the run, not at
exit; docs/benchmarks.md, "Measured code choices"); a second Ctrl-C ends the process within 10
s, stuck envs or not; and a reader of stdout or stderr that goes away never ends the run with a
traceback.
"""
import gc


def importing() -> None:
    """Before the slow imports, signals held by the caller: from here a signal ends the process
    in one line, nothing being on disk yet."""
    from a2c_ppo_acktr.run.interrupt import exit_on_signals  # (imports torch)
    exit_on_signals()


def imported() -> None:
    """After the imports: freeze their objects and turn the collector back on; a second Ctrl-C's
    hard exit; stdout and stderr that outlive their readers."""
    gc.freeze()
    gc.enable()
    from a2c_ppo_acktr.run import interrupt
    interrupt.HARD_EXIT_S = 8.0  # a second Ctrl-C ends the process within 10 s
    interrupt.outlive_readers("stdout closed: the run goes on, saving as before; its reports are "
                              "in progress.csv")
