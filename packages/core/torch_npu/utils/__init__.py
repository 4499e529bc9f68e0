"""Utilities of torch_npu (``python -m torch_npu.utils.collect_env``)."""
