"""`chorus batch`: a prompt template over every row of a CSV/JSONL file, on the engine's
spare capacity, each result stored as it finishes (app/jobs); list, status, cancel, delete, export."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from app.cli.chat_tool_args import add_tool_args, configured_servers, web_settings_of
from app.cli.command import add_command
from app.cli.engine_args import add_model_args, library_defaults, resolve_model, settings_from_args
from app.paths import kv_cache_dir
from storage import DEFAULT_FILENAME, JobsRepository, open_database


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    batch = add_command(sub, "batch", list_batches,
                        help="run a prompt over every row of a CSV/JSONL file (background jobs); bare: list")
    verbs = batch.add_subparsers(dest="batch_command")
    run = add_command(verbs, "run", run_batch, help="run (or resume, with --job) a job")
    add_model_args(run)
    run.add_argument("input", nargs="?", help="CSV (header row) or JSONL file: one item a row; a column "
                                              "@seed, @temperature, ... sets that for its row")
    source = run.add_mutually_exclusive_group()
    source.add_argument("--template", help="file holding the prompt template ($column or ${column})")
    source.add_argument("--prompt", help="the prompt template itself")
    run.add_argument("--seeds", type=int, metavar="N",
                     help="instead of INPUT: the prompt N times, with seeds 1..N (and --temperature)")
    run.add_argument("--temperature", type=float, default=None, help="the job's temperature (default: the engine's)")
    run.add_argument("--system", default="", help="system prompt")
    run.add_argument("--schema", help="JSON Schema file every answer must follow")
    run.add_argument("--max-tokens", type=int, default=256)
    run.add_argument("--window", type=int, default=None,
                     help="items in flight at once (default: twice the engine's sequences)")
    run.add_argument("--out", help="export the results here when done (.csv or .jsonl)")
    run.add_argument("--json", action="store_true", help="print the job's counts as JSON")
    run.add_argument("--job", help="resume this job instead of creating one (with the tools it was made with)")
    tools = run.add_argument_group("tools", "MCP servers and web tools every item's model may call, each call "
                                            "run without asking (naming them approves them); kept with the job")
    add_tool_args(tools, asks=False)
    add_command(verbs, "list", list_batches, help="list jobs")
    for verb, handler, text in (("status", batch_status, "a job's item counts"),
                                ("cancel", cancel_batch, "cancel a job (its finished items stay)")):
        add_command(verbs, verb, handler, help=text).add_argument("job")
    delete = add_command(verbs, "delete", delete_batch,
                         help="delete a job, its items and results (a server batch: once ended, with its output files)")
    delete.add_argument("job")
    delete.add_argument("--force", action="store_true",
                        help="delete a job stored running that no process runs any more (a kill left it so)")
    export = add_command(verbs, "export", export_batch, help="write a job's results (.csv or .jsonl)")
    export.add_argument("job")
    export.add_argument("out")


def _jobs(data_dir: Path) -> JobsRepository:
    return JobsRepository(open_database(data_dir / DEFAULT_FILENAME))


def _fail(message: str) -> int:
    print(f"chorus: {message}", file=sys.stderr)
    return 2


def run_batch(args: argparse.Namespace, data_dir: Path) -> int:
    from app.jobs import (
        InputError,
        JobRunner,
        JobSpec,
        JobToolsError,
        default_window,
        export,
        model_name,
        new_job,
        read_rows,
        seed_rows,
    )
    from app.output_schema import SchemaRefused
    from inference import Engine, ModelLoadError

    jobs = _jobs(data_dir)
    try:
        if args.job:
            job = jobs.get(args.job)
            if job is None:
                return _fail(f"no job {args.job}")
            if job.kind != "template":  # an OpenAI batch: `chorus serve` runs it, with its own Work
                return _fail(f"{args.job} is a batch of the server's (/v1/batches): `chorus serve` runs it")
            job_id = args.job
            spec = JobSpec.from_json(job.spec)
            if spec.model and args.model is None:
                args.model = spec.model  # resumed on the model it ran on
        else:
            if not (args.input or args.seeds is not None) or not (args.template or args.prompt):
                return _fail("batch run needs INPUT (or --seeds N) and --template or --prompt (or --job to resume)")
            if args.input and args.seeds is not None:
                return _fail("batch run takes INPUT or --seeds N, not both (a column @seed gives each row its own)")
            if args.seeds is not None and args.seeds < 1:
                return _fail(f"--seeds must be at least 1, got {args.seeds}")
            template = Path(args.template).read_text(encoding="utf-8") if args.template else args.prompt
            schema = json.loads(Path(args.schema).read_text(encoding="utf-8")) if args.schema else None
            sampling: dict = {"max_tokens": args.max_tokens}
            if args.temperature is not None:
                sampling["temperature"] = args.temperature
            spec = JobSpec(template=template, system_prompt=args.system, sampling=sampling, json_schema=schema,
                           tools=_job_tools(args))
            spec.grammar()  # a schema the engine cannot enforce is refused now, as the server refuses it
        model = resolve_model(args, data_dir)
        if args.job:
            if not spec.runs_on(str(model)):
                return _fail(f"job {job_id} runs on {model_name(spec.model)}, not {model.name}: "
                             "leave --model out to resume it on its own")
        else:
            spec = replace(spec, model=str(model))
            rows, source = ((seed_rows(args.seeds), f"{args.seeds} seeds") if args.seeds is not None
                            else (read_rows(Path(args.input)), Path(args.input).name))
            job_id = new_job(jobs, rows, spec, source=source).id
        engine = Engine.start(settings_from_args(args, model, library_defaults(data_dir, model),
                                                 kv_cache_dir=kv_cache_dir(data_dir)))
    except (InputError, ModelLoadError, OSError, json.JSONDecodeError, SchemaRefused, ValueError) as exc:
        jobs.db.close()  # ValueError: McpConfigError too, a schema beside tools
        return _fail(str(exc))
    print(f"job {job_id}", file=sys.stderr)
    try:
        window = args.window or default_window(engine, own_engine=True)  # no chat shares this engine
        try:
            status = JobRunner(jobs, engine, job_id, window=window).run(on_progress=_progress)
        except JobToolsError as exc:
            return _fail(f"{exc}; the job is kept: resume it with --job {job_id}")
        counts = jobs.counts(job_id)
        print("", file=sys.stderr)
        if args.out:
            export(jobs, job_id, Path(args.out))
        print(json.dumps({"job": job_id, "status": status, **counts}) if args.json
              else f"{job_id}: {status}, {counts['done']} done, {counts['failed']} failed, {counts['pending']} pending")
    finally:
        engine.shutdown()
        jobs.db.close()
    return 0


def _job_tools(args: argparse.Namespace) -> dict | None:
    """The job's tools from the tool options (JobTools' JSON), None without any;
    McpConfigError (a ValueError) for a server file or setting that cannot be."""
    from dataclasses import asdict

    from app.jobs import JobTools

    servers, web = configured_servers(args), web_settings_of(args)
    if args.tool_choice == "none" or not (servers or web):
        return None
    return JobTools.of(servers, web=asdict(web) if web is not None else None, choice=args.tool_choice,
                       max_rounds=args.max_tool_rounds, timeout_s=args.tool_timeout,
                       enabled=args.enabled_tools).to_json()


def _progress(counts: dict) -> None:
    total = sum(counts.values())
    print(f"\r{counts['done'] + counts['failed']}/{total} ({counts['failed']} failed)", end="", file=sys.stderr)


def list_batches(args: argparse.Namespace, data_dir: Path) -> int:
    jobs = _jobs(data_dir)
    try:
        for job in jobs.all():
            c = jobs.counts(job.id)
            print(f"{job.id}\t{job.status}\t{job.source}\t"
                  f"{c['done']} done\t{c['failed']} failed\t{c['pending']} pending")
    finally:
        jobs.db.close()
    return 0


def batch_status(args: argparse.Namespace, data_dir: Path) -> int:
    jobs = _jobs(data_dir)
    try:
        job = jobs.get(args.job)
        if job is None:
            return _fail(f"no job {args.job}")
        print(json.dumps({"job": job.id, "status": job.status, "source": job.source, **jobs.counts(job.id)}))
    finally:
        jobs.db.close()
    return 0


def cancel_batch(args: argparse.Namespace, data_dir: Path) -> int:
    jobs = _jobs(data_dir)
    try:
        if jobs.get(args.job) is None:
            return _fail(f"no job {args.job}")
        jobs.set_status(args.job, "cancelled")
    finally:
        jobs.db.close()
    return 0


def delete_batch(args: argparse.Namespace, data_dir: Path) -> int:
    from app.jobs import DeleteRefused, delete_job, owned_files
    from app.paths import files_dir
    from app.server.batches.files import delete_file

    jobs = _jobs(data_dir)
    try:
        gone = delete_job(jobs, args.job, force=args.force)
    except DeleteRefused as refused:
        return _fail(str(refused))
    finally:
        jobs.db.close()
    removed = [fid for fid in owned_files(gone) if delete_file(files_dir(data_dir), fid)]
    print(f"deleted {gone.id}" + (f" and its files {', '.join(removed)}" if removed else ""))
    return 0


def export_batch(args: argparse.Namespace, data_dir: Path) -> int:
    from app.jobs import export

    jobs = _jobs(data_dir)
    try:
        if jobs.get(args.job) is None:
            return _fail(f"no job {args.job}")
        print(f"{export(jobs, args.job, Path(args.out))} rows written to {args.out}")
    finally:
        jobs.db.close()
    return 0
