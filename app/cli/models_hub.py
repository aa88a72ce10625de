"""`chorus models search QUERY` and `chorus models pull REPO[:FILE_OR_QUANT]`: GGUF models
from the Hugging Face Hub (HF_ENDPOINT, HF_TOKEN / `hf auth login`, HF_HUB_OFFLINE apply).

pull without a file or quant picks the largest file that fits this machine (fit.py), from
each file's memory estimate for --ctx tokens, and says which and why. A vision model's
projector (hub_files.choose_projector) is pulled with it, said, and recorded as the model's
library default, so that it loads seeing images. A progress bar on a
terminal (tqdm), nothing but the result when the output is not one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.command import add_command
from app.models.fit import Fit, FitVerdict, assess_file, best_file, gb, machine_memory
from app.models.hub_files import projector_reason
from app.models.hub_types import DownloadProgress, HubError, HubFile
from app.paths import models_dir

if TYPE_CHECKING:
    from app.models.hub import HubClient

DEFAULT_CTX = 4096


def register_hub(msub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    search = add_command(msub, "search", run_search, help="search the Hugging Face Hub for GGUF models")
    search.add_argument("query")
    search.add_argument("--limit", type=int, default=20, help="at most this many repositories (default 20)")
    pull = add_command(msub, "pull", run_pull,
                       help="download a GGUF model from the Hub: REPO (the quant that fits best) or REPO:FILE_OR_QUANT")
    pull.add_argument("spec", metavar="REPO[:FILE_OR_QUANT]")
    pull.add_argument("--ctx", type=int, default=DEFAULT_CTX,
                      help=f"context size the fit is judged for (default {DEFAULT_CTX})")


def _client() -> HubClient:
    # huggingface_hub takes half a second to import: only the Hub commands pay for it.
    from app.models.hub import HubClient

    return HubClient()


def run_search(args: argparse.Namespace, base: Path) -> int:
    try:
        repos = _client().search(args.query, limit=args.limit)
    except HubError as exc:
        return _fail(exc)
    if not repos:
        print(f"no GGUF repositories match {args.query!r}")
        return 0
    for r in repos:
        details = ", ".join(x for x in (r.architecture, f"ctx {r.context_length}" if r.context_length else None,
                                        "gated" if r.gated else None, "sees images" if r.sees_images else None)
                            if x)
        print(f"{r.repo_id:<50} {r.downloads:>9} downloads {r.likes:>6} likes  {details}")
    return 0


def run_pull(args: argparse.Namespace, base: Path) -> int:
    repo_id, _, wanted = args.spec.partition(":")
    try:
        client = _client()
        files = client.files(repo_id)
        if not files:
            return _fail(f"{repo_id} has no GGUF model files")
        chosen = _pick(client, files, wanted, args.ctx)
        if chosen is None:
            return 1
        if chosen.projector is not None:
            print(f"with vision projector {Path(chosen.projector.name).name} ({projector_reason(chosen)}, "
                  f"{gb(chosen.projector.size_bytes)}): the model sees images", file=sys.stderr)
        path = _download(client, chosen, models_dir(base))
    except HubError as exc:
        return _fail(exc)
    except KeyboardInterrupt:
        _fail(f"interrupted; `chorus models pull {args.spec}` resumes the download")
        return 130
    from app.models.hub_download import installed_path  # huggingface_hub: loaded by _client already

    projector = installed_path(chosen.projector, models_dir(base)) if chosen.projector is not None else None
    _record(base, path, chosen, projector)
    print(path)
    return 0


def _pick(client: HubClient, files: list[HubFile], wanted: str, n_ctx: int) -> HubFile | None:
    if wanted:
        match = _named(files, wanted)
        if match is None:
            names = ", ".join(f.quant or f.name for f in files)
            _fail(f"no file or quant {wanted!r} in {files[0].repo_id}; it has: {names}")
        return match
    verdicts = _verdicts(client, files, n_ctx)
    chosen = best_file(files, verdicts)
    if chosen is None:
        smallest = files[0]
        _fail(f"no file of {smallest.repo_id} fits this machine "
              f"(smallest: {smallest.name}, {verdicts[smallest.name].reason}); name one to pull it anyway")
        return None
    verdict = verdicts[chosen.name]
    why = "the largest that fits" if verdict.fit is Fit.FITS else "the smallest, and it is tight"
    print(f"chose {chosen.name} ({chosen.quant or 'unknown quant'}, {gb(chosen.size_bytes)}): "
          f"{verdict.fit.value}, {verdict.reason}; {why} for {n_ctx} tokens of context", file=sys.stderr)
    return chosen


def _named(files: list[HubFile], wanted: str) -> HubFile | None:
    lowered = wanted.lower()
    for f in files:
        if lowered in (f.name.lower(), Path(f.name).name.lower()):
            return f
    by_quant = [f for f in files if f.quant and f.quant.lower() == lowered]
    return by_quant[0] if by_quant else None


def _verdicts(client: HubClient, files: list[HubFile], n_ctx: int) -> dict[str, FitVerdict]:
    ram, gpu_free = machine_memory()
    verdicts = {}
    for f in files:
        verdicts[f.name] = assess_file(f, client.estimate(f, n_ctx), ram, gpu_free)  # its projector counted
    return verdicts


def _download(client: HubClient, file: HubFile, mdir: Path) -> Path:
    show, close = _progress_bar(file)
    try:
        return client.download(file, mdir, progress=show)
    finally:
        close()


def _progress_bar(file: HubFile) -> tuple[Callable[[DownloadProgress], None] | None, Callable[[], None]]:
    if not sys.stderr.isatty():
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(total=file.download_bytes, unit="B", unit_scale=True, unit_divisor=1024, desc=Path(file.name).name,
               file=sys.stderr)

    def show(p: DownloadProgress) -> None:
        bar.update(p.done_bytes - bar.n)

    return show, bar.close


def _record(base: Path, path: Path, file: HubFile, projector: Path | None) -> None:
    """Into the model library (app/models/library.py), where this build has it."""
    try:
        from app.models.library import LibraryError, open_library
    except ImportError:  # a build without the library: the file is installed all the same
        return
    from storage.errors import StorageError

    try:
        with open_library(base) as library:
            library.record_download(path, file.repo_id, file.parts[0].sha256, projector)
    except (LibraryError, StorageError) as exc:
        print(f"chorus: {path.name} is installed, but the library did not record it: {exc}", file=sys.stderr)


def _fail(why: object) -> int:
    print(f"chorus: {why}", file=sys.stderr)
    return 1
