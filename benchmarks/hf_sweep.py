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
def s2s_mask_in(g): return dict(input_ids=ids(g), attention_mask=torch.ones(B, S, dtype=torch.long), labels=ids(g))
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
# --- the second sweep: families new to the table
F["modernbert"] = (lambda: T.ModernBertForMaskedLM(T.ModernBertConfig(vocab_size=V, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=32, global_attn_every_n_layers=2, local_attention=4, pad_token_id=0, embedding_dropout=0.0, mlp_dropout=0.0, attention_dropout=0.0)), mlm_in)
F["modernbert_cls"] = (lambda: T.ModernBertForSequenceClassification(T.ModernBertConfig(vocab_size=V, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=32, global_attn_every_n_layers=2, local_attention=4, pad_token_id=0, num_labels=NL, classifier_dropout=0.0)), cls_in)
F["qwen3"] = (lambda: T.Qwen3ForCausalLM(T.Qwen3Config(**DEC, num_key_value_heads=1, head_dim=8)), causal_in)
F["qwen3_moe_bmm"] = (lambda: _batched(T.Qwen3MoeForCausalLM(T.Qwen3MoeConfig(**DEC, num_key_value_heads=1, head_dim=8, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16))), causal_in)
F["gemma3"] = (lambda: T.Gemma3ForCausalLM(T.Gemma3TextConfig(**DEC, num_key_value_heads=1, head_dim=8, sliding_window=4)), causal_in)
F["olmo"] = (lambda: T.OlmoForCausalLM(T.OlmoConfig(**DEC, num_key_value_heads=1)), causal_in)
F["olmo2"] = (lambda: T.Olmo2ForCausalLM(T.Olmo2Config(**DEC, num_key_value_heads=1)), causal_in)
F["cohere"] = (lambda: T.CohereForCausalLM(T.CohereConfig(**DEC, num_key_value_heads=1)), causal_in)
F["glm"] = (lambda: T.GlmForCausalLM(T.GlmConfig(**DEC, num_key_value_heads=1, head_dim=8, pad_token_id=0)), causal_in)
F["granite"] = (lambda: T.GraniteForCausalLM(T.GraniteConfig(**DEC, num_key_value_heads=1)), causal_in)
F["starcoder2"] = (lambda: T.Starcoder2ForCausalLM(T.Starcoder2Config(**DEC, num_key_value_heads=1, residual_dropout=0.0, embedding_dropout=0.0, attention_dropout=0.0)), causal_in)
F["mamba"] = (lambda: T.MambaForCausalLM(T.MambaConfig(vocab_size=V, hidden_size=16, state_size=4, num_hidden_layers=1, expand=2, conv_kernel=4, time_step_rank=4, use_mambapy=False)), causal_in)
F["mamba2"] = (lambda: T.Mamba2ForCausalLM(T.Mamba2Config(vocab_size=V, hidden_size=16, state_size=4, num_hidden_layers=1, expand=2, conv_kernel=4, num_heads=4, head_dim=8, n_groups=1, chunk_size=4, time_step_rank=4)), causal_in)
F["rwkv"] = (lambda: T.RwkvForCausalLM(T.RwkvConfig(vocab_size=V, hidden_size=16, num_hidden_layers=2, attention_hidden_size=16, intermediate_size=32, context_length=32)), causal_in)
F["xlnet"] = (lambda: T.XLNetForSequenceClassification(T.XLNetConfig(vocab_size=V, d_model=16, n_layer=1, n_head=2, d_inner=32, dropout=0.0, summary_last_dropout=0.0, num_labels=NL)), cls_in)
F["ctrl"] = (lambda: T.CTRLLMHeadModel(T.CTRLConfig(vocab_size=V, n_embd=16, n_layer=1, n_head=2, dff=32, n_positions=32, resid_pdrop=0.0, embd_pdrop=0.0)), causal_in)
F["reformer"] = (lambda: T.ReformerModelWithLMHead(T.ReformerConfig(vocab_size=V, hidden_size=16, num_attention_heads=2, attention_head_size=8, feed_forward_size=32, attn_layers=["local", "lsh"], axial_pos_shape=[2, 4], axial_pos_embds_dim=[8, 8], max_position_embeddings=S, local_attn_chunk_length=4, lsh_attn_chunk_length=4, num_buckets=2, num_hashes=1, is_decoder=True, hidden_dropout_prob=0.0, lsh_attention_probs_dropout_prob=0.0, local_attention_probs_dropout_prob=0.0, pad_token_id=0)), causal_in)
F["reformer_local"] = (lambda: T.ReformerModelWithLMHead(T.ReformerConfig(vocab_size=V, hidden_size=16, num_attention_heads=2, attention_head_size=8, feed_forward_size=32, attn_layers=["local", "local"], axial_pos_shape=[2, 4], axial_pos_embds_dim=[8, 8], max_position_embeddings=S, local_attn_chunk_length=4, is_decoder=True, hidden_dropout_prob=0.0, local_attention_probs_dropout_prob=0.0, pad_token_id=0)), causal_in)
F["perceiver"] = (lambda: T.PerceiverForSequenceClassification(T.PerceiverConfig(vocab_size=V, num_latents=4, d_latents=16, d_model=16, num_blocks=1, num_self_attends_per_block=1, num_self_attention_heads=2, num_cross_attention_heads=1, qk_channels=8, v_channels=16, max_position_embeddings=S, attention_probs_dropout_prob=0.0, num_labels=NL)), cls_in)
F["convbert"] = enc("ConvBertConfig", "ConvBertForSequenceClassification", cls_in, embedding_size=16, head_ratio=2, conv_kernel_size=3)
F["canine"] = (lambda: T.CanineForSequenceClassification(T.CanineConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, max_position_embeddings=64, downsampling_rate=2, upsampling_kernel_size=3, num_hash_functions=2, num_hash_buckets=32, local_transformer_stride=4, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=NL)), cls_in)
F["rembert"] = enc("RemBertConfig", "RemBertForSequenceClassification", cls_in, input_embedding_size=8, output_embedding_size=8, classifier_dropout_prob=0.0, pad_token_id=0)
F["luke"] = enc("LukeConfig", "LukeForSequenceClassification", cls_in, entity_vocab_size=8, entity_emb_size=8, pad_token_id=0)
F["pvt"] = (lambda: T.PvtForImageClassification(T.PvtConfig(image_size=IMG, num_channels=3, num_encoder_blocks=2, depths=[1, 1], sequence_reduction_ratios=[2, 1], hidden_sizes=[8, 16], patch_sizes=[4, 2], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, drop_path_rate=0.0, num_labels=NL)), img_in)
F["pvt_v2"] = (lambda: T.PvtV2ForImageClassification(T.PvtV2Config(image_size=IMG, num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16], patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, drop_path_rate=0.0, num_labels=NL)), img_in)
F["focalnet"] = (lambda: T.FocalNetForImageClassification(T.FocalNetConfig(image_size=IMG, patch_size=4, num_channels=3, embed_dim=8, depths=[1, 1], focal_levels=[2, 2], focal_windows=[3, 3], hidden_dropout_prob=0.0, drop_path_rate=0.0, num_labels=NL)), img_in)
F["hiera"] = (lambda: T.HieraForImageClassification(T.HieraConfig(image_size=[IMG, IMG], patch_size=[7, 7], patch_stride=[4, 4], patch_padding=[3, 3], embed_dim=8, num_heads=[1, 2], depths=[1, 1], embed_dim_multiplier=2.0, num_query_pool=1, query_stride=[2, 2], masked_unit_size=[4, 4], masked_unit_attention=[True, False], drop_path_rate=0.0, num_labels=NL)), img_in)
F["yolos"] = (lambda: T.YolosForObjectDetection(T.YolosConfig(image_size=[IMG, IMG], patch_size=8, num_channels=3, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_detection_tokens=4, num_labels=NL)), lambda g: dict(pixel_values=torch.randn(B, 3, IMG, IMG, generator=g)))
F["dpt"] = (lambda: T.DPTForDepthEstimation(T.DPTConfig(image_size=IMG, patch_size=8, num_channels=3, hidden_size=16, num_hidden_layers=4, num_attention_heads=2, intermediate_size=32, backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[8, 8, 16, 16], fusion_hidden_size=16, head_in_index=-1, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)), lambda g: dict(pixel_values=torch.randn(B, 3, IMG, IMG, generator=g)))
F["owlvit"] = (lambda: T.OwlViTForObjectDetection(T.OwlViTConfig(text_config=dict(vocab_size=V, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=S), vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=IMG, patch_size=8), projection_dim=16)), lambda g: dict(input_ids=ids(g), pixel_values=torch.randn(B, 3, IMG, IMG, generator=g), attention_mask=torch.ones(B, S, dtype=torch.long)))
F["blip"] = (lambda: T.BlipForConditionalGeneration(T.BlipConfig(text_config=dict(vocab_size=V, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=32, encoder_hidden_size=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=0, bos_token_id=1, sep_token_id=2), vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=IMG, patch_size=8), projection_dim=8)), lambda g: dict(input_ids=ids(g), pixel_values=torch.randn(B, 3, IMG, IMG, generator=g), labels=ids(g)))
F["xclip"] = (lambda: T.XCLIPModel(T.XCLIPConfig(text_config=dict(vocab_size=V, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=S), vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=IMG, patch_size=8, num_frames=2, mit_hidden_size=16, mit_intermediate_size=32, mit_num_hidden_layers=1, mit_num_attention_heads=2), projection_dim=16, prompt_layers=1, prompt_attention_heads=2, prompt_hidden_act="quick_gelu", prompt_projection_dropout=0.0)), lambda g: dict(input_ids=ids(g), pixel_values=torch.randn(B, 2, 3, IMG, IMG, generator=g), return_loss=True))
def _ved():
    enc_cfg = T.ViTConfig(image_size=IMG, patch_size=8, num_channels=3, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    dec_cfg = T.GPT2Config(vocab_size=V, n_embd=16, n_layer=1, n_head=2, n_positions=32, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0, add_cross_attention=True, is_decoder=True)
    m = T.VisionEncoderDecoderModel(T.VisionEncoderDecoderConfig.from_encoder_decoder_configs(enc_cfg, dec_cfg))
    m.config.decoder_start_token_id, m.config.pad_token_id = 0, 0
    return m
F["vision_encoder_decoder"] = (_ved, lambda g: dict(pixel_values=torch.randn(B, 3, IMG, IMG, generator=g), labels=ids(g)))
TS = dict(prediction_length=4, context_length=8, lags_sequence=[1, 2], num_time_features=1, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0)
def ts_in(g):
    past = 8 + 2
    return dict(past_values=torch.randn(B, past, generator=g), past_time_features=torch.randn(B, past, 1, generator=g), past_observed_mask=torch.ones(B, past), future_time_features=torch.randn(B, 4, 1, generator=g), future_values=torch.randn(B, 4, generator=g))
F["time_series_transformer"] = (lambda: T.TimeSeriesTransformerForPrediction(T.TimeSeriesTransformerConfig(**TS)), ts_in)
F["informer"] = (lambda: T.InformerForPrediction(T.InformerConfig(**TS, attention_type="prob", sampling_factor=2, distil=False)), ts_in)
F["informer_full"] = (lambda: T.InformerForPrediction(T.InformerConfig(**TS, attention_type="full", distil=True)), ts_in)
F["autoformer"] = (lambda: T.AutoformerForPrediction(T.AutoformerConfig(**TS, moving_average=3, autocorrelation_factor=1)), ts_in)
F["decision_transformer"] = (lambda: T.DecisionTransformerModel(T.DecisionTransformerConfig(state_dim=5, act_dim=3, hidden_size=16, max_ep_len=32, n_layer=1, n_head=2, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)), lambda g: dict(states=torch.randn(B, S, 5, generator=g), actions=torch.randn(B, S, 3, generator=g), rewards=torch.randn(B, S, 1, generator=g), returns_to_go=torch.randn(B, S, 1, generator=g), timesteps=torch.arange(S).expand(B, S), attention_mask=torch.ones(B, S, dtype=torch.long)))
F["speecht5_asr"] = (lambda: T.SpeechT5ForSpeechToText(T.SpeechT5Config(vocab_size=V, hidden_size=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2, speech_decoder_prenet_units=16, max_text_positions=32, max_speech_positions=128, positional_dropout=0.0, speech_decoder_prenet_dropout=0.0, speech_decoder_postnet_dropout=0.0, hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0, mask_time_prob=0.0, pad_token_id=1, decoder_start_token_id=2)), lambda g: dict(input_values=torch.randn(B, 400, generator=g), labels=ids(g)))
F["encodec"] = (lambda: T.EncodecModel(T.EncodecConfig(target_bandwidths=[8.0], sampling_rate=8000, audio_channels=1, hidden_size=16, num_filters=4, num_residual_layers=1, upsampling_ratios=[4, 2], codebook_size=16, codebook_dim=16, num_lstm_layers=1, kernel_size=3, last_kernel_size=3, residual_kernel_size=3)), lambda g: dict(input_values=torch.randn(B, 1, 256, generator=g)))
# --- the second sweep: more decoders, seq2seq, video and audio
F["deepseek_v3"] = (lambda: _batched(T.DeepseekV3ForCausalLM(T.DeepseekV3Config(**DEC, num_key_value_heads=2, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=16, first_k_dense_replace=0, n_group=2, topk_group=1, kv_lora_rank=8, q_lora_rank=8, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8))), causal_in)
F["olmoe"] = (lambda: _batched(T.OlmoeForCausalLM(T.OlmoeConfig(**DEC, num_key_value_heads=1, num_experts=4, num_experts_per_tok=2))), causal_in)
F["granitemoe"] = (lambda: _batched(T.GraniteMoeForCausalLM(T.GraniteMoeConfig(**DEC, num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2))), causal_in)
F["dbrx"] = (lambda: T.DbrxForCausalLM(T.DbrxConfig(vocab_size=V, d_model=16, n_heads=2, n_layers=1, max_seq_len=32, attn_config=dict(kv_n_heads=1, rope_theta=10000.0, clip_qkv=8.0), ffn_config=dict(ffn_hidden_size=32, moe_num_experts=4, moe_top_k=2))), causal_in)
F["jamba"] = (lambda: _batched(T.JambaForCausalLM(T.JambaConfig(**{**DEC, "num_hidden_layers": 2}, num_key_value_heads=1, num_experts=2, num_experts_per_tok=1, expert_layer_period=2, expert_layer_offset=1, attn_layer_period=2, attn_layer_offset=1, mamba_d_state=4, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=4, use_mamba_kernels=False))), causal_in)
F["falcon_mamba"] = (lambda: T.FalconMambaForCausalLM(T.FalconMambaConfig(vocab_size=V, hidden_size=16, state_size=4, num_hidden_layers=1, expand=2, conv_kernel=4, time_step_rank=4, use_mambapy=False)), causal_in)
F["recurrent_gemma"] = (lambda: T.RecurrentGemmaForCausalLM(T.RecurrentGemmaConfig(vocab_size=V, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, lru_width=16, attention_window_size=4, conv1d_width=4, block_types=["recurrent", "attention"], head_dim=8)), causal_in)
F["nemotron"] = (lambda: T.NemotronForCausalLM(T.NemotronConfig(**DEC, num_key_value_heads=1)), causal_in)
F["smollm3"] = (lambda: T.SmolLM3ForCausalLM(T.SmolLM3Config(**DEC, num_key_value_heads=1, pad_token_id=0)), causal_in)
F["glm4"] = (lambda: T.Glm4ForCausalLM(T.Glm4Config(**DEC, num_key_value_heads=1, head_dim=8, pad_token_id=0)), causal_in)
F["helium"] = (lambda: T.HeliumForCausalLM(T.HeliumConfig(**DEC, num_key_value_heads=1, head_dim=8)), causal_in)
F["phimoe"] = (lambda: _batched(T.PhimoeForCausalLM(T.PhimoeConfig(**DEC, num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2))), causal_in)
F["mpt"] = (lambda: T.MptForCausalLM(T.MptConfig(vocab_size=V, d_model=16, n_heads=2, n_layers=1, max_seq_len=32, expansion_ratio=2)), causal_in)
F["persimmon"] = (lambda: T.PersimmonForCausalLM(T.PersimmonConfig(**DEC)), causal_in)
F["biogpt"] = (lambda: T.BioGptForCausalLM(T.BioGptConfig(**TXT)), causal_in)
F["led"] = (lambda: T.LEDForConditionalGeneration(T.LEDConfig(**{**S2S, "max_encoder_position_embeddings": 32, "max_decoder_position_embeddings": 32}, attention_window=[4])), s2s_in)
F["prophetnet"] = (lambda: T.ProphetNetForConditionalGeneration(T.ProphetNetConfig(vocab_size=V, hidden_size=16, encoder_ffn_dim=32, decoder_ffn_dim=32, num_encoder_layers=1, num_decoder_layers=1, num_encoder_attention_heads=2, num_decoder_attention_heads=2, max_position_embeddings=32, ngram=2, num_buckets=8, relative_max_distance=16, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, pad_token_id=0, decoder_start_token_id=0)), s2s_in)
F["longt5"] = (lambda: T.LongT5ForConditionalGeneration(T.LongT5Config(vocab_size=V, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1, num_heads=2, local_radius=2, global_block_size=4, encoder_attention_type="transient-global", relative_attention_num_buckets=8, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0)), s2s_mask_in)
F["switch_transformers"] = (lambda: T.SwitchTransformersForConditionalGeneration(T.SwitchTransformersConfig(vocab_size=V, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_decoder_layers=2, num_heads=2, num_experts=2, encoder_sparse_step=2, decoder_sparse_step=2, expert_capacity=8, relative_attention_num_buckets=8, dropout_rate=0.0, router_jitter_noise=0.0, decoder_start_token_id=0, pad_token_id=0)), s2s_mask_in)
F["umt5"] = (lambda: T.UMT5ForConditionalGeneration(T.UMT5Config(vocab_size=V, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1, num_heads=2, relative_attention_num_buckets=8, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0)), s2s_in)
F["m2m100"] = (lambda: T.M2M100ForConditionalGeneration(T.M2M100Config(**S2S, encoder_layerdrop=0.0, decoder_layerdrop=0.0)), s2s_in)
F["blenderbot"] = (lambda: T.BlenderbotForConditionalGeneration(T.BlenderbotConfig(**S2S)), s2s_in)
F["plbart"] = (lambda: T.PLBartForConditionalGeneration(T.PLBartConfig(**S2S)), s2s_in)
F["fsmt"] = (lambda: T.FSMTForConditionalGeneration(T.FSMTConfig(langs=["en", "de"], src_vocab_size=V, tgt_vocab_size=V, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=32, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, pad_token_id=1, decoder_start_token_id=2)), s2s_in)
def vid_in(g, frames=2): return dict(pixel_values=torch.randn(B, frames, 3, IMG, IMG, generator=g), labels=torch.randint(0, NL, (B,), generator=g))
F["videomae"] = (lambda: T.VideoMAEForVideoClassification(T.VideoMAEConfig(image_size=IMG, patch_size=8, num_channels=3, num_frames=2, tubelet_size=2, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=NL)), vid_in)
F["timesformer"] = (lambda: T.TimesformerForVideoClassification(T.TimesformerConfig(image_size=IMG, patch_size=8, num_channels=3, num_frames=2, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, drop_path_rate=0, num_labels=NL)), vid_in)
F["vivit"] = (lambda: T.VivitForVideoClassification(T.VivitConfig(image_size=IMG, num_frames=4, tubelet_size=[2, 8, 8], num_channels=3, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=NL)), lambda g: vid_in(g, 4))
F["ast"] = (lambda: T.ASTForAudioClassification(T.ASTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, patch_size=8, frequency_stride=8, time_stride=8, max_length=32, num_mel_bins=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=NL)), lambda g: dict(input_values=torch.randn(B, 32, 16, generator=g), labels=torch.randint(0, NL, (B,), generator=g)))
F["wav2vec2_bert"] = (lambda: T.Wav2Vec2BertForSequenceClassification(T.Wav2Vec2BertConfig(vocab_size=V, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, feature_projection_input_dim=8, conv_depthwise_kernel_size=3, hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0, layerdrop=0.0, final_dropout=0.0, conformer_conv_dropout=0.0, mask_time_prob=0.0, num_labels=NL, classifier_proj_size=8, position_embeddings_type="relative_key", left_max_position_embeddings=8, right_max_position_embeddings=8)), lambda g: dict(input_features=torch.randn(B, 10, 8, generator=g), labels=torch.randint(0, NL, (B,), generator=g)))
F["bit"] = (lambda: T.BitForImageClassification(T.BitConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_groups=2, num_labels=NL, layer_type="preactivation")), img_in)
F["llava"] = (lambda: T.LlavaForConditionalGeneration(T.LlavaConfig(vision_config=dict(model_type="clip_vision_model", hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2, image_size=IMG, patch_size=8, projection_dim=8), text_config=dict(model_type="llama", **DEC, num_key_value_heads=1), image_token_index=V - 1, vision_feature_layer=-1, projector_hidden_act="gelu")), lambda g: dict(input_ids=torch.cat([torch.full((B, 16), V - 1), ids(g) % (V - 1)], 1), pixel_values=torch.randn(B, 3, IMG, IMG, generator=g), labels=torch.cat([torch.full((B, 16), -100), ids(g) % (V - 1)], 1)))
# --- the second sweep: detection and depth with transformers' own backbones (no timm)
F["detr"] = (lambda: T.DetrForObjectDetection(T.DetrConfig(use_timm_backbone=False, use_pretrained_backbone=False, backbone=None, backbone_config=dict(model_type="resnet", num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], out_features=["stage2"]), num_queries=4, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, num_labels=NL)), lambda g: dict(pixel_values=torch.randn(B, 3, IMG, IMG, generator=g)))
F["depth_anything"] = (lambda: T.DepthAnythingForDepthEstimation(T.DepthAnythingConfig(backbone_config=dict(model_type="dinov2", hidden_size=16, num_hidden_layers=4, num_attention_heads=2, mlp_ratio=2, image_size=IMG, patch_size=8, out_indices=[1, 2, 3, 4], reshape_hidden_states=False, apply_layernorm=True), neck_hidden_sizes=[8, 8, 16, 16], fusion_hidden_size=16, reassemble_hidden_size=16, head_hidden_size=8, patch_size=8)), lambda g: dict(pixel_values=torch.randn(B, 3, IMG, IMG, generator=g)))
F = {k: v for k, v in F.items() if v}

LABEL_KEYS = ("labels", "start_positions", "end_positions", "return_loss", "future_values")
def main_out(o):
    for k in ("logits", "logits_per_image", "text_embeds", "image_embeds", "start_logits",
              "prediction_outputs", "predicted_depth", "pred_boxes", "audio_values", "action_preds", "params", "encoder_last_hidden_state", "last_hidden_state"):
        v = getattr(o, k, None)
        if isinstance(v, tuple): return torch.cat([t.flatten() for t in v])  # a distribution's parameters
        if v is not None: return v
    raise RuntimeError(f"no logits in {type(o)}")

OPT = (lambda p: torch.optim.SGD(p, lr=float(os.environ.get("LR", 0.1)))) if os.environ.get("SGD") else (lambda p: torch.optim.AdamW(p, lr=1e-2))
def run(name, steps=int(os.environ.get("STEPS", 2)), stage="both"):
    build, inputs = F[name]
    torch.manual_seed(0)
    model = build()
    d = inputs(g0())
    inf = {k: v for k, v in d.items() if k not in LABEL_KEYS}
    if "labels" in d and name in ("bart", "mbart", "pegasus", "marian", "mt5", "speech2text", "vision_encoder_decoder", "speecht5_asr", "led", "prophetnet", "longt5", "switch_transformers", "umt5", "m2m100", "blenderbot", "plbart", "fsmt"):
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
