"""How far to trust a predicted throughput: the spread of the machine
model's validation rows (docs/machine-validation.md, reproduced by
`benchmarks/machine_validation.py`), per class of workload.

Each class records the ratio tilefx / published of its validated rows
(lowest and highest). A prediction of a model of that class carries the
band the published figures would lie in: [predicted / highest, predicted /
lowest]. A model whose cycles are spent unlike any validated class (neither
matmul-dominated nor convolution-dominated) gets no band, and says so.
Vision transformers (matmul-dominated, with a convolutional patch
embedding) are a class of their own: the published ViT and Swin runs were
far slower than the model predicts while the BERT runs match it, and no
cost that differs between the two was found (docs/machine-validation.md,
"The ViT miss"), so their band is their own rows' spread. Inference (a
graph with no backward) is validated on rows of its own, one IPU serving
batches with its input streams overlapped by I/O tiles, so each class has
an inference band drawn from the inference rows. A model that gathers
features along edges and sums them into nodes (message passing) is a GNN,
validated on one row (SchNet), whichever op its cycles go to.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Band:
    label: str  # the class of workload
    lowest: float  # ratio tilefx / published, over the class's validated rows
    highest: float
    rows: int  # how many validated rows

    def published_range(self, predicted: float) -> tuple[float, float]:
        """Where the measured value lies if the model errs as on its validated rows."""
        return predicted / self.highest, predicted / self.lowest

    def percent(self) -> float:
        """The band as +-%: the largest relative error of a validated row."""
        return 100 * max(abs(1 / self.lowest - 1), abs(1 / self.highest - 1))


# ratio ranges of the prediction rows (docs/machine-validation.md, "Predictions")
BANDS = {
    "transformer": Band("transformer training pipelines (BERT pre-training and SQuAD)", 1.15, 1.32, 7),
    "vision-transformer": Band("vision-transformer training pipelines (ViT-B/16, Swin-T, DINO ViT-B/16)",
                               1.93, 2.63, 5),
    "cnn": Band("CNN training (ResNet-50, ResNeXt-101, UNet, G16-EfficientNet-B4)", 0.97, 1.54, 8),
    "cnn-inference": Band("CNN inference on one IPU (ResNet-50 on a C600, batches 4 and 32)", 0.89, 1.20, 2),
    "transformer-inference": Band("transformer inference on one IPU (the CLIP ViT-L/14 text encoder on a C600, "
                                  "batches 4 and 40)", 1.19, 2.18, 2),
    "vision-transformer-inference": Band("vision-transformer inference on one IPU (Swin-L 384 on a C600, batch 2)",
                                         1.54, 1.54, 1),
    "gnn": Band("GNN training (SchNet on HydroNet, 16 replicas)", 3.49, 3.49, 1),
}
MATMUL_OPS = ("aten.mm", "aten.bmm", "aten.addmm", "ipu.serialized_matmul")
CONV_OPS = ("aten.convolution", "aten.convolution_backward")
# message passing: features gathered along edges and summed into nodes
# (index_add lowers to an accumulating index_put)
MESSAGE_OPS = ("aten.index_select", "aten.index_put", "aten.scatter_add", "aten.gather")


def classify(cycles_by_op: dict[str, int], training: bool = True) -> str | None:
    """The validated class a profile's op mix resembles: a GNN when it gathers
    along edges (index_select) and message passing takes 2% of its op cycles
    or more, else more than half of its op cycles in convolutions (CNN), or
    in matmuls: a vision transformer when it also convolves (the patch
    embedding), else a transformer; None for any other mix. Without `training` (no backward), the class's inference
    rows ("cnn-inference", ...)."""
    total = sum(cycles_by_op.values())
    if not total:
        return None
    mm = sum(cycles_by_op.get(n, 0) for n in MATMUL_OPS) / total
    conv = sum(cycles_by_op.get(n, 0) for n in CONV_OPS) / total
    messages = sum(cycles_by_op.get(n, 0) for n in MESSAGE_OPS) / total
    kind = None
    if cycles_by_op.get("aten.index_select") and messages >= 0.02:
        kind = "gnn"
    elif conv > 0.5:
        kind = "cnn"
    elif mm > 0.5:
        kind = "vision-transformer" if conv > 0 else "transformer"
    return kind if kind is None or training else f"{kind}-inference"


def band_text(cycles_by_op: dict[str, int], cycles: int, clock_hz: float, training: bool = True) -> str:
    """One line for the profile: the predicted time of a weight update (or
    call) with the validated band, or why there is none."""
    seconds = cycles / clock_hz
    kind = classify(cycles_by_op, training)
    band = BANDS.get(kind) if kind else None
    if band is None or not band.rows:
        return (f"validated range: none: this model's op mix is unlike every validated row "
                f"(transformer, vision-transformer, CNN and GNN, training and inference); {cycles:,} cycles = "
                f"{1e3 * seconds:.3f} ms is unvalidated")
    lo, hi = band.published_range(seconds)  # a faster model (ratio > 1) means more real time
    return (f"validated range +-{band.percent():.0f}% for {band.label} ({band.rows} rows): "
            f"{1e3 * seconds:.3f} ms predicted, {1e3 * seconds * band.lowest:.3f}-"
            f"{1e3 * seconds * band.highest:.3f} ms on the validated rows' spread")
