"""The Discover tab's questions to the Hub, each on a worker thread: a search, a repository's
files, and each file's fit for the chosen context (HubClient.estimate + fit.assess against
this machine's free memory), shown as each arrives; once all are in, the best fitting file
is selected unless the user chose one. An answer to a question since replaced (another
search, repository or context) is dropped by its sequence number."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from ui.services.daemon_pool import DaemonPool
from ui.services.worker_hops import WorkerHops
from ui.widgets.models.models_window import ModelsWindow

if TYPE_CHECKING:
    from app.models.fit import FitVerdict
    from app.models.hub import HubClient, HubFile, HubRepo

SEARCH_LIMIT = 30
ESTIMATE_WORKERS = 3  # header reads by HTTP range, a few at a time


class DiscoverController:
    def __init__(self, window: ModelsWindow, hops: WorkerHops, client: Callable[[], HubClient]) -> None:
        self.window = window
        self.hops = hops
        self.client = client
        self.hub_calls = DaemonPool(2, "hub")  # searches and file lists
        self.estimates = DaemonPool(ESTIMATE_WORKERS, "hub-estimate")
        self.pending: set[str] = set()  # files whose verdict has not come yet
        self.verdicts: dict[str, FitVerdict] = {}
        self._futures: list[Future] = []
        self._search_seq = self._files_seq = self._estimate_seq = 0
        window.results.search_requested.connect(self.search)
        window.retry_requested.connect(lambda: self.search(window.results.query()))
        window.results.repo_selected.connect(self.select_repo)
        window.files.context_changed.connect(lambda _n_ctx: self.estimate_all())

    def search(self, query: str) -> Future:
        self._search_seq += 1
        seq, win = self._search_seq, self.window
        win.set_discover_message(f"Searching the Hub for “{query}”…" if query else "Asking the Hub…", error=False,
                                 busy=True)
        return self.hops.run(self.hub_calls, lambda: self.client().search(query, SEARCH_LIMIT),
                             lambda repos: self._found(seq, query, repos),
                             lambda message: seq == self._search_seq and win.set_discover_message(message, retry=True))

    def _found(self, seq: int, query: str, repos: list[HubRepo]) -> None:
        if seq != self._search_seq:
            return  # a later search is under way
        self.window.results.set_results(repos)
        self.window.set_discover_message("" if repos else f"No GGUF models found for “{query}”.", error=False)

    def select_repo(self, repo_id: str) -> Future:
        self._files_seq += 1
        seq, files = self._files_seq, self.window.files
        self._cancel_estimates()
        files.clear_files(f"Listing the files of {repo_id}…")
        return self.hops.run(self.hub_calls, lambda: self.client().files(repo_id),
                             lambda found: self._listed(seq, repo_id, found),
                             lambda message: seq == self._files_seq and files.clear_files(message))

    def _listed(self, seq: int, repo_id: str, found: list[HubFile]) -> None:
        if seq != self._files_seq:
            return
        self.window.files.set_files(repo_id, found)
        self.estimate_all()

    def estimate_all(self) -> None:
        files = self.window.files
        self._cancel_estimates()
        self._estimate_seq += 1
        seq, n_ctx = self._estimate_seq, files.context.value()
        listed = list(files.files.values())
        self.pending, self.verdicts = {f.name for f in listed}, {}
        files.set_estimating()
        memory = self.estimates.submit(_machine_memory)  # once per round; first in the queue
        for f in listed:
            self._futures.append(self.hops.run(
                self.estimates, lambda f=f: self._assess(f, n_ctx, memory),
                lambda verdict, name=f.name: self._verdict(seq, name, verdict),
                lambda message, name=f.name: self._verdict(seq, name, message)))

    def _assess(self, file: HubFile, n_ctx: int, memory: Future) -> FitVerdict:  # on a worker thread
        from app.models import fit

        ram, gpu_free = memory.result()
        return fit.assess_file(file, self.client().estimate(file, n_ctx), ram, gpu_free)  # projector counted

    def _verdict(self, seq: int, name: str, verdict: FitVerdict | str) -> None:
        """A file's badge (a FitVerdict, or why there is none); the last one selects the best."""
        if seq != self._estimate_seq:
            return
        files = self.window.files
        files.set_verdict(name, verdict)
        if not isinstance(verdict, str):
            self.verdicts[name] = verdict
        self.pending.discard(name)
        if not self.pending and files.selected_file() is None:
            from app.models import fit

            best = fit.best_file(list(files.files.values()), self.verdicts)
            if best is not None:
                files.select(best.name)

    def _cancel_estimates(self) -> None:
        for future in self._futures:
            future.cancel()
        self._futures = []

    def shutdown(self) -> None:
        self._cancel_estimates()
        self.hub_calls.shutdown()
        self.estimates.shutdown()


def _machine_memory() -> tuple[int, int | None]:
    from app.models import fit

    return fit.machine_memory()
