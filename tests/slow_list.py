"""Writes tests/slow_tests.txt, the tests the fast tier (`pytest -m "not slow" tests`) leaves out.

    python3 -m pytest -q -n 2 --dist loadfile tests --junitxml=/tmp/t.xml
    python3 tests/slow_list.py /tmp/t.xml [FRACTION]

Every parametrization of a test function shares its fate. The functions are taken costliest per
case first until what is left costs at most FRACTION (default 0.12) of the whole run: the fast tier
keeps as many cases as that budget allows.
"""
import collections
import os
import sys
import xml.etree.ElementTree as ET

HEADER = """\
# The tests `pytest -m "not slow" tests` (the fast tier) leaves out, one test function a line
# (all its parametrizations). Written by tests/slow_list.py from a timed run of the whole suite;
# a test missing here just runs in the fast tier, a name no longer collected is ignored.
"""


def function_costs(junit_xml: str) -> dict:
    """{node id of a test function, without parameters: (seconds, number of cases)}."""
    cost = collections.defaultdict(lambda: [0.0, 0])
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        module, *classes = case.get("classname").split(".")[1:]
        path = "tests/" + module + ".py"
        node = "::".join([path, *classes, case.get("name").split("[")[0]])
        cost[node][0] += float(case.get("time") or 0)
        cost[node][1] += 1
    return cost


def slow_functions(cost: dict, fraction: float) -> list:
    budget = fraction * sum(seconds for seconds, _ in cost.values())
    left = sum(seconds for seconds, _ in cost.values())
    slow = []
    for node, (seconds, cases) in sorted(cost.items(), key=lambda kv: -kv[1][0] / kv[1][1]):
        if left <= budget:
            break
        slow.append(node)
        left -= seconds
    return sorted(slow)


if __name__ == "__main__":
    fraction = float(sys.argv[2]) if len(sys.argv) > 2 else 0.12
    names = slow_functions(function_costs(sys.argv[1]), fraction)
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "slow_tests.txt"), "w") as f:
        f.write(HEADER + "".join(name + "\n" for name in names))
