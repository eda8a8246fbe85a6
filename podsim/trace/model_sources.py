"""The published sources of the model presets (podsim.trace.configs.PRESETS): one string per
model naming where each dimension, the sequence length and the training batch come from, or that
podsim chose a value the source does not publish."""

from __future__ import annotations

GPT3_SOURCE = (
    "Brown et al., 'Language Models are Few-Shot Learners', NeurIPS 2020, Table 2.1 (GPT-3 175B: "
    "n_layers 96, d_model 12288, n_heads 96, d_head 128, n_ctx 2048, batch 3.2M tokens = 1536 x 2048; "
    "d_ff = 4 d_model and the GPT-2 BPE vocabulary of 50257, as in GPT-2)"
)
LLAMA2_SOURCE = (
    "Touvron et al., 'Llama 2: Open Foundation and Fine-Tuned Chat Models', 2023, Table 1 and "
    "the released config.json of Llama-2-70b (80 layers, hidden 8192, 64 heads, 8 KV heads, "
    "intermediate 28672, vocab 32000, context 4096, global batch 4M tokens = 1024 x 4096)"
)
MIXTRAL_SOURCE = (
    "Jiang et al., 'Mixtral of Experts', 2024, Table 1 (dim 4096, 32 layers, head_dim 128, "
    "hidden_dim 14336, 32 heads, 8 KV heads, vocab 32000, 8 experts, top-2). Training sequence "
    "length and batch are not published: 4096 x 1024 is podsim's choice"
)
RESNET_SOURCE = (
    "He et al., 'Deep Residual Learning for Image Recognition', CVPR 2016, Table 1 (50-layer); "
    "v1.5 stride placement as in the MLPerf reference; global batch 1024 as in the Cloud TPU "
    "ResNet-50 reference (train_batch_size 1024)"
)

BERT_SOURCE = (
    "Devlin et al., 'BERT', NAACL 2019, BERT-large (24 layers, hidden 1024, 16 heads, FFN 4096, "
    "vocab 30522); MLPerf reference: seq 512, 76 masked positions; global batch 8192 as in "
    "MLPerf v0.7 Google v3-8192 (measurements.md M7)"
)
PALM_SOURCE = (
    "Chowdhery et al., 'PaLM', arXiv:2204.02311, Table 1 and §2 (540B: 118 layers, d_model 18432, "
    "48 heads x 256, FFN 4 d_model with SwiGLU, multi-query attention, shared embeddings, no biases, "
    "parallel layers (§2: y = x + MLP(LayerNorm(x)) + Attention(LayerNorm(x)), the input matmuls fused), "
    "vocab 256k = 256000, seq 2048, batch 2048 sequences in the last phase)"
)

MAXTEXT_COMMIT = "AI-Hypercomputer/maxtext@76bd53b0f44caf989c88189afadeb1062f9254f0"
MAXTEXT_SOURCE = (
    f"MaxText's 'global_parameter_scale' family ({MAXTEXT_COMMIT}, 2023-12-15): MaxText/pyconfig.py "
    "get_individual_scales (log2(scale) = 3b + r: heads and mlp_dim x 2^(b + (r > 0)), emb_dim x 2^(b + (r > 1)), layers x 2^b) "
    "on MaxText/configs/base.yml's base_emb_dim 2560, base_num_heads 8, base_mlp_dim 8192, base_num_decoder_layers 16, "
    "head_dim 256, vocab_size 32768, max_target_length 2048, mlp_activations ['relu'] (one input matrix: podsim's "
    "2-matrix 'gelu' shape), logits_via_embedding (tied), RMSNorm, RoPE, no biases, and MaxText/layers/models.py "
    "DecoderLayer's one norm feeding attention and the MLP, summed into one residual (a parallel block; the Q/K/V "
    "RMSNorms of layers/attentions.py are not modelled); global batch: the script's per_device_batch_size on one "
    "slice of the README's first row ({script})"
)

# The models served today (podsim/data/reference/serving_measurements.md md.1-md.7): dimensions from
# the released checkpoints' config.json as TensorRT-LLM's performance overview v0.11.0 lists them
# ([TRTLLM-V011] NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md), or the row's code source
TRTLLM_V011 = "[TRTLLM-V011] NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md (v0.11.0)"
LLAMA2_SMALL = (
    "Touvron et al., 'Llama 2', 2023, Table 1 (context 4k; grouped-query attention only in 34B and 70B) and §2.2 "
    "(global batch 4M tokens = 1024 x 4096); dimensions: "
)
LLAMA2_7B_SOURCE = LLAMA2_SMALL + (
    "config.json of the released meta-llama/Llama-2-7b-hf as in " + TRTLLM_V011 + " (32 layers, hidden 4096, 32 heads, "
    "32 KV heads, intermediate 11008, vocab 32000; serving_measurements.md md.1)"
)
LLAMA2_13B_SOURCE = LLAMA2_SMALL + (
    "AI-Hypercomputer/jetstream-pytorch@c8bb6119a388d66bc8936d7c03cb49e4be01f407:jetstream_pt/third_party/llama/"
    "model_args.py 'llama-2-13b' (40 layers, dim 5120, 40 heads, multiple_of 256, vocab 32000) with Llama's hidden-width "
    "rule int(2 x 4 x 5120 / 3) = 13653 rounded up to 256 = 13824 (serving_measurements.md md.2)"
)
LLAMA3 = (
    "config.json of the released meta-llama/Meta-Llama-3-{size} as in " + TRTLLM_V011 + " ({dims}; serving_measurements.md "
    "{row}); context 8,192 tokens (Meta's Llama 3 release: trained on sequences of 8,192 tokens); training batch of "
    "this size not published: podsim's choice 512 x 8192 (4M tokens, Llama 2's)"
)
LLAMA3_8B_SOURCE = LLAMA3.format(size="8B", row="md.3", dims="32 layers, hidden 4096, 32 heads, 8 KV heads, intermediate "
                                 "14336, vocab 128256")
LLAMA3_70B_SOURCE = LLAMA3.format(size="70B", row="md.4", dims="80 layers, hidden 8192, 64 heads, 8 KV heads, "
                                  "intermediate 28672, vocab 128256")
MISTRAL_SOURCE = (
    "Jiang et al., 'Mistral 7B', arXiv:2310.06825, Table 1 and the config.json of the released mistralai/Mistral-7B-v0.1 "
    "as in " + TRTLLM_V011 + " (32 layers, dim 4096, 32 heads x 128, 8 KV heads, hidden 14336, vocab 32000; "
    "serving_measurements.md md.7). Sliding-window attention (window 4096, context_len 8192) is not modelled: seq_len "
    "4096 = the window, where full causal attention is what the model computes; a longer context is charged full "
    "attention and KV (more than the model does). Training batch not published: podsim's choice 1024 x 4096"
)
GPTJ_SOURCE = (
    "mlcommons/inference_results_v3.1@ba621a0d11e5dff0eeed1148efd80571f7acc554 closed/Google/code/gptj-99/params/gptj.py, "
    "class GPTJ (28 layers, model dims 4096, 16 heads x 256, hidden 4 x 4096, GELU, vocabulary 50401, parallel attention "
    "and MLP on one layer norm), as podsim.validation.serving.GPTJ_DIMS and serving_measurements.md md.6 (TensorRT-LLM's "
    "config: vocab 50400); EleutherAI/gpt-j-6b model card (n_ctx 2048, rotary on 64 dims of each head, vocab 50257/50400, "
    "402B tokens over 383,500 steps: 1.05M tokens = 512 x 2048 a step). Biases counted on attention too (GPT-J has none "
    "there: 16,384 parameters a layer) and two norms a layer (GPT-J's parallel block has one)"
)
GEMMA_SOURCE = (
    "Gemma Team, 'Gemma: Open Models Based on Gemini Research and Technology', 2024, §2 (multi-head attention in 7B, "
    "RoPE, GeGLU, RMSNorm, embeddings shared between input and output, context 8192) and "
    "AI-Hypercomputer/jetstream-pytorch@c8bb6119a388d66bc8936d7c03cb49e4be01f407:jetstream_pt/third_party/gemma/config.py "
    "(GemmaConfig = 7b: 28 layers, hidden 3072, 16 heads x head_dim 256, 16 KV heads, intermediate 24576, vocab 256000; "
    "serving_measurements.md md.5). GeGLU is costed as the 3-matrix gated MLP ('swiglu'): the same shapes, FLOPs and "
    "bytes. Training batch not published: podsim's choice 512 x 8192"
)
