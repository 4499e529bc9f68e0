"""The compatibility matrix and CANN feature table. Generated from compat/ by `python -m compat render`; do not edit by hand."""

# (torch, cann, python) -> (status, detail): status is 'tested' (detail:
# date and command), 'stale' (a run of an older test suite; detail: where
# it was last tested), 'untested' or 'unsupported' (detail: the reason).
ROWS = {
    ('2.13.0', '8.0.0', '3.10'): ('untested', ''),
    ('2.13.0', '8.1.RC1', '3.10'): ('untested', ''),
    ('2.13.0', '8.5.0', '3.10'): ('untested', ''),
    ('2.13.0', '9.0.0', '3.10'): ('stale', 'last tested at 2026-12-03; the test suite has changed since'),
    ('2.13.0', '8.0.0', '3.11'): ('tested', '2026-12-07: nox -s "tests(torch=\'2.13.0\', cann=\'8.0.0\', python=\'3.11\')" -- packages/core/tests/simulator/test_sim_checker.py packages/core/tests/simulator/test_sim_config.py packages/core/tests/simulator/test_sim_hccl_direct.py packages/core/tests/simulator/test_sim_ipc.py packages/core/tests/simulator/test_sim_race.py packages/core/tests/simulator/test_sim_vmm.py packages/core/tests/test_allocator_config.py packages/core/tests/test_cann_features.py packages/core/tests/test_capture.py packages/core/tests/test_collect_env.py packages/core/tests/test_expandable_segments.py packages/core/tests/test_multiprocessing.py packages/core/tests/test_pluggable_allocator.py packages/core/tests/test_process.py packages/graph/tests/test_npugraph.py packages/graph/tests/test_replay_prepared.py packages/ops/tests/test_capture_ops.py tests/test_compat.py tests/test_graph_collectives.py --ignore=packages/ops/tests/test_device_contract.py --ignore=tests/test_hf_clients.py --ignore=packages/distributed/tests/test_collective_dtype_sweep.py --ignore=packages/distributed/tests/test_torchrun.py -q --durations=15'),
    ('2.13.0', '8.1.RC1', '3.11'): ('tested', '2026-12-07: nox -s "tests(torch=\'2.13.0\', cann=\'8.1.RC1\', python=\'3.11\')" -- packages/core/tests/simulator/test_sim_checker.py packages/core/tests/simulator/test_sim_config.py packages/core/tests/simulator/test_sim_hccl_direct.py packages/core/tests/simulator/test_sim_ipc.py packages/core/tests/simulator/test_sim_race.py packages/core/tests/simulator/test_sim_vmm.py packages/core/tests/test_allocator_config.py packages/core/tests/test_cann_features.py packages/core/tests/test_capture.py packages/core/tests/test_collect_env.py packages/core/tests/test_expandable_segments.py packages/core/tests/test_multiprocessing.py packages/core/tests/test_pluggable_allocator.py packages/core/tests/test_process.py packages/graph/tests/test_npugraph.py packages/graph/tests/test_replay_prepared.py packages/ops/tests/test_capture_ops.py tests/test_compat.py tests/test_graph_collectives.py --ignore=packages/ops/tests/test_device_contract.py --ignore=tests/test_hf_clients.py --ignore=packages/distributed/tests/test_collective_dtype_sweep.py --ignore=packages/distributed/tests/test_torchrun.py -q --durations=15'),
    ('2.13.0', '8.5.0', '3.11'): ('stale', 'last tested at e12284c0d8; the test suite has changed since'),
    ('2.13.0', '9.0.0', '3.11'): ('tested', '2026-12-07: ./dev test'),
    ('2.13.0', '8.0.0', '3.12'): ('untested', ''),
    ('2.13.0', '8.1.RC1', '3.12'): ('untested', ''),
    ('2.13.0', '8.5.0', '3.12'): ('untested', ''),
    ('2.13.0', '9.0.0', '3.12'): ('stale', 'last tested at 653fb814c6; the test suite has changed since'),
    ('2.13.0', '8.0.0', '3.13'): ('untested', ''),
    ('2.13.0', '8.1.RC1', '3.13'): ('untested', ''),
    ('2.13.0', '8.5.0', '3.13'): ('untested', ''),
    ('2.13.0', '9.0.0', '3.13'): ('stale', 'last tested at d9c0d59df1; the test suite has changed since'),
    ('2.14.1', '8.0.0', '3.10'): ('untested', ''),
    ('2.14.1', '8.1.RC1', '3.10'): ('untested', ''),
    ('2.14.1', '8.5.0', '3.10'): ('untested', ''),
    ('2.14.1', '9.0.0', '3.10'): ('untested', ''),
    ('2.14.1', '8.0.0', '3.11'): ('untested', ''),
    ('2.14.1', '8.1.RC1', '3.11'): ('untested', ''),
    ('2.14.1', '8.5.0', '3.11'): ('untested', ''),
    ('2.14.1', '9.0.0', '3.11'): ('tested', '2026-12-07: nox -s "tests(torch=\'2.14.1\', cann=\'9.0.0\', python=\'3.11\')" -- packages/core/tests packages/distributed/tests packages/graph/tests packages/ops/tests packages/profiler/tests tests --ignore=packages/core/tests/simulator -p compat.pytest_row_sample --row-sample=0/2 --ignore=packages/ops/tests/test_device_contract.py --ignore=tests/test_hf_clients.py --ignore=packages/distributed/tests/test_collective_dtype_sweep.py --ignore=packages/distributed/tests/test_torchrun.py -q --durations=15'),
    ('2.14.1', '8.0.0', '3.12'): ('untested', ''),
    ('2.14.1', '8.1.RC1', '3.12'): ('untested', ''),
    ('2.14.1', '8.5.0', '3.12'): ('untested', ''),
    ('2.14.1', '9.0.0', '3.12'): ('untested', ''),
    ('2.14.1', '8.0.0', '3.13'): ('untested', ''),
    ('2.14.1', '8.1.RC1', '3.13'): ('untested', ''),
    ('2.14.1', '8.5.0', '3.13'): ('untested', ''),
    ('2.14.1', '9.0.0', '3.13'): ('untested', ''),
    ('2.13.0', '9.0.0', '3.9'): ('unsupported', 'every torch-npu package requires Python >= 3.10'),
    ('2.13.0', '7.0.0', '3.11'): ('unsupported', 'older than the oldest CANN release torch-npu targets (8.0.0): neither emulated nor checked against its headers'),
    ('2.14.1', '9.0.0', '3.9'): ('unsupported', 'every torch-npu package requires Python >= 3.10'),
    ('2.14.1', '7.0.0', '3.11'): ('unsupported', 'older than the oldest CANN release torch-npu targets (8.0.0): neither emulated nor checked against its headers'),
}

DEFAULT_ROW = ('2.13.0', '9.0.0', '3.11')

# distribution -> version specifier accepted by the rows
PACKAGES = {
    'torch-npu': '==0.1.*',
    'torch-npu-core': '==0.1.*',
    'torch-npu-distributed': '==0.1.*',
    'torch-npu-graph': '==0.1.*',
    'torch-npu-ops': '==0.1.*',
    'torch-npu-profiler': '==0.1.*',
}

# The oldest CANN release of a supported row.
OLDEST_SUPPORTED_CANN = '8.0.0'

# feature -> (first CANN release with it, description, what uses it)
CANN_FEATURES = {
    'virtual_memory': ('8.0.0', 'virtual memory management (aclrtReserveMemAddress, aclrtMallocPhysical, aclrtMapMem and related functions)', 'expandable segments of the caching allocator'),
    'cann_version_query': ('8.1.RC1', 'querying the installed CANN version (aclsysGetCANNVersion)', 'torch.npu version reporting and feature checks on real CANN'),
    'model_capture': ('8.1.RC1', 'capturing stream work into a model and replaying it (aclmdlRICaptureBegin, aclmdlRICaptureEnd, aclmdlRIExecuteAsync)', 'torch.npu.NPUGraph (torch-npu-graph)'),
    'ipc_memory': ('8.3.RC1', 'sharing device memory between processes (aclrtIpcMemGetExportKey, aclrtIpcMemImportByKey, aclrtIpcMemSetImportPid, aclrtIpcMemClose)', 'npu tensors passed between processes by torch.multiprocessing'),
    'ipc_event': ('8.5.0', 'events shared between processes (aclrtIpcGetEventHandle, aclrtIpcOpenEventHandle)', 'waiting in one process for work another process queued'),
    'pinned_memory_expandable_segments': ('8.5.0', 'expandable segments for pinned host memory (host physical memory mapped into a reserved range)', 'pin_memory_expandable_segments of the pinned-memory allocator'),
}
