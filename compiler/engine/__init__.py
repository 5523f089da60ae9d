"""The engine: lowering to StableHLO (lowering), compiling and running programs (dispatch,
cpp_dispatch, segmenting), evaluation of eager ops (evaluate), SPMD execution over several devices
(spmd), the compile guards, the float checks and the engine's caches. It imports the primitive
families (``jaxprc.lax``) and ``ir``, ``passes``, ``runtime``; never the API modules.
"""
