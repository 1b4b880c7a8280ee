"""native.session() and run_native() on models whose tensors are stored as external data:
the data is read from the model's folder, never from outside it."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from lossgrad_compiler import onnx as lo
from lossgrad_compiler import reference
from lossgrad_compiler.evaluation import ort as native
from lossgrad_compiler.runtime.external_data import ExternalDataError
from tests.helpers.tolerances import assert_close

ATTRS = {"reduction": "sum", "log_target": 1}
TARGET = np.array([-0.5, -1.0, -2.0, -0.25], np.float32)  # an initializer: external data
DATA = "weights.bin"


def external_data_model(folder: Path, name: str = "model.onnx") -> Path:
    """KlDivBackward whose target is an initializer saved as external data beside it."""
    node = lo.make_node("KlDivBackward", ["go", "x", "t"], "g", name="kl", **ATTRS)
    graph = lo.make_graph(
        [node],
        [("go", "float32", []), ("x", "float32", ["N", 4])],
        [("g", "float32", ["N", 4])],
        initializers=[numpy_helper.from_array(TARGET, "t")],
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    onnx.save_model(
        lo.make_model(graph),
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=DATA,
        size_threshold=0,
    )
    return path


def _feeds() -> dict[str, np.ndarray]:
    x = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
    return {"go": np.array(0.75, np.float32), "x": x}


def _expected() -> np.ndarray:
    feeds = _feeds()
    inputs = {"grad_output": feeds["go"], "self": feeds["x"], "target": TARGET}
    return reference.evaluate("KlDivBackward", inputs, ATTRS)


def _with_location(path: Path, location: str) -> Path:
    """A copy of the model (beside it) whose external tensor points at `location`."""
    model = onnx.load(path, load_external_data=False)
    (tensor,) = model.graph.initializer
    for entry in tensor.external_data:
        if entry.key == "location":
            entry.value = location
    changed = path.with_name("changed.onnx")
    onnx.save(model, changed)
    return changed


def test_the_saved_model_really_uses_external_data(tmp_path: Path) -> None:
    path = external_data_model(tmp_path / "m")
    (tensor,) = onnx.load(path, load_external_data=False).graph.initializer
    assert tensor.data_location == onnx.TensorProto.EXTERNAL and not tensor.raw_data
    assert (path.parent / DATA).stat().st_size == TARGET.nbytes


@pytest.mark.parametrize("as_type", [str, Path])
@pytest.mark.parametrize("use_native", [True, False])
def test_session_reads_external_data_from_the_model_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_type: type, use_native: bool
) -> None:
    path = external_data_model(tmp_path / "model dir")
    monkeypatch.chdir(tmp_path)  # the data is found through the model's folder, not cwd
    sess = native.session(as_type(path), native=use_native)
    (got,) = sess.run(None, _feeds())
    assert_close(got, _expected(), compute=np.float32, tight=True)


def test_run_native_reads_external_data_through_a_relative_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    external_data_model(tmp_path / "a" / "b")
    monkeypatch.chdir(tmp_path / "a")
    (got,) = native.run_native("b/model.onnx", _feeds(), threads=2)
    assert_close(got, _expected(), compute=np.float32, tight=True)


@pytest.mark.parametrize("kind", ["parent", "absolute", "symlink", "dotdot inside"])
def test_locations_outside_the_model_folder_are_refused(tmp_path: Path, kind: str) -> None:
    path = external_data_model(tmp_path / "m")
    outside = tmp_path / "outside.bin"
    outside.write_bytes((path.parent / DATA).read_bytes())
    if kind == "parent":
        location = "../outside.bin"
    elif kind == "absolute":
        location = str(outside)
    elif kind == "symlink":
        os.symlink(outside, path.parent / "link.bin")
        location = "link.bin"
    else:
        location = "sub/../../outside.bin"
        (path.parent / "sub").mkdir()
    changed = _with_location(path, location)
    with pytest.raises(ExternalDataError) as err:
        native.session(changed)
    message = str(err.value)
    assert "\n" not in message and f"tensor 't': external data location {location!r}" in message
    expected = "must be a path relative" if kind == "absolute" else "is outside the model's folder"
    assert expected in message


def test_a_missing_data_file_is_one_line(tmp_path: Path) -> None:
    path = external_data_model(tmp_path / "m")
    (path.parent / DATA).unlink()
    with pytest.raises(ExternalDataError, match=r"'weights\.bin': no such file in .*/m$"):
        native.session(path)


def test_a_model_in_memory_must_carry_its_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It has no folder (ORT itself fails on it, with the data in the current directory or
    not); loaded with its data, it runs."""
    path = external_data_model(tmp_path / "m")
    monkeypatch.chdir(path.parent)
    model = onnx.load(path, load_external_data=False)
    with pytest.raises(ExternalDataError, match="a model given in memory has no folder"):
        native.session(model)
    with pytest.raises(ExternalDataError, match="pass the model's path"):
        native.session(model.SerializeToString())
    (got,) = native.session(onnx.load(path)).run(None, _feeds())
    assert_close(got, _expected(), compute=np.float32, tight=True)
