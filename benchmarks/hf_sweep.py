"""A sweep of Hugging Face families beyond tests/hf_families.py: tiny configs
(random weights, nothing downloaded) called as users port them,
`tilefx.inferenceModel(model)(**inputs)` and `tilefx.trainingModel(model,
optimizer=AdamW)(**inputs, labels=...)`, against PyTorch eager on the CPU:
logits (rtol 1e-4, atol 1e-5), the losses of two steps and every weight
element whose first gradient exceeds 1e-6 (AdamW turns the rounding noise of
a gradient that is zero in exact arithmetic into a step of +-lr).
docs/hf_families.md records its results.

    .venv/bin/python benchmarks/hf_sweep.py [family ...]     # SGD=1 for SGD, STEPS=n, STAGE=inf|train
"""
import copy, os, sys, time, traceback
os.environ["HF_HUB_OFFLINE"] = "1"
import torch, transformers as T
import tilefx

B, S, V, IMG, NL = 2, 8, 64, 32, 3
g0 = lambda s=0: torch.Generator().manual_seed(s)
def ids(g, b=B, s=S): return torch.randint(3, V, (b, s), generator=g)
TXT = dict(vocab_size=V, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
           max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
DEC = dict(vocab_size=V, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
           max_position_embeddings=32)

def cls_in(g): return dict(input_ids=ids(g), attention_mask=torch.ones(B, S, dtype=torch.long), labels=torch.randint(0, NL, (B,), generator=g))
def tok_in(g): return dict(input_ids=ids(g), attention_mask=torch.ones(B, S, dtype=torch.long), labels=torch.randint(0, NL, (B, S), generator=g))
def mlm_in(g): x = ids(g); return dict(input_ids=x, labels=x.clone())
def qa_in(g): return dict(input_ids=ids(g), start_positions=torch.randint(0, S, (B,), generator=g), end_positions=torch.randint(0, S, (B,), generator=g))
def mc_in(g): return dict(input_ids=ids(g, B * 2).view(B, 2, S), labels=torch.randint(0, 2, (B,), generator=g))
def causal_in(g): x = ids(g); return dict(input_ids=x, labels=x.clone())
def s2s_in(g): return dict(input_ids=ids(g), labels=ids(g))
def img_in(g, c=3, size=IMG): return dict(pixel_values=torch.randn(B, c, size, size, generator=g), labels=torch.randint(0, NL, (B,), generator=g))
def seg_in(g): return dict(pixel_values=torch.randn(B, 3, IMG, IMG, generator=g), labels=torch.randint(0, NL, (B, IMG, IMG), generator=g))
def audio_in(g): return dict(input_values=torch.randn(B, 400, generator=g), labels=torch.randint(0, NL, (B,), generator=g))

def enc(cfg, head, inputs, **kw):
    return (lambda: getattr(T, head)(getattr(T, cfg)(**{**TXT, "num_labels": NL, **kw})), inputs)

F = {}
# --- encoders
F["albert"] = (lambda: T.AlbertForSequenceClassification(T.AlbertConfig(**TXT, embedding_size=8, num_labels=NL, classifier_dropout_prob=0.0)), cls_in)
F["electra"] = enc("ElectraConfig", "ElectraForTokenClassification", tok_in, embedding_size=8)
F["deberta"] = enc("DebertaConfig", "DebertaForSequenceClassification", cls_in, pooler_dropout=0.0)
F["deberta_slc"] = enc("DebertaConfig", "DebertaForSequenceClassification", cls_in, pooler_dropout=0.0, problem_type="single_label_classification")
F["deberta_v2"] = enc("DebertaV2Config", "DebertaV2ForMaskedLM", mlm_in)
F["xlm_roberta"] = enc("XLMRobertaConfig", "XLMRobertaForQuestionAnswering", qa_in, pad_token_id=0, num_labels=2)
F["mpnet"] = enc("MPNetConfig", "MPNetForMultipleChoice", mc_in, pad_token_id=0)
F["funnel"] = (lambda: T.FunnelForSequenceClassification(T.FunnelConfig(vocab_size=V, d_model=16, n_head=2, d_head=8, d_inner=32, block_sizes=[1, 1], num_decoder_layers=1, hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, num_labels=NL, max_position_embeddings=32)), cls_in)
F["bert_mc"] = enc("BertConfig", "BertForMultipleChoice", mc_in)
F["bert_qa"] = enc("BertConfig", "BertForQuestionAnswering", qa_in, num_labels=2)
F["bert_mlm"] = enc("BertConfig", "BertForMaskedLM", mlm_in)
# --- seq2seq
S2S = dict(vocab_size=V, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
           encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=32, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
           pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
F["bart"] = (lambda: T.BartForConditionalGeneration(T.BartConfig(**S2S)), s2s_in)
F["bart_cls"] = (lambda: T.BartForSequenceClassification(T.BartConfig(**S2S, num_labels=NL)), lambda g: dict(input_ids=torch.cat([ids(g)[:, :-1], torch.full((B, 1), 2)], 1), labels=torch.randint(0, NL, (B,), generator=g)))
F["mbart"] = (lambda: T.MBartForConditionalGeneration(T.MBartConfig(**S2S)), s2s_in)
F["pegasus"] = (lambda: T.PegasusForConditionalGeneration(T.PegasusConfig(**S2S)), s2s_in)
F["marian"] = (lambda: T.MarianMTModel(T.MarianConfig(**S2S)), s2s_in)
# --- decoders
F["gpt_neo"] = (lambda: T.GPTNeoForCausalLM(T.GPTNeoConfig(vocab_size=V, hidden_size=16, num_layers=2, attention_types=[[["global", "local"], 1]], num_heads=2, intermediate_size=32, max_position_embeddings=32, window_size=4, embed_dropout=0.0, attention_dropout=0.0, resid_dropout=0.0)), causal_in)
F["gptj"] = (lambda: T.GPTJForCausalLM(T.GPTJConfig(vocab_size=V, n_embd=16, n_layer=1, n_head=2, n_positions=32, rotary_dim=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)), causal_in)
F["opt"] = (lambda: T.OPTForCausalLM(T.OPTConfig(vocab_size=V, hidden_size=16, num_hidden_layers=1, ffn_dim=32, num_attention_heads=2, max_position_embeddings=32, word_embed_proj_dim=16, dropout=0.0, attention_dropout=0.0, pad_token_id=1)), causal_in)
F["bloom"] = (lambda: T.BloomForCausalLM(T.BloomConfig(vocab_size=V, hidden_size=16, n_layer=1, n_head=2, hidden_dropout=0.0, attention_dropout=0.0)), causal_in)
F["falcon"] = (lambda: T.FalconForCausalLM(T.FalconConfig(vocab_size=V, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, hidden_dropout=0.0, attention_dropout=0.0, max_position_embeddings=32)), causal_in)
F["mistral"] = (lambda: T.MistralForCausalLM(T.MistralConfig(**DEC, num_key_value_heads=1, sliding_window=4)), causal_in)
F["mixtral"] = (lambda: T.MixtralForCausalLM(T.MixtralConfig(**DEC, num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2, sliding_window=None)), causal_in)
def _batched(m):
    m.set_experts_implementation("batched_mm"); return m
F["mixtral_bmm"] = (lambda: _batched(T.MixtralForCausalLM(T.MixtralConfig(**DEC, num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2, sliding_window=None))), causal_in)
F["qwen2_moe_bmm"] = (lambda: _batched(T.Qwen2MoeForCausalLM(T.Qwen2MoeConfig(**DEC, num_key_value_heads=1, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=16))), causal_in)
F["qwen2"] = (lambda: T.Qwen2ForCausalLM(T.Qwen2Config(**DEC, num_key_value_heads=1)), causal_in)
F["qwen2_moe"] = (lambda: T.Qwen2MoeForCausalLM(T.Qwen2MoeConfig(**DEC, num_key_value_heads=1, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=16)), causal_in)
F["phi"] = (lambda: T.PhiForCausalLM(T.PhiConfig(**DEC, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0, partial_rotary_factor=0.5)), causal_in)
F["phi3"] = (lambda: T.Phi3ForCausalLM(T.Phi3Config(**DEC, num_key_value_heads=1, pad_token_id=0)), causal_in)
F["gemma"] = (lambda: T.GemmaForCausalLM(T.GemmaConfig(**DEC, num_key_value_heads=1, head_dim=8)), causal_in)
F["gemma2"] = (lambda: T.Gemma2ForCausalLM(T.Gemma2Config(**DEC, num_key_value_heads=1, head_dim=8, sliding_window=4)), causal_in)
F["stablelm"] = (lambda: T.StableLmForCausalLM(T.StableLmConfig(**DEC, num_key_value_heads=1)), causal_in)
F["gpt_neox"] = (lambda: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(**DEC, rotary_pct=0.5)), causal_in)
F["codegen"] = (lambda: T.CodeGenForCausalLM(T.CodeGenConfig(vocab_size=V, n_embd=32, n_layer=1, n_head=4, n_positions=32, rotary_dim=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)), causal_in)
F["llama_cls"] = (lambda: T.LlamaForSequenceClassification(T.LlamaConfig(**DEC, num_key_value_heads=1, num_labels=NL, pad_token_id=0)), cls_in)
F["gpt2_tok"] = (lambda: T.GPT2ForTokenClassification(T.GPT2Config(vocab_size=V, n_embd=16, n_layer=1, n_head=2, n_positions=32, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0, num_labels=NL, classifier_dropout=0.0)), tok_in)
# --- vision
VIT = dict(image_size=IMG, patch_size=8, num_channels=3, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=NL)
F["deit"] = (lambda: T.DeiTForImageClassification(T.DeiTConfig(**VIT)), img_in)
F["beit"] = (lambda: T.BeitForImageClassification(T.BeitConfig(**VIT, use_relative_position_bias=True, use_mean_pooling=True)), img_in)
F["data2vec_vision"] = (lambda: T.Data2VecVisionForImageClassification(T.Data2VecVisionConfig(**VIT, use_relative_position_bias=True)), img_in)
F["dinov2"] = (lambda: T.Dinov2ForImageClassification(T.Dinov2Config(**{**VIT, "image_size": IMG}, mlp_ratio=2)), img_in)
F["segformer"] = (lambda: T.SegformerForSemanticSegmentation(T.SegformerConfig(num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16], patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0, drop_path_rate=0.0, num_labels=NL, semantic_loss_ignore_index=255)), seg_in)
F["segformer_cls"] = (lambda: T.SegformerForImageClassification(T.SegformerConfig(num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16], patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0, drop_path_rate=0.0, num_labels=NL)), img_in)
F["mobilenet_v2"] = (lambda: T.MobileNetV2ForImageClassification(T.MobileNetV2Config(num_channels=3, image_size=IMG, depth_multiplier=0.25, classifier_dropout_prob=0.0, num_labels=NL)), img_in)
F["mobilenet_v1"] = (lambda: T.MobileNetV1ForImageClassification(T.MobileNetV1Config(num_channels=3, image_size=IMG, depth_multiplier=0.25, classifier_dropout_prob=0.0, num_labels=NL)), img_in)
F["regnet"] = (lambda: T.RegNetForImageClassification(T.RegNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], groups_width=8, layer_type="y", num_labels=NL)), img_in)
F["efficientnet"] = (lambda: T.EfficientNetForImageClassification(T.EfficientNetConfig(num_channels=3, image_size=IMG, width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=320, dropout_rate=0.0, drop_connect_rate=0.0, num_labels=NL)), img_in)
F["convnextv2"] = (lambda: T.ConvNextV2ForImageClassification(T.ConvNextV2Config(num_channels=3, hidden_sizes=[8, 16], depths=[1, 1], patch_size=4, image_size=IMG, drop_path_rate=0.0, num_labels=NL, num_stages=2)), img_in)
F["poolformer"] = (lambda: T.PoolFormerForImageClassification(T.PoolFormerConfig(num_channels=3, hidden_sizes=[8, 16], depths=[1, 1], num_encoder_blocks=2, patch_sizes=[7, 3], strides=[4, 2], padding=[2, 1], drop_path_rate=0.0, num_labels=NL)), img_in)
F["levit"] = (lambda: T.LevitForImageClassification(T.LevitConfig(image_size=IMG, num_channels=3, kernel_size=3, stride=2, padding=1, patch_size=16, hidden_sizes=[16, 24], num_attention_heads=[1, 2], depths=[1, 1], key_dim=[8, 8], drop_path_rate=0, mlp_ratio=[2, 2], attention_ratio=[2, 2], down_ops=[["Subsample", 8, 16 // 8, 4, 2, 2]], num_labels=NL)), img_in)
F["swinv2"] = (lambda: T.Swinv2ForImageClassification(T.Swinv2Config(image_size=IMG, patch_size=4, num_channels=3, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4, mlp_ratio=2.0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, drop_path_rate=0.0, num_labels=NL)), img_in)
# --- speech
W2V = dict(vocab_size=V, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2, hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0, num_labels=NL, classifier_proj_size=8)
F["wav2vec2"] = (lambda: T.Wav2Vec2ForSequenceClassification(T.Wav2Vec2Config(**W2V)), audio_in)
F["hubert"] = (lambda: T.HubertForSequenceClassification(T.HubertConfig(**W2V)), audio_in)
F["wav2vec2_ctc"] = (lambda: T.Wav2Vec2ForCTC(T.Wav2Vec2Config(**W2V, ctc_loss_reduction="mean", pad_token_id=0)), lambda g: dict(input_values=torch.randn(B, 400, generator=g), labels=torch.randint(1, V, (B, 5), generator=g)))
# --- multimodal
CT = dict(vocab_size=V, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=32, projection_dim=8)
CV = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=IMG, patch_size=8, projection_dim=8)
F["clip"] = (lambda: T.CLIPModel(T.CLIPConfig(text_config=CT, vision_config=CV, projection_dim=8)), lambda g: dict(input_ids=ids(g), pixel_values=torch.randn(B, 3, IMG, IMG, generator=g), return_loss=True))
F["clip_text"] = (lambda: T.CLIPTextModelWithProjection(T.CLIPTextConfig(**CT)), lambda g: dict(input_ids=ids(g)))
F["clip_vision"] = (lambda: T.CLIPVisionModelWithProjection(T.CLIPVisionConfig(**CV)), lambda g: dict(pixel_values=torch.randn(B, 3, IMG, IMG, generator=g)))
F["clip_cls"] = (lambda: T.CLIPForImageClassification(T.CLIPConfig(text_config=CT, vision_config=CV, projection_dim=8, num_labels=NL)), img_in)
F["t5_encoder"] = (lambda: T.T5EncoderModel(T.T5Config(vocab_size=V, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2, relative_attention_num_buckets=8, dropout_rate=0.0)), lambda g: dict(input_ids=ids(g)))
F["mt5"] = (lambda: T.MT5ForConditionalGeneration(T.MT5Config(vocab_size=V, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1, num_heads=2, relative_attention_num_buckets=8, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0)), s2s_in)
F["roberta_mlm"] = enc("RobertaConfig", "RobertaForMaskedLM", mlm_in, pad_token_id=0)
F["longformer"] = (lambda: T.LongformerForSequenceClassification(T.LongformerConfig(**TXT, attention_window=4, num_labels=NL, pad_token_id=0)), cls_in)
F["big_bird"] = (lambda: T.BigBirdForSequenceClassification(T.BigBirdConfig(**TXT, attention_type="original_full", num_labels=NL)), cls_in)
F["vit_mae"] = (lambda: T.ViTMAEForPreTraining(T.ViTMAEConfig(image_size=IMG, patch_size=8, num_channels=3, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, decoder_hidden_size=16, decoder_num_hidden_layers=1, decoder_num_attention_heads=2, decoder_intermediate_size=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)), lambda g: dict(pixel_values=torch.randn(B, 3, IMG, IMG, generator=g), noise=torch.rand(B, 16, generator=g)))
F["wavlm"] = (lambda: T.WavLMForSequenceClassification(T.WavLMConfig(**W2V, num_buckets=8, max_bucket_distance=16)), audio_in)
F["sew"] = (lambda: T.SEWForSequenceClassification(T.SEWConfig(**{**W2V, "conv_dim": (8, 8), "squeeze_factor": 2}, )), audio_in)
F["unispeech_sat"] = (lambda: T.UniSpeechSatForSequenceClassification(T.UniSpeechSatConfig(**W2V)), audio_in)
F["data2vec_audio"] = (lambda: T.Data2VecAudioForSequenceClassification(T.Data2VecAudioConfig(**W2V)), audio_in)
F["speech2text"] = (lambda: T.Speech2TextForConditionalGeneration(T.Speech2TextConfig(vocab_size=V, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_source_positions=32, max_target_positions=32, num_conv_layers=1, conv_channels=8, conv_kernel_sizes=[5], input_feat_per_channel=8, input_channels=1, dropout=0.0, decoder_start_token_id=2, pad_token_id=1)), lambda g: dict(input_features=torch.randn(B, 16, 8, generator=g), labels=ids(g)))
F["siglip"] = (lambda: T.SiglipModel(T.SiglipConfig(text_config=dict(vocab_size=V, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=32), vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=IMG, patch_size=8))), lambda g: dict(input_ids=ids(g), pixel_values=torch.randn(B, 3, IMG, IMG, generator=g), return_loss=True))
F["fnet"] = enc("FNetConfig", "FNetForSequenceClassification", lambda g: dict(input_ids=ids(g), labels=torch.randint(0, NL, (B,), generator=g)), use_tpu_fourier_optimizations=False)
F["esm"] = (lambda: T.EsmForMaskedLM(T.EsmConfig(**TXT, pad_token_id=1, position_embedding_type="rotary")), mlm_in)
F["nystromformer"] = enc("NystromformerConfig", "NystromformerForSequenceClassification", cls_in, num_landmarks=4, segment_means_seq_len=S)
F["gpt_bigcode"] = (lambda: T.GPTBigCodeForCausalLM(T.GPTBigCodeConfig(vocab_size=V, n_embd=16, n_layer=1, n_head=2, n_positions=32, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0, multi_query=True)), causal_in)
F["xglm"] = (lambda: T.XGLMForCausalLM(T.XGLMConfig(vocab_size=V, d_model=16, num_layers=1, attention_heads=2, ffn_dim=32, max_position_embeddings=32, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)), causal_in)
F["layoutlm"] = (lambda: T.LayoutLMForTokenClassification(T.LayoutLMConfig(**TXT, num_labels=NL)), lambda g: dict(input_ids=ids(g), bbox=torch.sort(torch.randint(0, 1000, (B, S, 4), generator=g), -1).values[..., [0, 1, 2, 3]], labels=torch.randint(0, NL, (B, S), generator=g)))
F["patchtst"] = (lambda: T.PatchTSTForPrediction(T.PatchTSTConfig(num_input_channels=2, context_length=16, patch_length=4, patch_stride=4, prediction_length=4, d_model=16, num_attention_heads=2, num_hidden_layers=1, ffn_dim=32, dropout=0.0, attention_dropout=0.0, ff_dropout=0.0, path_dropout=0.0, head_dropout=0.0)), lambda g: dict(past_values=torch.randn(B, 16, 2, generator=g), future_values=torch.randn(B, 4, 2, generator=g)))
F["mobilebert"] = enc("MobileBertConfig", "MobileBertForSequenceClassification", cls_in, embedding_size=8, intra_bottleneck_size=16, num_feedforward_networks=1, true_hidden_size=16)
F["squeezebert"] = enc("SqueezeBertConfig", "SqueezeBertForSequenceClassification", cls_in, embedding_size=16, q_groups=1, k_groups=1, v_groups=1, post_attention_groups=1, intermediate_groups=1, output_groups=1)
F = {k: v for k, v in F.items() if v}

LABEL_KEYS = ("labels", "start_positions", "end_positions", "return_loss", "future_values")
def main_out(o):
    for k in ("logits", "logits_per_image", "text_embeds", "image_embeds", "start_logits",
              "prediction_outputs", "last_hidden_state"):
        if getattr(o, k, None) is not None: return getattr(o, k)
    raise RuntimeError(f"no logits in {type(o)}")

OPT = (lambda p: torch.optim.SGD(p, lr=float(os.environ.get("LR", 0.1)))) if os.environ.get("SGD") else (lambda p: torch.optim.AdamW(p, lr=1e-2))
def run(name, steps=int(os.environ.get("STEPS", 2)), stage="both"):
    build, inputs = F[name]
    torch.manual_seed(0)
    model = build()
    d = inputs(g0())
    inf = {k: v for k, v in d.items() if k not in LABEL_KEYS}
    if "labels" in d and name in ("bart", "mbart", "pegasus", "marian", "mt5", "speech2text"):
        inf["decoder_input_ids"] = d["labels"]
    res = []
    if stage in ("both", "inf"):
        model.eval()
        with torch.no_grad():
            ref = main_out(model(**inf))
        out = main_out(tilefx.inferenceModel(model)(**inf))
        err = (out - ref).abs().max().item()
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
        res.append(f"inf ok {err:.1e}")
    if stage in ("both", "train") and any(k in d for k in LABEL_KEYS):
        model.train()
        ref_model = copy.deepcopy(model)
        ropt = OPT(ref_model.parameters())
        rl = []
        live = None
        for _ in range(steps):
            ropt.zero_grad(); l = ref_model(**d).loss; l.backward()
            if live is None:  # parameters whose gradient is (mathematically) zero: AdamW turns rounding noise into steps
                live = {n: q.grad.abs() > 1e-6 for n, q in ref_model.named_parameters() if q.grad is not None}
            ropt.step(); rl.append(l.item())
        ipu = tilefx.trainingModel(model, optimizer=OPT(model.parameters()))
        tl = [float(ipu(**d).loss) for _ in range(steps)]
        torch.testing.assert_close(torch.tensor(tl), torch.tensor(rl), rtol=1e-4, atol=1e-5)
        for (n, p), (_, q) in zip(model.named_parameters(), ref_model.named_parameters()):
            if n in live: torch.testing.assert_close(p.detach()[live[n]], q.detach()[live[n]], rtol=1e-4, atol=1e-5, msg=n)
        res.append(f"train ok {tl[0]:.4f}")
    return "; ".join(res)


if __name__ == "__main__":
    names = sys.argv[1:] or list(F)
    stage = os.environ.get("STAGE", "both")
    for n in names:
        t = time.time()
        try:
            r = run(n, stage=stage)
            print(f"PASS {n}: {r} ({time.time() - t:.1f}s)", flush=True)
        except Exception as e:
            msg = f"{type(e).__name__}: {e}".replace("\n", " | ")[:600]
            print(f"FAIL {n}: {msg} ({time.time() - t:.1f}s)", flush=True)
            if os.environ.get("TB"):
                traceback.print_exc()
