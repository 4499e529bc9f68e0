"""Utilities of torch_npu (``python -m torch_npu.utils.collect_env``)."""


def get_cann_version(module: str = "CANN") -> str:
    """The CANN version in use (as in Ascend's ``torch_npu.utils``); see
    :func:`torch_npu.npu.get_cann_version`."""
    from ..npu import get_cann_version as _get

    return _get(module)
