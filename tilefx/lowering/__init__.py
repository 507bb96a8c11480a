"""Conversions between IR levels. Importing the package installs torch's own
shape and dtype rules into the `aten` verifier (see torch_rules.py)."""

from tilefx.lowering.torch_rules import install as _install_torch_rules

_install_torch_rules()
