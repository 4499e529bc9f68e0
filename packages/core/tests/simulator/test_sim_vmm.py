"""Virtual memory management: reservations, physical handles, mappings."""

import ctypes
import importlib.util
import os
from ctypes import byref, c_size_t, c_void_p
from pathlib import Path

from _simlib import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
    ACL_MEM_LOCATION_TYPE_DEVICE,
    ACL_MEM_LOCATION_TYPE_UNREGISTERED,
    D2H,
    GRANULARITY,
    MemLocation,
    PhysicalMemProp,
    MiB,
)

# The CANN feature table core ships (generated from compat/), loaded by path
# so that these tests need neither torch nor torch_npu.
_spec = importlib.util.spec_from_file_location(
    "_compat_data_for_sim_tests",
    Path(__file__).resolve().parents[2] / "torch_npu" / "_compat_data.py")
_compat_data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_compat_data)


def device_prop(device):
    return PhysicalMemProp(0, 0, 1, MemLocation(device, ACL_MEM_LOCATION_TYPE_DEVICE), 0)


def reserve(sim, size, alignment=0, expect=None):
    p = c_void_p()
    sim.check("aclrtReserveMemAddress",
              sim.lib.aclrtReserveMemAddress(byref(p), size, alignment, expect, 0))
    return p.value


def physical(sim, size, device=0):
    h = c_void_p()
    prop = device_prop(device)
    sim.check("aclrtMallocPhysical", sim.lib.aclrtMallocPhysical(byref(h), size, byref(prop), 0))
    return h.value


def test_granularity(dev0):
    g = c_size_t()
    prop = device_prop(0)
    assert dev0.lib.aclrtMemGetAllocationGranularity(byref(prop), 0, byref(g)) == 0
    assert g.value == GRANULARITY == 2 * MiB


def test_reserve_map_unmap_release(dev0):
    sim = dev0
    lib = sim.lib
    free0 = sim.mem_info()[0]
    va = reserve(sim, 8 * MiB)
    assert va % GRANULARITY == 0
    assert sim.mem_info()[0] == free0                    # address space is free
    assert sim.attrs(va)[0] == ACL_MEM_LOCATION_TYPE_UNREGISTERED
    h = physical(sim, 4 * MiB)
    assert sim.mem_info()[0] == free0 - 4 * MiB          # physical memory counts
    # Two mappings of one handle see the same bytes.
    assert lib.aclrtMapMem(va, 4 * MiB, 0, h, 0) == 0
    assert lib.aclrtMapMem(va + 4 * MiB, 4 * MiB, 0, h, 0) == 0
    assert sim.attrs(va + 12345) == (ACL_MEM_LOCATION_TYPE_DEVICE, 0)
    data = os.urandom(4096)
    sim.h2d(va + 100, data, sync=True)
    assert sim.d2h(va + 4 * MiB + 100, 4096, sync=True).raw == data
    # A copy spanning two contiguous mappings is fine.
    out = sim.d2h(va + 4 * MiB - 2048, 4096)
    sim.sync()
    assert out.raw == sim.d2h(va + 4 * MiB - 2048, 4096, sync=True).raw
    # Busy resources cannot be released.
    assert lib.aclrtFreePhysical(h) == ACL_ERROR_INVALID_PARAM and "still mapped" in sim.err()
    assert lib.aclrtReleaseMemAddress(va) == ACL_ERROR_INVALID_PARAM and "mapping" in sim.err()
    assert lib.aclrtMapMem(va, 2 * MiB, 0, h, 0) == ACL_ERROR_INVALID_PARAM  # overlaps
    assert "overlaps" in sim.err()
    assert lib.aclrtUnmapMem(va + 4 * MiB) == 0
    assert sim.attrs(va + 4 * MiB)[0] == ACL_MEM_LOCATION_TYPE_UNREGISTERED
    host = ctypes.create_string_buffer(16)
    assert lib.aclrtMemcpy(host, 16, va + 4 * MiB, 16, D2H) == ACL_ERROR_INVALID_PARAM
    assert "not mapped" in sim.err()
    assert lib.aclrtUnmapMem(va + 4 * MiB) == ACL_ERROR_INVALID_PARAM
    assert lib.aclrtUnmapMem(va) == 0
    assert lib.aclrtFreePhysical(h) == 0
    assert sim.mem_info()[0] == free0
    assert lib.aclrtFreePhysical(h) == ACL_ERROR_INVALID_PARAM
    assert lib.aclrtReleaseMemAddress(va) == 0
    assert lib.aclrtReleaseMemAddress(va) == ACL_ERROR_INVALID_PARAM


def test_handle_of_another_device_and_offsets(sim):
    sim.set_device(0)
    va = reserve(sim, 4 * MiB)
    h1 = physical(sim, 4 * MiB, device=1)
    assert sim.lib.aclrtMapMem(va, 2 * MiB, 2 * MiB, h1, 0) == 0   # second half of h1
    assert sim.attrs(va) == (ACL_MEM_LOCATION_TYPE_DEVICE, 1)
    sim.h2d(va, b"offset-check", sync=True)
    assert sim.lib.aclrtMapMem(va + 2 * MiB, 2 * MiB, 4 * MiB, h1, 0) == ACL_ERROR_INVALID_PARAM
    assert sim.lib.aclrtMapMem(va + 2 * MiB, 2 * MiB, 0, h1, 0) == 0
    assert sim.d2h(va + 2 * MiB, 12, sync=True).raw == bytes(12)
    assert sim.lib.aclrtUnmapMem(va) == 0
    assert sim.lib.aclrtMapMem(va, 2 * MiB, 2 * MiB, h1, 0) == 0   # data stayed in h1
    assert sim.d2h(va, 12, sync=True).raw == b"offset-check"
    for p in (va, va + 2 * MiB):
        assert sim.lib.aclrtUnmapMem(p) == 0
    assert sim.lib.aclrtFreePhysical(h1) == 0
    assert sim.lib.aclrtReleaseMemAddress(va) == 0


def test_reservation_arguments(dev0):
    sim = dev0
    lib = sim.lib
    p = c_void_p()
    assert lib.aclrtReserveMemAddress(byref(p), MiB, 0, None, 0) == ACL_ERROR_INVALID_PARAM
    assert lib.aclrtReserveMemAddress(byref(p), 2 * MiB, 3, None, 0) == ACL_ERROR_INVALID_PARAM
    assert lib.aclrtReserveMemAddress(byref(p), 2 * MiB, 0, None, 1) == ACL_ERROR_INVALID_PARAM
    big = reserve(sim, 4 * MiB, alignment=64 * MiB)
    assert big % (64 * MiB) == 0
    assert lib.aclrtReleaseMemAddress(big) == 0
    again = reserve(sim, 4 * MiB, expect=big)            # a free expected address is honoured
    assert again == big
    assert lib.aclrtReserveMemAddress(byref(p), 2 * MiB, 0, big + 2 * MiB, 0) == ACL_ERROR_INVALID_PARAM
    assert "not free" in sim.err()
    assert lib.aclrtReleaseMemAddress(again) == 0
    h = c_void_p()
    prop = device_prop(0)
    assert lib.aclrtMallocPhysical(byref(h), MiB, byref(prop), 0) == ACL_ERROR_INVALID_PARAM
    prop.location.type = 0
    assert lib.aclrtMallocPhysical(byref(h), 2 * MiB, byref(prop), 0) == ACL_ERROR_INVALID_PARAM
    assert lib.aclrtFree(big) == ACL_ERROR_INVALID_PARAM                  # not aclrtMalloc memory
    not_a_handle = ctypes.create_string_buffer(64)
    assert lib.aclrtFreePhysical(not_a_handle) == ACL_ERROR_INVALID_PARAM


def test_virtual_memory_is_gated_by_the_emulated_cann_version(runner):
    script = """
        sim.set_device(0)
        prop = PhysicalMemProp(0, 0, 1, MemLocation(0, 1), 0)
        g, p, h = ctypes.c_size_t(), ctypes.c_void_p(), ctypes.c_void_p()
        codes = [
            lib.aclrtMemGetAllocationGranularity(ctypes.byref(prop), 0, ctypes.byref(g)),
            lib.aclrtReserveMemAddress(ctypes.byref(p), 2 * MiB, 0, None, 0),
            lib.aclrtMallocPhysical(ctypes.byref(h), 2 * MiB, ctypes.byref(prop), 0),
        ]
        print(codes)
        print(sim.err())
    """
    old = runner.ok(script, NPU_SIM_CANN_VERSION="7.0.0")
    codes, message = old.stdout.splitlines()
    assert codes == str([ACL_ERROR_RT_FEATURE_NOT_SUPPORT] * 3)
    assert "aclrtMallocPhysical" in message and "emulated CANN 7.0.0" in message
    since = _compat_data.CANN_FEATURES["virtual_memory"][0]  # compat/cann_features.toml
    assert since == "8.0.0"
    assert f"needs CANN {since}" in message
    for version, supported in ((since, True), ("7.9.9", False), ("8.0.RC3", False),
                               ("8.0.0.1", True), ("8.5.0", True)):
        codes = runner.ok(script, NPU_SIM_CANN_VERSION=version).stdout.splitlines()[0]
        assert (codes == "[0, 0, 0]") == supported, version


def test_feature_questions_are_logged_per_tag(runner, tmp_path):
    # Note [Which tests reach CANN's features]: one line per tag and feature
    # asked, whether the release has the feature or not; tags change at run time.
    log = tmp_path / "reach.log"
    script = """
        sim.set_device(0)
        p = ctypes.c_void_p()
        for tag in ("t.py::a", "t.py::a", "t.py::b"):
            os.environ["NPU_SIM_CANN_REACH_TAG"] = tag
            print(lib.aclrtReserveMemAddress(ctypes.byref(p), 2 * MiB, 0, None, 0))
            lib.aclrtReleaseMemAddress(p)
    """
    for version in ("9.0.0", "7.0.0"):
        log.unlink(missing_ok=True)
        runner.ok(script, NPU_SIM_CANN_VERSION=version, NPU_SIM_CANN_REACH_LOG=str(log))
        assert log.read_text() == "t.py::a\tvirtual_memory\nt.py::b\tvirtual_memory\n"
    # Empty (as unset) logs nothing.
    log.unlink()
    runner.ok(script, NPU_SIM_CANN_REACH_LOG="")
    assert not log.exists()
