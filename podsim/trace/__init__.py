"""Training-step traces: the op DAG model, a model-driven generator, and importers.

- model.py     the contract with the step-time engine: StepTrace of Compute, Collective and
               SendRecv ops with dependencies;
- native.py    podsim's JSON/YAML trace format (versioned, validated), atomic writes;
- configs.py   model presets (gpt3-175b, llama2-70b, mixtral-8x7b, resnet50) with sources;
- mesh.py      parallelism plans and their mapping onto slice axes (as jax's mesh_utils);
- generate.py  the generator: checks a request, builds its program, maps it onto the slice;
               transformer.py (data, FSDP, tensor, sequence, pipeline 1F1B, expert parallelism),
               resnet.py (the data-parallel CNN program, distributed batch norm), costs.py
               (per-chip FLOPs, bytes, matmuls), builder.py (program order, logical -> slice
               groups), memory.py (HBM footprint per chip), options.py (GenerateOptions) and
               defaults.py (the defaults that depend on plan and chip, with their sources);
- plans.py     default and templated parallelism plans for a slice; how a plan splits the batch;
- kinds.py     the accepted spellings of collective kinds and algorithms;
- chakra.py    Chakra execution traces (.et protobuf, any vintage via chakra_wire.py, and
               JSON), one file per rank; chakra_export.py writes them;
- astra.py     ASTRA-sim 1.0 text workloads (astra_network.py: their network configs);
- load.py      `load_trace`: any supported file -> validated StepTrace; `summarize_trace`.

Typical use::

    from podsim.trace import generate_trace, load_trace, save_trace
    trace = generate_trace("gpt3-175b", "8x16x16", "data=8,fsdp=16,tensor=16")
    save_trace(trace, "gpt3.json")
    same = load_trace("gpt3.json", shape=(8, 16, 16))
"""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.trace.configs import PRESETS
    from podsim.trace.generate import generate_trace
    from podsim.trace.load import load_trace
    from podsim.trace.model import StepTrace
    from podsim.trace.native import save_trace
    from podsim.trace.options import GenerateOptions

__all__ = ["GenerateOptions", "PRESETS", "StepTrace", "generate_trace", "load_trace", "save_trace"]

lazy_face(__name__)
