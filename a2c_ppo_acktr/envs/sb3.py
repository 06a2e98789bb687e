"""SB3's Monitor, ResultsWriter and Atari wrappers, imported without OpenCV.

Any import from ``stable_baselines3`` runs its ``__init__``, which imports every algorithm and,
through ``atari_wrappers``, OpenCV (``cv2``), whose native library can crash the process as it
loads under a tight ``ulimit -v`` (SIGSEGV, no line; docs/details.md's fault table). Only the classic
Atari stack resizes frames with it, so it is imported there (``opencv``), not by every run.
"""
import sys
from types import ModuleType

# None in sys.modules makes ``import cv2`` raise ImportError, which atari_wrappers catches (cv2 is
# optional to SB3); the entry is taken out again so that an env of the user's can import OpenCV.
_held = "cv2" not in sys.modules
if _held:
    sys.modules["cv2"] = None  # type: ignore[assignment]
try:
    from stable_baselines3.common import atari_wrappers
    from stable_baselines3.common.atari_wrappers import (
        ClipRewardEnv,
        EpisodicLifeEnv,
        FireResetEnv,
        MaxAndSkipEnv,
        NoopResetEnv,
        WarpFrame,
    )
    from stable_baselines3.common.monitor import Monitor, ResultsWriter
finally:
    if _held and "cv2" in sys.modules and sys.modules["cv2"] is None:
        del sys.modules["cv2"]

__all__ = ["ClipRewardEnv", "EpisodicLifeEnv", "FireResetEnv", "MaxAndSkipEnv", "Monitor",
           "NoopResetEnv", "ResultsWriter", "WarpFrame", "atari_wrappers", "opencv"]


def opencv() -> ModuleType:
    """OpenCV, imported on first use and given to SB3's Atari wrappers (``WarpFrame``)."""
    if atari_wrappers.cv2 is None:
        import cv2

        cv2.ocl.setUseOpenCL(False)  # as SB3's import does: no OpenCL context per process
        atari_wrappers.cv2 = cv2
    return atari_wrappers.cv2
