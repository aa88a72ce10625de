"""A comparison as one Markdown document: each question once, then every pane's answer to
it, with the model and its numbers; what the user shares after comparing."""

from __future__ import annotations

from dataclasses import dataclass

from app.compare.state import ComparisonState
from app.engines.sources import ModelSource, source_of
from storage import ActivePath, CatalogRepository, ChatRepository, MessageRecord, MessageStatus

LETTERS = "ABCD"


@dataclass(frozen=True, slots=True)
class Pane:
    letter: str
    model: str
    path: ActivePath


def comparison_markdown(repo: ChatRepository, catalog: CatalogRepository, comparison_id: int) -> str:
    record = catalog.get_comparison(comparison_id)
    alive = tuple(i for i in record.conversation_ids if not repo.get_conversation(i).deleted)
    state = ComparisonState.from_settings(record.settings, alive, default=None)
    panes = [_pane(repo, LETTERS[k] if k < len(LETTERS) else str(k + 1), conv_id, state.sources.get(conv_id))
             for k, conv_id in enumerate(state.order)]
    lines = [f"# {record.title or 'Comparison'}", ""]
    lines += [f"- **{p.letter}**: {p.model}" + (" ★ (picked)" if p.path.conversation.id == state.favourite else "")
              for p in panes]
    lines.append("")
    system = next((m.content for p in panes for m in p.path.messages if m.role == "system"), None)
    if system:
        lines += ["**System prompt**", "", system, ""]
    turns = [_turns(p.path.messages) for p in panes]
    for t in range(max((len(x) for x in turns), default=0)):
        question = next((x[t][0].content for x in turns if t < len(x)), "")
        lines += [f"## {t + 1}. {_first_line(question)}", "", question, ""]
        for pane, pane_turns in zip(panes, turns):
            answer = pane_turns[t][1] if t < len(pane_turns) else None
            lines += [f"### {pane.letter} · {pane.model}", ""]
            lines += [answer.content if answer is not None else "_(no answer)_", ""]
            if answer is not None and (stats := reply_stats(answer)):
                lines += [f"_{stats}_", ""]
    return "\n".join(lines).rstrip() + "\n"


def _pane(repo: ChatRepository, letter: str, conversation_id: int, source: ModelSource | None) -> Pane:
    """The pane's model as the comparison saved it, else as its conversation names it."""
    path = repo.active_path(conversation_id)
    source = source or source_of(path.conversation.model_ref)
    return Pane(letter, source.label if source else (path.conversation.model_ref or "the app's model"), path)


def _turns(messages: list[MessageRecord]) -> list[tuple[MessageRecord, MessageRecord | None]]:
    """(question, answer) pairs of a pane, in order."""
    turns: list[tuple[MessageRecord, MessageRecord | None]] = []
    for m in messages:
        if m.role == "user":
            turns.append((m, None))
        elif m.role == "assistant" and turns and turns[-1][1] is None:
            turns[-1] = (turns[-1][0], m)
    return turns


def reply_stats(m: MessageRecord) -> str:
    """A saved reply's numbers, as a compare pane shows them after a reopen."""
    parts = []
    if m.ttft_s is not None:
        parts.append(f"TTFT {m.ttft_s:.2f} s")
    if m.tokens_per_s:
        parts.append(f"{m.tokens_per_s:.0f} tok/s")
    if m.completion_tokens:
        parts.append(f"{m.completion_tokens} tokens")
    if m.status is not MessageStatus.COMPLETE:
        parts.append(m.status.value)
    return " · ".join(parts)


def _first_line(text: str, limit: int = 60) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"
