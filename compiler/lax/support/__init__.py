"""What ``jaxprc.lax`` holds besides its primitive families: no primitive is defined here.

- ``operands``: the normalisation every family's builders apply to their arguments (axes,
  Python scalars, rank-0 broadcasting);
- ``accuracy``: the ``accuracy=`` param of the elementwise family's transcendental ops;
- ``vma``: shard_map's ``check_vma`` inference, for the parallel family;
- ``conveniences``, ``associative_scan``, ``ragged``: JAX's ``lax`` functions that are
  compositions of other families' primitives (``stack``, ``split``, ``tile``, ``dtype``, ...,
  ``associative_scan``, ``ragged_dot``), exported by ``jaxprc.lax``.
"""
