"""The result directory of tensorboard_trace_handler: its files and their
columns, the trace's kernels against the runtime's activity records, flow
arrows from each host op to the work it launched, offline analysis, and
what happens when the output cannot be written."""

from __future__ import annotations

import csv
import json
import os
import shutil
import threading
import warnings
from pathlib import Path

import pytest
import torch

import torch_npu
from torch_npu.profiler import (ProfilerActivity, ProfilerLevel, _ExperimentalConfig, profile, schedule,
                                tensorboard_trace_handler)
from torch_npu.profiler import _files
from torch_npu.profiler.analyse import main as analyse_main
from torch_npu.profiler.analysis import build_model, build_trace_view
from torch_npu.profiler.profiler import analyse
from torch_npu.profiler.raw_data import read_raw

KERNEL_LEVEL0 = ["Step Id", "Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)",
                 "Wait Time(us)", "Block Num"]
KERNEL_LEVEL1 = ["Step Id", "Device_id", "Name", "Type", "Task ID", "Stream ID", "Accelerator Core",
                 "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Num", "Input Shapes", "Input Data Types",
                 "Input Formats", "Output Shapes", "Output Data Types", "Output Formats"]
OPERATOR_DETAILS = ["Name", "Input Shapes", "Call Stack", "Host Self Duration(us)", "Host Total Duration(us)",
                    "Device Self Duration(us)", "Device Total Duration(us)", "Device Self Duration With AICore(us)",
                    "Device Total Duration With AICore(us)"]
OP_STATISTIC = ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
                "Max Time(us)", "Ratio(%)"]
STEP_TRACE_TIME = ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication",
                   "Free", "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
MEMORY_RECORD = ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)",
                 "Stream Ptr", "Device Type"]
OPERATOR_MEMORY = ["Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
                   "Duration(us)", "Active Duration(us)", "Allocation Total Allocated(MB)",
                   "Allocation Total Reserved(MB)", "Allocation Total Active(MB)", "Release Total Allocated(MB)",
                   "Release Total Reserved(MB)", "Release Total Active(MB)", "Stream Ptr", "Device Type"]


def train(prof, steps: int) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).npu()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8).npu()  # a host-to-device copy before profiling
    for _ in range(steps):
        y = torch.arange(4.0).npu()  # a memcpy in every step
        loss = (model(x).sum(dim=1) * y).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        prof.step()


def profile_run(out: Path, level: ProfilerLevel, **kwargs) -> Path:
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU], schedule=schedule(wait=1, active=2, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(out, **kwargs),
                 experimental_config=_ExperimentalConfig(profiler_level=level, data_simplification=False),
                 record_shapes=True,
                 profile_memory=True, with_stack=True) as prof:
        prof.add_metadata("model", "mlp")
        prof.add_metadata_json("sizes", '{"hidden": 16}')
        train(prof, 4)
    (result,) = out.iterdir()
    return result


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames), list(reader)


@pytest.fixture(scope="module")
def level1(tmp_path_factory) -> Path:
    return profile_run(tmp_path_factory.mktemp("level1"), ProfilerLevel.Level1)


@pytest.fixture(scope="module")
def level0(tmp_path_factory) -> Path:
    return profile_run(tmp_path_factory.mktemp("level0"), ProfilerLevel.Level0, worker_name="rank0")


def test_result_directory_layout(level1):
    host = __import__("socket").gethostname()
    assert level1.name.startswith(f"{host}_{os.getpid()}_") and level1.name.endswith("_ascend_pt")
    assert sorted(p.name for p in level1.iterdir()) == [
        "ASCEND_PROFILER_OUTPUT", "FRAMEWORK", "profiler_info.json", "profiler_metadata.json"]
    assert sorted(p.name for p in (level1 / "ASCEND_PROFILER_OUTPUT").iterdir()) == [
        "kernel_details.csv", "memory_record.csv", "op_statistic.csv", "operator_details.csv",
        "operator_memory.csv", "step_trace_time.csv", "trace_view.json"]
    info = json.loads((level1 / "profiler_info.json").read_text())
    assert info["config"]["experimental_config"]["_profiler_level"] == "Level1"
    assert info["config"]["common_config"]["schedule"] == {"wait": 1, "active": 2, "warmup": 0, "repeat": 1,
                                                           "skip_first": 0}
    metadata = json.loads((level1 / "profiler_metadata.json").read_text())
    assert metadata["model"] == "mlp" and metadata["sizes"] == {"hidden": 16}
    assert "NPU_SIM_CHECKER" in metadata["ENV_VARIABLES"] or all(
        not k.startswith("NPU_SIM_") for k in os.environ)


def test_worker_name_names_the_directory(level0):
    # {worker_name}_{timestamp}_ascend_pt, as Ascend documents: no pid when a name is given.
    assert level0.name.startswith("rank0_") and level0.name.endswith("_ascend_pt")
    assert level0.name.removeprefix("rank0_").removesuffix("_ascend_pt").isdigit()


def test_csv_columns_level1(level1):
    out = level1 / "ASCEND_PROFILER_OUTPUT"
    assert read_csv(out / "kernel_details.csv")[0] == KERNEL_LEVEL1
    assert read_csv(out / "operator_details.csv")[0] == OPERATOR_DETAILS
    assert read_csv(out / "op_statistic.csv")[0] == OP_STATISTIC
    assert read_csv(out / "step_trace_time.csv")[0] == STEP_TRACE_TIME
    assert read_csv(out / "memory_record.csv")[0] == MEMORY_RECORD
    assert read_csv(out / "operator_memory.csv")[0] == OPERATOR_MEMORY


def test_operator_details_keeps_its_columns_without_shapes_or_stacks(tmp_path):
    # Readers index this table by position (TensorBoard's profiler plugin
    # does): the columns stay, their cells are empty.
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU],
                 on_trace_ready=tensorboard_trace_handler(tmp_path)):
        torch.ones(4, device="npu").relu()
    (result,) = tmp_path.iterdir()
    header, rows = read_csv(result / "ASCEND_PROFILER_OUTPUT" / "operator_details.csv")
    assert header == OPERATOR_DETAILS
    relu = next(row for row in rows if row["Name"] == "aten::relu")
    assert relu["Input Shapes"] == relu["Call Stack"] == "" and float(relu["Device Self Duration(us)"]) > 0


def test_csv_columns_level0_has_fewer_kernel_columns(level0):
    header, rows = read_csv(level0 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    assert header == KERNEL_LEVEL0 and rows


def test_kernel_rows_belong_to_recorded_steps_and_statistics_add_up(level1):
    out = level1 / "ASCEND_PROFILER_OUTPUT"
    _, kernels = read_csv(out / "kernel_details.csv")
    assert {row["Step Id"] for row in kernels} == {"1", "2"}
    assert {"aten::addmm", "aten::mm", "MEMCPY_ASYNC"} <= {row["Type"] for row in kernels}
    addmm = next(row for row in kernels if row["Name"] == "aten::addmm")
    assert addmm["Input Shapes"].startswith("16;4,8;8,16") and addmm["Accelerator Core"] == "AI_CORE"
    _, stats = read_csv(out / "op_statistic.csv")
    assert sum(int(row["Count"]) for row in stats) == len(kernels)
    assert abs(sum(float(row["Ratio(%)"]) for row in stats) - 100) < 0.1
    _, steps = read_csv(out / "step_trace_time.csv")
    assert [row["Step"] for row in steps] == ["1", "2"]
    for row in steps:
        computing = sum(float(k["Duration(us)"]) for k in kernels if k["Step Id"] == row["Step"])
        assert float(row["Computing"]) <= computing + 0.01  # a union of the step's kernels
        assert float(row["Communication"]) == 0 and float(row["Free"]) >= 0


def test_trace_kernels_equal_the_activity_records(level1):
    trace = json.loads((level1 / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    assert isinstance(trace, list)
    records = json.loads((level1 / "FRAMEWORK" / "device_activity.json").read_text())
    device_events = [e for e in trace if e["ph"] == "X" and e["cat"] in ("kernel", "memcpy", "memset")]
    assert len(device_events) == len(records) > 0
    by_id = {(r["kind"], r["work_id"], r["correlation_id"]): r for r in records}
    for event in device_events:
        record = by_id[(event["cat"], event["args"]["Task Id"], event["args"]["correlation_id"])]
        assert event["name"] == record["name"]
        assert abs(event["dur"] - (record["end_ns"] - record["start_ns"]) / 1000) < 0.0015


def test_every_kernel_flows_from_the_op_that_launched_it(level1):
    trace = json.loads((level1 / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    names = {e["args"]["name"] for e in trace if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"Python", "Ascend Hardware"}
    ops = {(e["tid"], e["ts"]): e for e in trace if e["ph"] == "X" and e["cat"] == "cpu_op"}
    starts = {e["id"]: e for e in trace if e["ph"] == "s"}
    finishes = {e["id"]: e for e in trace if e["ph"] == "f"}
    device = {(e["pid"], e["tid"], e["ts"]): e for e in trace if e["ph"] == "X" and e["cat"] in ("kernel", "memcpy")}
    assert len(finishes) == len(device) == len(starts)
    for flow_id, finish in finishes.items():
        item = device[(finish["pid"], finish["tid"], finish["ts"])]
        launcher = ops[(starts[flow_id]["tid"], starts[flow_id]["ts"])]
        if item["cat"] == "kernel":
            # The simulator names a kernel after the aten op that launched it.
            assert launcher["name"] == item["name"]
        else:
            assert launcher["name"] in ("aten::copy_", "aten::_copy_from")
    steps = [e["name"] for e in trace if e["ph"] == "X" and e["name"].startswith("ProfilerStep#")]
    assert steps == ["ProfilerStep#1", "ProfilerStep#2"]
    addmm = next(e for e in trace if e["ph"] == "X" and e["name"] == "aten::addmm" and e["cat"] == "cpu_op")
    assert addmm["args"]["Input Dims"][1] == [4, 8] and "linear" in addmm["args"]["Call stack"]


def test_memory_files_follow_the_allocator(level1):
    out = level1 / "ASCEND_PROFILER_OUTPUT"
    _, records = read_csv(out / "memory_record.csv")
    _, allocations = read_csv(out / "operator_memory.csv")
    assert records and allocations
    assert all(row["Device Type"] == "NPU:0" and row["Component"] == "PTA" for row in records)
    released = [row for row in allocations if row["Release Time(us)"]]
    assert released and all(float(row["Duration(us)"]) >= 0 for row in released)
    assert {row["Name"] for row in allocations} & {"aten::empty", "aten::empty_strided", "aten::addmm", "aten::mm"}


def test_offline_analyse_reproduces_the_online_output(tmp_path):
    keep_raw = _ExperimentalConfig(data_simplification=False)
    with profile(schedule=schedule(wait=0, active=2, repeat=1), experimental_config=keep_raw,
                 on_trace_ready=tensorboard_trace_handler(tmp_path / "online"), profile_memory=True) as prof:
        train(prof, 2)
    (online,) = (tmp_path / "online").iterdir()
    with profile(schedule=schedule(wait=0, active=2, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(tmp_path / "offline", analyse_flag=False),
                 profile_memory=True) as prof:
        train(prof, 2)
    (offline,) = (tmp_path / "offline").iterdir()
    assert not (offline / "ASCEND_PROFILER_OUTPUT").exists()
    # The online directory's raw data analysed again (from the command line)
    # gives the same files.
    before = {p.name: p.read_bytes() for p in (online / "ASCEND_PROFILER_OUTPUT").iterdir()}
    assert analyse_main([str(tmp_path / "online")]) == 0
    after = {p.name: p.read_bytes() for p in (online / "ASCEND_PROFILER_OUTPUT").iterdir()}
    assert after == before
    # A parent directory holding several results (one per rank): each is
    # analysed, here in a pool of two processes.
    shutil.copytree(online, tmp_path / "offline" / "rank1_ascend_pt")
    shutil.rmtree(tmp_path / "offline" / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT")
    outputs = analyse(tmp_path / "offline", max_process_number=2)
    assert sorted(outputs) == sorted(str(d / "ASCEND_PROFILER_OUTPUT") for d in (tmp_path / "offline").iterdir())
    assert sorted(p.name for p in (offline / "ASCEND_PROFILER_OUTPUT").iterdir()) == sorted(before)
    copy = tmp_path / "offline" / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    assert {p.name: p.read_bytes() for p in copy.iterdir()} == before


def test_kernels_link_to_the_same_ops_whichever_side_numbers_them(monkeypatch):
    # Note [Kineto correlation for torch_npu.profiler]: with CPU and NPU
    # activity, torch's profiler numbers the ops and core records none;
    # core's own host-op callback (the path of builds without the Kineto
    # plugin) links every device item to an op of the same name.
    from torch_npu.profiler.collector import Collector

    def launches(prof):
        model = build_model(prof.raw_run)
        assert model.device_items and all(item.op is not None for item in model.device_items)
        return [(item.name, item.op.name, item.step) for item in model.device_items]

    def run():
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU],
                     schedule=schedule(wait=1, active=2, repeat=1), on_trace_ready=lambda p: None) as prof:
            train(prof, 4)
        return prof

    by_kineto = run()
    assert by_kineto.raw_run.info["start_info"]["correlation"] == "kineto"
    assert by_kineto.raw_run.host_ops == []
    monkeypatch.setattr(Collector, "_kineto_numbers_ops", property(lambda self: False))
    by_core = run()
    assert by_core.raw_run.info["start_info"]["correlation"] == "host_ops"
    assert by_core.raw_run.host_ops
    assert launches(by_kineto) == launches(by_core)
    assert {step for _, _, step in launches(by_kineto)} == {1, 2}


def test_npu_activity_alone_gives_the_device_files(tmp_path):
    with profile(activities=[ProfilerActivity.NPU], on_trace_ready=tensorboard_trace_handler(tmp_path)):
        torch.ones(64, device="npu").mul_(2)
    (result,) = tmp_path.iterdir()
    assert sorted(p.name for p in (result / "ASCEND_PROFILER_OUTPUT").iterdir()) == [
        "kernel_details.csv", "op_statistic.csv", "step_trace_time.csv", "trace_view.json"]
    assert not (result / "FRAMEWORK" / "torch_trace.json").exists()
    trace = json.loads((result / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    assert not any(e.get("cat") == "cpu_op" for e in trace)
    assert any(e.get("cat") == "kernel" and e["name"] == "aten::mul_" for e in trace)


def test_data_simplification_deletes_the_raw_data_after_analysis(tmp_path):
    with profile(on_trace_ready=tensorboard_trace_handler(tmp_path)):  # data_simplification: the default
        torch.ones(4, device="npu").add_(1)
    (result,) = tmp_path.iterdir()
    assert sorted(p.name for p in result.iterdir()) == [
        "ASCEND_PROFILER_OUTPUT", "profiler_info.json", "profiler_metadata.json"]
    with pytest.raises(ValueError, match="was deleted after analysis"):
        analyse(result)


def test_analyse_on_a_directory_that_is_not_a_result_is_an_error(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match="is not a torch_npu.profiler result"):
        analyse(tmp_path)
    assert analyse_main([str(tmp_path)]) == 2  # the command line: a message, no traceback
    assert "not a torch_npu.profiler result" in capsys.readouterr().err


def test_unwritable_output_warns_and_training_goes_on(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    steps_done = 0
    with pytest.warns(RuntimeWarning, match="could not write the profiling result"):
        with profile(schedule=schedule(wait=0, active=1),
                     on_trace_ready=tensorboard_trace_handler(blocker / "out")) as prof:
            for _ in range(3):
                torch.ones(4, device="npu").add_(1)
                prof.step()
                steps_done += 1
    assert steps_done == 3


def test_a_full_disk_leaves_nothing_that_looks_complete(tmp_path, monkeypatch):
    real_write = _files.write_bytes_atomic

    def write_until_full(path, data):
        if Path(path).name == "kernel_details.csv":
            raise OSError(28, "No space left on device")
        real_write(path, data)

    monkeypatch.setattr(_files, "write_bytes_atomic", write_until_full)
    with pytest.warns(RuntimeWarning, match="No space left"):
        with profile(on_trace_ready=tensorboard_trace_handler(tmp_path)):
            torch.ones(4, device="npu").add_(1)
    (result,) = tmp_path.iterdir()
    assert (result / "profiler_info.json").exists()  # the raw data was complete
    assert sorted(p.name for p in result.iterdir()) == [
        "FRAMEWORK", "profiler_info.json", "profiler_metadata.json"]  # no ASCEND_PROFILER_OUTPUT, no temporaries


def test_a_profile_in_a_worker_thread_sees_only_that_threads_work():
    runs = []

    def worker():
        torch.npu.set_device(0)
        with profile() as prof:
            torch.full((32,), 2.0, device="npu").mul_(3)
        runs.append(prof.raw_run)

    stop = threading.Event()

    def noise():
        torch.npu.set_device(0)
        x = torch.ones(16, device="npu")
        while not stop.is_set():
            x.sub_(1)

    noisy = threading.Thread(target=noise)
    noisy.start()
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    stop.set()
    noisy.join()
    model = build_model(runs[0])
    assert {op.name for op in model.host_ops} >= {"aten::full", "aten::mul_"}
    assert "aten::sub_" not in {op.name for op in model.host_ops}
    assert "aten::sub_" not in {item.name for item in model.device_items}
    assert any(item.name == "aten::mul_" for item in model.device_items)


def test_mstx_records_are_rendered_and_unknown_kinds_ignored(level1):
    run = read_raw(level1)
    thread = run.info["start_info"]["thread"]
    stream = run.device_records[0]["stream"]
    t0 = run.device_records[0]["start_ns"]
    run.device_records += [
        {"kind": "mstx", "name": "mark here", "domain": "default", "start_ns": t0, "end_ns": t0, "stream": 0,
         "device": 0, "tid": thread},
        {"kind": "mstx", "name": "forward", "domain": "default", "start_ns": t0, "end_ns": t0 + 5000,
         "stream": stream, "device": 0, "tid": thread},
        {"kind": "mstx", "name": "filtered out", "domain": "hidden", "start_ns": t0, "end_ns": t0, "stream": 0,
         "device": 0, "tid": thread},
        {"kind": "something_new", "name": "x", "start_ns": t0, "end_ns": t0},
    ]
    run.info["config"]["experimental_config"]["_mstx_domain_exclude"] = ["hidden"]
    run.info["config"]["experimental_config"]["_mstx"] = False
    assert not any(e.get("cat") == "mstx" for e in build_trace_view(build_model(run)))  # not asked for
    run.info["config"]["experimental_config"]["_mstx"] = True
    trace = build_trace_view(build_model(run))
    mstx = [e for e in trace if e.get("cat") == "mstx"]
    assert [(e["ph"], e["name"]) for e in mstx] == [("i", "mark here"), ("X", "forward"), ("X", "forward")]
    assert mstx[1]["pid"] != mstx[2]["pid"] and mstx[2]["dur"] == 5.0  # host thread and device lane
    assert not any(e.get("name") == "x" for e in trace)


def test_export_chrome_trace_writes_the_trace(tmp_path):
    with profile() as prof:
        torch.ones(4, device="npu").add_(1)
    prof.export_chrome_trace(tmp_path / "trace.json")
    events = json.loads((tmp_path / "trace.json").read_text())
    assert any(e["ph"] == "X" and e["name"] == "aten::add_" and e["cat"] == "kernel" for e in events)


def test_profiling_off_leaves_no_callback_and_no_records():
    C = torch_npu._C
    with warnings.catch_warnings():
        with profile():
            torch.ones(4, device="npu")
    assert not C._activity_recording_host_ops()
    torch.ones(4, device="npu").add_(1)
    torch.npu.synchronize()
    assert C._activity_flush() == [] and C._activity_flush_host_ops() == []


def test_export_memory_timeline(tmp_path):
    model = torch.nn.Linear(64, 32).npu()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with profile(profile_memory=True, record_shapes=True, with_stack=True) as prof:
        for _ in range(2):
            model(torch.randn(16, 64).npu()).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prof.export_memory_timeline(tmp_path / "memory.json")
    prof.export_memory_timeline(tmp_path / "memory.html", device="npu:0")
    times, sizes = json.loads((tmp_path / "memory.json").read_text())
    assert len(times) == len(sizes) > 0
    # The weight and bias (64*32 + 32 float32) show as one category of torch's memory profiler.
    assert any(8320 in row for row in sizes)
    assert "<html" in (tmp_path / "memory.html").read_text()
    with profile(profile_memory=True) as prof_without_shapes:
        torch.ones(4, device="npu").add_(1)
    with pytest.raises(RuntimeError, match="record_shapes=True, with_stack=True"):
        prof_without_shapes.export_memory_timeline(tmp_path / "never.json")
