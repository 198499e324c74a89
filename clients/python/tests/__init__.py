"""The Python client's tests. Under make test-python (scripts/test-python.sh)
FENCER_PY_SITE names the directory the package was installed into, with
pip and Debian's setuptools: the tests then import that installed package,
not the source beside them, so a packaging mistake (a module left out of the
wheel) fails them."""

import os
import sys

_site = os.environ.get("FENCER_PY_SITE")
if _site:
    sys.path.insert(0, _site)
    import fencer

    if not os.path.abspath(fencer.__file__).startswith(os.path.abspath(_site) + os.sep):
        raise ImportError("FENCER_PY_SITE=%s, but fencer was imported from %s" % (_site, fencer.__file__))
