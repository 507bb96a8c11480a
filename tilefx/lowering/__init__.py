"""Conversions between IR levels, and the torch plugins of the layers below:
torch's own shape and dtype rules for the `aten` verifier (torch_rules.py,
`TorchRules`) and ATen's own kernels for the executor where they pay
(aten_kernels.py, `AtenKernels`). Importing the package installs nothing:
callers install the plugins (tilefx/runtime.py)."""
