"""Shared by the test suites (tests/, tests_oracle/): the sampling of large parametrized grids.

``@pytest.mark.sample(k)`` on a parametrized test function makes an ordinary run (CI, a developer's)
run about one case in ``k``, a fixed subset picked by a hash of each case's id: the same cases every
run, on every xdist worker, and adding a case does not reshuffle the others. ``JAXPRC_LONG_TESTS=1``
(the nightly run, .ci/nightly) runs every case; the fuzz tests read it too, for their full counts.
No jax and no jaxprc imports here: the product suite checks that its processes never import jax.
"""
import os
import zlib

import pytest

LONG = os.environ.get("JAXPRC_LONG_TESTS") == "1"


def pytest_report_header(config):
    return ["sampled grids: " + ("all cases (JAXPRC_LONG_TESTS=1)" if LONG
                                 else "a fixed subset (JAXPRC_LONG_TESTS=1 runs all)")]


def kept(nodeid: str, k: int) -> bool:
    return zlib.crc32(nodeid.encode()) % k == 0


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    if LONG:
        return
    keep, drop, first_of = [], [], set()
    for item in items:
        marker = item.get_closest_marker("sample")
        if marker is None:
            keep.append(item)
            continue
        function = item.nodeid.split("[")[0]
        # the first case of each function always runs, so a function is never left out entirely
        if kept(item.nodeid, marker.args[0]) or function not in first_of:
            keep.append(item)
        else:
            drop.append(item)
        first_of.add(function)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
