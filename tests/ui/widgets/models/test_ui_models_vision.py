"""Vision models in the window's widgets: the model picker's "sees images" mark (and the
controller's reading of it from the library), a vision repository in Discover's results
and its files with their projector. Real widgets; no Hub."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QTreeWidgetItem

from app.models.hub_files import group_gguf_files
from app.models.hub_types import HubFilePart, HubRepo
from app.models.library import ModelLibrary
from storage import open_database
from tests.support.shown import shown
from ui.controllers.model_picker import _seeing, model_files
from ui.widgets.models.hub_files import VISION_MARK, HubFiles
from ui.widgets.models.hub_results import HubResults
from ui.widgets.models.model_picker import SEES_IMAGES, ModelChoice, ModelPicker

MB = 1_000_000


def test_the_picker_marks_the_models_that_see_images(qtbot):
    picker = shown(qtbot, ModelPicker(), 400, 30)
    picker.set_choices(
        [ModelChoice("SmolVLM-test-Q8_0.gguf", "/m/SmolVLM-test-Q8_0.gguf", sees_images=True),
         ModelChoice("SmolLM2-135M-Instruct.Q4_1.gguf", "/m/SmolLM2-135M-Instruct.Q4_1.gguf")],
        [ModelChoice("SmolVLM 256M Instruct (Q8_0)", "", "smolvlm-256m", "Apache-2.0", sees_images=True)], [])
    texts = {a.data(): a.text() for a in picker.entries()}
    assert texts["/m/SmolVLM-test-Q8_0.gguf"] == "SmolVLM-test-Q8_0.gguf" + SEES_IMAGES
    assert texts["/m/SmolLM2-135M-Instruct.Q4_1.gguf"] == "SmolLM2-135M-Instruct.Q4_1.gguf"  # no mark
    assert texts["smolvlm-256m"] == f"Download SmolVLM 256M Instruct (Q8_0){SEES_IMAGES} — Apache-2.0"
    seeing = next(a for a in picker.entries() if a.data() == "/m/SmolVLM-test-Q8_0.gguf")
    assert "vision projector" in seeing.toolTip()


def test_the_picker_reads_the_marks_from_the_library_and_lists_no_projector(tmp_path: Path):
    models = tmp_path / "models"
    folder = models / "o" / "vlm"
    folder.mkdir(parents=True)
    (folder / "vlm-Q8_0.gguf").write_bytes(b"GGUF model")
    (folder / "mmproj-vlm-Q8_0.gguf").write_bytes(b"GGUF projector")
    (models / "plain.gguf").write_bytes(b"GGUF plain")
    assert [f.name for f in model_files(models)] == ["plain.gguf", "vlm-Q8_0.gguf"]
    db = open_database(tmp_path / "chorus.db")
    try:
        library = ModelLibrary(db, models)
        library.record_download(folder / "vlm-Q8_0.gguf", "o/vlm", None, folder / "mmproj-vlm-Q8_0.gguf")
        library.record_local(models / "plain.gguf")
        assert _seeing(library) == {str(folder / "vlm-Q8_0.gguf")}
        assert _seeing(None) == set()
    finally:
        db.close()


def test_discover_marks_a_vision_repository_and_its_files_projector(qtbot):
    results = shown(qtbot, HubResults(), 600, 300)
    results.set_results([HubRepo("o/vlm", 10, 1, False, None, "llama", None, sees_images=True),
                         HubRepo("o/plain", 5, 1, False, None, "llama", None)])
    rows: list[QTreeWidgetItem] = [results.list.topLevelItem(i) for i in range(results.list.topLevelItemCount())]
    assert rows[0].text(1) == "llama · sees images" and "vision model" in rows[0].toolTip(0)
    assert rows[1].text(1) == "llama"
    files = shown(qtbot, HubFiles(), 600, 300)
    listed = group_gguf_files("o/vlm", [HubFilePart("vlm-Q8_0.gguf", 175 * MB, "a" * 64),
                                        HubFilePart("mmproj-vlm-f16.gguf", 190 * MB, "b" * 64)], "c" * 40)
    files.set_files("o/vlm", listed)
    assert files.title.text() == "o/vlm · 1 GGUF file" + VISION_MARK
    item = files.list.topLevelItem(0)
    assert item.text(0) == "vlm-Q8_0.gguf + vision projector" and item.text(2) == "348.1 MiB"  # both files
    assert "with vision projector mmproj-vlm-f16.gguf" in item.toolTip(0)
    files.select("vlm-Q8_0.gguf")
    assert "with vision projector mmproj-vlm-f16.gguf: the model sees images" in files.fit_reason.text()
    files.set_installed("/m/vlm-Q8_0.gguf", "vlm-Q8_0.gguf", " with vision projector mmproj-vlm-f16.gguf")
    assert files.progress_label.text() == "Installed vlm-Q8_0.gguf with vision projector mmproj-vlm-f16.gguf"
