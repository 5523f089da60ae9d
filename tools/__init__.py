"""jaxprc.tools: the command line and the benchmarks."""
