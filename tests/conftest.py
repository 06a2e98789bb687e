"""Shared fixtures. The package is installed (``pip install -e .``); ``main``, ``enjoy`` and
``gail_experts`` are imported from the repository root, pytest's rootdir."""
import contextlib

import pytest
import torch


@contextlib.contextmanager
def intra_op_threads(n: int):
    threads = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture
def one_thread():
    """One intra-op thread, as main.py runs small MLPs (more only spin on a busy machine)."""
    with intra_op_threads(1):
        yield


@pytest.fixture
def two_threads():
    """Two intra-op threads, as main.py runs CNNs on a 2-CPU machine."""
    with intra_op_threads(2):
        yield
