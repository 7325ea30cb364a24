"""A PEP 517 build backend of the standard library alone: it packs `src/*` and the `[project]` table's name,
version, description and entry points into a wheel, so that the example installs offline with nothing but pip. A
plugin of your own would name setuptools, hatchling or flit here instead."""

from __future__ import annotations

import base64
import hashlib
import tomllib
import zipfile
from pathlib import Path
from typing import Any

HERE = Path.cwd()  # pip runs the backend in the project's directory


def _project() -> dict[str, Any]:
    return tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _metadata(project: dict[str, Any]) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}"]
    if "description" in project:
        lines.append(f"Summary: {project['description']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    return "\n".join(lines) + "\n"


def _entry_points(project: dict[str, Any]) -> str:
    groups = project.get("entry-points", {})
    return "".join(f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in entries.items()) + "\n"
                   for group, entries in groups.items())


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _wheel(wheel_directory: str, files: dict[str, bytes]) -> str:
    project = _project()
    dist = project["name"].replace("-", "_")
    info = f"{dist}-{project['version']}.dist-info"
    wheel_file = b"Wheel-Version: 1.0\nGenerator: wheel_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files = {**files, f"{info}/METADATA": _metadata(project).encode(), f"{info}/WHEEL": wheel_file,
             f"{info}/entry_points.txt": _entry_points(project).encode()}
    record = [_record_line(name, data) for name, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    name = f"{dist}-{project['version']}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory) / name, "w", zipfile.ZIP_DEFLATED) as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)
    return name


def get_requires_for_build_wheel(config_settings: Any = None) -> list[str]:
    return []


def get_requires_for_build_editable(config_settings: Any = None) -> list[str]:
    return []


def build_wheel(wheel_directory: str, config_settings: Any = None, metadata_directory: Any = None) -> str:
    source = HERE / "src"
    files = {path.relative_to(source).as_posix(): path.read_bytes() for path in sorted(source.rglob("*"))
             if path.is_file() and "__pycache__" not in path.parts}
    return _wheel(wheel_directory, files)


def build_editable(wheel_directory: str, config_settings: Any = None, metadata_directory: Any = None) -> str:
    """An editable install: a .pth file that puts `src` on sys.path."""
    return _wheel(wheel_directory, {f"{_project()['name'].replace('-', '_')}.pth": f"{HERE / 'src'}\n".encode()})
