"""lossgrad-compile's model files: the compiled model and its external data.

External data locations are relative to the model's folder, so a compiled model written to
another folder would name files that are not there. The compiled model therefore takes its
external data along: each tensor is read from the input model's folder with onnx's
external-data reader (which refuses a location that leaves that folder, an absolute path or a
symbolic link) and written to one file beside the output, `<output name>.data`, the layout
`onnx.save_model(..., save_as_external_data=True, location=...)` gives. A model written to a
stream (a pipe, /dev/null) carries its data inline instead."""

from __future__ import annotations

import os
from pathlib import Path

from onnx import ModelProto, TensorProto
from onnx.checker import ValidationError
from onnx.external_data_helper import (
    ExternalDataInfo,
    load_external_data_for_tensor,
    set_external_data,
)

from lossgrad_compiler.onnx.tensors import external_tensors
from lossgrad_compiler.output_files import Destination, OutputFile, destination


class ExternalDataError(ValueError):
    """External data the compiler cannot (or must not) read."""


def external_files(model: ModelProto, folder: Path) -> set[Path]:
    """The files the model's external data names (not read here: for overwrite checks)."""
    files = set()
    for tensor in external_tensors(model):
        location = ExternalDataInfo(tensor).location
        if location and not os.path.isabs(location):
            files.add(folder / location)
    return files


def data_destination(model_destination: Destination) -> Destination:
    """Where the external data of a model written to `model_destination` goes."""
    path = model_destination.path
    return destination(
        path.with_name(f"{path.name}.data"),
        streamable=False,
        refusal="the model's external data needs a regular file",
    )


def write_model(
    model: ModelProto, where: Destination, source_folder: Path, *, make_parents: bool = False
) -> Destination | None:
    """Write `model` (its external data read from `source_folder`, the input model's folder)
    to `where`; the destination of the external data file written, if any. The data file is
    put in place just before the model, so a failure leaves both old files as they were."""
    tensors = external_tensors(model)
    if not tensors:
        with OutputFile(where, make_parents=make_parents) as output:
            output.file.write(model.SerializeToString())
        return None
    if where.stream:
        for tensor in tensors:
            _load(tensor, source_folder)
        with OutputFile(where) as output:
            output.file.write(model.SerializeToString())
        return None
    data_where = data_destination(where)
    data = OutputFile(data_where, make_parents=make_parents)
    try:
        offset = 0
        for tensor in tensors:
            _load(tensor, source_folder)
            data.file.write(tensor.raw_data)
            size = len(tensor.raw_data)
            set_external_data(tensor, data_where.path.name, offset, size)
            tensor.ClearField("raw_data")
            offset += size
        output = OutputFile(where, make_parents=make_parents)
        try:
            output.file.write(model.SerializeToString())
        except BaseException:
            output.discard()
            raise
    except BaseException:
        data.discard()
        raise
    data.commit()
    output.commit()
    return data_where


def _load(tensor: TensorProto, folder: Path) -> None:
    """The tensor's data read into raw_data; onnx's reader refuses locations outside `folder`."""
    try:
        load_external_data_for_tensor(tensor, str(folder))
    except (ValidationError, ValueError, OSError) as err:
        text = " ".join(str(err).split())
        raise ExternalDataError(f"external data of tensor '{tensor.name}': {text}") from None
