"""The sampling room's fixture: a test run on the C kernel and again on the numpy path."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["kernel", "numpy"])
def sampling_path(request, monkeypatch) -> str:
    """Runs a sampling test on the C kernel and again on the numpy path that takes every
    row where the kernel could not be built (inference/sample/kernel.py)."""
    from inference.sample import kernel

    if request.param == "kernel" and not kernel.AVAILABLE:
        pytest.skip("the C sampling kernel is not built here")
    if request.param == "numpy":
        monkeypatch.setattr(kernel, "AVAILABLE", False)
    return request.param
