"""Test hooks for the reducer, a --load-pass-plugin file (the reducer's built-in tests run in a
worker process, which loads it too). A primitive with no lowering (lowering fails, as an XLA
crash would); one that "miscompiles": its eager evaluation computes sin, its lowering cos; one
whose lowering kills the process with a message (as an XLA abort would)."""
import os
import sys

import numpy as np

from jaxprc.interpreters import mlir
from jaxprc.interpreters.mlir import hlo
from jaxprc.ir import Primitive

unlowerable_p = Primitive("test_reduce_unlowerable")
unlowerable_p.def_abstract_eval(lambda x: x)

miscompiled_p = Primitive("test_reduce_miscompiled")
miscompiled_p.def_abstract_eval(lambda x: x)
miscompiled_p.def_impl(lambda x: np.sin(np.asarray(x)))
mlir.register_lowering(miscompiled_p, lambda ctx, x: hlo.cosine(x))

dies_p = Primitive("test_reduce_dies")
dies_p.def_abstract_eval(lambda x: x)


def _die(ctx, x):
    if not sys.argv[0].endswith("isolated_test.py"):      # never the test process itself
        raise RuntimeError("test_reduce_dies dies only in a reducer's worker process")
    os.write(2, b"F0000 fatal: test_reduce_dies cannot be compiled\n")
    os._exit(134)


mlir.register_lowering(dies_p, _die)
