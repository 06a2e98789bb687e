"""Make the repository root importable (``a2c_ppo_acktr``, ``main``, ``evaluation``) without an install."""
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


@pytest.fixture
def one_thread():
    """One intra-op thread, as main.py runs small MLPs (more only spin on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
