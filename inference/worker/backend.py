"""What the installed llama.cpp build is and can do: versions, CPU features, GPU offload.

Cheap queries that need no model; the About dialog and the model dialog show them.
"""

from __future__ import annotations

import llama_cpp as ll


def gpu_offload_supported() -> bool:
    """True when this build has a GPU backend (CUDA, Metal, Vulkan, ...) with a device."""
    return bool(ll.llama_supports_gpu_offload())


def llama_cpp_python_version() -> str:
    return str(getattr(ll, "__version__", "unknown"))


def llama_cpp_version() -> str:
    """libllama's own version string; older bindings lack the call."""
    version = getattr(ll, "llama_version", None)
    if version is None:
        return "unknown"
    try:
        return version().decode("utf-8", "replace")
    except (AttributeError, OSError):  # the symbol is missing from this libllama
        return "unknown"


def system_info() -> str:
    """llama.cpp's one-line summary of the backends and CPU features it was built with."""
    return ll.llama_print_system_info().decode("utf-8", "replace").strip(" |")
