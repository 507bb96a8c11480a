"""Hugging Face `transformers` model families from tiny configs (random
weights, nothing downloaded), wrapped the way a PopTorch user wraps them:
`forward` returns the logits (inference) or the loss (training).

Shared by tests/integration/huggingface/test_hf_models.py, benchmarks/bench_models.py and the BERT
example. `transformers` is a test dependency: tilefx never imports it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

BATCH = 2
SEQ = 8
VOCAB = 64
IMAGE = 32
LABELS = 3
_TEXT = dict(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
             intermediate_size=32, max_position_embeddings=32)
_NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


class LogitsOrLoss(torch.nn.Module):
    """`model(**inputs)` returning the logits in eval mode and the loss in train mode."""

    def __init__(self, model: torch.nn.Module, train_names: tuple[str, ...],
                 eval_names: tuple[str, ...], output: str = "logits", train_kwargs: dict | None = None):
        super().__init__()
        self.model = model
        self.train_names = train_names
        self.eval_names = eval_names
        self.output = output
        self.train_kwargs = train_kwargs or {}

    def forward(self, *args):
        kwargs = dict(zip(self.train_names if self.training else self.eval_names, args))
        if self.training:
            return self.model(**kwargs, **self.train_kwargs).loss
        return getattr(self.model(**kwargs), self.output)


@dataclass
class Family:
    name: str
    build: Callable[[float], torch.nn.Module]  # dropout probability -> HF model
    inputs: Callable[[torch.Generator], dict[str, torch.Tensor]]  # with labels (last)
    seq2seq: bool = False
    labels: tuple[str, ...] = ("labels",)  # the training-only inputs (last)
    output: str = "logits"  # the ModelOutput field inference returns
    train_kwargs: dict | None = None  # constant keywords in training (CLIP's return_loss)

    def model(self, dropout: float = 0.0) -> LogitsOrLoss:
        torch.manual_seed(0)
        m = self.build(dropout)
        return LogitsOrLoss(m, self.input_names(True), self.input_names(False), self.output,
                            self.train_kwargs)

    def example(self, seed: int = 0, training: bool = True) -> tuple[torch.Tensor, ...]:
        """The inputs in `model().input_names` order; in inference the labels
        are the decoder's input ids (encoder-decoder families) or left out."""
        d = self.inputs(torch.Generator().manual_seed(seed))
        if not training:
            labels = [d.pop(k) for k in self.labels if k in d]
            if self.seq2seq:
                d["decoder_input_ids"] = labels[0]
        return tuple(d.values())

    def input_names(self, training: bool) -> tuple[str, ...]:
        names = [k for k in self.inputs(torch.Generator().manual_seed(0))
                 if training or k not in self.labels]
        if not training and self.seq2seq:
            names.append("decoder_input_ids")
        return tuple(names)


def _ids(g, batch=BATCH, seq=SEQ):
    return torch.randint(1, VOCAB, (batch, seq), generator=g)


def _text_cls(g):
    return {"input_ids": _ids(g), "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long),
            "labels": torch.randint(0, LABELS, (BATCH,), generator=g)}


def _causal(g):
    ids = _ids(g)
    return {"input_ids": ids, "labels": ids.clone()}


def _image(g, channels=3):
    return {"pixel_values": torch.randn(BATCH, channels, IMAGE, IMAGE, generator=g),
            "labels": torch.randint(0, LABELS, (BATCH,), generator=g)}


def _bert(p):
    from transformers import BertConfig, BertForSequenceClassification

    return BertForSequenceClassification(BertConfig(
        **_TEXT, hidden_dropout_prob=p, attention_probs_dropout_prob=p, num_labels=LABELS))


def _roberta(p):
    from transformers import RobertaConfig, RobertaForSequenceClassification

    return RobertaForSequenceClassification(RobertaConfig(
        **_TEXT, hidden_dropout_prob=p, attention_probs_dropout_prob=p, num_labels=LABELS,
        pad_token_id=0))


def _distilbert(p):
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    return DistilBertForSequenceClassification(DistilBertConfig(
        vocab_size=VOCAB, dim=16, n_layers=1, n_heads=2, hidden_dim=32, max_position_embeddings=32,
        dropout=p, attention_dropout=p, seq_classif_dropout=p, num_labels=LABELS))


def _gpt2(p):
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_embd=16, n_layer=1, n_head=2, n_positions=32,
                                      resid_pdrop=p, embd_pdrop=p, attn_pdrop=p))


def _llama(p):
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32,
                                        num_hidden_layers=1, num_attention_heads=2,
                                        num_key_value_heads=1, max_position_embeddings=32,
                                        attention_dropout=p))


def _t5(p):
    from transformers import T5Config, T5ForConditionalGeneration

    return T5ForConditionalGeneration(T5Config(
        vocab_size=VOCAB, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1, num_heads=2,
        relative_attention_num_buckets=8, dropout_rate=p, decoder_start_token_id=0, pad_token_id=0))


def _t5_inputs(g):
    return {"input_ids": _ids(g), "labels": _ids(g)}


def _whisper(p):
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    return WhisperForConditionalGeneration(WhisperConfig(
        vocab_size=VOCAB, num_mel_bins=8, encoder_layers=1, decoder_layers=1, d_model=16,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
        max_source_positions=8, max_target_positions=16, dropout=p, attention_dropout=p,
        activation_dropout=p, decoder_start_token_id=1, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, suppress_tokens=None, begin_suppress_tokens=None))


def _whisper_inputs(g):
    # 16 mel frames: the encoder's stride-2 conv gives max_source_positions = 8
    return {"input_features": torch.randn(BATCH, 8, 16, generator=g), "labels": _ids(g)}


def _vit(p):
    from transformers import ViTConfig, ViTForImageClassification

    return ViTForImageClassification(ViTConfig(
        image_size=IMAGE, patch_size=8, num_channels=3, hidden_size=16, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=32, hidden_dropout_prob=p,
        attention_probs_dropout_prob=p, num_labels=LABELS))


def _swin(p):
    from transformers import SwinConfig, SwinForImageClassification

    return SwinForImageClassification(SwinConfig(
        image_size=IMAGE, patch_size=4, num_channels=3, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
        window_size=4, mlp_ratio=2.0, hidden_dropout_prob=p, attention_probs_dropout_prob=p,
        drop_path_rate=0.0, num_labels=LABELS))


def _convnext(p):
    from transformers import ConvNextConfig, ConvNextForImageClassification

    return ConvNextForImageClassification(ConvNextConfig(
        num_channels=3, hidden_sizes=[8, 16], depths=[1, 1], patch_size=4, image_size=IMAGE,
        drop_path_rate=0.0, num_labels=LABELS, num_stages=2))


def _mobilevit(p):
    from transformers import MobileViTConfig, MobileViTForImageClassification
    from transformers.models.mobilevit import modeling_mobilevit as mv

    model = MobileViTForImageClassification(MobileViTConfig(
        num_channels=3, image_size=IMAGE, patch_size=2, hidden_sizes=[16, 16, 16],
        neck_hidden_sizes=[8, 8, 16, 16, 16, 16, 32], num_attention_heads=2, mlp_ratio=2.0,
        expand_ratio=2.0, hidden_dropout_prob=p, attention_probs_dropout_prob=p,
        classifier_dropout_prob=p, num_labels=LABELS))
    # the architecture fixes its depths (2/4/3 transformer layers, 3-deep
    # MobileNet stages); one of each keeps every kind of layer at a tenth of the graph
    for m in model.modules():
        if isinstance(m, (mv.MobileViTTransformer, mv.MobileViTMobileNetLayer)):
            m.layer = m.layer[:1]
    return model


def _resnet(p):
    from transformers import ResNetConfig, ResNetForImageClassification

    return ResNetForImageClassification(ResNetConfig(
        num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic",
        num_labels=LABELS))


# -- more families: the task heads and architectures users port -------------------

_DECODER = dict(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                num_attention_heads=2, max_position_embeddings=32)
_S2S = dict(vocab_size=VOCAB, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=32,
            pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)

def _hf(config: str, head: str, **kw):
    """`transformers.<head>(<config>(**kw))`: a builder without dropout arguments."""
    def build(p):
        import transformers

        return getattr(transformers, head)(getattr(transformers, config)(**kw))
    return build


def _token_cls(g):
    return {"input_ids": _ids(g), "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long),
            "labels": torch.randint(0, LABELS, (BATCH, SEQ), generator=g)}


def _masked_lm(g):
    ids = _ids(g)
    return {"input_ids": ids, "labels": ids.clone()}


def _question_answering(g):
    return {"input_ids": _ids(g), "start_positions": torch.randint(0, SEQ, (BATCH,), generator=g),
            "end_positions": torch.randint(0, SEQ, (BATCH,), generator=g)}


def _multiple_choice(g):
    return {"input_ids": _ids(g, BATCH * 2).view(BATCH, 2, SEQ),
            "labels": torch.randint(0, 2, (BATCH,), generator=g)}


def _segmentation(g, size=16):
    return {"pixel_values": torch.randn(BATCH, 3, size, size, generator=g),
            "labels": torch.randint(0, LABELS, (BATCH, size, size), generator=g)}


def _audio(g):
    return {"input_values": torch.randn(BATCH, 160, generator=g),
            "labels": torch.randint(0, LABELS, (BATCH,), generator=g)}


def _image_text(g):
    return {"input_ids": _ids(g), "pixel_values": torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g)}


def _mixtral(p):
    model = _hf("MixtralConfig", "MixtralForCausalLM", **_DECODER, num_key_value_heads=1,
                num_local_experts=4, num_experts_per_tok=2)(p)
    # the default "grouped_mm" experts sort tokens into groups whose sizes depend
    # on the routing (a data-dependent loop); "batched_mm" gathers each token's
    # experts' weights: static shapes (test_hf_models.py checks the default's error)
    model.set_experts_implementation("batched_mm")
    return model


_CLIP_TEXT = dict(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                  num_attention_heads=2, max_position_embeddings=32)
_CLIP_VISION = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                    image_size=IMAGE, patch_size=8)
_WAV2VEC2 = dict(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=32, conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3),
                 num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2, mask_time_prob=0.0,
                 num_labels=LABELS, classifier_proj_size=8)
_SEGFORMER = dict(num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16],
                  patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
                  decoder_hidden_size=16, drop_path_rate=0.0, num_labels=LABELS)

_TIME_SERIES = dict(prediction_length=4, context_length=8, lags_sequence=[1, 2], num_time_features=1, d_model=16,
                   encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                   encoder_ffn_dim=32, decoder_ffn_dim=32, dropout=0.0, attention_dropout=0.0,
                   activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0)


def _time_series(g):
    past = 8 + 2  # the context and the largest lag
    return {"past_values": torch.randn(BATCH, past, generator=g),
            "past_time_features": torch.randn(BATCH, past, 1, generator=g),
            "past_observed_mask": torch.ones(BATCH, past),
            "future_time_features": torch.randn(BATCH, 4, 1, generator=g),
            "future_values": torch.randn(BATCH, 4, generator=g)}


_IMAGE_TOKEN = VOCAB - 1
_LLAVA = dict(vision_config=dict(model_type="clip_vision_model", hidden_size=16, intermediate_size=32,
                                 num_hidden_layers=2, num_attention_heads=2, image_size=IMAGE, patch_size=8,
                                 projection_dim=8),
              text_config=dict(model_type="llama", **_DECODER, num_key_value_heads=1),
              image_token_index=_IMAGE_TOKEN, vision_feature_layer=-1)


def _image_prompt(g):
    """16 image tokens (one per patch) before the text; the loss skips them."""
    text = torch.randint(3, _IMAGE_TOKEN, (BATCH, SEQ), generator=g)
    return {"input_ids": torch.cat([torch.full((BATCH, 16), _IMAGE_TOKEN), text], 1),
            "pixel_values": torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g),
            "labels": torch.cat([torch.full((BATCH, 16), -100), text], 1)}


MORE_FAMILIES = [
    Family("albert", _hf("AlbertConfig", "AlbertForSequenceClassification", **_TEXT, embedding_size=8,
                         num_labels=LABELS, **_NO_DROPOUT, classifier_dropout_prob=0.0), _text_cls),
    Family("electra", _hf("ElectraConfig", "ElectraForTokenClassification", **_TEXT, embedding_size=8,
                          num_labels=LABELS, **_NO_DROPOUT), _token_cls),
    Family("deberta_v2", _hf("DebertaV2Config", "DebertaV2ForMaskedLM", **_TEXT, **_NO_DROPOUT), _masked_lm),
    Family("xlm_roberta", _hf("XLMRobertaConfig", "XLMRobertaForQuestionAnswering", **_TEXT, **_NO_DROPOUT,
                              pad_token_id=0), _question_answering,
           labels=("start_positions", "end_positions"), output="start_logits"),
    Family("mpnet", _hf("MPNetConfig", "MPNetForMultipleChoice", **_TEXT, **_NO_DROPOUT, pad_token_id=0),
           _multiple_choice),
    Family("bloom", _hf("BloomConfig", "BloomForCausalLM", vocab_size=VOCAB, hidden_size=16, n_layer=1,
                        n_head=2, hidden_dropout=0.0, attention_dropout=0.0), _causal),
    Family("gemma2", _hf("Gemma2Config", "Gemma2ForCausalLM", **_DECODER, num_key_value_heads=1, head_dim=8,
                         sliding_window=4), _causal),
    Family("mixtral", _mixtral, _causal),
    Family("segformer", _hf("SegformerConfig", "SegformerForSemanticSegmentation", **_SEGFORMER,
                            **_NO_DROPOUT, classifier_dropout_prob=0.0, semantic_loss_ignore_index=255),
           _segmentation),
    Family("convnextv2", _hf("ConvNextV2Config", "ConvNextV2ForImageClassification", num_channels=3,
                             hidden_sizes=[8, 16], depths=[1, 1], patch_size=4, image_size=IMAGE,
                             drop_path_rate=0.0, num_labels=LABELS, num_stages=2), _image),
    Family("swinv2", _hf("Swinv2Config", "Swinv2ForImageClassification", image_size=IMAGE, patch_size=4,
                         num_channels=3, embed_dim=16, depths=[1], num_heads=[2], window_size=4,
                         mlp_ratio=2.0, **_NO_DROPOUT, drop_path_rate=0.0, num_labels=LABELS), _image),
    Family("hubert", _hf("HubertConfig", "HubertForSequenceClassification", **_WAV2VEC2, hidden_dropout=0.0,
                         attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0, layerdrop=0.0),
           _audio),
    Family("clip", _hf("CLIPConfig", "CLIPModel", text_config=_CLIP_TEXT, vision_config=_CLIP_VISION,
                       projection_dim=8), _image_text, labels=(), output="logits_per_image",
           train_kwargs={"return_loss": True}),
    # the loss is a StudentT's log-likelihood: torch.distributions' argument checks
    Family("time_series_transformer", _hf("TimeSeriesTransformerConfig", "TimeSeriesTransformerForPrediction",
                                          **_TIME_SERIES), _time_series, labels=("future_values",),
           output="encoder_last_hidden_state"),
    # image features scattered into the prompt; transformers checks their count
    # against the image tokens with torch._check_tensor_all (a graph assert)
    Family("llava", _hf("LlavaConfig", "LlavaForConditionalGeneration", **_LLAVA), _image_prompt),
]

FAMILIES: dict[str, Family] = {f.name: f for f in [
    Family("bert", _bert, _text_cls),
    Family("roberta", _roberta, _text_cls),
    Family("distilbert", _distilbert, _text_cls),
    Family("gpt2", _gpt2, _causal),
    Family("llama", _llama, _causal),
    Family("t5", _t5, _t5_inputs, seq2seq=True),
    Family("whisper", _whisper, _whisper_inputs, seq2seq=True),
    Family("vit", _vit, _image),
    Family("swin", _swin, _image),
    Family("convnext", _convnext, _image),
    Family("mobilevit", _mobilevit, _image),
    Family("resnet", _resnet, _image),
    *MORE_FAMILIES,
]}
# families whose training graph has dropout (the dropout check runs on these)
WITH_DROPOUT = ("bert", "gpt2", "vit")
