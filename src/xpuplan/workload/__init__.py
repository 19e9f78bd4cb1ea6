"""What the user wants done: training jobs (``workload.training``) and serving traffic (``workload.serving``)."""

from xpuplan.workload.serving import LengthDist, ServingScenario, load_serving_scenario
from xpuplan.workload.training import (
    DEFAULT_GLOBAL_BATCH_TOKENS,
    TrainingJob,
    TrainingScenario,
    load_training_scenario,
    parse_device_range,
)

__all__ = [
    "DEFAULT_GLOBAL_BATCH_TOKENS",
    "LengthDist",
    "ServingScenario",
    "TrainingJob",
    "TrainingScenario",
    "load_serving_scenario",
    "load_training_scenario",
    "parse_device_range",
]
