"""The wall time of one turn's calls through the terminal's tool loop (app/tools/agent.py,
ToolLoop): a scripted model writes N calls to the test MCP server's slow tool (stdio, a
child process) and then its answer, approved without asking; the loop's run() is timed,
from the first turn's request to the answer. Its median over the runs is printed as JSON.

    python -m tests.support.tool_calls_timing [--calls 3] [--seconds 0.5] [--runs 5]

Only ToolLoop's constructor and run() are used, so the tree before issue 38 runs it too
(PYTHONPATH=that tree, this file by its path): docs/benchmarks.md#tool-calls-of-one-turn-at-once."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from app.tools import McpManager, StdioServer, Toolbox, ToolLoop
from inference import Delta, FinishReason, SamplingParams

SERVER = Path(__file__).parent / "mcp_test_server.py"


class Scripted:
    """A model that writes its replies at once, in order."""

    info = SimpleNamespace(chat_template=None)

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)

    def stream(self, chat, sink) -> str:
        sink(Delta(chat.request_id, text=self.replies.pop(0), token_ids=(1,)))
        sink(Delta.finished_with(chat.request_id, FinishReason.STOP))
        return chat.request_id

    def cancel(self, request_id: str) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    turn = json.dumps([{"name": "slow", "arguments": {"seconds": args.seconds}}] * args.calls)
    with McpManager(start_timeout_s=30) as manager:
        manager.start(StdioServer("test", sys.executable, (str(SERVER), "stdio"))).result(30)
        toolbox = Toolbox(manager, [t for t in manager.tools() if t.name == "slow"], timeout_s=60)
        walls = []
        for _ in range(args.runs):
            loop = ToolLoop(Scripted(turn, "Slept."), toolbox, [{"role": "user", "content": "Sleep."}],
                            SamplingParams.greedy(16))
            began = time.monotonic()
            results = sum(1 for e in loop.run() if type(e).__name__ == "CallFinished")
            walls.append(time.monotonic() - began)
            assert results == args.calls, f"{results} results of {args.calls} calls"
    tree = Path(sys.modules["app"].__file__ or "").parents[1]  # the tree whose loop ran
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=tree).stdout.strip()
    print(json.dumps({"tree": str(tree), "commit": commit, "calls": args.calls, "seconds": args.seconds,
                      "runs": args.runs, "wall_s_median": round(statistics.median(walls), 3),
                      "wall_s": [round(w, 3) for w in walls]}))


if __name__ == "__main__":
    main()
