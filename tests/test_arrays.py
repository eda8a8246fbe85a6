"""podsim._arrays: the sort-based unique and duplicate check agree with numpy's."""

import numpy as np
import pytest

from podsim._arrays import has_duplicates, unique


@pytest.mark.parametrize("n,high", [(0, 1), (1, 5), (2, 1), (50, 10), (1000, 5000), (300, 3)])
def test_unique_and_duplicates_agree_with_numpy(n, high):
    a = np.random.default_rng(n).integers(0, high, size=n)
    for x in (a, a.reshape(-1, 1) if n else a, a.astype(np.int32)):
        u = unique(x)
        assert u.dtype == np.unique(x).dtype and np.array_equal(u, np.unique(x))
        assert has_duplicates(x) == (len(np.unique(x)) != x.size)
