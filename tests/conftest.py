"""Shared fixtures. The package is installed (``pip install -e .``); ``main``, ``enjoy`` and
``gail_experts`` are imported from the repository root, pytest's rootdir."""
import contextlib
from pathlib import Path

import pytest
import torch

RESEARCH_MARK = "pytest.mark.research"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """``-m research`` imports only the test modules that hold a research test (their text
    names the mark): the others' imports (Ray, the scripts) would take most of its seconds."""
    if (config.option.markexpr == "research" and collection_path.suffix == ".py"
            and collection_path.name.startswith("test_")):
        return RESEARCH_MARK not in collection_path.read_text()
    return None


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
