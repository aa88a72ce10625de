"""Per-model defaults reach the engine: on the real model, from the library to what loads
(the command line's path, the desktop app's switch) and to the prompt the engine renders."""

from __future__ import annotations

import pytest

from app.cli.engine_args import library_defaults, settings_from_args
from app.cli.main import main, parse
from app.engines.process import EngineProcess
from app.models.library import ModelDefaults, ModelInUse, open_library
from inference import ModelLoadError, SamplingParams
from inference.core.engine import Engine
from inference.params import ChatRequest, LoadSettings
from tests.support.gui_app import WAIT_MS

pytestmark = pytest.mark.model

# A template no model ships: its markup shows up in the prompt tokens only if it is used.
TEMPLATE = ("{% for m in messages %}### {{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}### assistant:{% endif %}")
CHAT = [{"role": "user", "content": "Name a colour."}]


@pytest.fixture
def base(tmp_path, model_path):
    """A data folder whose models folder links the real default model."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / model_path.name).symlink_to(model_path)
    return tmp_path


def test_a_default_context_is_what_the_engine_loads_with(base, capsys):
    assert main(["--data-dir", str(base), "models", "defaults", "smollm2-135m", "--ctx", "768"]) == 0
    model = base / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    args = parse(["chat"])
    with Engine.start(settings_from_args(args, model, library_defaults(base, model))) as engine:
        assert engine.info.n_ctx == 768
    with open_library(base) as library:
        assert library.listed("smollm2-135m").last_used is not None  # the load marked it used
    flagged = parse(["chat", "--ctx", "1024"])  # the command line wins over the default
    with Engine.start(settings_from_args(flagged, model, library_defaults(base, model))) as engine:
        assert engine.info.n_ctx == 1024


def test_a_draft_model_default_loads_the_draft_model_and_a_bad_one_is_a_clear_error(base, tmp_path, capsys):
    model = base / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert main(["--data-dir", str(base), "models", "defaults", "smollm2-135m", "--ctx", "768",
                 "--draft-model", "smollm2-135m"]) == 0
    args = parse(["chat"])
    settings = settings_from_args(args, model, library_defaults(base, model))
    assert (settings.speculative, settings.draft_model) == ("draft", model)
    with Engine.start(settings) as engine:
        assert engine.call(lambda core: core.proposer.planner.model is not None)
        reply = engine.submit(ChatRequest(messages=tuple(CHAT), sampling=SamplingParams.greedy(max_tokens=8)))
        assert reply.result(timeout=120).error is None
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ModelLoadError, match="broken.gguf is too small to be a model"):
        Engine.start(LoadSettings(model_path=model, n_ctx=768, speculative="draft", draft_model=broken))


def test_a_chat_template_override_changes_the_prompt_the_engine_renders(model_path):
    with Engine.start(LoadSettings(model_path=model_path, n_ctx=1024, n_seq_max=2)) as own:
        ordinary = own.inputs.chat_tokens(CHAT)  # the file's own ChatML
    settings = LoadSettings(model_path=model_path, n_ctx=1024, n_seq_max=2, chat_template=TEMPLATE)
    with Engine.start(settings) as overridden:
        expected = overridden.text_tokens("### user: Name a colour.\n### assistant:", parse_special=False)
        assert overridden.inputs.chat_tokens(CHAT) == expected != ordinary
        reply = overridden.submit(ChatRequest(messages=tuple(CHAT), sampling=SamplingParams.greedy(max_tokens=8)))
        done = reply.result(timeout=120)
        assert done.error is None and done.stats.prompt_tokens == len(expected)


def test_the_engine_process_renders_with_the_override_too(model_path):
    """The server and the chats' tool formats read the template off the engine's ModelInfo."""
    process = EngineProcess(LoadSettings(model_path=model_path, n_ctx=1024, n_seq_max=2, chat_template=TEMPLATE))
    process.start()
    try:
        assert process.info.chat_template == TEMPLATE
        prepared = process.prepare(ChatRequest(messages=tuple(CHAT)))
        assert prepared.prompt_tokens == tuple(process.text_tokens("### user: Name a colour.\n### assistant:",
                                                                   parse_special=False))
    finally:
        process.shutdown()


def test_the_app_loads_a_model_with_its_defaults_and_refuses_to_remove_it(app, model_path, tmp_path):
    hub, library = app.controllers.engines, app.ctx.library
    copy = tmp_path / "copy-of-smollm.gguf"
    copy.symlink_to(model_path)
    library.record_local(copy)
    library.set_defaults("copy-of-smollm.gguf", ModelDefaults(n_ctx=1024, chat_template=TEMPLATE))
    hub.load_model(str(copy)).join(120)
    app.qtbot.waitUntil(lambda: hub.model_name == "copy-of-smollm.gguf", timeout=WAIT_MS)
    state = hub.engine.state
    assert state.status == "ready" and state.info.n_ctx == 1024
    assert hub.local_settings.chat_template == TEMPLATE
    assert library.listed("copy-of-smollm.gguf").last_used is not None
    with pytest.raises(ModelInUse):
        library.remove("copy-of-smollm.gguf", hub.loaded_paths())

    hub.load_model(str(model_path)).join(120)  # back: the copy's defaults do not come along
    app.qtbot.waitUntil(lambda: hub.model_name == model_path.name, timeout=WAIT_MS)
    assert hub.engine.state.info.n_ctx == 4096 and hub.local_settings.chat_template is None
    library.remove("copy-of-smollm.gguf", hub.loaded_paths())
    assert copy.exists()  # a local file outside the models folder: forgotten, not deleted
    assert library.listed("copy-of-smollm.gguf") is None
