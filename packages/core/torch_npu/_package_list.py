"""The packages of torch-npu.

Generated from packages/*/pyproject.toml by `python -m compat render`; do not edit by hand.
Data only, no imports: torch_npu._plugins reads it without torch.
"""

CORE_DISTRIBUTION = 'torch-npu-core'
META_DISTRIBUTION = 'torch-npu'

# plugin distribution -> the name of its torch_npu.plugins entry point
PLUGIN_ENTRY_POINTS = {
    'torch-npu-distributed': 'distributed',
    'torch-npu-graph': 'graph',
    'torch-npu-ops': 'ops',
    'torch-npu-profiler': 'profiler',
}

# torch_npu submodule -> the plugin distribution that installs it
PLUGIN_MODULES = {
    'contrib': 'torch-npu-ops',
    'distributed': 'torch-npu-distributed',
    'graph': 'torch-npu-graph',
    'ops': 'torch-npu-ops',
    'optim': 'torch-npu-ops',
    'profiler': 'torch-npu-profiler',
}

# plugin distribution -> the extra of the meta-package that installs it
META_EXTRAS = {
    'torch-npu-distributed': 'distributed',
    'torch-npu-graph': 'graph',
    'torch-npu-ops': 'ops',
    'torch-npu-profiler': 'profiler',
}
