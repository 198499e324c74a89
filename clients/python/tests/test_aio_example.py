"""The complete example of docs/clients/python-asyncio.md, run as it is
written there against a real cluster."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import unittest

from .cluster import REPO, Cluster

DOC = os.path.join(REPO, "docs", "clients", "python-asyncio.md")


def example() -> str:
    """The python block of the page's "A complete example" section."""
    with open(DOC) as f:
        text = f.read()
    section = text[text.index("## A complete example"):]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "no python block under A complete example"
    return m.group(1)


class AioExampleTest(unittest.TestCase):
    def test_example_runs(self) -> None:
        cluster = Cluster(3)
        self.addCleanup(cluster.close)
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(example())
        self.addCleanup(os.unlink, f.name)
        env = dict(os.environ, FENCER_ENDPOINTS=",".join(cluster.endpoints()))
        site = os.environ.get("FENCER_PY_SITE")
        env["PYTHONPATH"] = site or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        out = subprocess.run([sys.executable, f.name], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertRegex(out.stdout, r"holding nightly-report with token \d+")
        m = re.search(r"wrote 3 parts; the last one, chunk 2 with token (\d+)", out.stdout)
        self.assertTrue(m, out.stdout)
        first = int(re.search(r"with token (\d+)", out.stdout).group(1))  # type: ignore[union-attr]
        self.assertGreater(int(m.group(1)), first, "the second run's writes carry the first run's token")


if __name__ == "__main__":
    unittest.main()
