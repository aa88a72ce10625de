"""`chorus bench`, `bench-agents`, `bench-documents`, `bench-images`, `bench-jobs`, `bench-engines`, `bench-grammar`,
`bench-schemas`, `bench-serve`, `bench-storage`, `bench-restart` and `bench-ui`: the benchmarks.

The measuring code is in app/bench/ (bench-ui's in ui/bench.py, run through app/cli/gui.py):
each benchmark takes an options dataclass (and the engine's LoadSettings) and returns its
report. Here are their command-line options, turned into those inputs, and the printing.
Each handler imports its benchmark: those load llama.cpp, and the CLI's start (`chorus app`
is its process too) must not.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli import gui
from app.cli.command import add_command
from app.cli.engine_args import add_model_args, resolve_model, settings_from_args
from app.models import catalog as model_catalog
from app.paths import models_dir

if TYPE_CHECKING:
    from app.bench import serve


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _register_ui(sub)
    _register_storage(sub)
    _register_engine(sub)
    _register_engines(sub)
    _register_grammar(sub)
    _register_schemas(sub)
    _register_serve(sub)
    _register_restart(sub)
    _register_documents(sub)
    _register_images(sub)
    _register_agents(sub)
    _register_jobs(sub)


def _register_ui(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ubench = add_command(sub, "bench-ui", gui.run_bench_ui, help="GUI event-loop stalls while N tabs stream")
    add_model_args(ubench)
    ubench.add_argument("--tabs", type=int, default=16)
    ubench.add_argument("--max-tokens", type=int, default=128)
    ubench.add_argument("--panel", action="store_true",
                        help="open the performance panel while the tabs stream (timed), and keep it open")
    ubench.add_argument("--serve", action="store_true",
                        help="switch the HTTP server on and off while the tabs stream (timed)")
    ubench.add_argument("--compare", action="store_true", help="4 of the tabs are panes of a compare view on screen")
    ubench.add_argument("--json", action="store_true")


def _register_storage(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sbench = add_command(sub, "bench-storage", _storage,
                         help="time checkpoints, opening and search on a scratch database")
    sbench.add_argument("--messages", type=int, default=100_000, help="messages in the search corpus")
    sbench.add_argument("--long", type=int, default=10_000, help="messages in the long conversation")
    sbench.add_argument("--json", action="store_true")


def _register_engine(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = add_command(sub, "bench", _engine, help="N chats through the engine vs one after another")
    add_model_args(bench)
    bench.add_argument("--chats", type=int, default=8)
    bench.add_argument("--system-tokens", type=int, default=1000)
    bench.add_argument("--max-tokens", type=int, default=128)
    bench.add_argument("--warm", action="store_true", help="pin the system prompt before the clock starts")
    bench.add_argument("--n-seq-max", type=int, default=None, help="engine sequences (default: chats + 2)")
    bench.add_argument("--skip-baseline", action="store_true", help="run only the engine")
    bench.add_argument("--native", action="store_true", help="also time llama.cpp's raw batched decode")
    bench.add_argument("--sampling", choices=("greedy", "default"), default="greedy",
                       help="greedy (what the ratios compare) or the app's default chat sampling")
    bench.add_argument("--workload", choices=("chat", "edit"), default="chat",
                       help="chat: questions under a shared system prompt; edit: each chat copies a given text "
                            "(what --speculative lookup speeds up)")
    bench.add_argument("--spec-rounds", type=int, default=0, metavar="N",
                       help="with --speculative: also run the workload with it off, alternating on fresh engines, "
                            "N runs a side; prints each side's decode rate and their ratio")
    bench.add_argument("--repeat", type=int, default=0, metavar="N",
                       help="the same chats N times more on the same engine (a regenerated reply): "
                            "each run's decode rate and tokens a step")
    bench.add_argument("--kv-rounds", type=int, default=0, metavar="N",
                       help="with --kv-type q8_0 or q4_0: also run the workload on an f16 KV cache, alternating, "
                            "N runs a side; prints the decode ratio, KV bytes and the greedy agreement")
    bench.add_argument("--json", action="store_true", help="print one JSON object")


def _register_engines(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ebench = add_command(sub, "bench-engines", _engines,
                         help="two models decoding at once: all cores each vs cores split")
    ebench.add_argument("--models", nargs=2, default=["smollm2-135m", "gemma3-270m"],
                        help="catalog names or GGUF paths")
    ebench.add_argument("--threads", type=int, default=None, help="cores to use (default: physical cores)")
    ebench.add_argument("--max-tokens", type=int, default=150)
    ebench.add_argument("--json", action="store_true")


def _register_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sbench = add_command(sub, "bench-serve", _serve,
                         help="N concurrent raw-HTTP streaming clients against the OpenAI-compatible server")
    add_model_args(sbench)
    sbench.add_argument("--clients", type=int, default=32, help="concurrent streaming requests")
    sbench.add_argument("--max-tokens", type=int, default=16, help="max_tokens of each request")
    sbench.add_argument("--server", default=None,
                        help="URL of a running server (default: start `chorus serve` on a free loopback port)")
    sbench.add_argument("--api-key", default=None, help="sent as 'Authorization: Bearer KEY'")
    sbench.add_argument("--parallel", type=int, default=8, help="the started server's --parallel")
    sbench.add_argument("--timeout", type=float, default=120.0, help="seconds a client waits for its whole answer")
    sbench.add_argument("--system-words", type=int, default=0,
                        help="a system prompt of about this many words (4/3 tokens each) shared by the clients")
    sbench.add_argument("--rounds", type=int, default=1,
                        help="send the same requests again once each round has finished; the last round's TTFT "
                             "is the warm one")
    sbench.add_argument("--json", action="store_true", help="print one JSON object")


def _register_restart(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rbench = add_command(sub, "bench-restart", _restart,
                         help="TTFT of a long chat's next turn after a restart, with and without the disk prompt cache")
    add_model_args(rbench)
    rbench.add_argument("--history-tokens", type=int, default=4000, help="tokens of the conversation before the turn")
    rbench.add_argument("--json", action="store_true", help="print one JSON object")


def _restart(args: argparse.Namespace, base: Path) -> int:
    from app.bench import restart
    options = restart.RestartBenchOptions(history_tokens=args.history_tokens, ctx=args.ctx)
    report = restart.run_restart_bench(options, settings_from_args(args, resolve_model(args, base)))
    print(restart.render(report, args.json))
    return 0


def _register_documents(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dbench = add_command(sub, "bench-documents", _documents,
                         help="one document asked about by N chats at once, one after another, and after a restart")
    add_model_args(dbench)
    dbench.add_argument("--document", type=Path, default=None,
                        help="the file asked about (default: a generated manual of --document-tokens)")
    dbench.add_argument("--document-tokens", type=int, default=3000, help="size of the generated manual")
    dbench.add_argument("--chats", type=int, default=8)
    dbench.add_argument("--max-tokens", type=int, default=32)
    dbench.add_argument("--uncached", action="store_true",
                        help="also one after another with each question computing the document (no shared cache)")
    dbench.add_argument("--json", action="store_true", help="print one JSON object")


def _documents(args: argparse.Namespace, base: Path) -> int:
    from app.bench import documents
    options = documents.DocumentBenchOptions(document=args.document, chats=args.chats, max_tokens=args.max_tokens,
                                             generated_tokens=args.document_tokens, uncached=args.uncached)
    report = documents.run_documents_bench(options, settings_from_args(args, resolve_model(args, base)))
    print(documents.render(report, args.json))
    return 0


def _register_images(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ibench = add_command(sub, "bench-images", _images,
                         help="one image asked about by N chats at once vs each encoding it, the decoding chats' "
                              "stall beside images, and after a restart (needs --mmproj)")
    add_model_args(ibench)
    ibench.add_argument("--image", type=Path, default=None, help="the image asked about (default: a generated "
                                                                  "512x512 PNG)")
    ibench.add_argument("--chats", type=int, default=8)
    ibench.add_argument("--max-tokens", type=int, default=32)
    ibench.add_argument("--text-chats", type=int, default=8, help="text chats decoding in the stall runs")
    ibench.add_argument("--text-tokens", type=int, default=96, help="each text chat's reply in the stall runs")
    ibench.add_argument("--json", action="store_true", help="print one JSON object")


def _images(args: argparse.Namespace, base: Path) -> int:
    from app.bench import images
    options = images.ImageBenchOptions(image=args.image, chats=args.chats, max_tokens=args.max_tokens,
                                       text_chats=args.text_chats, text_tokens=args.text_tokens)
    try:
        report = images.run_images_bench(options, settings_from_args(args, resolve_model(args, base)))
    except ValueError as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    print(images.render(report, args.json))
    return 0


def _storage(args: argparse.Namespace, base: Path) -> int:
    from app.bench import storage
    # A scratch database: the data folder is not touched.
    result = storage.run_storage_bench(storage.StorageBenchOptions(messages=args.messages, long=args.long))
    print(storage.render(result, args.json))
    return 0


def _register_grammar(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gbench = add_command(sub, "bench-grammar", _grammar, help="whether grammar-constrained chats slow the others")
    add_model_args(gbench)
    gbench.add_argument("--chats", type=int, default=8)
    gbench.add_argument("--grammar-chats", type=int, default=4, help="of them, how many follow a grammar")
    gbench.add_argument("--max-tokens", type=int, default=128)
    gbench.add_argument("--system-tokens", type=int, default=1000)
    gbench.add_argument("--rounds", type=int, default=3, help="rounds of the three runs, in alternation")
    gbench.add_argument("--json", action="store_true", help="print one JSON object")


def _grammar(args: argparse.Namespace, base: Path) -> int:
    from app.bench import grammar_rows
    report = grammar_rows.run_grammar_bench(settings_from_args(args, resolve_model(args, base)), args.chats,
                                            args.grammar_chats, args.max_tokens, args.system_tokens, args.rounds)
    print(grammar_rows.render(report, args.json))
    return 0


def _register_schemas(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sbench = add_command(sub, "bench-schemas", _schemas,
                         help="JSONSchemaBench-style coverage of structured output (optionally beside llama-server)")
    add_model_args(sbench)
    sbench.add_argument("--data", type=Path, required=True,
                        help="a folder of schema sets (JSONSchemaBench's data/: a folder of .json schemas a set)")
    sbench.add_argument("--sets", default="Glaiveai2K,Github_easy,Github_medium,Kubernetes,Snowplow",
                        help="comma-separated set names (folders under --data)")
    sbench.add_argument("--per-set", type=int, default=40, help="schemas sampled from each set")
    sbench.add_argument("--max-tokens", type=int, default=384)
    sbench.add_argument("--concurrency", type=int, default=8, help="requests at once (each side)")
    sbench.add_argument("--seed", type=int, default=0, help="which schemas are sampled")
    sbench.add_argument("--peer", help="a llama-server's base URL: the same requests there, in the same run")
    sbench.add_argument("--plain-per-set", type=int, default=None,
                        help="schemas of each set also asked without a grammar, for the decode rates (default: all)")
    sbench.add_argument("--json", action="store_true", help="print one JSON object, every schema's outcome too")


def _schemas(args: argparse.Namespace, base: Path) -> int:
    from app.bench import schemas
    options = schemas.SchemaBenchOptions(data=args.data, sets=tuple(s for s in args.sets.split(",") if s),
                                         per_set=args.per_set, max_tokens=args.max_tokens,
                                         concurrency=args.concurrency, seed=args.seed, peer=args.peer,
                                         plain_per_set=args.plain_per_set)
    try:
        report = schemas.run_schema_bench(options, settings_from_args(args, resolve_model(args, base)))
    except ValueError as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    print(schemas.render(report, args.json))
    return 0


def _engine(args: argparse.Namespace, base: Path) -> int:
    from app.bench import engine
    options = engine.EngineBenchOptions(
        chats=args.chats, system_tokens=args.system_tokens, max_tokens=args.max_tokens, warm=args.warm,
        sampling=args.sampling, native=args.native, skip_baseline=args.skip_baseline,
        n_seq_max=args.n_seq_max, ctx=args.ctx, workload=args.workload, spec_rounds=args.spec_rounds,
        kv_rounds=args.kv_rounds, repeat=args.repeat,
    )
    report = engine.run_bench(options, settings_from_args(args, resolve_model(args, base)))
    print(engine.render(report, args.json))
    return 0


def _serve(args: argparse.Namespace, base: Path) -> int:
    from app.bench import serve
    options = serve.ServeBenchOptions(clients=args.clients, max_tokens=args.max_tokens, timeout_s=args.timeout,
                                      api_key=args.api_key, server=args.server, start=_server_to_start(args, base),
                                      system_words=args.system_words, rounds=args.rounds)
    try:
        result = serve.run_bench_serve(options)
    except (serve.ServerStartError, ValueError) as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    print(serve.render(result, args.json))
    return 0


def _server_to_start(args: argparse.Namespace, base: Path) -> serve.ServerOptions | None:
    """The `chorus serve` bench-serve starts, unless it was given a running server's URL."""
    from app.bench import serve
    if args.server:
        return None
    return serve.ServerOptions(base=base, model=resolve_model(args, base), parallel=args.parallel, ctx=args.ctx,
                               threads=args.threads, gpu_layers=args.gpu_layers, reproducible=args.reproducible)


def _engines(args: argparse.Namespace, base: Path) -> int:
    from app.bench import engines
    models = tuple(model_catalog.resolve(m, models_dir(base)) for m in args.models)
    options = engines.EnginesBenchOptions(models=models, threads=args.threads, max_tokens=args.max_tokens)
    print(engines.render(engines.run_engines_bench(options), args.json))
    return 0


def _register_agents(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    abench = add_command(sub, "bench-agents", _agents,
                         help="N agent chats calling a slow local tool: what follow-up turns compute, decode rate")
    add_model_args(abench)
    abench.add_argument("--agents", type=int, default=8)
    abench.add_argument("--rounds", type=int, default=3, help="questions per agent, each a call and an answer")
    abench.add_argument("--tool-seconds", type=float, default=0.5, help="how long the tool takes to answer")
    abench.add_argument("--max-tokens", type=int, default=48, help="of each model turn")
    abench.add_argument("--tools", type=int, default=1,
                        help="tools the local server offers (the weather tool and look-ups never called): a long "
                             "tool list, computed once for all the agents' first turns (at most 49)")
    abench.add_argument("--json", action="store_true", help="print one JSON object")


def _agents(args: argparse.Namespace, base: Path) -> int:
    from app.bench import agents
    options = agents.AgentBenchOptions(agents=args.agents, rounds=args.rounds, tool_seconds=args.tool_seconds,
                                       max_tokens=args.max_tokens, tools=args.tools)
    report = agents.run_agents_bench(options, settings_from_args(args, resolve_model(args, base)))
    print(agents.render(report, args.json))
    return 0


def _register_jobs(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    jbench = add_command(sub, "bench-jobs", _jobs,
                         help="a background job against the engine's own batched rate, and beside a focused chat")
    add_model_args(jbench)
    jbench.add_argument("--items", type=int, default=1000, help="rows of the job (short questions)")
    jbench.add_argument("--width", type=int, default=8, help="engine sequences (the batch's width)")
    jbench.add_argument("--max-tokens", type=int, default=16, help="of each item")
    jbench.add_argument("--system-words", type=int, default=120, help="the job's system prompt, about this many words")
    jbench.add_argument("--window", type=int, default=None,
                        help="the runner's items in flight (default: chorus batch run's alone, "
                             "the desktop's beside the chat)")
    jbench.add_argument("--rounds", type=int, default=2,
                        help="engine and job phases each, alternating (engine, job, job, engine, ...)")
    jbench.add_argument("--chat-turns", type=int, default=8,
                        help="pairs of the chat's turns: one typed while the job runs, one alone")
    jbench.add_argument("--chat-every", type=float, default=5.0, help="seconds between the chat's turns")
    jbench.add_argument("--chat-max-tokens", type=int, default=32, help="of each chat turn")
    jbench.add_argument("--json", action="store_true", help="print one JSON object")


def _jobs(args: argparse.Namespace, base: Path) -> int:
    from app.bench import jobs
    options = jobs.JobsBenchOptions(items=args.items, width=args.width, max_tokens=args.max_tokens,
                                    system_words=args.system_words, window=args.window, chat_turns=args.chat_turns,
                                    chat_every_s=args.chat_every, chat_max_tokens=args.chat_max_tokens,
                                    rounds=args.rounds)
    report = jobs.run_jobs_bench(options, settings_from_args(args, resolve_model(args, base)))
    print(jobs.render(report, args.json))
    return 0
