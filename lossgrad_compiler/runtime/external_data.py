"""External data of a model run by the runtime: which folder it is read from, and a check
that every location stays inside that folder.

A session is created from the prepared model's bytes, so ONNX Runtime learns the model's
folder from the session option below (ORT 1.18 and later). onnx 1.23 and recent ORT
releases (1.31 checked) refuse absolute locations and locations that leave the folder
(`..`, symlinks); ORT added those checks late in 2025, and the older releases this project
supports (from 1.21) do not have them, so the check here runs first on every version and
gives one line naming the tensor."""

from __future__ import annotations

from pathlib import Path

from onnx import ModelProto

from lossgrad_compiler.onnx.tensors import external_tensors

# kOrtSessionOptionsModelExternalInitializersFileFolderPath (session options config keys)
FOLDER_OPTION = "session.model_external_initializers_file_folder_path"


class ExternalDataError(ValueError):
    """An external-data location that is absolute, leaves the model's folder, or is missing."""


def model_folder(model: object) -> Path | None:
    """The folder of a model given as a path; None for one given in memory."""
    if isinstance(model, str | Path):
        return Path(model).resolve().parent
    return None


def check_external_data(model: ModelProto, folder: Path | None) -> None:
    """Every external-data file of `model` is a regular file inside `folder`. A model given
    in memory has no folder: its external data is refused (ORT cannot read it either)."""
    base = folder.resolve() if folder else None
    for tensor in external_tensors(model):
        entries = {entry.key: entry.value for entry in tensor.external_data}
        location = entries.get("location", "")
        where = f"tensor '{tensor.name}': external data location {location!r}"
        if base is None:
            raise ExternalDataError(
                f"{where}: a model given in memory has no folder to read it from; pass the "
                "model's path, or load the data into it (onnx.load_external_data_for_model)"
            )
        if not location or Path(location).is_absolute():
            raise ExternalDataError(f"{where} must be a path relative to the model's folder")
        path = (base / location).resolve()
        if not path.is_relative_to(base):
            raise ExternalDataError(f"{where} is outside the model's folder {base}")
        if not path.is_file():
            raise ExternalDataError(f"{where}: no such file in {base}")
