"""llama.cpp's process-wide backend: its one-time start, its log, and what the installed
build is and can do (versions, CPU features, GPU offload, CPU weight repacking).

Cheap queries that need no model; the About dialog and the model dialog show them.
"""

from __future__ import annotations

import ctypes
import logging
import os

import llama_cpp as ll

from inference.outputs import BackendInfo

log = logging.getLogger(__name__)

GGML_TYPE_Q8_0 = 8  # ggml.h's enum ggml_type, for the reproducible mode's KV cache
GGML_TYPES = {"f16": 1, "q4_0": 2, "q8_0": GGML_TYPE_Q8_0}  # the KV cache types LoadSettings knows


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


def backend_info() -> BackendInfo:
    return BackendInfo(llama_cpp_version(), llama_cpp_python_version(), system_info(), gpu_offload_supported())


# ----- the backend's start and its log ---------------------------------------------------

_backend_ready = False
_log_callback = None
# The last error llama.cpp logged: the real reason behind a NULL from a load call.
_last_error = ""


def init_backend() -> None:
    global _backend_ready, _log_callback
    if _backend_ready:
        return

    @ll.llama_log_callback
    def forward(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        # llama.cpp is chatty at load; keep its warnings and errors, drop the rest. Logged
        # at INFO (shown with -v): a failed load's reason is in its ModelLoadError already,
        # and 2-4 lines of llama.cpp before that one line only bury it.
        global _last_error
        if level in (3, 4):  # GGML_LOG_LEVEL_WARN, GGML_LOG_LEVEL_ERROR
            line = text.decode("utf-8", "replace").rstrip()
            log.info("llama.cpp: %s", line)
            if level == 4 and "failed to load model" not in line:
                _last_error = line.split(": ", 1)[-1]

    _log_callback = forward
    ll.llama_log_set(forward, ctypes.c_void_p())
    ll.llama_backend_init()
    _backend_ready = True


def route_mtmd_logs() -> None:
    """libmtmd (the vision projector) logs through the same callback as llama.cpp."""
    import llama_cpp.mtmd_cpp as mtmd

    init_backend()
    mtmd.mtmd_log_set(_log_callback, ctypes.c_void_p())
    mtmd.mtmd_helper_log_set(_log_callback, ctypes.c_void_p())


def last_error() -> str:
    """The last error line llama.cpp logged since clear_last_error()."""
    return _last_error


def clear_last_error() -> None:
    global _last_error
    _last_error = ""


# ----- CPU weight repacking ----------------------------------------------------------------


def cpu_repack_enabled() -> bool:
    """Whether llama.cpp may use its extra CPU weight buffers (AMX tiles, repacked layouts).

    Virtual machines have been seen to list AMX in /proc/cpuinfo yet trap its tile
    instructions: the process dies with SIGILL at its first decode (seen on this project's
    build machines). Where the CPU lists AMX they are off unless CHORUS_CPU_REPACK=1; on a
    machine whose AMX works that costs some CPU speed. CHORUS_CPU_REPACK=0 turns them off
    anywhere."""
    choice = os.environ.get("CHORUS_CPU_REPACK")
    if choice is not None:
        return choice.strip() not in ("", "0", "false", "no")
    if os.environ.get("CHORUS_NO_CPU_REPACK"):
        return False
    return not _cpu_lists_amx()


def _cpu_lists_amx() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            return any(line.startswith("flags") and "amx_tile" in line for line in info)
    except OSError:  # not Linux: no such VM seen
        return False
