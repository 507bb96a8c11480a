"""Conversions between IR levels. Importing the package installs torch's own
shape and dtype rules into the `aten` verifier (see torch_rules.py) and ATen's
own kernels into the executor for the ops where they pay (aten_kernels.py)."""

from tilefx.lowering.torch_rules import install as _install_torch_rules

_install_torch_rules()

from tilefx.lowering.aten_kernels import install as _install_aten_kernels  # noqa: E402

_install_aten_kernels()
