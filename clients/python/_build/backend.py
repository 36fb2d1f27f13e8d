"""An in-tree PEP 517 build backend, standard library only, so that
``pip install ./clients/python`` needs no package index (nothing to fetch to build).

It builds a pure-Python wheel of the ``shardplan`` package, an sdist, and an editable
wheel (PEP 660, a ``.pth`` file pointing at this directory).
"""

import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME = "shardplan"
VERSION = "0.1.0"
SUMMARY = "Client for the shardplan sharding-planner service, with JAX and PyTorch DTensor converters"
REQUIRES_PYTHON = ">=3.9"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIST_INFO = "%s-%s.dist-info" % (NAME, VERSION)
TAG = "py3-none-any"


def _metadata() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return (
        "Metadata-Version: 2.1\n"
        "Name: %s\nVersion: %s\nSummary: %s\nRequires-Python: %s\n"
        "Description-Content-Type: text/markdown\n\n%s" % (NAME, VERSION, SUMMARY, REQUIRES_PYTHON, readme)
    )


def _wheel_file() -> str:
    return "Wheel-Version: 1.0\nGenerator: shardplan-build\nRoot-Is-Purelib: true\nTag: %s\n" % TAG


def _package_files():
    pkg = os.path.join(ROOT, NAME)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py"):
            yield os.path.join(pkg, name), "%s/%s" % (NAME, name)


def _write_wheel(directory: str, files) -> str:
    """files: (archive name, bytes) pairs; RECORD and the dist-info are added."""
    filename = "%s-%s-%s.whl" % (NAME, VERSION, TAG)
    records = []
    entries = list(files) + [
        ("%s/METADATA" % DIST_INFO, _metadata().encode("utf-8")),
        ("%s/WHEEL" % DIST_INFO, _wheel_file().encode("utf-8")),
    ]
    with zipfile.ZipFile(os.path.join(directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in entries:
            z.writestr(arc, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append("%s,sha256=%s,%d" % (arc, digest, len(data)))
        records.append("%s/RECORD,," % DIST_INFO)
        z.writestr("%s/RECORD" % DIST_INFO, "\n".join(records) + "\n")
    return filename


def get_requires_for_build_wheel(config_settings=None):
    return []


get_requires_for_build_sdist = get_requires_for_build_wheel
get_requires_for_build_editable = get_requires_for_build_wheel


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, DIST_INFO)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(d, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_file())
    return DIST_INFO


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = []
    for path, arc in _package_files():
        with open(path, "rb") as f:
            files.append((arc, f.read()))
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [("%s.pth" % NAME, (ROOT + "\n").encode("utf-8"))])


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, VERSION)
    filename = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz") as tar:
        for rel in ["pyproject.toml", "README.md", "_build/backend.py"] + [a for _, a in _package_files()]:
            tar.add(os.path.join(ROOT, rel), arcname="%s/%s" % (base, rel))
        pkg_info = _metadata().encode("utf-8")
        info = tarfile.TarInfo("%s/PKG-INFO" % base)
        info.size = len(pkg_info)
        tar.addfile(info, io.BytesIO(pkg_info))
    return filename
