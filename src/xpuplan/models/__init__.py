"""Model architectures and the preset catalog.

``get_model(name)`` resolves a preset id, an alias, or a local file (HF ``config.json`` or a
preset-format YAML); ``list_models()`` returns every preset; ``load_hf_config(path)`` imports a
Hugging Face config without touching the network.
"""

from xpuplan.models.arch import MLAConfig, ModelArch, MoEConfig, Published, PublishedCount
from xpuplan.models.hf_import import load_hf_config
from xpuplan.models.presets import (
    ModelCatalog,
    build_model_catalog,
    get_model,
    list_models,
    load_model_catalog,
    load_model_file,
    load_model_path,
)

__all__ = [
    "MLAConfig",
    "ModelArch",
    "ModelCatalog",
    "MoEConfig",
    "Published",
    "PublishedCount",
    "build_model_catalog",
    "get_model",
    "list_models",
    "load_hf_config",
    "load_model_catalog",
    "load_model_file",
    "load_model_path",
]
