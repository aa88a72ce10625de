"""What the Hugging Face Hub side of Chorus hands out: repositories, GGUF files, progress,
and the errors, each a one-line message for a status bar or a terminal.

Kept apart from the client (app/models/hub.py) so that the GUI and fit.py can use the types
without the HTTP code; app/models/hub.py re-exports all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


class HubError(RuntimeError):
    """Any failure talking to the Hub; str() is one line, fit to show as it is."""


class HubOffline(HubError):
    """HF_HUB_OFFLINE is set: no request was made."""


class HubUnreachable(HubError):
    """DNS failure, refused connection, timeout, or a 5xx answer."""


class GatedRepo(HubError):
    """401/403 on a gated or private repository: the message says how to give a token."""


class RepoNotFound(HubError):
    """No such repository or file on this Hub."""


class IntegrityError(HubError):
    """A downloaded file does not match the Hub's LFS sha256; nothing was installed."""


class DownloadCancelled(HubError):
    """The download was cancelled; the resumable part stays in <models_dir>/.partial/."""


@dataclass(frozen=True)
class HubRepo:
    repo_id: str
    downloads: int
    likes: int
    gated: bool
    last_modified: datetime | None
    architecture: str | None  # from the Hub's GGUF summary ("gguf" expand), when given
    context_length: int | None
    sees_images: bool = False  # it has vision projectors (mmproj files): a vision model


@dataclass(frozen=True)
class HubFilePart:
    filename: str  # path inside the repository
    size_bytes: int
    sha256: str | None  # the LFS oid; None for a file not stored in LFS


@dataclass(frozen=True)
class HubFile:
    repo_id: str
    name: str  # the first part's filename, or the file's
    quant: str | None  # "Q4_K_M", "IQ4_XS", "F16"... parsed from the file name
    parts: tuple[HubFilePart, ...]
    revision: str | None = None  # the commit the listing came from: downloads pin it
    # A vision model's projector (an mmproj GGUF of the same repository, chosen by
    # hub_files.choose_projector): downloaded beside the model, which then sees images.
    projector: HubFile | None = None

    @property
    def size_bytes(self) -> int:
        return sum(p.size_bytes for p in self.parts)

    @property
    def download_bytes(self) -> int:
        """The model's parts and its projector: what a download fetches."""
        return self.size_bytes + (self.projector.size_bytes if self.projector is not None else 0)


@dataclass(frozen=True)
class DownloadProgress:
    done_bytes: int  # over all parts of the file
    total_bytes: int
    filename: str  # the part being downloaded
