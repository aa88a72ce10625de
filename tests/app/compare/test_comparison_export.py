"""A comparison as Markdown, from a real SQLite file."""

from app.compare.export import comparison_markdown
from app.compare.state import ComparisonState
from app.engines.sources import ModelSource


def test_each_question_once_then_every_panes_answer(repo, catalog):
    smol, gemma = ModelSource.local("/m/smol.gguf"), ModelSource.remote("http://host:8080/v1", "big")
    a = repo.create_conversation("q", model_ref=smol.key)
    b = repo.create_conversation("q", model_ref=gemma.key)
    for conv in (a, b):
        repo.add_message(conv.id, "system", "Be brief.")
        repo.add_message(conv.id, "user", "Name a colour.\nJust one.")
    repo.add_message(a.id, "assistant", "Red.", ttft_s=0.25, tokens_per_s=110.0, completion_tokens=2)
    repo.add_message(b.id, "assistant", "Blue.", completion_tokens=2)
    repo.add_message(a.id, "user", "Why?")
    repo.add_message(a.id, "assistant", "It is warm.")
    state = ComparisonState({a.id: smol, b.id: gemma}, [b.id, a.id], favourite=a.id)
    comp = catalog.create_comparison("Colours", [a.id, b.id], state.to_settings())
    text = comparison_markdown(repo, catalog, comp.id)
    assert text.startswith("# Colours\n")
    assert "- **A**: big @ host:8080\n- **B**: smol.gguf ★ (picked)\n" in text  # the saved order
    assert text.count("Be brief.") == 1 and text.count("Name a colour.\nJust one.") == 1
    assert "## 1. Name a colour." in text and "## 2. Why?" in text
    first, second = text.split("## 2. Why?")
    assert first.index("### A · big @ host:8080\n\nBlue.") < first.index("### B · smol.gguf\n\nRed.")
    assert "_TTFT 0.25 s · 110 tok/s · 2 tokens_" in first
    assert "### A · big @ host:8080\n\n_(no answer)_" in second and "It is warm." in second


def test_a_deleted_pane_is_left_out(repo, catalog):
    a, b = repo.create_conversation("a"), repo.create_conversation("b")
    for conv, answer in ((a, "kept"), (b, "gone")):
        repo.add_message(conv.id, "user", "hi")
        repo.add_message(conv.id, "assistant", answer)
    comp = catalog.create_comparison("", [a.id, b.id])
    repo.delete(b.id)
    text = comparison_markdown(repo, catalog, comp.id)
    assert text.startswith("# Comparison\n") and "kept" in text and "gone" not in text
