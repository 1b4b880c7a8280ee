"""`lossgrad_compiler.evaluation.ascendc.emulate` as a user calls it: every call works, its
block_dim is validated, the cached runner and emulation runtime are checked and rebuilt
when damaged, a failing runner says how it failed, and an unusable cache directory is one
clear error naming LOSSGRAD_CACHE_DIR."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lossgrad_compiler import reference
from lossgrad_compiler.backends.ascendc.build import emulator_runtime
from lossgrad_compiler.backends.ascendc.emulation import EmulatorRunnerError, run_raw
from lossgrad_compiler.errors import ACLNN_ERR_PARAM_INVALID, InvalidArgumentError
from lossgrad_compiler.evaluation import ascendc
from tests.helpers import isolated

OP = "SmoothL1LossBackward"
ATTRS = {"reduction": "none", "beta": 0.5}


def _inputs(n: int = 40) -> dict[str, np.ndarray]:
    x = np.linspace(-2.0, 2.0, n, dtype=np.float32)
    return {"grad_output": np.float32(0.5), "self": x, "target": np.cos(x).astype(np.float32)}


# Runs `emulate` twice through the package attribute, as the README shows it, and checks
# both results against the reference.
TWICE_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from lossgrad_compiler import reference
    from lossgrad_compiler.evaluation import ascendc

    x = np.linspace(-2.0, 2.0, 40, dtype=np.float32)
    inputs = {"grad_output": np.float32(0.5), "self": x, "target": np.cos(x).astype(np.float32)}
    attrs = {"reduction": "none", "beta": 0.5}
    want = reference.evaluate("SmoothL1LossBackward", inputs, attrs)
    for _ in range(2):
        got = ascendc.emulate("SmoothL1LossBackward", inputs, attrs)
        np.testing.assert_array_equal(got, want)
    print("ok")
    """
)


# --------------------------------------------------------------------------- item 1


def test_emulate_can_be_called_more_than_once() -> None:
    """The module function stays a function after its first call built the runner."""
    done = isolated.run_python(TWICE_SCRIPT, None)
    assert done.returncode == 0, isolated.outcome(done)
    assert done.stdout.split() == ["ok"]
    assert callable(ascendc.emulate) and not isinstance(ascendc.emulate, type(ascendc))


# --------------------------------------------------------------------------- item 15


@pytest.mark.parametrize(
    ("soc", "block_dim", "got"),
    [
        ("ascend910b", -1, "got -1"),
        ("ascend910b", 0, "got 0"),
        ("ascend910b", 49, "got 49"),
        ("ascend910b", 2**32 + 1, "got 4294967297"),
        ("ascend910b", 2.5, "got 2.5 (float)"),
        ("ascend910b", "8", "got '8' (str)"),
        ("ascend910b", True, "got True (bool)"),
        ("ascend910b", np.float32(4), "got np.float32(4.0) (float32)"),
        ("ascend910b3", 41, "got 41"),
    ],
)
def test_invalid_block_dim_is_refused_before_anything_is_built(
    monkeypatch: pytest.MonkeyPatch, soc: str, block_dim: Any, got: str
) -> None:
    def must_not_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled although block_dim is invalid")

    monkeypatch.setattr(ascendc, "compile_signatures", must_not_build)
    with pytest.raises(InvalidArgumentError) as err:
        ascendc.emulate(OP, _inputs(), ATTRS, soc=soc, block_dim=block_dim)
    cores = {"ascend910b": 48, "ascend910b3": 40}[soc]
    assert err.value.code == ACLNN_ERR_PARAM_INVALID
    assert str(err.value) == (
        f"{OP}: block_dim: must be an integer from 1 to {cores} (the vector cores of {soc}), "
        f"or None for all of them; {got} [aclnn 161002 ACLNN_ERR_PARAM_INVALID]"
    )


@pytest.mark.parametrize("block_dim", [None, 1, np.int64(3), 48])
def test_valid_block_dims_give_the_reference_result(block_dim: Any) -> None:
    inputs = _inputs(1000)
    got = ascendc.emulate(OP, inputs, ATTRS, block_dim=block_dim)
    np.testing.assert_array_equal(got, reference.evaluate(OP, inputs, ATTRS))


# --------------------------------------------------------------------------- item 6

EMULATE_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from lossgrad_compiler import reference
    from lossgrad_compiler.evaluation import ascendc
    from lossgrad_compiler.calls import checked_call
    from lossgrad_compiler.evaluation.ascendc import compile_signatures

    x = np.linspace(-2.0, 2.0, 40, dtype=np.float32)
    inputs = {"grad_output": np.float32(0.5), "self": x, "target": np.cos(x).astype(np.float32)}
    attrs = {"reduction": "none", "beta": 0.5}
    got = ascendc.emulate("SmoothL1LossBackward", inputs, attrs, block_dim=2)
    np.testing.assert_array_equal(got, reference.evaluate("SmoothL1LossBackward", inputs, attrs))
    (compiled,) = compile_signatures([checked_call("SmoothL1LossBackward", inputs, attrs).checked])
    print("ok", compiled.runner)
    """
)


def _truncate(path: Path) -> int:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return len(data)


def _notices(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("lossgrad: building")]


def test_damaged_runner_and_runtime_are_rebuilt(tmp_path: Path) -> None:
    """A truncated runner (today: "runner failed:" and nothing else) and a truncated
    emulation runtime are rebuilt, and the results are right."""
    built = emulator_runtime()  # the suite's copy, to save building it once more here
    shutil.copytree(built, tmp_path / "ascendc" / built.name)
    first = isolated.run_python(EMULATE_SCRIPT, tmp_path)
    assert first.returncode == 0, isolated.outcome(first)
    runner = Path(first.stdout.split()[1])
    assert runner.is_relative_to(tmp_path) and len(_notices(first.stderr)) == 1
    size = _truncate(runner)
    second = isolated.run_python(EMULATE_SCRIPT, tmp_path)
    assert second.returncode == 0, isolated.outcome(second)
    (notice,) = _notices(second.stderr)
    assert "the Ascend C emulation of SmoothL1LossBackward" in notice
    assert f"cannot be used: runner has {size // 2} bytes, {size} were built" in notice
    assert runner.stat().st_size == size
    (runtime,) = tmp_path.glob("ascendc/emulator-*/runtime.o")
    size = _truncate(runtime)
    third = isolated.run_python(EMULATE_SCRIPT, tmp_path)
    assert third.returncode == 0, isolated.outcome(third)
    (notice,) = _notices(third.stderr)
    assert "runtime and precompiled headers" in notice and "runtime.o has" in notice
    assert runtime.stat().st_size == size
    quiet = isolated.run_python(EMULATE_SCRIPT, tmp_path)
    assert quiet.returncode == 0 and _notices(quiet.stderr) == [], isolated.outcome(quiet)


def _script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "runner"
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("#!/bin/sh\necho 'tail of the output' >&2\nkill -BUS $$\n",
         "failed: killed by SIGBUS (Bus error); stderr: tail of the output"),
        ("#!/bin/sh\nkill -SEGV $$\n", "failed: killed by SIGSEGV (Segmentation fault); "
         "nothing on stderr"),
        ("#!/bin/sh\necho 'no memory' >&2\nexit 3\n", "failed: exit status 3; stderr: no memory"),
        ("\x7fELF\x02\x01\x01", "could not start: Exec format error"),
    ],
)  # fmt: skip
def test_a_failing_runner_says_what_happened(tmp_path: Path, script: str, expected: str) -> None:
    runner = _script(tmp_path, script)
    with pytest.raises(EmulatorRunnerError) as err:
        run_raw(runner, [])
    assert str(err.value) == f"the Ascend C emulation runner {runner} {expected}"


# --------------------------------------------------------------------------- item 7

CACHE_ERROR_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from lossgrad_compiler.evaluation import ascendc
    from lossgrad_compiler.backends.build_cache import CacheDirError

    x = np.linspace(-2.0, 2.0, 40, dtype=np.float32)
    inputs = {"grad_output": np.float32(0.5), "self": x, "target": x}
    try:
        ascendc.emulate("SmoothL1LossBackward", inputs, {"reduction": "sum"})
    except CacheDirError as err:
        print(type(err).__name__, err)
    """
)


@pytest.mark.parametrize("kind", ["a file", "below a file", "unwritable"])
def test_unusable_cache_dir_is_one_error_naming_the_variable(tmp_path: Path, kind: str) -> None:
    prefix: tuple[str, ...] = ()
    if kind == "unwritable":
        cache, prefix = isolated.unwritable_directory(tmp_path)
    else:
        regular_file = tmp_path / "cache-file"
        regular_file.write_text("not a directory")
        cache = regular_file if kind == "a file" else regular_file / "below"
    done = isolated.run_python(CACHE_ERROR_SCRIPT, cache, prefix=prefix)
    assert done.returncode == 0, isolated.outcome(done)
    (line,) = done.stdout.splitlines()
    assert line.startswith(f"CacheDirError cannot use the build cache {cache}")
    assert f"from $LOSSGRAD_CACHE_DIR={cache}:" in line
    assert line.endswith("set $LOSSGRAD_CACHE_DIR to a writable directory")
