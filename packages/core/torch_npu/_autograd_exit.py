"""Lets autograd's npu threads finish their last backward before exit.

Since torch 2.13, every ``backward()`` stashes a Python object (the caller's
``contextvars`` context) in the thread-local state that the graph task
carries to the device threads. A device thread drops its reference to the
graph task just after ``backward()`` has returned, and dropping that object
takes the GIL. When the script ends right there, the interpreter may already
be finalising: taking the GIL then ends the thread by a forced unwind, and
the process aborts with "terminate called without an active exception"
(pytorch/pytorch#190489; it affects every device whose backward runs on a
device thread, CUDA's included).

At exit, while the interpreter is still whole, this runs one tiny backward
through each npu device thread that may hold a graph task. A device thread
takes graph tasks in order and drops each one before it takes the next, so
once these return the earlier ones are gone. They go to the engine directly:
``torch.autograd.backward`` would stash the context again.
"""

from __future__ import annotations

import atexit

import torch


def _drain_device_threads() -> None:
    if not torch.npu.is_initialized():
        return
    engine = torch.autograd.Variable._execution_engine
    for index in range(torch.npu.device_count()):
        # Only a device that had memory can have run a backward; touching the
        # others would create their contexts at exit.
        if torch.npu.max_memory_reserved(index) == 0 and torch.npu.memory_reserved(index) == 0:
            continue
        leaf = torch.zeros((), device=torch.device("npu", index), requires_grad=True)
        # Its backward copies the gradient to npu and accumulates it there,
        # on the device's autograd thread (core's kernels suffice).
        out = leaf.to("cpu")
        engine.run_backward((out,), (torch.ones(()),), False, False, (), True, True)


def _drain_at_exit() -> None:
    try:
        _drain_device_threads()
    except Exception:  # noqa: BLE001 - best effort at exit; never turn exit into an error
        pass


def register() -> None:
    atexit.register(_drain_at_exit)
