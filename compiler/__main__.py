"""``python -m jaxprc``: the command line. The CLI lives in the top layer (jaxprc.tools);
this launcher starts it by name rather than importing it, so the package root
keeps depending only on the layers below it."""
import runpy

runpy.run_module("jaxprc.tools.cli", run_name="__main__", alter_sys=True)
