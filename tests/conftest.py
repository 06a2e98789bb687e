"""Shared fixtures. The package is installed (``pip install -e .``); ``main``, ``enjoy`` and
``gail_experts`` are imported from the repository root, pytest's rootdir."""
import pytest
import torch


@pytest.fixture
def one_thread():
    """One intra-op thread, as main.py runs small MLPs (more only spin on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
