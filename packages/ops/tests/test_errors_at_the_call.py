"""Note [Errors at the call] (csrc/CallVerification.h): argument errors that
only the CPU kernel checks are raised at the call, also after calls of the
same kind ran cleanly (csrc/ArgumentChecks.cpp), and the kernels' warnings
reach Python's warnings (Note [Warnings of queued work])."""

from __future__ import annotations

import pytest
import torch
import torch_npu  # noqa: F401


def test_multinomial_refuses_more_samples_than_categories_at_the_call_after_a_clean_call():
    probabilities = torch.tensor([0.3, 0.7]).npu()
    torch.multinomial(probabilities, 2)  # a clean call: its kind is verified
    torch.npu.synchronize()
    with pytest.raises(RuntimeError, match=r"cannot sample n_sample > prob_dist.size\(-1\) samples without replacement"):
        torch.multinomial(probabilities, 3)
    torch.npu.synchronize()  # nothing left to raise
    assert torch.multinomial(probabilities, 3, replacement=True).shape == (3,)


def test_random_bounds_out_of_the_dtype_are_refused_at_the_call_after_a_clean_call():
    # random_'s integer bounds are part of the call's signature: a clean
    # call with bounds that fit bool does not let one that does not through
    # to a later synchronization (the device-contract sweep's randint_like
    # on bool failed so, depending on the order of the tests).
    flags = torch.zeros(4, dtype=torch.bool).npu()
    torch.randint_like(flags, 2)
    torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="to - 1 is out of bounds for bool"):
        torch.randint_like(flags, 10)
    torch.npu.synchronize()  # nothing left to raise


def test_multi_tensor_scalar_kinds_are_checked_at_the_call_after_a_clean_call():
    # The kinds of a multi-tensor op's scalars (bool, int, float, complex) are
    # part of the call's signature, their values are not: a clean call with
    # float scalars does not let bool scalars, which _foreach_sub refuses,
    # through to a later synchronization (found by PyTorch's test_foreach
    # test_parity of _foreach_sub on complex tensors).
    tensors = [torch.ones(2, 2, dtype=torch.complex64).npu()]
    for scalars in ([1.0], 1.0):
        torch._foreach_sub(tensors, scalars)  # a clean call: its kind is verified
        torch.npu.synchronize()
    bool_message = r"Subtraction, the `-` operator, with a bool tensor is not supported"
    with pytest.raises(RuntimeError, match=bool_message):
        torch._foreach_sub(tensors, [True])
    torch._foreach_sub_(tensors, 1.0)
    torch.npu.synchronize()
    with pytest.raises(RuntimeError, match=bool_message):
        torch._foreach_sub_(tensors, True)
    torch.npu.synchronize()  # nothing left to raise
    # A complex scalar after a clean float one: an in-place float list refuses it.
    floats = [torch.ones(3).npu()]
    torch._foreach_add_(floats, 1.0)
    torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        torch._foreach_add_(floats, 1j)
    torch.npu.synchronize()
    torch.testing.assert_close(floats[0].cpu(), torch.full((3,), 2.0))


def test_multinomial_refuses_more_than_2_to_the_24_categories_at_the_call_after_a_clean_call():
    # The size is no part of the call's signature: checked on the host
    # (csrc/ArgumentChecks.cpp).
    torch.multinomial(torch.ones(8).npu(), 3)
    torch.npu.synchronize()
    with pytest.raises(RuntimeError, match=r"number of categories cannot exceed 2\^24"):
        torch.multinomial(torch.ones(2**24 + 1).npu(), 3)
    torch.npu.synchronize()


@pytest.mark.parametrize(
    ("dtype", "fits", "too_large", "message"),
    [
        (torch.uint8, 256, 257, "value cannot be converted to type uint8_t without overflow"),
        (torch.float16, 2049, 2050, "n cannot be greater than 2049 for Half type"),
    ],
)
def test_randperm_refuses_an_n_its_out_dtype_cannot_hold_at_the_call_after_a_clean_call(
    dtype, fits, too_large, message
):
    # n is keyed by its sign only: checked on the host (csrc/ArgumentChecks.cpp),
    # as the CPU refuses it, instead of failing the device work later.
    out = torch.empty(0, dtype=dtype).npu()
    torch.manual_seed(7)
    torch.randperm(fits, out=out)
    torch.npu.synchronize()
    assert sorted(out.cpu().long().tolist()) == list(range(fits))
    # The checked overload still draws from the npu generator: the functional
    # op, which reaches it through the composite randperm.out, agrees.
    torch.manual_seed(7)
    torch.testing.assert_close(torch.randperm(fits, dtype=dtype, device="npu").cpu(), out.cpu(), atol=0, rtol=0)
    with pytest.raises(RuntimeError, match=message):
        torch.randperm(too_large, out=out)
    with pytest.raises(RuntimeError, match=message):
        torch.randperm(too_large, out=torch.empty(0, dtype=dtype))  # the CPU's own refusal
    torch.npu.synchronize()  # nothing left to raise


# Note [Warnings of queued work] (csrc/CallVerification.h). Run in a fresh
# process: which call signatures ran cleanly before is process-wide state.
WARNINGS_SCRIPT = """
    import warnings, torch, torch_npu

    def warned(call):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        return sum("degrees of freedom is <= 0" in str(w.message) for w in caught)

    one = torch.randn(1).npu()
    # A kernel warning that follows from the call's signature: at every
    # call, as on the CPU (on the stream's worker it went to stderr).
    print("every call:", [warned(lambda: one.var()) for _ in range(4)])
    # A warning the signature cannot foresee (it depends on the size): the
    # first one reaches Python's warnings at the next launch, later calls
    # warn at the call.
    four, two = torch.randn(4, 3).npu(), torch.randn(1, 3).npu()
    four.std(0), four.std(0)  # a clean signature
    torch.npu.synchronize()
    late = warned(lambda: (two.std(0), torch.npu.synchronize()))
    print("late:", late, [warned(lambda: two.std(0)) for _ in range(3)])
    # Warnings as errors (python -W error) raise at the call.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            one.var()
            print("no error")
        except UserWarning as error:
            print("raised:", "degrees of freedom" in str(error))
    torch.npu.synchronize()
"""


def test_kernel_warnings_reach_pythons_warnings_not_stderr(python_subprocess_env):
    result = python_subprocess_env(WARNINGS_SCRIPT, {"TORCH_NPU_META_WARMUP": "0"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "every call: [1, 1, 1, 1]"
    assert lines[1] == "late: 0 [2, 1, 1]"  # the deferred one with the next call's own
    assert lines[2] == "raised: True"
    assert "degrees of freedom" not in result.stderr


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_linalg_eig_refuses_non_finite_input_at_the_call_after_a_clean_call(bad):
    # The CPU and CUDA kernels check the values first and read the result on
    # the host; a queued kernel raised it at the next synchronization (found
    # by PyTorch's test_linalg test_eig_with_nan, which then failed the next
    # test's op).
    a = torch.randn(2, 4, 4)
    clean = torch.linalg.eig(a.npu())  # a clean call: its signature is verified
    torch.npu.synchronize()
    expected = torch.linalg.eig(a)
    torch.testing.assert_close(clean.eigenvalues.cpu(), expected.eigenvalues)
    a[1, -1, -1] = bad
    message = "torch.linalg.eig: input tensor should not contain infs or NaNs"
    with pytest.raises(RuntimeError, match=message):
        torch.linalg.eig(a)
    with pytest.raises(RuntimeError, match=message):
        torch.linalg.eig(a.npu())
    values = torch.empty(0, dtype=torch.complex64).npu()
    vectors = torch.empty(0, dtype=torch.complex64).npu()
    with pytest.raises(RuntimeError, match=message):
        torch.linalg.eig(a.npu(), out=(values, vectors))
    torch.npu.synchronize()  # nothing left to raise
