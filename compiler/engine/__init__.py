"""The engine: lowering to StableHLO (lowering), compiling and running programs (dispatch,
cpp_dispatch, segmenting), evaluation of eager ops (evaluate), SPMD execution over several devices
(spmd), the compile guards, the float checks, the engine's caches and the traceback filtering of the
public entry points (traceback_filtering). It imports the primitive
families (``jaxprc.lax``) and ``ir``, ``passes``, ``runtime``; never the API modules.
"""
