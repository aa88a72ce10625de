"""A reply's reasoning apart from its answer: the text a reasoning model writes between
`<think>` and `</think>` (or its template's own markers) before it answers.

One splitter serves the desktop view (which shows the reasoning as a collapsible "Thought
for N s" block), the prompt built from a chat's history (which leaves the reasoning out, as
reasoning templates expect) and the HTTP server (which returns it as `reasoning_content`).
It is incremental: fed a reply delta by delta it holds back a marker split across deltas,
reports a block still open while the model thinks, and passes a reply with no markers
through as the answer. As llama.cpp's server and vLLM's parsers do, reasoning is looked for
at the start of a reply only (after white space), once: a `<think>` written later in an
answer is the answer's text.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Markers:
    open: str
    close: str


THINK = Markers("<think>", "</think>")
# Other templates' own markers: ByteDance Seed-OSS, Mistral's Magistral, Cohere's Command A
# reasoning, Moonshot's Kimi. Qwen3, DeepSeek-R1, QwQ, GLM and Phi-4-reasoning use <think>.
KNOWN = (
    THINK,
    Markers("<seed:think>", "</seed:think>"),
    Markers("[THINK]", "[/THINK]"),
    Markers("<|START_THINKING|>", "<|END_THINKING|>"),
    Markers("◁think▷", "◁/think▷"),
)


@dataclass(frozen=True, slots=True)
class Piece:
    """What one delta adds to each side."""

    reasoning: str = ""
    answer: str = ""


_START, _OPENING, _REASONING, _AFTER, _ANSWER = range(5)


class ReasoningSplitter:
    """Splits a reply fed in pieces into reasoning and answer.

    opened: the prompt already opened the block (a template that ends its generation
    prompt with `<think>`, as DeepSeek-R1's distills do), so the reply starts inside it.
    Token counts and times come with the text when the caller has them: tokens of a delta
    that began or ended inside the block are reasoning tokens."""

    def __init__(self, markers: tuple[Markers, ...] = KNOWN, opened: bool = False) -> None:
        self.markers = markers
        self._state = _START
        self._held = ""  # text that may still be the start of a marker
        self._close = markers[0].close
        self.reasoning_tokens = 0
        self.answer_tokens = 0
        self.started_s: float | None = None  # when the block opened, on the caller's clock
        self.ended_s: float | None = None  # when it closed
        self._seen = opened  # a block was opened
        self._undecided = 0  # tokens of text held at the start, before it is known which side it is
        if opened:
            self._state = _OPENING

    @property
    def thinking(self) -> bool:
        """Inside an open block: the model is writing its reasoning."""
        return self._state in (_OPENING, _REASONING)

    @property
    def had_reasoning(self) -> bool:
        return self._seen

    def seconds(self, now: float | None = None) -> float | None:
        """How long the model thought: until the block closed, or until now while it is open."""
        if self.started_s is None:
            return None
        end = self.ended_s if self.ended_s is not None else now
        return None if end is None else max(0.0, end - self.started_s)

    def feed(self, text: str, tokens: int = 0, now: float | None = None) -> Piece:
        was_thinking = self.thinking
        if self._state == _OPENING and self.started_s is None:
            self.started_s = now
        reasoning, answer = self._split(self._held + text, now)
        tokens += self._undecided
        self._undecided = 0
        if self._state == _START:
            self._undecided = tokens
        elif was_thinking or self.thinking or (self._state == _AFTER and not answer):
            self.reasoning_tokens += tokens
        else:
            self.answer_tokens += tokens
        return Piece(reasoning, answer)

    def finish(self) -> Piece:
        """The reply ended: what was held back is what it is (an open block stays reasoning)."""
        held, self._held = self._held, ""
        self.answer_tokens += self._undecided
        self._undecided = 0
        if self._state in (_OPENING, _REASONING):
            return Piece(reasoning=held.lstrip() if self._state == _OPENING else held)
        if self._state == _AFTER:
            return Piece()  # white space after the block
        return Piece(answer=held)

    def _split(self, text: str, now: float | None) -> tuple[str, str]:
        self._held = ""
        reasoning, answer = "", ""
        while text:
            if self._state == _START:
                stripped = text.lstrip()
                if not stripped:
                    self._held = text
                    return reasoning, answer
                marker = next((m for m in self.markers if stripped.startswith(m.open)), None)
                if marker is not None:
                    self._state, self._close, self._seen = _OPENING, marker.close, True
                    self.started_s = now
                    text = stripped[len(marker.open):]
                elif any(m.open.startswith(stripped) for m in self.markers):
                    self._held = text  # "<thi": wait for more
                    return reasoning, answer
                else:
                    self._state = _ANSWER
            elif self._state == _OPENING:  # white space after the opening marker is dropped
                text = text.lstrip()
                if text:
                    self._state = _REASONING
            elif self._state == _REASONING:
                at = text.find(self._close)
                if at >= 0:
                    reasoning += text[:at]
                    text = text[at + len(self._close):]
                    self._state, self.ended_s = _AFTER, now
                    continue
                keep = _partial_suffix(text, self._close)
                reasoning += text[:len(text) - keep]
                self._held = text[len(text) - keep:]
                return reasoning, answer
            elif self._state == _AFTER:  # white space between the block and the answer is dropped
                text = text.lstrip()
                if text:
                    self._state = _ANSWER
            else:
                answer += text
                text = ""
        return reasoning, answer


def _partial_suffix(text: str, marker: str) -> int:
    """How many characters at the end of text could begin marker."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0


@dataclass(frozen=True, slots=True)
class Split:
    reasoning: str | None  # None: the reply has no reasoning block
    answer: str
    open: bool = False  # the block never closed (still thinking, or cut while thinking)


def split_reasoning(text: str, markers: tuple[Markers, ...] = KNOWN) -> Split:
    """A whole reply's reasoning and answer. A closing marker with no opening one before it
    (the template's generation prompt opened the block) makes what precedes it reasoning."""
    splitter = ReasoningSplitter(markers)
    first, last = splitter.feed(text), splitter.finish()
    if splitter.had_reasoning:
        return Split((first.reasoning + last.reasoning).strip(), (first.answer + last.answer).strip(),
                     open=splitter.thinking)
    closed = _closed_unopened(text, markers)
    if closed is not None:
        at, end = closed
        return Split(text[:at].strip(), text[end:].strip())
    return Split(None, text)


def answer_start(text: str, markers: tuple[Markers, ...] = KNOWN) -> int | None:
    """Where a whole reply's answer begins in text, by split_reasoning's rules: after its
    reasoning block (None while the block is open), 0 when it has none."""
    start = text.lstrip()
    lead = len(text) - len(start)
    for marker in markers:
        if start.startswith(marker.open):
            close = text.find(marker.close, lead + len(marker.open))
            return None if close < 0 else close + len(marker.close)
    closed = _closed_unopened(text, markers)
    return closed[1] if closed is not None else 0


def _closed_unopened(text: str, markers: tuple[Markers, ...]) -> tuple[int, int] | None:
    """A closing marker with no opening one before it (the template's generation prompt
    opened the block): where it begins and ends."""
    for marker in markers:
        at = text.find(marker.close)
        if at >= 0 and marker.open not in text[:at]:
            return at, at + len(marker.close)
    return None


def strip_reasoning(text: str, markers: tuple[Markers, ...] = KNOWN) -> str:
    """A stored reply as the next turn's prompt carries it: the answer alone."""
    split = split_reasoning(text, markers)
    return text if split.reasoning is None else split.answer


def estimated_thought_s(text: str, completion_tokens: int | None, tokens_per_s: float | None) -> float | None:
    """For a reply saved by an earlier run (its thinking time is not stored): its decoding
    time shared out by the reasoning's part of the text."""
    split = split_reasoning(text)
    if split.reasoning is None or not completion_tokens or not tokens_per_s:
        return None
    share = len(split.reasoning) / max(1, len(split.reasoning) + len(split.answer))
    return share * completion_tokens / tokens_per_s
