"""The caching allocator's settings (PYTORCH_NPU_ALLOC_CONF, Note [Allocator
settings] in NPUAllocatorConfig.h): parsing, errors, and what each key
changes in the allocator.

Settings are process-wide, so keys that cannot be set back to their default
at run time (max_split_size_mb, garbage_collection_threshold, page_size) are
tried in subprocesses through the environment variables.
"""

from __future__ import annotations

import gc
import json
import time
from typing import Any, Callable

import pytest
import torch

import torch_npu
from torch_npu.npu import memory

MiB = 1 << 20
GiB = 1 << 30


def parse(config: str) -> dict:
    """What ``config`` parses to over the defaults, without applying it."""
    return dict(torch_npu._C._npu_parse_allocator_settings(config))


def divisions_for(settings: dict, size: int) -> int:
    """roundup_power2_divisions that apply to a request of ``size`` bytes."""
    return settings["roundup_power2_divisions"][size.bit_length() - 1]


def run_checked(run_python: Callable[..., Any], code: str, env: dict[str, str]) -> str:
    """Runs ``code`` with conftest's ``run_python`` (the ``python_subprocess``
    fixture) in a fresh process with ``env``; returns its stdout."""
    result = run_python("import torch, torch_npu\n" + code, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def fresh_env(**values: str) -> dict[str, str]:
    """An environment with exactly the allocator variables given."""
    env = {"PYTORCH_NPU_ALLOC_CONF": "", "PYTORCH_ALLOC_CONF": ""}
    env.update(values)
    return env


def settle() -> None:
    """Waits until earlier tests' tensors are freed: a finished kernel's work
    item may drop its reference to its tensors just after synchronize()
    returns, which would move a test's baseline while it runs."""
    gc.collect()
    torch.npu.synchronize()
    last = torch.npu.memory_allocated()
    for _ in range(200):
        time.sleep(0.005)
        now = torch.npu.memory_allocated()
        if now == last:
            return
        last = now


@pytest.fixture(autouse=True)
def clean_allocator():
    settle()
    torch.npu.empty_cache()
    yield
    # The keys a test may have changed at run time, back to their defaults.
    memory._set_allocator_settings("expandable_segments:False,roundup_power2_divisions:0,base_addr_aligned_kb:16")
    settle()  # and leave none of this test's tensors to the next one
    torch.npu.empty_cache()


# ---- parsing ----------------------------------------------------------------


def test_defaults():
    s = parse("")
    assert s["expandable_segments"] is False
    assert s["max_split_size"] is None
    assert s["garbage_collection_threshold"] == 0.0
    assert set(s["roundup_power2_divisions"]) == {0}
    assert s["base_addr_aligned_kb"] == 16
    assert s["page_size"] is None
    assert s["segment_size"] is None
    assert s["large_segment_size"] == 20 * MiB


@pytest.mark.parametrize(
    ("config", "key", "expected"),
    [
        ("expandable_segments:True", "expandable_segments", True),
        ("expandable_segments:False", "expandable_segments", False),
        ("max_split_size_mb:21", "max_split_size", 21 * MiB),
        ("max_split_size_mb:1024", "max_split_size", GiB),
        ("garbage_collection_threshold:0.6", "garbage_collection_threshold", 0.6),
        ("garbage_collection_threshold:0.001", "garbage_collection_threshold", 0.001),
        ("base_addr_aligned_kb:0", "base_addr_aligned_kb", 0),
        ("base_addr_aligned_kb:16", "base_addr_aligned_kb", 16),
        ("page_size:1g", "page_size", GiB),
        ("segment_size_mb:128", "segment_size", 128 * MiB),
        ("segment_size_mb:1", "segment_size", MiB),
        ("large_segment_size_mb:40", "large_segment_size", 40 * MiB),
        (" max_split_size_mb : 32 ", "max_split_size", 32 * MiB),  # spaces around
        ("max_split_size_mb:32,", "max_split_size", 32 * MiB),  # trailing comma
        ("max_split_size_mb:32,max_split_size_mb:64", "max_split_size", 64 * MiB),  # last wins
    ],
)
def test_every_key_parses(config: str, key: str, expected: object):
    assert parse(config)[key] == expected


def test_documented_examples_parse():
    s = parse("max_split_size_mb:32,garbage_collection_threshold:0.6")
    assert (s["max_split_size"], s["garbage_collection_threshold"]) == (32 * MiB, 0.6)
    s = parse("expandable_segments:True,base_addr_aligned_kb:16")
    assert (s["expandable_segments"], s["base_addr_aligned_kb"]) == (True, 16)


def test_roundup_single_value_applies_to_every_size():
    s = parse("roundup_power2_divisions:4")
    assert set(s["roundup_power2_divisions"]) == {4}
    assert set(parse("roundup_power2_divisions:1")["roundup_power2_divisions"]) == {1}


def test_roundup_list_covers_intervals_below_each_bound():
    # As PyTorch's CUDA docs: 1 division below 256 MiB, 2 from 256 to 512
    # MiB, 4 from 512 MiB to 1 GiB, 8 above.
    s = parse("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]")
    assert divisions_for(s, 1) == 1
    assert divisions_for(s, int(1.1 * MiB)) == 1
    assert divisions_for(s, 256 * MiB - 1) == 1
    assert divisions_for(s, 256 * MiB) == 2
    assert divisions_for(s, 512 * MiB - 1) == 2
    assert divisions_for(s, 512 * MiB) == 4
    assert divisions_for(s, GiB) == 8
    assert divisions_for(s, 100 * GiB) == 8


def test_roundup_list_without_catch_all_leaves_larger_sizes_alone():
    s = parse("roundup_power2_divisions:[64:2, 128:0]")
    assert divisions_for(s, MiB) == 2
    assert divisions_for(s, 64 * MiB) == 0
    assert divisions_for(s, 512 * MiB) == 0


# ---- errors -----------------------------------------------------------------

BAD_SETTINGS = [
    ("a:", "'a'"),
    (":1", "no key"),
    ("expandable_segments", "expandable_segments"),
    ("unknown_key:1", "unknown_key"),
    ("max_split_size_mb:abc", "max_split_size_mb"),
    ("max_split_size_mb:20", "max_split_size_mb"),
    ("max_split_size_mb:-1", "max_split_size_mb"),
    ("max_split_size_mb:32.5", "max_split_size_mb"),
    ("max_split_size_mb:99999999999999999999", "max_split_size_mb"),
    ("garbage_collection_threshold:0", "garbage_collection_threshold"),
    ("garbage_collection_threshold:1.0", "garbage_collection_threshold"),
    ("garbage_collection_threshold:abc", "garbage_collection_threshold"),
    ("garbage_collection_threshold:nan", "garbage_collection_threshold"),
    ("expandable_segments:yes", "expandable_segments"),
    ("expandable_segments:true", "expandable_segments"),
    ("roundup_power2_divisions:3", "roundup_power2_divisions"),
    ("roundup_power2_divisions:[256:3]", "roundup_power2_divisions"),
    ("roundup_power2_divisions:[100:2]", "roundup_power2_divisions"),
    ("roundup_power2_divisions:[512:1,256:2]", "roundup_power2_divisions"),
    ("roundup_power2_divisions:[>:1,256:2]", "roundup_power2_divisions"),
    ("roundup_power2_divisions:[256:1", "roundup_power2_divisions"),
    ("roundup_power2_divisions:[256]", "roundup_power2_divisions"),
    ("roundup_power2_divisions:[]", "roundup_power2_divisions"),
    ("base_addr_aligned_kb:17", "base_addr_aligned_kb"),
    ("base_addr_aligned_kb:-1", "base_addr_aligned_kb"),
    ("page_size:2m", "page_size"),
    ("page_size:1G", "page_size"),
    ("segment_size_mb:0", "segment_size_mb"),
    ("segment_size_mb:2.5", "segment_size_mb"),
    ("segment_size_mb:9999999", "segment_size_mb"),
    ("large_segment_size_mb:0", "large_segment_size_mb"),
    ("large_segment_size_mb:big", "large_segment_size_mb"),
    ("expandable_segments:True,max_split_size_mb:32", "expandable_segments"),
    ("garbage_collection_threshold:0.5,expandable_segments:True", "garbage_collection_threshold"),
]


@pytest.mark.parametrize(("config", "named"), BAD_SETTINGS)
def test_bad_settings_raise_naming_the_key(config: str, named: str):
    with pytest.raises(RuntimeError, match="allocator settings") as info:
        parse(config)
    assert named in str(info.value)


def test_unknown_key_lists_the_keys():
    with pytest.raises(RuntimeError) as info:
        parse("max_split:32")
    for key in ("expandable_segments", "max_split_size_mb", "garbage_collection_threshold",
                "roundup_power2_divisions", "base_addr_aligned_kb", "page_size", "segment_size_mb",
                "large_segment_size_mb"):
        assert key in str(info.value)


def runtime_error_of(config: str) -> str:
    """The message _set_allocator_settings(config) raises. Caught here, so
    that no traceback ties the caller's tensors into a reference cycle that
    the garbage collector would free in the middle of a later test."""
    with pytest.raises(RuntimeError, match="_set_allocator_settings") as info:
        memory._set_allocator_settings(config)
    return str(info.value)


@pytest.mark.parametrize(("config", "named"), BAD_SETTINGS)
def test_bad_runtime_settings_change_nothing_and_allocation_goes_on(config: str, named: str):
    memory._set_allocator_settings("roundup_power2_divisions:2")
    before = memory._get_allocator_settings()
    base = torch.npu.memory_allocated()
    live = torch.empty(3 * 4096, dtype=torch.uint8, device="npu")
    assert named in runtime_error_of(config)
    assert memory._get_allocator_settings() == before
    more = torch.ones(4 * 4096, dtype=torch.uint8, device="npu")  # sizes roundup leaves as they are
    assert torch.npu.memory_allocated() == base + live.nbytes + more.nbytes
    assert int(more.sum()) == more.numel()


def test_set_allocator_settings_takes_a_string():
    with pytest.raises(TypeError):
        memory._set_allocator_settings(32)  # type: ignore[arg-type]


# ---- run-time settings --------------------------------------------------------


def test_runtime_settings_keep_keys_not_named():
    memory._set_allocator_settings("roundup_power2_divisions:4")
    memory._set_allocator_settings("base_addr_aligned_kb:0")
    s = memory._get_allocator_settings()
    assert set(s["roundup_power2_divisions"]) == {4}
    assert s["base_addr_aligned_kb"] == 0


def test_expandable_segments_at_run_time_warns_nothing(python_subprocess):
    out = run_checked(
        python_subprocess,
        """
        import warnings
        from torch_npu.npu import memory
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            memory._set_allocator_settings("expandable_segments:True")
            t = torch.ones(1024, device="npu")
        print(len(caught))
        print(memory._get_allocator_settings()["expandable_segments"], float(t.sum()))
        """.replace("\n        ", "\n"),
        fresh_env(),
    )
    assert out.split() == ["0", "True", "1024.0"]


# ---- environment variables ------------------------------------------------------

SHOW_SETTINGS = """
t = torch.ones(16, device="npu")  # the allocator's first use reads the environment
print(json.dumps(torch_npu.npu.memory._get_allocator_settings()))
"""


def settings_from_env(run_python: Callable[..., Any], **values: str) -> dict:
    return json.loads(run_checked(run_python, "import json\n" + SHOW_SETTINGS, fresh_env(**values)))


def test_env_npu_variable(python_subprocess):
    s = settings_from_env(python_subprocess, PYTORCH_NPU_ALLOC_CONF="max_split_size_mb:32,roundup_power2_divisions:[256:1,>:4],page_size:1g")
    assert s["max_split_size"] == 32 * MiB
    assert s["page_size"] == GiB
    assert divisions_for(s, MiB) == 1
    assert divisions_for(s, GiB) == 4


def test_env_generic_variable_and_both_agreeing(python_subprocess):
    assert settings_from_env(python_subprocess, PYTORCH_ALLOC_CONF="garbage_collection_threshold:0.7")["garbage_collection_threshold"] == 0.7
    both = "base_addr_aligned_kb:4"
    s = settings_from_env(python_subprocess, PYTORCH_NPU_ALLOC_CONF=both, PYTORCH_ALLOC_CONF=both)
    assert s["base_addr_aligned_kb"] == 4


ALLOCATE_TWICE = """
for attempt in range(2):
    try:
        torch.ones(16, device="npu")
        print("allocated")
    except RuntimeError as error:
        print("error:", str(error).splitlines()[0])
"""


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"PYTORCH_NPU_ALLOC_CONF": "max_split_size_mb:1", "PYTORCH_ALLOC_CONF": "max_split_size_mb:64"},
         ["PYTORCH_NPU_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "differ"]),
        ({"PYTORCH_NPU_ALLOC_CONF": "max_split_size_mb:abc"}, ["PYTORCH_NPU_ALLOC_CONF", "max_split_size_mb"]),
        ({"PYTORCH_ALLOC_CONF": "page_size:2m"}, ["PYTORCH_ALLOC_CONF", "page_size"]),
        ({"PYTORCH_NPU_ALLOC_CONF": "a:"}, ["'a'"]),
        ({"PYTORCH_NPU_ALLOC_CONF": ":1"}, ["no key"]),
    ],
)
def test_bad_env_raises_at_first_use_naming_the_key(python_subprocess, env: dict[str, str], named: list[str]):
    # The allocator refuses to run misconfigured: every use raises the same
    # error until the environment is fixed.
    lines = run_checked(python_subprocess, ALLOCATE_TWICE, fresh_env(**env)).splitlines()
    assert len(lines) == 2 and lines[0] == lines[1], lines
    assert lines[0].startswith("error:")
    for word in named:
        assert word in lines[0]


# ---- what the keys change in the allocator -------------------------------------


def test_roundup_power2_divisions_rounds_a_request():
    # 1.1 MiB lies between 1 and 2 MiB: with 4 divisions it rounds up to the
    # next quarter step of 256 KiB (1.25 MiB), with 1 to 2 MiB, without to
    # the next 512 bytes, and to the next 16 KiB for the large pool's default
    # base_addr_aligned_kb:16.
    size = int(1.1 * MiB)
    for config, expected in [
        ("roundup_power2_divisions:0,base_addr_aligned_kb:0", (size + 511) // 512 * 512),
        ("roundup_power2_divisions:0,base_addr_aligned_kb:16", (size + 16383) // 16384 * 16384),
        ("roundup_power2_divisions:4", 1280 * 1024),
        ("roundup_power2_divisions:[256:1,512:2,>:8]", 2 * MiB),
        ("roundup_power2_divisions:[1:4,2:8]", 1152 * 1024),  # 1-2 MiB: 8 steps of 128 KiB
    ]:
        memory._set_allocator_settings(config)
        base = torch.npu.memory_allocated()
        t = torch.empty(size, dtype=torch.uint8, device="npu")
        assert torch.npu.memory_allocated() - base == expected, config
        assert torch.npu.memory_stats()["requested_bytes.all.current"] >= size
        del t


def test_roundup_keeps_small_requests_at_512_bytes():
    memory._set_allocator_settings("roundup_power2_divisions:8")
    base = torch.npu.memory_allocated()
    t = torch.empty(3000, dtype=torch.uint8, device="npu")  # below 8 * 512 bytes
    assert torch.npu.memory_allocated() - base == 3072
    del t


def test_without_max_split_size_a_large_cached_block_is_split():
    x = torch.empty(64 * MiB, dtype=torch.uint8, device="npu")
    del x
    reserved = torch.npu.memory_reserved()
    y = torch.empty(4 * MiB, dtype=torch.uint8, device="npu")
    assert torch.npu.memory_reserved() == reserved
    del y


def test_max_split_size_keeps_large_blocks_whole(python_subprocess):
    out = run_checked(
        python_subprocess,
        """
import json
MiB = 1 << 20
def state():
    s = torch.npu.memory_stats()
    return [torch.npu.memory_reserved() // MiB, s["oversize_allocations.current"], s["oversize_segments.current"]]
x = torch.empty(64 * MiB, dtype=torch.uint8, device="npu")
seen = {"max_split_size": torch.npu.memory_stats()["max_split_size"]}
seen["big"] = state()
del x
y = torch.empty(4 * MiB, dtype=torch.uint8, device="npu")   # must not split the cached 64 MiB
seen["small_after_big"] = state()
x = torch.empty(60 * MiB, dtype=torch.uint8, device="npu")  # oversize: 64 < 60 + 20 MiB, reused whole
seen["reuse"] = state()
del x
z = torch.empty(40 * MiB, dtype=torch.uint8, device="npu")  # 64 >= 40 + 20 MiB: a segment of its own
seen["no_waste"] = state()
del y, z
torch.npu.empty_cache()
seen["empty"] = state()
print(json.dumps(seen))
""",
        fresh_env(PYTORCH_NPU_ALLOC_CONF="max_split_size_mb:32"),
    )
    seen = json.loads(out)
    assert seen["max_split_size"] == 32 * MiB
    assert seen["big"] == [64, 1, 1]
    assert seen["small_after_big"] == [84, 0, 1]  # a new 20 MiB segment
    assert seen["reuse"] == [84, 1, 1]
    assert seen["no_waste"] == [124, 1, 2]
    assert seen["empty"] == [0, 0, 0]


GC_SCRIPT = """
import json
MiB = 1 << 20
total = torch.npu.mem_get_info()[1]
if FRACTION:
    torch.npu.set_per_process_memory_fraction(512 * MiB / total)  # allowed maximum: 512 MiB
a = torch.empty(150 * MiB, dtype=torch.uint8, device="npu")
b = torch.empty(160 * MiB, dtype=torch.uint8, device="npu")
for name in ORDER:  # the order the two are freed in
    del globals()[name]
c = torch.empty(170 * MiB, dtype=torch.uint8, device="npu")  # fits neither cached block
s = torch.npu.memory_stats()
print(json.dumps([torch.npu.memory_reserved() // MiB, s["num_device_free"], s["num_alloc_retries"]]))
"""


@pytest.mark.parametrize(
    ("order", "fraction", "expected"),
    [
        # 310 MiB reserved > 0.5 * 512: the least recently freed segment goes
        # (150 or 160 MiB), which brings reserved under 256 MiB.
        (["a", "b"], True, [160 + 170, 1, 0]),
        (["b", "a"], True, [150 + 170, 1, 0]),
        # Without a memory fraction there is no allowed maximum to exceed.
        (["a", "b"], False, [150 + 160 + 170, 0, 0]),
    ],
)
def test_garbage_collection_frees_least_recently_freed_segments(python_subprocess, order: list[str],
                                                                  fraction: bool, expected: list[int]):
    code = GC_SCRIPT.replace("FRACTION", str(fraction)).replace("ORDER", repr(order))
    out = run_checked(python_subprocess, code, fresh_env(PYTORCH_NPU_ALLOC_CONF="garbage_collection_threshold:0.5"))
    assert json.loads(out) == expected


def test_page_size_1g_makes_large_segments_whole_gibibytes(python_subprocess):
    out = run_checked(
        python_subprocess,
        """
MiB = 1 << 20
x = torch.ones(4 * MiB, dtype=torch.uint8, device="npu")
large = torch.npu.memory_reserved()
y = torch.ones(MiB // 2, dtype=torch.uint8, device="npu")  # small pool: 2 MiB segments as before
print(large // MiB, (torch.npu.memory_reserved() - large) // MiB, int(x.sum()) == x.numel())
""",
        fresh_env(PYTORCH_NPU_ALLOC_CONF="page_size:1g"),
    )
    assert out.split() == ["1024", "2", "True"]


def test_base_addr_aligned_kb_aligns_large_blocks():
    """Blocks of the large pool start at base_addr_aligned_kb-aligned
    addresses (torch_npu's default, 16 KiB); 0 leaves 512 bytes."""
    odd = (1 << 20) + 1000  # above 1 MiB: the large pool
    memory._set_allocator_settings("base_addr_aligned_kb:16")
    try:
        a = torch.empty(odd, dtype=torch.uint8, device="npu")
        b = torch.empty(odd, dtype=torch.uint8, device="npu")
        assert a.data_ptr() % (16 << 10) == 0 and b.data_ptr() % (16 << 10) == 0
        assert abs(b.data_ptr() - a.data_ptr()) % (16 << 10) == 0
        blocks = {blk["address"]: blk["size"] for s in torch.npu.memory._snapshot()["segments"] for blk in s["blocks"]}
        assert blocks[a.data_ptr()] == (16 << 10) * -(-odd // (16 << 10))
        del a, b
        memory._set_allocator_settings("base_addr_aligned_kb:0")
        c = torch.empty(odd, dtype=torch.uint8, device="npu")
        blocks = {blk["address"]: blk["size"] for s in torch.npu.memory._snapshot()["segments"] for blk in s["blocks"]}
        assert blocks[c.data_ptr()] == 512 * -(-odd // 512)
        small = torch.empty(1000, dtype=torch.uint8, device="npu")  # the small pool keeps 512-byte blocks
        blocks = {blk["address"]: blk["size"] for s in torch.npu.memory._snapshot()["segments"] for blk in s["blocks"]}
        assert blocks[small.data_ptr()] == 1024
    finally:
        memory._set_allocator_settings("base_addr_aligned_kb:16")


# ---- segment sizes (torch_npu's segment_size_mb and large_segment_size_mb) ----


@pytest.fixture
def settings_restored():
    before = memory._get_allocator_settings()
    gc.collect()
    torch.npu.synchronize()
    torch.npu.empty_cache()
    try:
        yield torch.npu.memory_reserved()
    finally:
        gc.collect()
        torch.npu.synchronize()
        torch.npu.empty_cache()
        memory._set_allocator_settings(
            f"expandable_segments:{before['expandable_segments']},"
            f"large_segment_size_mb:{before['large_segment_size'] // MiB}")
        assert memory._get_allocator_settings()["large_segment_size"] == before["large_segment_size"]


def test_segment_size_mb_makes_an_expandable_segment_grow_by_that_much(settings_restored):
    memory._set_allocator_settings("expandable_segments:True,segment_size_mb:128")
    x = torch.empty((2, 1024, 1024), device="npu", dtype=torch.float32)  # 8 MiB
    assert torch.npu.memory_reserved() - settings_restored == 128 * MiB
    y = torch.empty((2, 1024, 1024), device="npu", dtype=torch.float32)  # from the same growth
    assert torch.npu.memory_reserved() - settings_restored == 128 * MiB
    assert y.data_ptr() == x.data_ptr() + 8 * MiB
    del x, y
    # The small pool keeps the granularity.
    memory._set_allocator_settings("segment_size_mb:2")
    assert memory._get_allocator_settings()["segment_size"] == 2 * MiB


def test_large_segment_size_mb_sizes_the_segment_of_a_mid_sized_request(settings_restored):
    memory._set_allocator_settings("expandable_segments:False,large_segment_size_mb:40")
    x = torch.empty(5 * MiB, dtype=torch.uint8, device="npu")
    assert torch.npu.memory_reserved() - settings_restored == 40 * MiB
    del x
    torch.npu.empty_cache()
    # A request above it gets a segment of its own size (in 2 MiB steps).
    memory._set_allocator_settings("large_segment_size_mb:4")
    y = torch.empty(7 * MiB, dtype=torch.uint8, device="npu")
    assert torch.npu.memory_reserved() - settings_restored == 8 * MiB
    del y
