"""compile_model on a model path with external data: the data is loaded from the model's
folder (as onnx.load does), so the compiled model can be saved and run anywhere; a location
outside that folder is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from lossgrad_compiler import compile_model
from lossgrad_compiler.errors import CompileError
from tests.helpers.tolerances import assert_close
from tests.ort.test_ort_external_data import _expected, _feeds, _with_location, external_data_model


@pytest.mark.parametrize("mode", ["functions", "inline"])
def test_a_compiled_model_saved_elsewhere_keeps_its_data(tmp_path: Path, mode: str) -> None:
    source = external_data_model(tmp_path / "in")
    result = compile_model(source, mode=mode)
    out = tmp_path / "elsewhere" / "out.onnx"
    out.parent.mkdir()
    onnx.save(result.model, out)  # as the README shows it
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, _feeds())
    assert_close(got, _expected(), compute=np.float32)


@pytest.mark.parametrize("location", ["../outside.bin", "/etc/hostname"])
def test_external_data_outside_the_folder_is_refused(tmp_path: Path, location: str) -> None:
    source = _with_location(external_data_model(tmp_path / "in"), location)
    with pytest.raises(CompileError, match="external data of tensor 't'"):
        compile_model(source)
