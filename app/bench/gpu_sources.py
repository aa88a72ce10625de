"""The part of llama-cpp-python's sdist that a CUDA (or CPU) build needs, for a machine with
no network: the Python package, the CMake project, and of the vendored llama.cpp the library,
its common code, the mtmd library it installs, ggml with its CPU and CUDA backends. Left out:
the other backends, llama.cpp's tools, tests, examples, docs, model vocabularies and media
(the sdist: 217 MB unpacked; what is kept: 24 MB, 2.5 MB as .tar.xz).

What is kept is decided by path alone, so the same sdist always gives the same archive; the
archive unpacks to one folder, as the sdist does, and pip builds it like the sdist."""

from __future__ import annotations

import tarfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

LLAMA = "vendor/llama.cpp/"
# The sdist's own files and folders (under its top folder).
ROOT_FILES = frozenset({"CMakeLists.txt", "pyproject.toml", "README.md", "LICENSE.md", "PKG-INFO"})
ROOT_DIRS = ("llama_cpp/",)
# Inside vendor/llama.cpp: what its CMake project reads when llama-cpp-python adds it as a
# subproject (no tools, tests or examples) with LLAMA_BUILD_COMMON, and tools/mtmd, which
# llama-cpp-python adds itself.
LLAMA_FILES = frozenset({"CMakeLists.txt", "LICENSE", "ggml/CMakeLists.txt"})
LLAMA_DIRS = ("cmake/", "include/", "src/", "common/", "vendor/", "licenses/", "ggml/cmake/", "ggml/include/",
              "ggml/src/ggml-cpu/", "ggml/src/ggml-cuda/", "tools/mtmd/")
# ggml/src's own files; each backend is a folder there, and only the two above are built.
GGML_SRC = "ggml/src/"
# In the kept folders, what no build reads: mtmd's test media and Python conversion scripts.
LLAMA_DROPPED = ("tools/mtmd/tests/", "tools/mtmd/test-", "tools/mtmd/tests.sh", "tools/mtmd/legacy-models/",
                 "tools/mtmd/requirements.txt")


def kept(relative: str) -> bool:
    """Whether a file of the sdist (its path under the sdist's top folder) is needed to build."""
    if relative in ROOT_FILES or relative.startswith(ROOT_DIRS):
        return True
    if not relative.startswith(LLAMA):
        return False
    inner = relative[len(LLAMA):]
    if inner.startswith(LLAMA_DROPPED):
        return False
    if inner in LLAMA_FILES or inner.startswith(LLAMA_DIRS):
        return True
    return inner.startswith(GGML_SRC) and "/" not in inner[len(GGML_SRC):]


def trim_sdist(sdist: Path, out: Path) -> list[str]:
    """Write out (.tar.xz) with the sdist's needed files under its own top folder; returns
    their paths (relative to that folder)."""
    names: list[str] = []
    with tarfile.open(sdist) as src, tarfile.open(out, "w:xz", preset=9) as dst:
        for member in _members(src):
            top, _, relative = member.name.partition("/")
            if member.isdir() or not (member.isfile() or member.issym()) or not kept(relative):
                continue
            names.append(relative)
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    return names


def _members(src: tarfile.TarFile) -> Iterable[tarfile.TarInfo]:
    """The archive's members in path order (the same archive whatever order the sdist had)."""
    return sorted(src.getmembers(), key=lambda m: m.name)


def top_folder(archive: Path) -> str:
    """The one folder an sdist (or trimmed archive) unpacks to."""
    with tarfile.open(archive) as tar:
        tops = {PurePosixPath(m.name).parts[0] for m in tar.getmembers()}
    if len(tops) != 1:
        raise ValueError(f"{archive.name} unpacks to {len(tops)} folders, not one")
    return tops.pop()
