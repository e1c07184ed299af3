"""The encoder's products: padding a few rows up to the count BLAS takes whole changes none of them.

A query's vector may depend on the company it is embedded in (a lone query, a coalesced group, a store
batch) only by rounding, so a row of a product depends on its own row of the input and on nothing else
beyond the last bits, on whichever kernel the CPU selects.
"""

from __future__ import annotations

import numpy as np
import pytest
import threadpoolctl

from cpersona.stores.embedding.bert import _Linear, _rows_padded


@pytest.fixture(scope="module")
def linear() -> _Linear:
    # The shape of the feed-forward's first product, random but fixed.
    rng = np.random.default_rng(7)
    weight = rng.standard_normal((1536, 384), dtype=np.float32) / np.float32(20.0)
    bias = rng.standard_normal(1536, dtype=np.float32)
    threadpoolctl.threadpool_limits(limits=1, user_api="blas")  # as the embedder runs it
    return _Linear(np.ascontiguousarray(weight), bias)


def test_padding_reaches_whole_kernel_counts_and_only_adds_zero_rows() -> None:
    rng = np.random.default_rng(1)
    expected = {1: 1, 2: 4, 3: 4, 4: 4, 5: 8, 8: 8, 9: 16, 13: 16, 16: 16, 17: 24, 63: 64, 64: 64}
    for rows, full in expected.items():
        x = rng.standard_normal((rows, 384), dtype=np.float32)
        padded = _rows_padded(x)
        assert padded.shape == (full, 384)
        np.testing.assert_array_equal(padded[:rows], x)
        assert not padded[rows:].any()


# Products here are of order one; float32 rounding of a 384-term sum moves them by about 1e-6 (the
# largest seen with the Haswell kernel was 1.2e-6). A row that took anything from another row, or from a
# padding row that was not zero, would be off by far more.
_ROUNDING = 1e-5


def test_each_row_of_a_product_is_the_same_in_any_company_up_to_rounding(linear: _Linear) -> None:
    rng = np.random.default_rng(2)
    block = rng.standard_normal((40, 384), dtype=np.float32)
    # A text has two tokens at least ([CLS] and [SEP]); the reference is a row beside a zero row.
    zero = np.zeros((1, 384), dtype=np.float32)
    alone = [linear(np.concatenate([block[i : i + 1], zero]))[0] for i in range(len(block))]
    # Every count from 2 to 40 rows, padded or not, against each row computed on its own.
    for rows in range(2, len(block) + 1):
        product = linear(block[:rows])
        assert product.shape == (rows, 1536)
        for i in range(rows):
            np.testing.assert_allclose(product[i], alone[i], rtol=0, atol=_ROUNDING)


def test_the_same_product_gives_the_same_bits_every_time(linear: _Linear) -> None:
    # One BLAS thread per call: nothing may reorder a sum between two calls of the same shape.
    rng = np.random.default_rng(4)
    for rows in (2, 7, 64, 300):
        x = rng.standard_normal((rows, 384), dtype=np.float32)
        np.testing.assert_array_equal(linear(x), linear(x.copy()))


def test_the_product_is_x_times_the_weight_plus_the_bias(linear: _Linear) -> None:
    rng = np.random.default_rng(3)
    for rows in (1, 5, 13, 64, 200, 300):  # the thin form, padded and not, and the plain form
        x = rng.standard_normal((rows, 384), dtype=np.float32)
        expected = x.astype(np.float64) @ linear.weight.T.astype(np.float64) + linear.bias
        np.testing.assert_allclose(linear(x), expected, rtol=1e-4, atol=1e-4)
        out = np.empty((rows, 1536), dtype=np.float32)
        assert linear(x, out=out) is out
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
