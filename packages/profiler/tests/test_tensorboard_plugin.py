"""TensorBoard's profiler plugin (Ascend's build, torch-tb-profiler-ascend)
reads a tensorboard_trace_handler result: it finds the run, the worker and its
span, and fills the operator, kernel and trace views with our real op and
kernel names.

The plugin is driven the way the TensorBoard frontend drives it, in-process:
the plugin object scans the log directory, loads the run in its worker
processes, and its HTTP routes are called through werkzeug's test client (no
server, no port). A second test parses the same directory with the plugin's
parser in this process, where its error log can be seen: the plugin logs a
missing column or an unparsable row and carries on, so a view silently loses
data instead of failing."""

from __future__ import annotations

import csv
import gzip
import json
import logging
import time
from pathlib import Path

import pytest
import torch

from _rank_processes import run_rank_script
from torch_npu.profiler import ProfilerActivity, ProfilerLevel, _ExperimentalConfig, profile, schedule, \
    tensorboard_trace_handler

tb_profiler = pytest.importorskip(
    "torch_tb_profiler", reason="TensorBoard's profiler plugin (pip install torch-tb-profiler-ascend) is not installed")
from torch_tb_profiler import consts as tb_consts  # noqa: E402

if not hasattr(tb_consts, "WORKER_SPAN_PATTERN"):
    pytest.skip("the installed torch_tb_profiler is PyTorch's build, which cannot read Ascend result directories; "
                "install torch-tb-profiler-ascend", allow_module_level=True)

from tensorboard.plugins import base_plugin  # noqa: E402
from torch_tb_profiler.plugin import TorchProfilerPlugin  # noqa: E402
from torch_tb_profiler.profiler.data import RunProfileData  # noqa: E402
from torch_tb_profiler.profiler.run_generator import RunGenerator  # noqa: E402
from werkzeug.test import Client  # noqa: E402

RUN = "run"
WORKER = "rank0"
LOAD_TIMEOUT_S = 120


def train_and_profile(logdir: Path) -> Path:
    """Two active steps of a small MLP; returns the one result directory."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).npu()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8).npu()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU], schedule=schedule(wait=1, active=2),
                 on_trace_ready=tensorboard_trace_handler(logdir / RUN, worker_name=WORKER),
                 experimental_config=_ExperimentalConfig(profiler_level=ProfilerLevel.Level1),
                 record_shapes=True, with_stack=True) as prof:
        for _ in range(3):
            model(x).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
            prof.step()
    (result,) = (logdir / RUN).iterdir()
    return result


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tb")
    train_and_profile(root)
    return root


@pytest.fixture(scope="module")
def result_dir(logdir) -> Path:
    (result,) = (logdir / RUN).iterdir()
    return result


@pytest.fixture(scope="module")
def plugin(logdir) -> TorchProfilerPlugin:
    return loaded_plugin(logdir)


def loaded_plugin(logdir: Path) -> TorchProfilerPlugin:
    """The plugin, after it found and loaded every run under logdir."""
    plugin = TorchProfilerPlugin(base_plugin.TBContext(logdir=str(logdir)))
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    while True:
        runs = get(plugin, "/runs")
        if runs["runs"] and not runs["loading"]:
            return plugin
        if time.monotonic() > deadline:
            pytest.fail(f"the plugin did not load the run within {LOAD_TIMEOUT_S} s: /runs answered {runs}")
        time.sleep(0.2)


def get(plugin: TorchProfilerPlugin, route: str, **query: str):
    """Calls one of the plugin's routes as the frontend does; returns its JSON."""
    app = plugin.get_plugin_apps()[route]
    response = Client(app).get(route, query_string=query)
    assert response.status_code == 200, f"{route} {query}: {response.status_code} {response.get_data(as_text=True)}"
    body = response.get_data()
    if response.headers.get("Content-Encoding") == "gzip":
        body = gzip.decompress(body)
    return json.loads(body)


def csv_column(path: Path, column: str) -> set[str]:
    with open(path, newline="") as f:
        return {row[column] for row in csv.DictReader(f)}


def test_plugin_finds_run_worker_span_and_views(plugin, result_dir):
    assert get(plugin, "/runs")["runs"] == [RUN]
    views = get(plugin, "/views", run=RUN)
    assert views["device_target"] == "Ascend"
    assert {"Operator", "Kernel", "Trace"} <= set(views["views"])
    # The plugin splits {worker}_{timestamp}_ascend_pt: the worker is
    # everything before the timestamp (the worker_name, `rank0`), and the
    # timestamps of one worker become spans numbered from 1.
    workers = get(plugin, "/workers", run=RUN, view="Operator")
    worker, timestamp = result_dir.name.removesuffix("_ascend_pt").rsplit("_", 1)
    assert workers == [worker] == [WORKER] and timestamp.isdigit()
    assert get(plugin, "/spans", run=RUN, worker=worker) == ["1"]


def test_operator_view_has_our_ops(plugin, result_dir):
    worker, span = only_worker_and_span(plugin)
    table = get(plugin, "/operation/table", run=RUN, worker=worker, span=span, group_by="Operation")["data"]
    names = {row["name"] for row in table}
    expected = csv_column(result_dir / "ASCEND_PROFILER_OUTPUT" / "operator_details.csv", "Name")
    assert {"aten::addmm", "aten::mm", "aten::relu"} <= names == expected
    addmm = next(row for row in table if row["name"] == "aten::addmm")
    assert addmm["calls"] >= 2 and addmm["device_self_duration"] > 0 and addmm["host_total_duration"] > 0
    pie = get(plugin, "/operation", run=RUN, worker=worker, span=span, group_by="Operation")
    assert "aten::addmm" in {name for name, _ in pie["device_self_time"]["rows"]}
    by_shape = get(plugin, "/operation/table", run=RUN, worker=worker, span=span,
                   group_by="OperationAndInputShape")["data"]
    assert any(row["name"] == "aten::addmm" and row["input_shape"] != "[]" for row in by_shape)


def test_kernel_view_has_our_kernels(plugin, result_dir):
    worker, span = only_worker_and_span(plugin)
    kernels_csv = result_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    per_kernel = get(plugin, "/kernel/table", run=RUN, worker=worker, span=span, group_by="Kernel")["data"]
    name_column = [c["name"] for c in per_kernel["columns"]].index("Name")
    assert {row[name_column] for row in per_kernel["rows"]} == csv_column(kernels_csv, "Name")
    statistics = get(plugin, "/kernel/table", run=RUN, worker=worker, span=span, group_by="Operation")["data"]
    calls = {row[0]: row[1] for row in statistics["rows"]}
    assert {"aten::addmm", "aten::mm"} <= calls.keys() and calls["aten::addmm"] >= 2
    cores = get(plugin, "/kernel/tc_pie", run=RUN, worker=worker, span=span)["total"]["rows"]
    assert "Using AI CORE" in {name for name, _ in cores}


def test_trace_view_and_operator_tree_have_the_steps(plugin):
    worker, span = only_worker_and_span(plugin)
    trace = get(plugin, "/trace", run=RUN, worker=worker, span=span)
    names = {event.get("name") for event in trace}
    assert {"ProfilerStep#1", "ProfilerStep#2", "aten::addmm"} <= names
    tree = get(plugin, "/tree", run=RUN, worker=worker, span=span)
    steps = [child["name"] for child in tree["children"] if child["name"].startswith("ProfilerStep#")]
    assert steps == ["ProfilerStep#1", "ProfilerStep#2"]


def test_plugin_parser_logs_no_error(result_dir, tmp_path, caplog):
    assert_parses_without_complaint(result_dir, tmp_path, caplog)


def assert_parses_without_complaint(result_dir: Path, cache_dir: Path, caplog) -> None:
    """Runs the parser behind every view in this process: the plugin reports
    format problems (a missing column, a row it cannot read) only through its
    log, and drops the data."""
    caplog.set_level(logging.WARNING, logger=tb_consts.PLUGIN_NAME)
    caplog.clear()
    worker, span = result_dir.name.removesuffix("_ascend_pt").rsplit("_", 1)
    data = RunProfileData.parse_npu(worker, span, str(result_dir / "ASCEND_PROFILER_OUTPUT"), str(cache_dir))
    assert data.has_trace and data.has_kernel and data.has_operator_view
    profile_run = RunGenerator(worker, span, data, "Ascend").generate_run_profile()
    assert profile_run.kernel_table["data"]["rows"] and profile_run.operation_table_by_name["data"]
    problems = [r.getMessage() for r in caplog.records if r.name == tb_consts.PLUGIN_NAME]
    assert problems == [], result_dir.name


def only_worker_and_span(plugin) -> tuple[str, str]:
    (worker,) = get(plugin, "/workers", run=RUN, view="Operator")
    (span,) = get(plugin, "/spans", run=RUN, worker=worker)
    return worker, span


RANK_SCRIPT = """\
import sys, warnings
warnings.filterwarnings("ignore", category=FutureWarning)
import torch, torch_npu
import torch.distributed as dist
from torch_npu.profiler import profile, schedule, tensorboard_trace_handler
rank, store, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
torch.npu.set_device(rank)
dist.init_process_group("hccl", init_method=f"file://{store}", rank=rank, world_size=2)
x = torch.ones(64, 32).npu()
handler = tensorboard_trace_handler(out, worker_name=f"rank{rank}")
with profile(schedule=schedule(wait=0, active=2, repeat=1), on_trace_ready=handler) as prof:
    for _ in range(2):
        y = (x * (rank + 1)).relu()
        dist.all_reduce(y)
        prof.step()
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def distributed_logdir(tmp_path_factory) -> Path:
    """Two ranks profiled into one run directory, as a multi-rank job writes it."""
    root = tmp_path_factory.mktemp("tb_dist")
    script = root / "rank.py"
    script.write_text(RANK_SCRIPT)
    run_rank_script(script, 2, lambda rank: [str(rank), str(root / "store"), str(root / "logs" / RUN)])
    return root / "logs"


def test_distributed_view_reads_both_ranks(distributed_logdir, tmp_path, caplog):
    # These ranks ran without record_shapes and with_stack: operator_details.csv
    # still has Ascend's nine columns (its Input Shapes and Call Stack empty).
    for result_dir in (distributed_logdir / RUN).iterdir():
        assert_parses_without_complaint(result_dir, tmp_path, caplog)
    plugin = loaded_plugin(distributed_logdir)
    views = get(plugin, "/views", run=RUN)["views"]
    assert "Distributed" in views
    ranks = sorted(p.name.removesuffix("_ascend_pt").rsplit("_", 1)[0] for p in (distributed_logdir / RUN).iterdir())
    assert get(plugin, "/workers", run=RUN, view="Operator") == ranks
    # The frontend asks for the workers of a view, then for their spans.
    assert get(plugin, "/workers", run=RUN, view="Distributed") == ["All"]
    (span,) = get(plugin, "/spans", run=RUN, worker="All")
    # Computing, overlapped, communication (not overlapped), free: from
    # step_trace_time.csv, per worker. (The plugin takes a row's first column
    # for its step; Ascend's current layout, and ours, starts with Device_id,
    # so its per-step entries of this chart are keyed by device: only the
    # "all" entry is meaningful.)
    overlap = get(plugin, "/distributed/overlap", run=RUN, span=span)["data"]["all"]
    assert sorted(overlap) == ranks
    assert all(values[0] > 0 and values[2] > 0 for values in overlap.values())
    # Transit and synchronization time per step, and the operations table:
    # from communication.json.
    wait = get(plugin, "/distributed/waittime", run=RUN, span=span)["data"]
    steps = {row for p in (distributed_logdir / RUN).iterdir()
             for row in csv_column(p / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", "Step")}
    assert len(steps) == 2 and set(wait) == {"all"} | steps
    assert sorted(wait["all"]) == ranks and all(transit > 0 for transit, _ in wait["all"].values())
    ops = get(plugin, "/distributed/commops", run=RUN, span=span)["data"]
    for rank in ranks:
        names = [row[0] for row in ops[rank]["rows"]]
        allreduce = next(row for row in ops[rank]["rows"] if "allReduce" in row[0])
        assert allreduce[1] == 2 and allreduce[2] > 0, names
