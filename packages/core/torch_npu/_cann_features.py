"""Which CANN release a feature needs, and what to tell the user otherwise.

The table is ``_compat_data.CANN_FEATURES`` (generated from
compat/cann_features.toml); the simulator gates the same features with the
same table. Standalone (no torch) so that it can be tested on its own.
"""

from __future__ import annotations

from typing import Optional

from . import _compat_data
from ._cann_version import CannVersion

__all__ = ["FEATURES", "UNKNOWN", "feature_available", "missing_feature_message",
           "unsupported_cann_message"]

FEATURES = _compat_data.CANN_FEATURES
UNKNOWN = "unknown"

# CANN releases before this one have no aclsysGetCANNVersion: when real CANN
# does not report its version, it is older than this.
_VERSION_QUERY_SINCE = CannVersion(FEATURES["cann_version_query"][0])


def _check_name(name: str) -> None:
    if name not in FEATURES:
        raise ValueError(f"unknown CANN feature {name!r}; known: {', '.join(sorted(FEATURES))}")


def feature_available(name: str, cann_version: str) -> Optional[bool]:
    """Whether CANN ``cann_version`` has feature ``name``; None if unknowable.

    An unknown version (``"unknown"``: CANN without aclsysGetCANNVersion) is
    older than 8.1.RC1, so features of 8.1.RC1 and later are unavailable and
    older ones cannot be decided.
    """
    _check_name(name)
    since = CannVersion(FEATURES[name][0])
    if cann_version == UNKNOWN or not CannVersion.is_valid(cann_version):
        return False if since >= _VERSION_QUERY_SINCE else None
    return CannVersion(cann_version) >= since


def missing_feature_message(name: str, cann_version: str, backend: str,
                            purpose: Optional[str] = None) -> Optional[str]:
    """The error message when CANN ``cann_version`` lacks ``name``, else None."""
    if feature_available(name, cann_version) is not False:
        return None
    since, description, used_by = FEATURES[name]
    what = purpose or used_by
    if cann_version == UNKNOWN:
        have = f"the installed CANN is older than {_VERSION_QUERY_SINCE} (it does not report its version)"
    else:
        have = f"the {'simulated ' if backend == 'simulator' else ''}CANN is {cann_version}"
    if backend == "simulator":
        fix = (f"set NPU_SIM_CANN_VERSION={since} (or newer) to emulate a release "
               "that has it")
    else:
        fix = (f"install CANN {since} or newer and source its set_env.sh "
               "(e.g. /usr/local/Ascend/ascend-toolkit/set_env.sh)")
    return f"{what} needs {description}, which CANN has since {since}; {have}: {fix}."


def unsupported_cann_message(cann_version: str, backend: str) -> Optional[str]:
    """A warning when ``cann_version`` is older than every supported row."""
    oldest = CannVersion(_compat_data.OLDEST_SUPPORTED_CANN)
    if not CannVersion.is_valid(cann_version) or CannVersion(cann_version) >= oldest:
        return None
    where = "NPU_SIM_CANN_VERSION" if backend == "simulator" else "the installed CANN"
    return (f"CANN {cann_version} ({where}) is older than the oldest release torch-npu "
            f"supports ({oldest}); see COMPATIBILITY.en.md. Features may be missing or fail.")
