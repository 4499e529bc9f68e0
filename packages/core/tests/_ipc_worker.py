"""A process holding npu tensors it received through torch.multiprocessing,
driven by test_multiprocessing.py (a module of its own, so that spawned
processes import it quickly)."""

import gc


def serve(requests, replies):
    """Answers (op, name, arg) requests until "exit"."""
    import torch
    import torch_npu  # noqa: F401

    held = {}
    while True:
        op, name, arg = requests.get()
        try:
            if op == "exit":
                return
            if op == "hold":
                held[name] = arg
                reply = (type(arg).__name__, str(arg.device))
            elif op == "add":
                with torch.no_grad():  # Parameters too
                    held[name].add_(arg)
                torch.npu.synchronize()
                reply = None
            elif op == "values":
                reply = held[name].cpu().tolist()
            elif op == "echo":  # sends the tensor on, back to the test
                reply = held[name]
            elif op == "wait_read":  # a stream waits for event `name`, then reads tensor `arg`
                stream = torch.npu.Stream()
                held[name].wait(stream)
                with torch.npu.stream(stream):
                    copy = held[arg].clone()
                stream.synchronize()
                reply = copy.cpu().tolist()
            elif op == "query":
                reply = held[name].query()
            elif op == "collect":
                torch.npu.ipc_collect()
                reply = None
            elif op == "release":
                del held[name]
                gc.collect()
                reply = None
            else:
                raise ValueError(f"unknown request {op}")
            replies.put(("ok", reply))
        except Exception as e:  # reported to the test
            replies.put(("error", repr(e)))


def add_and_exit(tensor, value):
    """A process started with an npu tensor as its argument."""
    import torch
    import torch_npu  # noqa: F401

    tensor.add_(value)
    torch.npu.synchronize()
