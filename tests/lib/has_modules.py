#!/usr/bin/env python3
"""tests/lib/has_modules.py MODULE... - exits 0 when every MODULE imports,
else prints "lacks NAME" for the first that does not and exits 1.  A suite
that uses the runner's shared Python worker (tests/lib/checks.sh,
py_worker_start) asks it this way, in a fork of that worker, what its own
worker would have said when it started."""

import importlib
import sys

for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except ImportError:
        print("lacks " + name)
        sys.exit(1)
