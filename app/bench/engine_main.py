"""`python -m app.bench.engine_main --model FILE ...`: `chorus bench --json --skip-baseline`
(app/bench/engine.py, the same run and the same JSON) without the command line around it,
which imports every command's packages (the server's, MCP's, storage's, the documents').
This needs only the engine's: what `make gpu-check` runs on a machine that has just those."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.bench.engine import EngineBenchOptions, render, run_bench
from inference import LoadSettings


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m app.bench.engine_main", description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="a GGUF file")
    parser.add_argument("--chats", type=int, default=8)
    parser.add_argument("--system-tokens", type=int, default=1000)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--gpu-layers", type=int, default=None, help="layers to offload (default: all if supported)")
    parser.add_argument("--threads", type=int, default=None, help="threads (default: physical cores)")
    parser.add_argument("--sampling", choices=("greedy", "default"), default="greedy")
    parser.add_argument("--native", action="store_true", help="also time llama.cpp's raw batched decode")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if not args.model.is_file():
        print(f"engine bench: no model file {args.model}", file=sys.stderr)
        return 2
    options = EngineBenchOptions(chats=args.chats, system_tokens=args.system_tokens, max_tokens=args.max_tokens,
                                 sampling=args.sampling, native=args.native, skip_baseline=True)
    values = {"n_gpu_layers": args.gpu_layers, "n_threads": args.threads}
    settings = LoadSettings(model_path=args.model, **{k: v for k, v in values.items() if v is not None})
    print(render(run_bench(options, settings), as_json=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
