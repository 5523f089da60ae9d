"""jaxprc.tools: the command line (the benchmarks are in the repository's benchmarks/, not installed)."""
