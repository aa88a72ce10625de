"""`make gpu-prepare`: everything `make gpu-check` needs on the lent GPU machine, which has no
network, in one folder (.gpu/) that travels with the checkout (64 MiB in all):

- llama-cpp-python's sdist (this venv's version), trimmed to what a CUDA build needs
  (app/bench/gpu_sources.py), as .tar.xz;
- cp312 wheels of what the check needs there and that machine lacks: diskcache
  (llama_cpp imports it), llguidance (the engine's grammars) and scikit-build-core (the build
  backend, pinned, so the build does not depend on that machine's version); the bench run
  through app/bench/engine_main.py needs nothing else the machine lacks (its image lists
  numpy, Jinja2, psutil, nvidia-ml-py);
- the stand-in model (app/bench/gpu_model.py), as .xz;
- Python 3.12's C headers (from a 3.12 here, if any), for the sampling kernel where that
  machine's Python has none;
- manifest.json: versions, files, sizes, the model's sha256.

Downloads go through pip (its index and cache, its configuration); the default model comes
from the catalog as `chorus models fetch` gets it."""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from app.bench import gpu_model, gpu_sources
from app.bench.gpu_build import MANIFEST
from app.models import catalog as model_catalog
from app.paths import data_dir, models_dir

FOLDER = ".gpu"
PYTHON_VERSION = "3.12"  # the lent machine's python3 (3.12.3)
# pip's platform tags for a manylinux x86-64 wheel the lent machine's glibc takes, older
# first (preferred where a package has several). llguidance 1.9 ships 2_31 alone: glibc
# 2.31 or newer there (its PyTorch wheels already need 2.28; the check's diag.log says).
PLATFORMS = ("manylinux1_x86_64", "manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_27_x86_64", "manylinux_2_28_x86_64", "manylinux_2_31_x86_64")
BUILD_BACKEND = "scikit-build-core==1.1.2"
# What the check uses of the lent machine's own packages (its image's list: the device
# tool's KINDS.md): the bench's imports and the build backend's needs. The dry run
# installs just these; a test holds the bench's imports to them and the carried wheels.
MACHINE_HAS = ("numpy", "jinja2", "markupsafe", "psutil", "nvidia-ml-py", "typing-extensions", "packaging",
               "pathspec")
CARRY_LIMIT = 64 * 1024 * 1024  # what travels: the checkout and the carried folders together


def installed_version(distribution: str) -> str:
    from importlib.metadata import version

    return version(distribution)


def wheel_specs() -> list[str]:
    """diskcache (llama_cpp imports it) and llguidance (the sampling room's grammars), at this
    venv's versions, and the build backend."""
    return [f"diskcache=={installed_version('diskcache')}", f"llguidance=={installed_version('llguidance')}",
            BUILD_BACKEND]


def pip_download(args: list[str], dest: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "--no-deps", "-d",
           str(dest), *args]
    subprocess.run(cmd, check=True)


def download_wheels(dest: Path) -> list[str]:
    dest.mkdir(parents=True, exist_ok=True)
    platforms = [a for p in PLATFORMS for a in ("--platform", p)]
    pip_download(["--only-binary=:all:", "--python-version", PYTHON_VERSION, "--implementation", "cp", *platforms,
                  *wheel_specs()], dest)
    return sorted(p.name for p in dest.glob("*.whl"))


def python312_candidates() -> list[str]:
    """Interpreters that may be a Python 3.12 here (the dry run looks for the same ones)."""
    found = [sys.executable] if sys.version_info[:2] == (3, 12) else []
    found += [p for p in (shutil.which("python3.12"),) if p]
    found += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")), reverse=True)
    return found + ["/usr/bin/python3.12"]


def prepare_headers(out_dir: Path) -> str | None:
    """Python 3.12's C headers (from any 3.12 here) for the sampling kernel, where the lent
    machine's Python has none; None when no 3.12 with its headers is here."""
    code = "import sys, sysconfig; assert sys.version_info[:2] == (3, 12); print(sysconfig.get_paths()['include'])"
    for python in python312_candidates():
        try:
            done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        include = Path(done.stdout.strip())
        if done.returncode == 0 and (include / "Python.h").is_file():
            archive = out_dir / "python3.12-include.tar.xz"
            with tarfile.open(archive, "w:xz", preset=9) as tar:
                tar.add(include, arcname="python3.12")
            return archive.name
    return None


def prepare_sources(out_dir: Path, scratch: Path) -> dict:
    version = installed_version("llama_cpp_python")
    pip_download(["--no-binary=:all:", f"llama-cpp-python=={version}"], scratch)
    [sdist] = scratch.glob("llama_cpp_python-*.tar.gz")
    archive = out_dir / f"llama_cpp_python-{version}.tar.xz"
    names = gpu_sources.trim_sdist(sdist, archive)
    return {"version": version, "archive": archive.name, "files": len(names),
            "sdist_bytes": sdist.stat().st_size, "bytes": archive.stat().st_size}


def prepare_model(out_dir: Path, scratch: Path, base: Path) -> dict:
    spec = model_catalog.CATALOG[model_catalog.DEFAULT_MODEL]
    mdir = models_dir(base)
    if not model_catalog.is_installed(spec, mdir):
        model_catalog.fetch(spec, mdir, say=lambda m: print(f"gpu-prepare: {m}", file=sys.stderr))
    real = model_catalog.resolve(spec.key, mdir)
    name = f"{real.stem}.layers{gpu_model.REAL_LAYERS}.gguf"
    stand_in = gpu_model.write_stand_in(real, scratch / name)
    archive = out_dir / "model" / f"{name}.xz"
    archive.parent.mkdir(exist_ok=True)
    gpu_model.compress(stand_in.path, archive)
    note = (f"{real.name} with layers {stand_in.real_layers}-{stand_in.n_layer - 1} holding copies of layers "
            f"0-{stand_in.real_layers - 1}: the real model's shapes, types, tokenizer and template (what a step "
            "costs), not its text")
    return {"file": name, "archive": str(archive.relative_to(out_dir)), "sha256": gpu_model.sha256(stand_in.path),
            "bytes": stand_in.path.stat().st_size, "xz_bytes": archive.stat().st_size, "from": real.name,
            "n_layer": stand_in.n_layer, "real_layers": stand_in.real_layers, "note": note}


def prepare(root: Path, base: Path) -> dict[str, object]:
    """root/.gpu made anew; its manifest."""
    out_dir = root / FOLDER
    started = time.monotonic()
    staging = root / (FOLDER + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    with tempfile.TemporaryDirectory(prefix="gpu-prepare-") as tmp:
        scratch = Path(tmp)
        manifest: dict[str, object] = {
            "python": PYTHON_VERSION,
            "llama_cpp_python": prepare_sources(staging, scratch),
            "wheels": [f"wheels/{w}" for w in download_wheels(staging / "wheels")],
            "python_headers": prepare_headers(staging),
            "model": prepare_model(staging, scratch, base),
        }
    manifest["bytes"] = folder_bytes(staging)
    manifest["seconds"] = round(time.monotonic() - started, 1)
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    shutil.rmtree(out_dir, ignore_errors=True)
    staging.rename(out_dir)
    return manifest


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def travelling_bytes(root: Path) -> int:
    """What git sends of the checkout: tracked files and untracked ones it does not ignore."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                         check=True, capture_output=True).stdout
    paths = (root / p for p in out.decode().split("\0") if p)
    return sum(p.stat().st_size for p in paths if p.is_file() and not p.is_symlink())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu-prepare", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="Chorus's data folder, where the default model is")
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parents[2]
    manifest = prepare(root, data_dir(args.data_dir))
    total = folder_bytes(root / FOLDER) + travelling_bytes(root)
    print(json.dumps({"folder": FOLDER, "bytes": manifest["bytes"], "with_checkout_bytes": total,
                      "limit_bytes": CARRY_LIMIT, "seconds": manifest["seconds"]}, indent=2))
    if total > CARRY_LIMIT:
        print(f"gpu-prepare: {FOLDER} and the checkout come to {total / 2**20:.1f} MiB, over the "
              f"{CARRY_LIMIT / 2**20:.0f} MiB that travels", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
