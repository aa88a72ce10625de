"""Model files for the model library's tests: stand-ins with a GGUF magic and a size, the
catalog's default model, a chat template of the tests' own."""

from __future__ import annotations

from pathlib import Path

from app.models import catalog as model_catalog

SMOL = model_catalog.CATALOG["smollm2-135m"]
TEMPLATE = "{% for m in messages %}<<{{ m['role'] }}>>{{ m['content'] }}{% endfor %}"


def fake_gguf(path: Path, size: int) -> Path:
    """A file of `size` bytes that starts as a GGUF file does (its folders made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF" + b"\0" * (size - 4))
    return path
