"""Configuration, device table, versions and device information."""

import ctypes
import re
import shutil
import subprocess
from ctypes import byref, c_int32, c_int64
from pathlib import Path

from _simlib import (
    ACL_DEV_ATTR_CUBE_CORE_NUM,
    ACL_DEV_ATTR_L2_CACHE_SIZE,
    ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE,
    ACL_DEV_ATTR_VECTOR_CORE_NUM,
    ACL_ERROR_REPEAT_INITIALIZE,
    ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
    ACL_ERROR_RT_INVALID_DEVICEID,
    ACL_SUCCESS,
    CONTRACT_FUNCTIONS,
    CANNPackageVersion,
    GiB,
    MiB,
    UtilizationInfo,
)


CANN_HEADERS = Path(__file__).resolve().parents[2] / "csrc" / "cann"


def contract_functions():
    """Every function of the contract, read from the headers themselves."""
    acl = (CANN_HEADERS / "acl_functions.h").read_text()
    ext = (CANN_HEADERS / "npu_sim_ext.h").read_text()
    names = set(re.findall(r"X\(\s*[\w *]+,\s*(acl\w+),", acl))
    names |= set(re.findall(r"^[\w *]+?\b(npuSim\w+)\(", ext, re.M))
    hccl = (CANN_HEADERS / "hccl_functions.h").read_text()
    names |= set(re.findall(r"X\(\s*[\w *]+,\s*(Hccl\w+),", hccl))
    return names


def test_every_contract_function_is_exported(lib_path):
    names = contract_functions()
    assert names and names == set(CONTRACT_FUNCTIONS)
    lib = ctypes.CDLL(str(lib_path))
    assert [n for n in sorted(names) if not hasattr(lib, n)] == []
    if shutil.which("nm"):
        out = subprocess.run(["nm", "-D", "--defined-only", str(lib_path)],
                             capture_output=True, text=True, check=True).stdout
        exported = {line.split()[-1] for line in out.splitlines() if line.strip()}
        assert exported == names  # nothing else leaks out of the library


def test_default_configuration(sim):
    assert sim.device_count() == 8
    assert sim.lib.aclrtGetSocName() == b"Ascend910B3 (simulated)"
    describe = sim.lib.npuSimDescribe().decode()
    for part in ("backend=simulator", "devices=8", "capacity=16.00GiB", "checker=off",
                 "cann=9.0.0", "soc=Ascend910B3 (simulated)"):
        assert part in describe
    assert sim.delta() == 0


def test_versions(sim):
    major, minor, patch = c_int32(), c_int32(), c_int32()
    assert sim.lib.aclrtGetVersion(byref(major), byref(minor), byref(patch)) == ACL_SUCCESS
    assert (major.value, minor.value, patch.value) == (1, 17, 0)
    v = CANNPackageVersion()
    assert sim.lib.aclsysGetCANNVersion(0, byref(v)) == ACL_SUCCESS
    assert (v.version, v.majorVersion, v.minorVersion, v.releaseVersion, v.patchVersion) == (
        b"9.0.0", b"9", b"0", b"0", b"0")


def test_device_info(sim):
    def info(device, attr):
        value = c_int64()
        rc = sim.lib.aclrtGetDeviceInfo(device, attr, byref(value))
        return rc, value.value

    assert info(0, ACL_DEV_ATTR_CUBE_CORE_NUM) == (ACL_SUCCESS, 24)
    assert info(3, ACL_DEV_ATTR_VECTOR_CORE_NUM) == (ACL_SUCCESS, 48)
    assert info(7, ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE) == (ACL_SUCCESS, 16 * GiB)
    assert info(0, ACL_DEV_ATTR_L2_CACHE_SIZE) == (ACL_SUCCESS, 192 * MiB)
    assert info(0, 12345)[0] == ACL_ERROR_RT_FEATURE_NOT_SUPPORT
    assert "attribute 12345" in sim.err()
    assert info(8, ACL_DEV_ATTR_CUBE_CORE_NUM)[0] == ACL_ERROR_RT_INVALID_DEVICEID
    least, greatest = c_int32(), c_int32()
    assert sim.lib.aclrtDeviceGetStreamPriorityRange(byref(least), byref(greatest)) == 0
    assert (least.value, greatest.value) == (7, 0)


def test_peer_access(sim):
    def can(device, peer):
        value = c_int32(-1)
        rc = sim.lib.aclrtDeviceCanAccessPeer(byref(value), device, peer)
        return rc, value.value

    # Every simulated device reaches every other one; none is its own peer.
    assert can(0, 1) == (ACL_SUCCESS, 1)
    assert can(7, 0) == (ACL_SUCCESS, 1)
    assert can(2, 2) == (ACL_SUCCESS, 0)
    assert can(0, 8)[0] == ACL_ERROR_RT_INVALID_DEVICEID
    assert sim.lib.aclrtDeviceCanAccessPeer(None, 0, 1) != ACL_SUCCESS


def test_utilization_is_the_share_of_time_device_work_ran(sim):
    import time

    def utilization(device):
        info = UtilizationInfo()
        assert sim.lib.aclrtGetDeviceUtilizationRate(device, byref(info)) == ACL_SUCCESS
        assert info.cubeUtilization == info.vectorUtilization
        assert info.aicpuUtilization == 0 and info.memoryUtilization == -1
        return info.cubeUtilization

    sim.set_device(0)
    utilization(0)  # starts a sampling period
    time.sleep(0.2)
    assert utilization(0) <= 5  # idle
    s = sim.create_stream()
    sim.launch(lambda: time.sleep(0.3) or 0, s)  # busy for most of the period
    time.sleep(0.05)
    sim.sync(s)
    time.sleep(0.02)
    assert utilization(0) >= 70
    sim.destroy_stream(s)
    assert sim.lib.aclrtGetDeviceUtilizationRate(8, byref(UtilizationInfo())) == ACL_ERROR_RT_INVALID_DEVICEID


def test_set_device_validates_and_is_per_thread(sim):
    import threading

    assert sim.lib.aclrtSetDevice(8) == ACL_ERROR_RT_INVALID_DEVICEID
    assert "invalid device id 8" in sim.err()
    assert sim.lib.aclrtSetDevice(-1) == ACL_ERROR_RT_INVALID_DEVICEID
    sim.set_device(2)
    seen = {}

    def other_thread():
        d = c_int32()
        seen["before"] = sim.lib.aclrtGetDevice(byref(d))
        seen["message"] = sim.err()
        sim.set_device(5)
        sim.lib.aclrtGetDevice(byref(d))
        seen["after"] = d.value

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    d = c_int32()
    assert sim.lib.aclrtGetDevice(byref(d)) == ACL_SUCCESS and d.value == 2
    assert seen["before"] == 107002  # ACL_ERROR_RT_CONTEXT_NULL
    assert "aclrtSetDevice" in seen["message"]
    assert seen["after"] == 5
    sim.set_device(0)


def test_recent_error_message_is_cleared_by_reading(sim):
    sim.err()               # whatever an earlier test left
    assert sim.err() == ""  # never null
    assert sim.lib.aclrtSetDevice(99) == ACL_ERROR_RT_INVALID_DEVICEID
    assert "99" in sim.err()
    assert sim.err() == ""


def test_init_twice_and_finalize(runner):
    runner.ok(f"""
        assert lib.aclInit(None) == 0
        assert lib.aclInit(None) == {ACL_ERROR_REPEAT_INITIALIZE}
        assert "already" in sim.err()
        assert lib.aclFinalize() == 0
        assert lib.aclInit(b"/nonexistent.json") == 0
    """)


def test_environment_overrides(runner):
    result = runner.ok("""
        v = CANNPackageVersion()
        assert lib.aclsysGetCANNVersion(0, ctypes.byref(v)) == 0
        total = ctypes.c_int64()
        lib.aclrtGetDeviceInfo(2, ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE, ctypes.byref(total))
        print(sim.device_count(), total.value, lib.aclrtGetSocName().decode())
        print(v.version.decode(), v.majorVersion.decode(), v.minorVersion.decode(),
              v.releaseVersion.decode())
        print(lib.npuSimDescribe().decode())
        sim.set_device(2)
        assert sim.mem_info()[1] == 512 * MiB
    """, NPU_SIM_DEVICE_COUNT=3, NPU_SIM_DEVICE_MEMORY="512MiB",
        NPU_SIM_CANN_VERSION="8.3.RC1", NPU_SIM_SOC_NAME="Ascend910B4")
    lines = result.stdout.splitlines()
    assert lines[0] == f"3 {512 * MiB} Ascend910B4 (simulated)"
    assert lines[1] == "8.3.RC1 8 3 RC1"
    assert "devices=3 capacity=512.00MiB" in lines[2] and "cann=8.3.RC1" in lines[2]
    assert result.stderr == ""


def test_memory_size_forms(runner):
    forms = {"1G": GiB, "64 mib": 64 * MiB, "1.5GiB": 3 * GiB // 2, "8388608": 8 * MiB,
             "2T": 2 << 40, "100K": 100 * 1024}
    script = """
        total = ctypes.c_int64()
        lib.aclrtGetDeviceInfo(0, ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE, ctypes.byref(total))
        print(total.value)
    """
    for text, expected in forms.items():
        result = runner.ok(script, NPU_SIM_DEVICE_MEMORY=text, NPU_SIM_DEVICE_COUNT=1)
        assert int(result.stdout) == expected, text


def test_invalid_values_fall_back_to_defaults_with_a_message(runner):
    result = runner.ok("""
        total = ctypes.c_int64()
        lib.aclrtGetDeviceInfo(0, ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE, ctypes.byref(total))
        v = CANNPackageVersion()
        lib.aclsysGetCANNVersion(0, ctypes.byref(v))
        print(sim.device_count(), total.value, v.version.decode())
    """, NPU_SIM_DEVICE_COUNT="many", NPU_SIM_DEVICE_MEMORY="lots", NPU_SIM_CANN_VERSION="banana")
    assert result.stdout.split() == ["8", str(16 * GiB), "9.0.0"]
    err = result.stderr
    assert "NPU_SIM_DEVICE_COUNT='many' is invalid" in err
    assert "NPU_SIM_DEVICE_MEMORY='lots' is invalid" in err and "GiB" in err
    assert "NPU_SIM_CANN_VERSION='banana' is invalid" in err and "8.3.RC1" in err


def test_visible_devices(runner):
    result = runner.ok(f"""
        print(sim.device_count())
        sim.set_device(1)
        assert lib.aclrtSetDevice(2) == {ACL_ERROR_RT_INVALID_DEVICEID}
        print(lib.npuSimDescribe().decode())
    """, NPU_SIM_DEVICE_COUNT=4, ASCEND_RT_VISIBLE_DEVICES="3, 1,9,x,1")
    lines = result.stdout.splitlines()
    assert lines[0] == "2"
    assert "visible=3,1" in lines[1]
    warnings = result.stderr.splitlines()
    assert len(warnings) == 3
    assert "ASCEND_RT_VISIBLE_DEVICES" in warnings[0] and "'9'" in warnings[0]
    assert "'x'" in warnings[1]
    assert "duplicate" in warnings[2]
