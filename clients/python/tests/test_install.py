"""The client installs without a package index: its build backend is in the tree."""

import os
import subprocess
import sys
import tarfile
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _has_pip() -> bool:
    return subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode == 0


class OfflineInstallTest(unittest.TestCase):
    def setUp(self):
        if not _has_pip():
            if os.environ.get("CI") == "true":
                self.fail("pip is missing under CI=true (scripts/ci/python.sh installs python3-pip)")
            self.skipTest("pip is not installed")

    def test_pip_install_no_index(self):
        with tempfile.TemporaryDirectory() as tmp:
            site = os.path.join(tmp, "site")
            env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_CONFIG_FILE=os.devnull)
            env.pop("PYTHONPATH", None)
            r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-cache-dir", "--target", site, ROOT],
                               capture_output=True, text=True, env=env, cwd=tmp)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            # Imported from the install, not from the tree.
            r = subprocess.run([sys.executable, "-c", "import shardplan; print(shardplan.__file__); print(shardplan.request_fields.__name__)"],
                               capture_output=True, text=True, env=dict(env, PYTHONPATH=site), cwd=tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            path, fn = r.stdout.split()
            self.assertTrue(path.startswith(site), path)
            self.assertEqual(fn, "request_fields")
            self.assertTrue(os.path.isdir(os.path.join(site, "shardplan-0.1.0.dist-info")))

    def test_sdist_builds(self):
        sys.path.insert(0, os.path.join(ROOT, "_build"))
        try:
            import backend  # the in-tree PEP 517 backend
        finally:
            sys.path.pop(0)
        with tempfile.TemporaryDirectory() as tmp:
            name = backend.build_sdist(tmp)
            with tarfile.open(os.path.join(tmp, name)) as tar:
                names = tar.getnames()
            self.assertIn("shardplan-0.1.0/shardplan/client.py", names)
            self.assertIn("shardplan-0.1.0/_build/backend.py", names)
            self.assertIn("shardplan-0.1.0/PKG-INFO", names)
