"""Make the repository root importable (``a2c_ppo_acktr``, ``main``, ``evaluation``) without an install."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
