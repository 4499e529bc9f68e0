"""Probe a fresh environment made from the wheels in dist/ (nox install_check).

    python install_probe.py all                # after pip install "torch-npu[all]"
    python install_probe.py core+distributed   # after pip install torch-npu-core torch-npu-distributed

Runs inside that environment (standard library + what was installed): checks
which distributions are there, that every installed plugin loaded, that npu
tensors work, and that a missing plugin's import error says what to install.
Exits non-zero with the list of failed checks.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from types import ModuleType

CORE = "torch-npu-core"


def package_list() -> ModuleType:
    """The installed core's generated torch_npu/_package_list.py, loaded by
    path: importing it as torch_npu._package_list would import torch first."""
    path = importlib.metadata.distribution(CORE).locate_file("torch_npu/_package_list.py")
    spec = importlib.util.spec_from_file_location("_probe_package_list", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_PACKAGES = package_list()
# plugin distribution -> its name (torch_npu.<name>)
PLUGIN_OF = dict(_PACKAGES.PLUGIN_ENTRY_POINTS)
ALL = [_PACKAGES.META_DISTRIBUTION, _PACKAGES.CORE_DISTRIBUTION, *PLUGIN_OF]
SELECTIONS = {
    "all": ALL,
    "core+distributed": [CORE, "torch-npu-distributed"],
}

failures: list[str] = []


def check(condition: bool, what: str) -> None:
    print(("ok      " if condition else "FAILED  ") + what)
    if not condition:
        failures.append(what)


def installed(dist: str) -> bool:
    try:
        importlib.metadata.version(dist)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


# What each rank of run_collectives prints.
COLLECTIVES_EXPECTED = "all_reduce [3.0, 3.0] broadcast [1.0, 1.0] all_gather [0.0, 1.0] barrier"


def collective_rank(rank: int, world: int, store: str) -> None:
    """One rank of run_collectives: hccl collectives on npu:<rank>, using only
    what core and distributed provide (no ops: no arithmetic on npu)."""
    import torch
    import torch.distributed as dist

    import torch_npu  # noqa: F401

    torch.npu.set_device(rank)
    dist.init_process_group("hccl", init_method=f"file://{store}", rank=rank, world_size=world)
    t = torch.full((2,), float(rank + 1)).npu()
    dist.all_reduce(t)
    b = torch.full((2,), float(rank)).npu()
    dist.broadcast(b, src=1)
    parts = [torch.empty(1).npu() for _ in range(world)]
    dist.all_gather(parts, torch.tensor([float(rank)]).npu())
    dist.barrier()
    gathered = [p.cpu().item() for p in parts]
    print(f"all_reduce {t.cpu().tolist()} broadcast {b.cpu().tolist()} all_gather {gathered} barrier")
    dist.destroy_process_group()


def run_collectives(world: int) -> list[str]:
    """Runs collective_rank in `world` processes; returns what each printed
    (or its error)."""
    import os
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = [subprocess.Popen([sys.executable, __file__, "--collective-rank", str(r), str(world), store],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for r in range(world)]
        results = []
        for proc in procs:
            try:
                out, err = proc.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            results.append(out.strip() if proc.returncode == 0 else f"exit {proc.returncode}: {err[-2000:]}")
    return results


def main(selection: str) -> int:
    expected = SELECTIONS[selection]
    for dist in ALL:
        want = dist in expected
        check(installed(dist) == want, f"{dist} is {'installed' if want else 'not installed'}")

    import torch
    import torch_npu
    from torch_npu import _plugins

    print(f"torch {torch.__version__}, torch_npu {torch_npu.__version__}")
    records = _plugins.loaded_plugins()
    for dist, name in PLUGIN_OF.items():
        if dist in expected:
            info = records.get(name)
            check(info is not None and info.ok, f"plugin {name} loaded ({info.error if info else 'no record'})")
        else:
            try:
                __import__(f"torch_npu.{name}")
            except ImportError as exc:
                check(f"pip install {dist}" in str(exc), f"import torch_npu.{name} says `pip install {dist}`")
            else:
                check(False, f"import torch_npu.{name} fails when {dist} is absent")

    x = torch.arange(6, dtype=torch.float32).npu()
    check(str(x.device) == "npu:0", "tensors move to npu:0")
    check(torch.equal(x.cpu(), torch.arange(6, dtype=torch.float32)), "copies round-trip")
    if "torch-npu-ops" in expected:
        y = (x * 2 + 1).sum()
        check(y.item() == 36.0, "ops run on npu (torch-npu-ops)")
    else:
        try:
            x + 1
        except Exception as exc:  # core alone: ops say which package provides them
            check("torch-npu-ops" in str(exc), "an op without torch-npu-ops names the package")
        else:
            check(False, "an op without torch-npu-ops raises")
    if "torch-npu-distributed" in expected:
        results = run_collectives(world=2)
        check(results == [COLLECTIVES_EXPECTED] * 2,
              f"collectives run between 2 processes over hccl (got {results})")
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print(f"install check '{selection}': all checks passed")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--collective-rank":
        collective_rank(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
        sys.exit(0)
    if len(sys.argv) != 2 or sys.argv[1] not in SELECTIONS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(SELECTIONS)}}}")
    sys.exit(main(sys.argv[1]))
