"""The compare view, offscreen, on real models: panes on one model share a batch, panes on
two models run in two engines, blind mode, differences, follow-ups and reopening."""

from __future__ import annotations

import re

import pytest
from PySide6.QtCore import QPoint

from app.compare.word_diff import Op, diff_words
from app.engines.sources import ModelSource
from inference import SamplingParams
from storage import MessageStatus
from tests.support.gui_app import SCREENSHOTS, WAIT_MS, App
from tests.support.pixels import bubble_colour

pytest.importorskip("PySide6")
pytestmark = pytest.mark.model  # every test here drives the app on the real model(s)


def open_comparison(app, **kwargs):
    before = len(app.window.open_comparisons())
    app.controllers.compare.new_comparison(**kwargs)
    app.qtbot.waitUntil(lambda: len(app.window.open_comparisons()) == before + 1, timeout=10_000)
    view = app.window.open_comparisons()[-1]
    app.qtbot.waitUntil(lambda: len(view.panes()) >= kwargs.get("panes", len(kwargs.get("sources") or [1, 1])),
                        timeout=10_000)
    return view


def send(view, text: str) -> None:
    view.composer.setPlainText(text)
    view.send_button.click()


def last(pane):
    return pane.model.view(pane.model.rowCount() - 1)


def wait_done(app, view, timeout: int = WAIT_MS) -> None:
    app.qtbot.waitUntil(
        lambda: all(p.model.rowCount() >= 2 and last(p).role == "assistant"
                    and last(p).status in ("complete", "stopped", "interrupted", "error") for p in view.panes())
        and not view.busy(),
        timeout=timeout,
    )



def test_two_panes_on_one_model_stream_in_one_batch(app):
    app.ctx.sampling = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=120, ignore_eos=True)
    view = open_comparison(app)
    a, b = view.panes()
    assert (a.source_label, b.source_label) == (app.controllers.engines.model_name,) * 2
    batches = []
    app.controllers.monitor._deliver = lambda m, hw: batches.append(
        m[app.controllers.engines.model_name].last_step_seqs if m.get(app.controllers.engines.model_name) else 0)
    send(view, "Describe the moon in two sentences.")
    app.qtbot.waitUntil(lambda: a.busy and b.busy, timeout=10_000)
    assert view.stop_button.isEnabled() and not view.send_button.isEnabled()
    wait_done(app, view)
    assert max(batches) == 2  # both panes decoded in the same engine steps
    for pane in (a, b):
        assert last(pane).status == "complete"
        stats = pane.stats_label.text()
        assert re.search(r"TTFT \d+\.\d\d s · [\d.]+ tok/s · 120 tokens", stats), stats
        assert stats.endswith("finish: length")
        messages = app.repo.active_path(pane.conversation_id).messages
        assert [m.role for m in messages] == ["user", "assistant"]
        assert messages[0].content == "Describe the moon in two sentences."
    app.qtbot.waitUntil(lambda: bool(re.fullmatch(r"B vs A: \d+% of words agree", view.agreement_label.text())),
                        timeout=5_000)
    record = app.ctx.catalog.get_comparison(view.comparison_id)
    assert set(record.conversation_ids) == {a.conversation_id, b.conversation_id}
    assert record.title == "Describe the moon in two sentences."
    assert app.controllers.engines.router.pool.engines() == []  # same model: no second engine


def test_panes_on_two_models_complete_in_their_own_engines(app, model_path, gemma_path):
    app.ctx.sampling = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=60, ignore_eos=True)
    app.window.perf_panel.show()
    smol, gemma = ModelSource.local(model_path), ModelSource.local(gemma_path)
    view = open_comparison(app, sources=[smol, gemma])
    a, b = view.panes()
    assert b.source_label == gemma_path.name and b.source_box.currentData() == gemma.key
    pooled = app.controllers.engines.router.pool.get(gemma)
    assert pooled is not None and pooled.wait_started(120) and pooled.status == "ready"
    assert pooled.engine.pid != app.controllers.engines.engine.pid  # its own process
    # The two engines split the cores instead of fighting over them.
    share = max(1, app.controllers.engines.router.cpu_threads // 2)
    assert pooled.engine.settings.n_threads == app.controllers.engines.engine.settings.n_threads == share
    # A model that loaded in a pane is offered again (File → Recent models, every pane's list).
    app.qtbot.waitUntil(lambda: str(gemma_path) in [a.text() for a in app.window.menus.recent_menu.actions()],
                        timeout=10_000)
    assert str(gemma_path) in app.ctx.catalog.get_setting("recent_models", [])
    send(view, "What is the capital of France?")
    wait_done(app, view)
    for pane, name in ((a, model_path.name), (b, gemma_path.name)):
        assert last(pane).status == "complete" and last(pane).text.strip()
        assert "60 tokens" in pane.stats_label.text()
        assert app.stored_last(pane.conversation_id, MessageStatus.COMPLETE).model == name
    assert last(a).text != last(b).text
    # The panel has charts for each loaded engine.
    app.qtbot.waitUntil(lambda: set(app.window.perf_panel.engines()) >= {model_path.name, gemma_path.name},
                        timeout=5_000)
    panel = app.window.perf_panel
    assert max((v for v in panel.series("decode tok/s", engine=gemma_path.name) if v == v), default=0) > 0
    assert f"{gemma_path.name}:" in panel.summary.text()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    panel.engine_box.setCurrentText(gemma_path.name)
    app.qtbot.wait(400)
    assert panel.engine() == gemma_path.name
    assert app.window.grab().save(str(SCREENSHOTS / "performance-two-engines.png"))
    app.window.perf_panel.hide()
    app.qtbot.wait(100)
    assert app.window.grab().save(str(SCREENSHOTS / "compare-two-models.png"))
    # Closing the comparison stops the engine no pane needs any more.
    app.window.area.close_tab(app.window.tabs.indexOf(view))
    app.qtbot.waitUntil(lambda: pooled.engine.state.status == "stopped", timeout=30_000)
    assert app.controllers.engines.router.pool.engines() == []
    assert app.controllers.engines.engine.settings.n_threads == app.controllers.engines.router.cpu_threads


def test_a_model_that_cannot_load_fails_only_its_pane(app, tmp_path):
    app.ctx.sampling = SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True)
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x00" * 100)
    view = open_comparison(app)
    a, b = view.panes()
    view.source_file_chosen.emit(b.conversation_id, str(broken))
    assert b.source_label == "broken.gguf"
    send(view, "Hello")
    wait_done(app, view)
    assert last(a).status == "complete"
    assert last(b).status == "error" and "broken.gguf could not be loaded" in last(b).meta
    assert "finish: error" in b.stats_label.text()
    assert str(broken) not in app.ctx.catalog.get_setting("recent_models", [])  # only models that load


def test_blind_mode_hides_models_until_a_pick_and_reopens_as_it_was(app):
    app.ctx.sampling = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)
    view = open_comparison(app, panes=3)
    comparison_id = view.comparison_id
    view.blind_box.setChecked(True)
    names = [p.name_label.text() for p in view.panes()]
    assert names == ["Model A", "Model B", "Model C"]
    assert not any(p.source_box.isVisible() or p.stats_label.isVisible() for p in view.panes())
    assert all(p.pick_button.isVisible() for p in view.panes())
    send(view, "Name a colour.")
    wait_done(app, view)
    assert not any(p.view.delegate.show_meta for p in view.panes())  # no speeds to tell them apart
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert app.window.grab().save(str(SCREENSHOTS / "compare-blind.png"))
    dialog = app.controllers.compare.review.show_differences(view, modal=False)
    assert dialog.left.itemText(0) == "Model A"  # no model names in the diff either
    dialog.close()
    chosen = view.panes()[1]
    chosen.pick_button.click()
    assert chosen.name_label.text() == "★ B"
    assert all(p.source_box.isVisible() and p.stats_label.isVisible() and not p.pick_button.isVisible()
               for p in view.panes())
    assert all(p.view.delegate.show_meta for p in view.panes())
    order = [p.conversation_id for p in view.panes()]
    app.qtbot.waitUntil(lambda: app.ctx.catalog.get_comparison(comparison_id).settings.get("favourite")
                        == chosen.conversation_id, timeout=5_000)
    app.window.area.close_tab(app.window.tabs.indexOf(view))
    app.controllers.compare.open_comparison(comparison_id)
    app.qtbot.waitUntil(lambda: app.window.compare_for(comparison_id) is not None
                        and len(app.window.compare_for(comparison_id).panes()) == 3, timeout=10_000)
    again = app.window.compare_for(comparison_id)
    assert [p.conversation_id for p in again.panes()] == order
    assert again.pane_for(chosen.conversation_id).name_label.text() == "★ B"
    assert all(p.model.rowCount() == 2 and p.stats_label.text() for p in again.panes())


def test_follow_ups_continue_every_pane_and_one_goes_on_as_a_chat(qtbot, tmp_path, model_path):
    app = App(qtbot, tmp_path, model_path, max_tokens=16)
    try:
        view = open_comparison(app)
        send(view, "Hi, who are you?")
        wait_done(app, view)
        send(view, "And what can you do?")
        app.qtbot.waitUntil(lambda: all(p.model.rowCount() == 4 for p in view.panes()), timeout=10_000)
        wait_done(app, view)
        for pane in view.panes():
            roles = [m.role for m in app.repo.active_path(pane.conversation_id).messages]
            assert roles == ["user", "assistant", "user", "assistant"]
        exported = tmp_path / "comparison.md"
        app.controllers.compare.review.export_markdown(view, str(exported))
        qtbot.waitUntil(exported.exists, timeout=10_000)
        markdown = exported.read_text()
        assert "## 1. Hi, who are you?" in markdown and "## 2. And what can you do?" in markdown
        assert all(last(p).text in markdown for p in view.panes())
        b = view.panes()[1]
        b.continue_button.click()
        qtbot.waitUntil(lambda: app.window.tabs.count() == 2, timeout=10_000)
        tab = app.window.open_tabs()[0]
        qtbot.waitUntil(lambda: tab.model.rowCount() == 4, timeout=10_000)
        assert [v.text for v in tab.model.views()] == [v.text for v in b.model.views()]
        assert tab.conversation_id != b.conversation_id
        assert tab.state_label.text() == f"on {b.source_label}"
        app.send(tab, "Thanks!")
        app.wait_done(tab)
        assert tab.model.rowCount() == 6 and b.model.rowCount() == 4  # the comparison stays as it was
        # The sidebar lists the comparison once, and the continued chat.
        qtbot.waitUntil(lambda: len(app.window.conversation_list.titles()) == 2, timeout=10_000)
        texts = app.window.conversation_list.titles()  # without the date headers
        assert any(t.startswith("⚖ Hi, who are you?") for t in texts)
        comparison_id = view.comparison_id
    finally:
        app.close()
    # A restart restores the open comparison with its panes and stats.
    again = App(qtbot, tmp_path, model_path)
    try:
        qtbot.waitUntil(lambda: again.window.compare_for(comparison_id) is not None
                        and all(p.model.rowCount() == 4 for p in again.window.compare_for(comparison_id).panes()),
                        timeout=10_000)
        panes = again.window.compare_for(comparison_id).panes()
        assert len(panes) == 2 and all("16 tokens" in p.stats_label.text() for p in panes)
        assert again.window.open_tabs()[0].model.rowCount() == 6
    finally:
        again.close()


def test_a_pane_can_use_a_remote_server_and_a_refused_one_says_so(app, shared_engine):
    from app.server.config import ServerConfig
    from app.server.uvicorn_server import HttpServer

    app.ctx.sampling = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)
    server = HttpServer(shared_engine, ServerConfig(port=0, api_key="secret", model_id="remote-smol")).start()
    try:
        view = open_comparison(app, panes=3)
        a, b, c = view.panes()
        view.source_remote_chosen.emit(b.conversation_id, f"{server.url}/v1", "remote-smol", "secret")
        view.source_remote_chosen.emit(c.conversation_id, "http://127.0.0.1:1/v1", "nothing", "")
        assert b.source_label.startswith("remote-smol @ 127.0.0.1:")
        send(view, "Say something.")
        wait_done(app, view)
        assert last(a).status == "complete" and last(b).status == "complete" and last(b).text
        assert last(c).status == "error" and "refused the connection" in last(c).meta
        settings = app.ctx.catalog.get_comparison(view.comparison_id).settings
        assert settings["panes"][str(b.conversation_id)]["source"]["kind"] == "remote"
        assert "secret" not in str(settings)  # keys stay in memory
    finally:
        server.stop()


def test_regenerate_all_branches_every_pane_and_the_arrows_go_back(app):
    app.ctx.sampling = SamplingParams(temperature=1.0, max_tokens=12, ignore_eos=True)
    view = open_comparison(app)
    assert not view.regenerate_button.isEnabled()  # nothing to regenerate yet
    send(view, "Name an animal.")
    wait_done(app, view)
    first = [last(p).text for p in view.panes()]
    view.regenerate_button.click()
    app.qtbot.waitUntil(lambda: all(last(p).branch == (2, 2) for p in view.panes()), timeout=10_000)
    wait_done(app, view)
    for pane in view.panes():
        assert last(pane).status == "complete" and "12 tokens" in pane.stats_label.text()
    pane = view.panes()[0]
    pane.branch_requested.emit(last(pane).message_id, -1)
    app.qtbot.waitUntil(lambda: last(pane).branch == (1, 2), timeout=10_000)
    assert last(pane).text == first[0]
    assert last(view.panes()[1]).branch == (2, 2)  # the other pane stays where it was


def test_panes_add_and_remove_within_two_to_four(app):
    view = open_comparison(app)
    view.add_button.click()
    app.qtbot.waitUntil(lambda: len(view.panes()) == 3, timeout=10_000)
    view.add_button.click()
    app.qtbot.waitUntil(lambda: len(view.panes()) == 4, timeout=10_000)
    assert not view.add_button.isEnabled()
    gone = view.panes()[0].conversation_id
    view.panes()[0].remove_button.click()
    app.qtbot.waitUntil(lambda: len(view.panes()) == 3, timeout=10_000)
    app.qtbot.waitUntil(lambda: gone not in app.ctx.catalog.get_comparison(view.comparison_id).settings["order"],
                        timeout=5_000)
    assert app.repo.get_conversation(gone).deleted
    view.panes()[0].remove_button.click()
    app.qtbot.waitUntil(lambda: len(view.panes()) == 2, timeout=10_000)
    assert not any(p.remove_button.isEnabled() for p in view.panes())
    assert [p.name_label.text() for p in view.panes()] == ["A", "B"]


def test_screenshot_of_the_compare_view(app):
    app.ctx.sampling = SamplingParams(temperature=0.8, max_tokens=160)
    view = open_comparison(app, panes=3)
    send(view, "Give me three tips for writing clear code.")
    wait_done(app, view)
    app.qtbot.waitUntil(lambda: bool(view.agreement_label.text()), timeout=10_000)  # worked out off the GUI thread
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    panes = view.panes()
    for pane in panes:
        pane.view.scrollToBottom()
    image = app.window.grab().toImage()
    assert image.save(str(SCREENSHOTS / "compare-view.png"))
    # Side by side, left to right, each pane showing its reply in the assistant's bubble.
    corners = [p.mapTo(view, QPoint(0, 0)) for p in panes]
    assert len({c.y() for c in corners}) == 1 and [c.x() for c in corners] == sorted({c.x() for c in corners})
    for pane in panes:
        assert bubble_colour(image, app.window, pane.view, 1) == pane.view.palette().alternateBase().color().name()
    dialog = app.controllers.compare.review.show_differences(view, modal=False)
    assert dialog.grab().save(str(SCREENSHOTS / "compare-differences.png"))
    # The dialog shows the diff of the first two answers, whether or not they differ.
    expected = diff_words(*(text for _, _, text in app.controllers.compare.review.answers(view)[:2]))
    assert dialog.similarity.text().startswith(f"{100 * expected.similarity:.0f}% of the words agree")
    assert ("line-through" in dialog.browser.toHtml()) == any(r.op is Op.DELETE for r in expected.runs)
    dialog.close()


def test_a_pane_engine_that_dies_interrupts_only_its_pane_and_comes_back(app, model_path, gemma_path):
    app.ctx.sampling = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=300, ignore_eos=True)
    view = open_comparison(app, sources=[ModelSource.local(model_path), ModelSource.local(gemma_path)])
    a, b = view.panes()
    pooled = app.controllers.engines.router.pool.get(ModelSource.local(gemma_path))
    assert pooled.wait_started(120) and pooled.status == "ready"
    old_pid = pooled.engine.pid
    send(view, "Tell me a long story.")
    app.qtbot.waitUntil(lambda: b.model.rowCount() == 2 and len(last(b).text) > 20, timeout=60_000)
    pooled.engine.kill()
    wait_done(app, view)
    assert last(b).status == "interrupted" and "stopped unexpectedly" in last(b).meta
    assert last(a).status == "complete"  # the main engine never noticed
    stored = app.stored_last(b.conversation_id, MessageStatus.INTERRUPTED)
    assert stored.content and last(b).text.startswith(stored.content[:20])
    app.qtbot.waitUntil(lambda: pooled.status == "ready" and pooled.engine.pid not in (None, old_pid), timeout=120_000)
    app.ctx.sampling = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    send(view, "Go on.")
    app.qtbot.waitUntil(lambda: b.model.rowCount() == 4, timeout=10_000)
    wait_done(app, view)
    assert last(b).status == "complete" and "8 tokens" in b.stats_label.text()
