"""The host loop beneath the surfaces: what runs a compiled program call
after call for PopTorch's executor and PopART's sessions alike (the arrays
shared with torch, the model's tensors by name, one call at a time per
executor), configured by the driver's `CompileConfig`. Torch is allowed here;
nothing of a surface's options is (docs/architecture.md)."""
