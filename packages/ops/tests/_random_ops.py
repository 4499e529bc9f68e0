"""OpInfo entries whose values are random, for the sweeps that compare
values (test_opinfo_conformance.py, test_device_contract.py): npu draws from
its own generator, and empty* returns uninitialised memory, so only the
structure, shapes and dtypes of their results can be compared."""

from __future__ import annotations

RANDOM_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
    "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout", "nn.functional.rrelu",
    "bernoulli", "multinomial", "normal", "uniform", "cauchy", "exponential", "geometric",
    "log_normal", "rand_like", "randn", "randn_like", "randint", "randint_like",
    # random pooling regions unless the sample passes _random_samples
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    # randomized algorithms (random projections): results are unique only up
    # to the phase of complex singular vectors
    "svd_lowrank", "pca_lowrank",
})
