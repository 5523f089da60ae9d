"""A mesh's questions about its axis types (``auto_axes``, ``are_all_axes_explicit``, ...), which
flax asks before it reshards a value, answered as JAX answers them."""
import jax
import pytest

import jaxprc


def _answers(lib, types):
    abstract = lib.sharding.AbstractMesh((1, 1), ("a", "b"), axis_types=types)
    concrete = lib.make_mesh((1, 1), ("a", "b"), **({} if types is None else {"axis_types": types}))
    return [(m.auto_axes, m.explicit_axes, m.manual_axes, m.are_all_axes_auto, m.are_all_axes_explicit,
             m.are_all_axes_manual) for m in (abstract, concrete)]


@pytest.mark.parametrize("types", [None, ("Explicit", "Explicit"), ("Auto", "Manual"), ("Manual", "Manual")])
def test_axis_type_questions_match_jax(types):
    def as_types(lib):
        return None if types is None else tuple(getattr(lib.sharding.AxisType, t) for t in types)
    assert _answers(jaxprc, as_types(jaxprc)) == _answers(jax, as_types(jax))
