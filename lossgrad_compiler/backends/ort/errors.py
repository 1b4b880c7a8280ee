"""The error of the ORT backend itself (IR outside the level-2 contract, a build failure):
a defect of the compiler or its environment, not an invalid call, so it carries no aclnn code."""

from __future__ import annotations


class OrtBackendError(RuntimeError):
    """Level-2 IR the printer cannot translate, or a kernel library that cannot be built."""
