"""`make gpu-check`'s pieces that run without a GPU: the refusal, the NVML sampler on a
stand-in source, the JSON summary's assembly (the 8-chat claim among it), the bench's
command, and a missing prepared folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from app.bench.gpu_check import (
    NO_GPU,
    Deadline,
    NvmlSampler,
    bench_command,
    refusal,
    run_report,
    summarize_nvml,
    summary,
)
from app.perf.hardware import GpuSample
from tests.support.paths import ROOT


def gpu(index: int, util: float, mem: float, power: float | None) -> GpuSample:
    return GpuSample(index, f"GPU {index}", util, mem, 1000.0, 50.0, power)


def test_no_nvidia_smi_is_refused_in_one_line() -> None:
    why = refusal(which=lambda _name: None)
    assert why is not None and "nvidia-smi" in why and "\n" not in why


def test_nvml_without_a_device_is_refused() -> None:
    def broken() -> int:
        raise RuntimeError("NVML Shared Library Not Found")

    assert "NVML Shared Library Not Found" in (refusal(lambda _n: "/usr/bin/nvidia-smi", broken) or "")
    assert "no NVIDIA device" in (refusal(lambda _n: "/usr/bin/nvidia-smi", lambda: 0) or "")
    assert refusal(lambda _n: "/usr/bin/nvidia-smi", lambda: 1) is None


def test_the_script_exits_2_with_a_reason_where_there_is_no_nvidia_smi(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # a PATH with only what the script needs before it checks
    bin_dir.mkdir()
    dirname = shutil.which("dirname")
    assert dirname is not None
    os.symlink(dirname, bin_dir / "dirname")
    done = subprocess.run(["/bin/bash", str(ROOT / "packaging" / "gpu_check.sh")], capture_output=True,
                          text=True, env={"PATH": str(bin_dir)}, timeout=30)
    assert done.returncode == NO_GPU
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
    assert "no nvidia-smi" in done.stderr


def test_the_sampler_reads_its_source_until_stopped_and_survives_a_failed_read() -> None:
    reads = 0
    enough = threading.Event()

    def source() -> tuple[GpuSample, ...]:
        nonlocal reads
        reads += 1
        if reads == 2:
            raise RuntimeError("NVML hiccup")
        if reads >= 5:
            enough.set()
        return (gpu(0, 10.0 * reads, 100.0 * reads, 50.0),)

    sampler = NvmlSampler(source, interval_s=0.001).start()
    assert enough.wait(10)
    readings = sampler.stop()
    assert sampler.errors == 1 and len(readings) == reads - 1 >= 4
    [s] = summarize_nvml(readings)
    assert s["samples"] == len(readings) and s["utilization_pct_max"] == 10.0 * reads
    assert s["memory_used_mib_max"] == 100.0 * reads and s["power_w_mean"] == 50.0


def test_nvml_summary_is_per_gpu_with_means_and_peaks() -> None:
    readings = [(gpu(0, 20, 500, 100), gpu(1, 0, 10, None)), (gpu(0, 60, 700, 300), gpu(1, 0, 10, None))]
    first, second = summarize_nvml(readings)
    assert first == {
        "index": 0, "name": "GPU 0", "samples": 2, "utilization_pct_mean": 40.0, "utilization_pct_max": 60,
        "memory_used_mib_max": 700.0, "memory_total_mib": 1000.0, "power_w_mean": 200.0, "power_w_max": 300.0,
    }
    assert second["power_w_mean"] is None and second["utilization_pct_max"] == 0
    assert summarize_nvml([]) == []


def test_the_summary_carries_each_runs_bench_figures_or_its_error() -> None:
    bench = {"engine": {"host_ms_per_step": 0.7, "decode_tok_s": 900.0}, "native_decode_tok_s": 1000.0,
             "ratio": {"decode_vs_native": 0.9}}
    readings = [(gpu(0, 90, 2000, 400),)]
    good = run_report(8, "greedy", 12.345, json.dumps(bench), None, readings)
    failed = run_report(64, "default", 90.0, None, "timed out after 90 s", [])
    garbled = run_report(1, "greedy", 1.0, "Traceback ...", None, [])
    out = summary({"ok": True, "cached": False, "seconds": 300.0}, [good, failed, garbled], 420.04)
    assert json.loads(json.dumps(out)) == out  # plain JSON
    assert out["ok"] is False and out["elapsed_s"] == 420.0
    assert out["host_ms_per_step"] == {"8/greedy": 0.7}
    first = out["runs"][0]
    assert first["ok"] and first["seconds"] == 12.35 and first["native_decode_tok_s"] == 1000.0
    assert first["engine"]["decode_tok_s"] == 900.0 and first["gpus"][0]["utilization_pct_max"] == 90
    assert out["runs"][1]["error"] == "timed out after 90 s"
    assert out["runs"][2]["error"] == "the bench printed no JSON"
    assert summary({"ok": True}, [good], 1.0)["ok"] is True


def test_each_step_gets_its_cap_but_never_past_the_deadline() -> None:
    now = [0.0]
    deadline = Deadline(600.0, clock=lambda: now[0])
    assert deadline.cap(420.0) == 420.0
    now[0] = 550.0
    assert deadline.cap(90.0) == 50.0
    now[0] = 700.0
    assert deadline.cap(90.0) == 0.0


def test_bench_commands_run_the_engine_bench_alone_offload_every_layer_and_time_native_decode_when_greedy() -> None:
    greedy = bench_command(Path("/usr/bin/python3"), 32, "greedy", Path("/w/m.gguf"))
    assert greedy[:3] == ["/usr/bin/python3", "-m", "app.bench.engine_main"]
    assert greedy[greedy.index("--chats") + 1] == "32" and greedy[greedy.index("--gpu-layers") + 1] == "999"
    assert greedy[greedy.index("--model") + 1] == "/w/m.gguf" and "--native" in greedy
    sampled = bench_command(Path("/usr/bin/python3"), 8, "default", Path("m.gguf"), max_tokens=4, gpu_layers=0)
    assert "--native" not in sampled and sampled[sampled.index("--sampling") + 1] == "default"
    assert sampled[sampled.index("--max-tokens") + 1] == "4" and sampled[sampled.index("--gpu-layers") + 1] == "0"


def bench_json(gen: float, decode: float) -> str:
    return json.dumps({"engine": {"gen_tok_s": gen, "decode_tok_s": decode, "host_ms_per_step": 0.5}})


def test_the_summary_says_how_each_size_scales_over_one_chat_and_whether_the_8_chat_claim_holds() -> None:
    runs = [run_report(1, "greedy", 5.0, bench_json(100.0, 120.0), None, []),
            run_report(8, "greedy", 6.0, bench_json(400.0, 480.0), None, []),
            run_report(32, "greedy", 7.0, None, "timed out after 60 s", []),
            run_report(1, "default", 5.0, bench_json(90.0, 100.0), None, []),
            run_report(8, "default", 6.0, bench_json(90.0 * 3.4, 100.0 * 3.6), None, [])]
    out = summary({"ok": True}, runs, 30.0)
    assert out["scaling"] == {"greedy": {"8": {"gen_tok_s": 4.0, "decode_tok_s": 4.0}},
                              "default": {"8": {"gen_tok_s": 3.4, "decode_tok_s": 3.6}}}
    assert out["claim"] == {"chats": 8, "at_least": 3.5, "gen_tok_s": {"ratio": 4.0, "holds": True},
                            "decode_tok_s": {"ratio": 4.0, "holds": True}}
    no_single = summary({"ok": True}, runs[1:3], 30.0)
    assert no_single["scaling"] == {}  # no 1-chat run: nothing to scale by
    assert no_single["claim"] == {"chats": 8, "at_least": 3.5}


def test_a_check_without_the_prepared_folder_says_how_to_make_it_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "app.bench.gpu_check", "--backend", "cpu",
                           "--prepared", str(tmp_path / "none")], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert done.returncode == NO_GPU + 1 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "make gpu-prepare" in done.stderr
