"""jaxprc.passes: IR-to-IR transformations and their per-primitive rules."""
