"""``python -m jaxprc.tools``: the command line."""
import sys

from jaxprc.tools.cli import main

sys.exit(main())
