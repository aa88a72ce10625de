"""`chorus bench-ui --tabs N`: the real window (offscreen) with N tabs streaming at once on
the engine process, while a 5 ms timer probes how long the GUI event loop stalls. With
--compare, 4 of them are the panes of a compare view on screen (all drawing each frame).

--panel opens the performance panel and --serve switches the HTTP server on and off while
the tabs stream, as a user would (View menu, File menu): each of those is timed on the GUI
thread (the call itself, the time until it has taken effect, and the longest stall
meanwhile)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

PROBE_MS = 5


def run_ui_bench(args: argparse.Namespace, model: Path) -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    from app.chats.store import open_chat_store
    from app.engines.protocol import EngineStatus
    from app.perf.heap import freeze_startup_heap
    from inference import LoadSettings, SamplingParams
    from ui.controllers.root import Controllers
    from ui.services.gui_thread_gc import GuiThreadCollector
    from ui.theme import apply_theme
    from ui.widgets.window.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    collector = GuiThreadCollector(app)  # as ui/app_main.py does
    apply_theme(app, "light")
    import qasync

    qasync.QEventLoop(app, already_running=True)  # the controller's asyncio tasks run on Qt
    with tempfile.TemporaryDirectory(prefix="chorus-bench-ui-") as tmp:
        db, repo = open_chat_store(Path(tmp))
        window = MainWindow()
        sampling = SamplingParams(temperature=0.7, seed=1, max_tokens=args.max_tokens, ignore_eos=True)
        settings = LoadSettings(model_path=model, n_ctx=max(4096, args.tabs * (args.max_tokens + 96)),
                                n_seq_max=args.tabs)
        controllers = Controllers(window, repo, settings, sampling=sampling)
        window.show()
        controllers.start()
        freeze_startup_heap()  # as ui/app_main.py does once it has started
        loop = QEventLoop()
        _run_until(loop, lambda: controllers.engines.engine.state.status is EngineStatus.READY, 120)
        panes = min(4, args.tabs) if args.compare else 0
        tabs = []
        for i in range(args.tabs - panes):
            controllers.conversations.new_chat()
            _run_until(loop, lambda n=i + 1: window.tabs.count() == n, 30)
            tabs.append(window.tabs.widget(i))
        view = None
        if panes:
            controllers.compare.new_comparison(panes=panes)
            _run_until(loop, lambda: bool(window.open_comparisons())
                       and len(window.open_comparisons()[0].panes()) == panes, 30)
            view = window.open_comparisons()[0]
            window.tabs.setCurrentWidget(view)
        gaps: list[float] = []
        probed: list[float] = []  # when each gap ended
        # The GUI thread's own CPU time in each gap: a long gap with little of it was the
        # machine's other work (a shared, loaded machine), not work on the GUI thread.
        busy: list[float] = []
        last = [time.perf_counter(), time.thread_time()]

        def probe() -> None:
            now, cpu = time.perf_counter(), time.thread_time()
            gaps.append(now - last[0])
            busy.append(cpu - last[1])
            probed.append(now)
            last[0], last[1] = now, cpu

        timer = QTimer()
        timer.setInterval(PROBE_MS)
        timer.timeout.connect(probe)
        started = time.perf_counter()
        timer.start()
        for i, tab in enumerate(tabs):
            tab.composer.setPlainText(f"Write a short story about a lighthouse keeper, part {i + 1}.")
            tab.send_button.click()
        if view is not None:
            view.composer.setPlainText("Write a short story about a lighthouse keeper.")
            view.send_button.click()
        writers = tabs + (view.panes() if view is not None else [])
        actions: dict[str, float] = {}
        if args.panel or args.serve:
            # Once every tab writes: the moment a user opens the panel or the server.
            _run_until(loop, lambda: all(t.model.rowCount() >= 2 and t.model.view(t.model.rowCount() - 1).text
                                         for t in writers), 300)
            timed = _Timed(loop, gaps, busy, probed, actions)
            if args.panel:
                panel = window.perf_panel
                timed("panel_open", panel.show, lambda: panel.isVisible() and panel.charts_ready())
            if args.serve:
                timed("server_start", lambda: window.server_start_requested.emit("127.0.0.1", 0, "", ()),
                      lambda: window.status.server_label.text().startswith("API: "))
                timed("server_stop", window.server_stop_requested.emit,
                      lambda: not controllers.server.server.running)
        done = lambda: all(  # noqa: E731
            t.model.rowCount() >= 2 and t.model.view(t.model.rowCount() - 1).status == "complete" for t in writers
        )
        _run_until(loop, done, 1800)
        wall = time.perf_counter() - started
        timer.stop()
        metrics = controllers.engines.metrics
        controllers.shutdown()
        db.close()
        window.close()
    collector.stop()
    stalls = sorted(max(0.0, g - PROBE_MS / 1000) * 1000 for g in gaps[1:])
    worked = sorted(b * 1000 for b in busy[1:])
    result = {
        "tabs": args.tabs,
        "panel": args.panel,
        "compare_panes": panes,
        "max_tokens": args.max_tokens,
        "probes": len(stalls),
        "stall_p50_ms": statistics.median(stalls),
        "stall_p99_ms": stalls[int(0.99 * (len(stalls) - 1))],
        "stall_max_ms": stalls[-1],
        "gui_busy_p99_ms": worked[int(0.99 * (len(worked) - 1))],
        "gui_busy_max_ms": worked[-1],
        "wall_s": wall,
        "engine_tok_s": args.tabs * args.max_tokens / wall,
        "max_batch_seqs": metrics.max_step_seqs if metrics else None,
        **actions,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:<16}{value:>12.2f}" if isinstance(value, float) else f"{key:<16}{value!s:>12}")
    return 0


class _Timed:
    """Runs one user action on the GUI thread and records, in ms: how long the call itself
    took, how long until it had taken effect, and the longest event-loop stall from the call
    until 0.2 s after that (the paints that follow), with the GUI thread's CPU time in the
    busiest gap."""

    SETTLE_S = 0.2

    def __init__(self, loop, gaps: list[float], busy: list[float], probed: list[float],
                 out: dict[str, float]) -> None:
        self.loop, self.gaps, self.busy, self.probed, self.out = loop, gaps, busy, probed, out

    def __call__(self, name: str, action, effect) -> None:
        start = time.perf_counter()
        action()
        call = time.perf_counter() - start
        _run_until(self.loop, effect, 60)
        ready = time.perf_counter() - start
        _run_until(self.loop, lambda: time.perf_counter() - start > ready + self.SETTLE_S, 10)
        end = time.perf_counter()
        # Every gap that overlaps [start, end], the one the action sat in included.
        during = [(g, b) for g, b, t in zip(self.gaps, self.busy, self.probed) if t > start and t - g < end]
        self.out[f"{name}_call_ms"] = call * 1000
        self.out[f"{name}_ready_ms"] = ready * 1000
        self.out[f"{name}_max_stall_ms"] = max(0.0, max((g for g, _b in during), default=0.0) * 1000 - PROBE_MS)
        self.out[f"{name}_max_busy_ms"] = max((b for _g, b in during), default=0.0) * 1000


def _run_until(loop, condition, timeout_s: float) -> None:
    from PySide6.QtCore import QTimer

    deadline = time.monotonic() + timeout_s
    check = QTimer()
    check.setInterval(20)
    def tick() -> None:
        if condition() or time.monotonic() > deadline:
            loop.quit()

    check.timeout.connect(tick)
    check.start()
    if not condition():
        loop.exec()
    check.stop()
    if not condition():
        raise TimeoutError(f"UI benchmark step did not finish within {timeout_s:.0f} s")
