"""What a load run came to: the clients' results added up, as lines or one JSON object."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from app.bench.raw_http import FAILURE_KINDS, ClientResult
from inference import percentile


@dataclass(frozen=True)
class Spread:
    p50: float | None
    p95: float | None
    max: float | None

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        return cls(percentile(values, 50), percentile(values, 95), max(values) if values else None)

    def as_dict(self) -> dict:
        return {"p50": self.p50, "p95": self.p95, "max": self.max}

    def text(self) -> str:
        if self.max is None:
            return "none"
        return f"p50 {self.p50:.2f} s, p95 {self.p95:.2f} s, max {self.max:.2f} s"


@dataclass(frozen=True)
class LoadReport:
    clients: int
    max_tokens: int
    completed: int
    failed: dict[str, int]  # every kind of FAILURE_KINDS, 0 included
    examples: dict[str, str]  # per kind that happened: its most common detail, with its count
    rejected_429: int
    retry_after_seen: int  # of the 429s, those that said when to come back
    ttft_s: Spread  # of the completed requests
    latency_s: Spread
    generated_tokens: int
    wall_s: float
    after: ClientResult | None  # one request sent once the load was over (None: not sent)

    @classmethod
    def of(cls, results: list[ClientResult], max_tokens: int, wall_s: float,
           after: ClientResult | None) -> LoadReport:
        done = [r for r in results if r.completed]
        rejected = [r for r in results if r.rejected]
        failures = [r for r in results if r.failure is not None]
        kinds = Counter(r.failure for r in failures)
        examples: dict[str, str] = {}
        for (kind, detail), n in Counter((r.failure or "", r.detail) for r in failures).most_common():
            examples.setdefault(kind, f"{n}x {detail}")
        return cls(
            clients=len(results), max_tokens=max_tokens, completed=len(done),
            failed={kind: kinds.get(kind, 0) for kind in FAILURE_KINDS}, examples=examples,
            rejected_429=len(rejected), retry_after_seen=sum(r.retry_after is not None for r in rejected),
            ttft_s=Spread.of([r.ttft_s for r in done if r.ttft_s is not None]),
            latency_s=Spread.of([r.latency_s for r in done if r.latency_s is not None]),
            generated_tokens=sum(r.tokens for r in done), wall_s=wall_s, after=after,
        )

    @property
    def failed_total(self) -> int:
        return sum(self.failed.values())

    @property
    def tok_s(self) -> float:
        """Generated tokens of the completed requests over the whole run's wall time."""
        return self.generated_tokens / self.wall_s if self.wall_s > 0 else 0.0

    def as_dict(self) -> dict:
        return {
            "clients": self.clients, "max_tokens": self.max_tokens, "completed": self.completed,
            "failed": {**self.failed, "total": self.failed_total}, "failure_examples": self.examples,
            "rejected_429": self.rejected_429, "retry_after_seen": self.retry_after_seen,
            "ttft_s": self.ttft_s.as_dict(), "latency_s": self.latency_s.as_dict(),
            "generated_tokens": self.generated_tokens, "wall_s": self.wall_s, "tok_s": self.tok_s,
            "after_load": None if self.after is None else {
                "completed": self.after.completed, "status": self.after.status, "failure": self.after.failure,
                "detail": self.after.detail, "latency_s": self.after.latency_s, "ttft_s": self.after.ttft_s},
        }

    def lines(self) -> list[str]:
        kinds = ", ".join(f"{kind} {n}" for kind, n in self.failed.items())
        out = [
            f"completed {self.completed}/{self.clients}, 429 {self.rejected_429} "
            f"(Retry-After on {self.retry_after_seen}), failed {self.failed_total} ({kinds})",
            *(f"  {kind}, e.g.: {detail}" for kind, detail in self.examples.items()),
            f"TTFT     {self.ttft_s.text()}",
            f"latency  {self.latency_s.text()}",
            f"generated {self.generated_tokens} tokens in {self.wall_s:.1f} s: {self.tok_s:.1f} tok/s",
        ]
        if self.after is not None:
            out.append(f"a new request after the load: {after_text(self.after)}")
        return out


def after_text(result: ClientResult) -> str:
    took = f"{result.latency_s:.2f} s" if result.latency_s is not None else "?"
    if result.completed:
        return f"served in {took} (first token after {result.ttft_s or 0.0:.2f} s)"
    if result.rejected:
        return f"429 after {took} (Retry-After {result.retry_after})"
    return f"FAILED after {took}: {result.failure}, {result.detail}"
