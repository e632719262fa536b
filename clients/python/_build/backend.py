"""A PEP 517 build backend in the standard library only, so that the package installs with
`pip install ./clients/python` on a machine with no package index (nothing to download for the
build, nothing to depend on). It builds a pure-Python wheel of the `runtimectl` package and an
sdist; `pip install -e` gets a .pth file pointing at the source tree."""

import base64
import hashlib
import io
import os
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "runtimectl"


def _version():
    with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("version"):
                return line.split("=", 1)[1].strip().strip('"')
    raise RuntimeError("no version in pyproject.toml")


def _dist_info():
    return "%s-%s.dist-info" % (NAME, _version())


def _metadata():
    readme = ""
    path = os.path.join(HERE, "README.md")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            readme = f.read()
    return (
        "Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
        "Summary: Python client of runtimectl serve: stateful code sessions for LLM agents\n"
        "Requires-Python: >=3.9\nDescription-Content-Type: text/markdown\n\n%s" % (NAME, _version(), readme)
    )


_WHEEL = "Wheel-Version: 1.0\nGenerator: runtimectl-backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _files():
    pkg = os.path.join(HERE, NAME)
    for root, dirs, files in os.walk(pkg):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            full = os.path.join(root, name)
            yield full, os.path.relpath(full, HERE).replace(os.sep, "/")


def _write_wheel(wheel_directory, entries):
    fname = "%s-%s-py3-none-any.whl" % (NAME, _version())
    dist = _dist_info()
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, fname), "w", zipfile.ZIP_DEFLATED) as zf:
        def add(arcname, data):
            zf.writestr(zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0)), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append("%s,sha256=%s,%d" % (arcname, digest, len(data)))

        for arcname, data in entries:
            add(arcname, data)
        add(dist + "/METADATA", _metadata().encode())
        add(dist + "/WHEEL", _WHEEL.encode())
        add(dist + "/top_level.txt", (NAME + "\n").encode())
        records.append(dist + "/RECORD,,")
        zf.writestr(zipfile.ZipInfo(dist + "/RECORD", date_time=(2020, 1, 1, 0, 0, 0)), "\n".join(records) + "\n")
    return fname


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist = os.path.join(metadata_directory, _dist_info())
    os.makedirs(dist, exist_ok=True)
    with open(os.path.join(dist, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(dist, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_WHEEL)
    return _dist_info()


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    entries = []
    for full, arc in _files():
        with open(full, "rb") as f:
            entries.append((arc, f.read()))
    return _write_wheel(wheel_directory, entries)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [("_runtimectl_editable.pth", (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, _version())
    fname = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, fname), "w:gz") as tf:
        for rel in ["pyproject.toml", "README.md", "CHANGELOG.md", "_build/backend.py"]:
            if os.path.exists(os.path.join(HERE, rel)):
                tf.add(os.path.join(HERE, rel), arcname=base + "/" + rel)
        for full, arc in _files():
            tf.add(full, arcname=base + "/" + arc)
        data = _metadata().encode()
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    return fname
