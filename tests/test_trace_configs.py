"""The presets of the models people serve (podsim.trace.configs): parameter counts from their shapes
against the published sizes, the serving validation serving the same presets, and `podsim serve`
running one by name."""

from __future__ import annotations

import json

import pytest
from helpers import run_podsim

from podsim.trace.configs import PRESETS, TransformerConfig

# Published sizes, embeddings counted as the model cards count them (input embedding and an untied
# LM head each once; Gemma's shared one once):
PUBLISHED_PARAMS = {
    # Hugging Face's parameter count of the released safetensors checkpoints (meta-llama/Llama-2-7b-hf
    # 6.74B, Llama-2-13b-hf 13.0B; the Llama 2 paper rounds them to 7B and 13B)
    "llama2-7b": 6.74e9,
    "llama2-13b": 13.0e9,
    # the same for meta-llama/Meta-Llama-3-8B (8.03B) and Meta-Llama-3-70B (70.6B)
    "llama3-8b": 8.03e9,
    "llama3-70b": 70.6e9,
    # the same for mistralai/Mistral-7B-v0.1 (7.24B; the paper's abstract says 7.3B)
    "mistral-7b": 7.24e9,
    # EleutherAI/gpt-j-6b model card: n_parameters 6,053,381,344
    "gptj-6b": 6.053e9,
    # Gemma report, Table 2 (7B): 786,825,216 embedding + 7,751,248,896 non-embedding parameters
    "gemma-7b": 786_825_216 + 7_751_248_896,
}


@pytest.mark.parametrize("name", list(PUBLISHED_PARAMS))
def test_served_presets_have_their_published_size(name):
    """Counted layer by layer from the shapes (no fitted constant), within 2% of the published size."""
    cfg = PRESETS[name]
    assert isinstance(cfg, TransformerConfig) and cfg.name == name
    assert cfg.params == pytest.approx(PUBLISHED_PARAMS[name], rel=0.02)


def test_gemma_non_embedding_parameters_are_the_reports_exactly():
    """Gemma's 16 heads x 256 on d_model 3072 (attention 4096 wide) and its gated MLP of three
    24576-wide matrices give the report's 7,751,248,896 non-embedding parameters to the unit (the
    embedding differs: the report's table holds 256,128 rows, the config's vocab is 256,000)."""
    g = PRESETS["gemma-7b"]
    assert g.d_head == 256 and g.n_heads * g.d_head == 4096 and g.mlp_matrices == 3 and g.tied_embeddings
    assert g.params - g.vocab * g.d_model == 7_751_248_896


def test_served_presets_cite_their_row_and_say_what_podsim_chose():
    """Each source names its serving_measurements.md row; a batch the paper does not publish is said
    to be podsim's choice; the published ones (Llama 2's 4M tokens, GPT-J's 383,500 steps) are cited."""
    rows = {"llama2-7b": "md.1", "llama2-13b": "md.2", "llama3-8b": "md.3", "llama3-70b": "md.4", "gemma-7b": "md.5",
            "gptj-6b": "md.6", "mistral-7b": "md.7"}
    for name, row in rows.items():
        src = PRESETS[name].source
        assert f"serving_measurements.md {row}" in src, name
        published = name.startswith("llama2") or name == "gptj-6b"
        assert ("podsim's choice" in src) != published, name
    assert PRESETS["llama2-7b"].tokens_per_step == PRESETS["llama2-13b"].tokens_per_step == 1024 * 4096
    assert "window" in PRESETS["mistral-7b"].source and PRESETS["mistral-7b"].seq_len == 4096


def test_the_serving_rows_serve_the_presets():
    """The serving table's rows name presets (no model spelled out beside them), and the preset
    GPT-J is the Saxml rows' GPTJ_DIMS field for field, so both tables run one model."""
    from podsim.validation.serving import GPTJ_DIMS
    from podsim.validation.serving_rows import ALL_ROWS

    models = {r.config["model"].get("model") for r in ALL_ROWS}
    assert all("dims" not in r.config["model"] for r in ALL_ROWS)
    assert {"llama2-7b", "llama3-8b", "llama3-70b", "gptj-6b"} <= models <= set(PRESETS)
    gptj = PRESETS["gptj-6b"]
    assert {k: getattr(gptj, k) for k in GPTJ_DIMS} == GPTJ_DIMS and gptj.parallel_block


def test_podsim_serve_runs_llama3_8b_on_one_h100(capsys):
    """`podsim serve -g gpu-h100 --slice 1 --model llama3-8b` was refused (no such preset); it runs,
    and the chip holds the model's 8.03 B parameters at one byte each in fp8 (norms in bf16)."""
    code, out, err = run_podsim(capsys, "serve", "-g", "gpu-h100", "--slice", "1", "--model", "llama3-8b", "--weights", "fp8",
                                "--kv-cache", "fp8", "--rate", "2/s", "--duration", "10s", "--prompt", "fixed:512",
                                "--output", "fixed:64", "--json")
    assert code == 0, err
    m = json.loads(out)["metrics"]
    assert m["model"] == "llama3-8b" and m["requests"] > 0 and m["requests_completed"] == m["requests"]
    assert m["weight_bytes_per_chip"] == pytest.approx(8.03e9, rel=1e-3)
    assert m["ttft_p50_s"] > 0 and m["tpot_p50_s"] > 0
