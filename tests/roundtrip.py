"""The text round-trip check shared by the IR tests."""
from jaxprc.ir.core import ClosedJaxpr
from jaxprc.ir.equality import alpha_equivalent, structural_hash
from jaxprc.ir.parser import parse
from jaxprc.ir.verify import verify


def assert_round_trip(cj: ClosedJaxpr) -> ClosedJaxpr:
    """print(parse(print(j))) == print(j), parse(print(j)) ≡ j, both verify; returns the parsed copy."""
    verify(cj)
    text = str(cj)
    back = parse(text)
    assert str(back) == text
    verify(back)
    assert alpha_equivalent(back, cj) and alpha_equivalent(cj, back)
    assert structural_hash(back) == structural_hash(cj)
    return back
