"""A torch model as ONNX bytes, by either of torch.onnx's exporters, with
their warnings and log lines kept out of the test output (the ONNX frontend
tests and the executor's attention grouping of exported models share it)."""

import io
import logging
import warnings

import torch


def export(model: torch.nn.Module, x: torch.Tensor, dynamo: bool) -> bytes:
    model.eval()
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.onnx.export(model, (x,), f, dynamo=dynamo)
        finally:
            logging.disable(logging.NOTSET)
    return f.getvalue()
