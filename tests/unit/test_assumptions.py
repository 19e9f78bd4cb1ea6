"""``Assumptions``: an explicit, frozen input with provenance; validated overrides; planners that
take it as an argument and never read the environment, files or the store."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from xpuplan.catalog import load_catalog
from xpuplan.catalog.assumptions import (
    DATA_DIR,
    ENV_ASSUMPTIONS_PATH,
    Assumptions,
    build_assumptions,
    default_assumptions,
    load_assumptions,
)
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.perf.roofline import cost_gemm, op_time
from xpuplan.serve import estimate as estimate_serving
from xpuplan.serve import make_replica
from xpuplan.train import Cluster, estimate, make_plan
from xpuplan.workload import TrainingJob

SRC = Path(__file__).resolve().parents[2] / "src" / "xpuplan"
H100 = "nvidia-h100-sxm-80gb"


def dev(name: str):
    return load_catalog().get(name)


# -- the built-in bundle ----------------------------------------------------------------------------
def test_default_assumptions_come_from_package_data_once() -> None:
    a = default_assumptions()
    assert a is default_assumptions()  # parsed once per process
    assert a.files == () and a.calibrations == {} and a.overridden == {}
    assert {"nvlink", "hccs", "infiniband", "pcie"} <= set(a.link_types)
    assert {"vllm", "trtllm", "mindie"} <= set(a.engines)
    assert a.state_recipe("bf16-adam").total == 16
    assert H100 in a.comparison_set
    for name in ("efficiency", "link_types", "engines", "state_recipes", "comparison_set"):
        assert (DATA_DIR / f"{name}.yaml").is_file()


def test_default_assumptions_ignore_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text("link_types:\n  nvlink:\n    bus_bw_fraction: 0.5\n")
    monkeypatch.setenv(ENV_ASSUMPTIONS_PATH, str(f))
    assert default_assumptions().link_type("nvlink").bus_bw_fraction == 0.80
    assert Cluster.from_catalog(H100, 8).scale_up.bus_bw_fraction == 0.80
    loaded = load_assumptions()  # the entry point jobs call reads the variable
    assert loaded.link_type("nvlink").bus_bw_fraction == 0.5
    assert loaded.link_type("nvlink").source == f"user override ({f})" and loaded.files == (str(f),)


# -- provenance -------------------------------------------------------------------------------------
def test_every_efficiency_value_says_where_it_came_from() -> None:
    a = default_assumptions()
    h100 = a.efficiency_provenance(dev("H100"))
    assert h100["gemm_peak_fraction"] == "family:nvidia-hopper" and h100["gemm_half_dim"] == "defaults"
    assert h100["scale_up_bw_fraction"] == "link type"  # decided by the link type
    assert a.efficiency(dev("H100")).source == "family:nvidia-hopper"
    npu = a.efficiency_provenance(dev("910B"))
    assert npu["gemm_peak_fraction"] == "family:huawei-ascend" and npu["low_precision_factor"] == "defaults"
    assert npu["memory_bw_fraction"] == "family:npu-cn"  # the broad family the specific one refines
    assert a.efficiency_provenance(dev("A100"))["gemm_peak_fraction"] == "defaults"

    fitted = a.efficiency(dev("H100")).merged({"gemm_peak_fraction": 0.5}, "calibration:#7 for test")
    cal = a.with_calibration({H100: fitted})
    assert cal.efficiency(dev("H100")).source == "calibration:#7 for test"
    assert cal.efficiency_provenance(dev("H100"))["gemm_peak_fraction"] == "calibration:#7 for test"
    assert cal.efficiency(dev("A100")) == a.efficiency(dev("A100"))  # other devices untouched
    assert a.calibrations == {}  # frozen: the original is unchanged

    mine = cal.with_overrides({"efficiency": {"devices": {"H100": {"memory_bw_fraction": 0.6}},
                                              "defaults": {"gemm_half_dim": 100}}})
    prov = mine.efficiency_provenance(dev("H100"))
    assert prov["memory_bw_fraction"] == "user override"  # the user's value wins over the calibration
    assert prov["gemm_peak_fraction"] == "calibration:#7 for test"
    assert mine.efficiency(dev("H100")).memory_bw_fraction == 0.6
    assert mine.efficiency(dev("H100")).source == "calibration:#7 for test + user override"
    assert mine.efficiency_provenance(dev("A100"))["gemm_half_dim"] == "user override"
    assert mine.efficiency(dev("A100")).gemm_half_dim == 100


def test_link_types_engines_and_recipes_carry_their_source() -> None:
    a = default_assumptions().with_overrides({
        "link_types": {"nvlink": {"latency_us": 3.0}},
        "engines": {"vllm": {"step_overhead_ms": 1.0}},
        "state_recipes": {"my-adam": {"weights_bytes_per_param": 2, "grads_bytes_per_param": 2,
                                      "master_bytes_per_param": 4, "optimizer_bytes_per_param": 4,
                                      "description": "Adam with bf16 moments"}},
        "comparison_set": [H100, "nvidia-a100-sxm-80gb"],
    })
    assert a.link_type("nvlink").source == "user override" and a.link_type("nvlink").latency_s == pytest.approx(3e-6)
    assert a.link_type("nvlink").bus_bw_fraction == 0.80  # fields not given keep the built-in value
    assert a.link_type("infiniband").source == "defaults"
    assert a.engine("vLLM 0.6").step_overhead_s == pytest.approx(1e-3) and a.engine("vllm").source == "user override"
    assert a.engine("sglang").source == "defaults"
    assert a.state_recipe("my-adam").total == 12 and a.state_recipe("bf16-adam").source == "defaults"
    assert a.comparison_set == (H100, "nvidia-a100-sxm-80gb")
    assert set(a.overridden) == {"link_types.nvlink.latency_us", "engines.vllm.step_overhead_ms",
                                 "state_recipes.my-adam.weights_bytes_per_param",
                                 "state_recipes.my-adam.grads_bytes_per_param",
                                 "state_recipes.my-adam.master_bytes_per_param",
                                 "state_recipes.my-adam.optimizer_bytes_per_param",
                                 "state_recipes.my-adam.description", "comparison_set"}
    used = a.used(devices=[dev("H100")], link_types=["nvlink"], engines=["vllm"], state_recipes=["my-adam"])
    assert used["link_types"]["nvlink"]["source"] == "user override"
    hopper = default_assumptions().efficiency_layers.families["nvidia-hopper"].gemm_peak_fraction
    assert used["efficiency"][H100]["gemm_peak_fraction"] == {"value": hopper, "source": "family:nvidia-hopper"}
    json.dumps(used)
    json.dumps(a.to_dict())
    assert a.fingerprint != default_assumptions().fingerprint
    assert default_assumptions().with_overrides({}).fingerprint == default_assumptions().fingerprint
    assert build_assumptions() == default_assumptions() and hash(build_assumptions()) == hash(default_assumptions())
    assert a != default_assumptions()


def test_engine_versions_are_data() -> None:
    a = default_assumptions()
    assert not a.engine("TensorRT-LLM v0.6.1").gqa_shared_kv_load  # before XQA (v0.8)
    assert a.engine("TensorRT-LLM v0.9.0").gqa_shared_kv_load
    later = a.with_overrides({"engines": {"trtllm": {"min_versions": {"gqa_shared_kv_load": "0.10"}}}})
    assert not later.engine("TensorRT-LLM v0.9.0").gqa_shared_kv_load


def test_engine_host_cost_per_request_is_overridable_data() -> None:
    a = default_assumptions()
    assert a.engine("vLLM 0.10.2").host_s_per_sequence == pytest.approx(9e-6)
    mine = a.with_overrides({"engines": {"vllm": {"host_us_per_sequence": 4.0,
                                                  "min_versions": {"async_scheduling": "0.10"}}}})
    assert mine.engine("vLLM 0.10.2").host_s_per_sequence == pytest.approx(4e-6)
    assert mine.engine("vLLM 0.10.2").async_scheduling  # the user says their build overlaps scheduling
    used = mine.used(engines=["vLLM 0.10.2"])["engines"]["vllm"]
    assert used["host_s_per_sequence"] == pytest.approx(4e-6) and used["async_scheduling"] is True


# -- validation of overrides ------------------------------------------------------------------------
@pytest.mark.parametrize(("overrides", "field"), [
    ({"linktypes": {}}, "linktypes"),
    ({"link_types": {"nvlink": {"bus_bw_frac": 0.5}}}, "link_types.nvlink.bus_bw_frac"),
    ({"link_types": {"nvlink": {"bus_bw_fraction": 1.5}}}, "link_types.nvlink.bus_bw_fraction"),
    ({"link_types": {"carrier-pigeon": {"bus_bw_fraction": 0.1}}}, "link_types.carrier-pigeon.latency_us"),
    ({"efficiency": {"defaults": {"gemm_peak_fraction": 0}}}, "efficiency.defaults.gemm_peak_fraction"),
    ({"efficiency": {"devices": {"H100": {"kernel_overhead_s": -1}}}}, "efficiency.devices.H100.kernel_overhead_s"),
    ({"efficiency": {"families": {"tpu": {"memory_bw_fraction": 2}}}}, "efficiency.families.tpu.memory_bw_fraction"),
    ({"engines": {"vllm": {"gpu_memory_fraction": 1.2}}}, "engines.vllm.gpu_memory_fraction"),
    ({"engines": {"vllm": {"step_overhead_ms": "no-such-overhead"}}}, None),
    ({"engines": {"vllm": {"host_us_per_sequence": "no-such-overhead"}}}, None),
    ({"engines": {"vllm": {"host_us_per_sequence": -1}}}, "engines.vllm.host_us_per_sequence"),
    ({"state_recipes": {"bf16-adam": {"master_bytes_per_param": -4}}}, "state_recipes.bf16-adam.master_bytes_per_param"),
    ({"comparison_set": []}, "comparison_set"),
    ({"link_types": {"nvlink": {"latency_us": float("inf")}}}, "link_types.nvlink.latency_us"),
    ({"efficiency": {"defaults": {"gemm_half_dim": float("nan")}}}, "efficiency.defaults.gemm_half_dim"),
    ({"link_types": {"nvlink": 5}}, "link_types.nvlink"),
    (["not", "a", "mapping"], "assumptions"),
])
def test_overrides_are_validated_and_errors_name_the_field(overrides: object, field: str | None) -> None:
    with pytest.raises(UserInputError) as err:
        default_assumptions().with_overrides(overrides)  # type: ignore[arg-type]
    if field is not None:
        assert err.value.field == field, err.value
    else:
        assert "no-such-overhead" in str(err.value)


def test_override_file_errors_name_file_line_and_field(tmp_path: Path) -> None:
    f = tmp_path / "over.yaml"
    f.write_text("link_types:\n  nvlink:\n    latency_us: 4\n    bus_bw_fraction: 7\n")
    with pytest.raises(UserInputError) as err:
        load_assumptions([f])
    assert (err.value.file, err.value.line, err.value.field) == (str(f), 4, "link_types.nvlink.bus_bw_fraction")
    f.write_text("efficiency:\n  defaults:\n    gemm_peak_fractoin: 0.7\n")
    with pytest.raises(UserInputError) as err:
        load_assumptions([f])
    assert (err.value.line, err.value.field) == (3, "efficiency.defaults.gemm_peak_fractoin")
    f.write_text("engines:\n  vllm:\n    host_us_per_sequence: -3\n")  # a number-or-name field
    with pytest.raises(UserInputError) as err:
        load_assumptions([f])
    assert (err.value.line, err.value.field) == (3, "engines.vllm.host_us_per_sequence")
    f.write_text("")
    with pytest.raises(UserInputError, match="empty"):
        load_assumptions([f])


def test_data_file_errors_name_file_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "link_types.yaml"
    bad.write_text((DATA_DIR / "link_types.yaml").read_text().replace("latency_us: 15.0", "latency_us: -15.0"))
    with pytest.raises(UserInputError) as err:
        build_assumptions(link_types=bad)
    line = next(i for i, t in enumerate(bad.read_text().splitlines(), 1) if "-15.0" in t)
    assert (err.value.file, err.value.line, err.value.field) == (str(bad), line, "link_types.infiniband.latency_us")
    engines = tmp_path / "engines.yaml"
    engines.write_text((DATA_DIR / "engines.yaml").read_text().replace("engine: sglang}", "engine: sglng}"))
    with pytest.raises(UserInputError, match="sglng") as err:
        build_assumptions(engines=engines)
    assert err.value.file == str(engines)


# -- planners take assumptions, never fetch them ----------------------------------------------------
def _train(a: Assumptions | None):
    model = get_model("llama3-8b")
    cluster = Cluster.from_catalog("H100", 16, assumptions=a)
    plan = make_plan(n_devices=16, global_batch_seqs=128, tp=2, micro_batch=1, model=model)
    return estimate(model, cluster, plan, TrainingJob(seq_len=4096, global_batch_tokens=128 * 4096))


def _serve(a: Assumptions | None):
    rep = make_replica(get_model("llama3-8b"), dev("H100"), tp=1, assumptions=a)
    return estimate_serving(rep, input_len=1024, output_len=256, batch=16)


def test_explicit_default_assumptions_give_identical_results() -> None:
    a = default_assumptions()
    assert _train(a).to_dict() == _train(None).to_dict()
    assert _serve(a).to_dict() == _serve(None).to_dict()
    gemm = cost_gemm(4096, 4096, 4096)
    assert op_time(gemm, dev("H100"), assumptions=a) == op_time(gemm, dev("H100"))
    # a rebuilt bundle (same files, new object) gives the same results as the cached one
    assert _train(build_assumptions()).to_dict() == _train(None).to_dict()


def test_a_calibration_handed_in_changes_results_without_any_store() -> None:
    a = default_assumptions()
    slow = a.efficiency(dev("H100")).merged({"gemm_peak_fraction": 0.3, "memory_bw_fraction": 0.4},
                                            "calibration:#42 for test")
    cal = a.with_calibration({H100: slow})
    base_t, cal_t = _train(None), _train(cal)
    assert cal_t.step.step_s > 1.5 * base_t.step.step_s and cal_t.efficiency_source == "calibration:#42 for test"
    base_s, cal_s = _serve(None), _serve(cal)
    assert cal_s.tpot_s > 1.5 * base_s.tpot_s and cal_s.efficiency_source == "calibration:#42 for test"
    assert Cluster.from_catalog("H100", 8, assumptions=cal).to_dict()["efficiency_source"] == "calibration:#42 for test"
    gemm = cost_gemm(8192, 8192, 8192)
    assert op_time(gemm, dev("H100"), assumptions=cal).time_s > op_time(gemm, dev("H100")).time_s


def test_overrides_reach_the_planners() -> None:
    a = default_assumptions().with_overrides({"link_types": {"nvlink": {"bus_bw_fraction": 0.4}},
                                              "engines": {"vllm": {"block_size_tokens": 32}}})
    c = Cluster.from_catalog("H100", 8, assumptions=a)
    assert c.scale_up.bus_bw_fraction == 0.4 and c.assumptions is a
    assert make_replica(get_model("llama3-8b"), dev("H100"), engine="vllm", assumptions=a).block_size_tokens == 32
    with pytest.raises(UserInputError) as err:
        Cluster.from_catalog("H100", 8, scale_out_kind="carrier-pigeon", assumptions=a)
    assert err.value.field == "scale_out_kind"


def test_old_module_level_tables_are_read_only_views_of_the_defaults() -> None:
    from xpuplan.perf.collectives import LINK_TYPES, link_type
    from xpuplan.perf.efficiency import Efficiency as OldEfficiency
    from xpuplan.perf.efficiency import efficiency_for
    from xpuplan.perf.memory import STATE_RECIPES
    from xpuplan.serve.constants import CPP_RUNTIME_STEP_OVERHEAD_S, ENGINES, engine_profile

    a = default_assumptions()
    assert LINK_TYPES["nvlink"] is a.link_types["nvlink"] and link_type("hccs") is a.link_type("hccs")
    assert dict(ENGINES) == dict(a.engines) and dict(STATE_RECIPES) == dict(a.state_recipes)
    assert engine_profile("TensorRT-LLM") is a.engines["trtllm"]
    assert CPP_RUNTIME_STEP_OVERHEAD_S == pytest.approx(2e-3)
    assert efficiency_for(dev("910B")) == a.efficiency(dev("910B")) and isinstance(a.efficiency(dev("910B")), OldEfficiency)
    with pytest.raises(TypeError):
        LINK_TYPES["nvlink"] = LINK_TYPES["pcie"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.link_types["nvlink"].bus_bw_fraction = 1.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        link_type("carrier-pigeon")


PLANNER_PACKAGES = ("perf", "train", "serve")
FORBIDDEN_MODULES = ("os", "xpuplan.store", "xpuplan.calibration", "xpuplan.calibrate", "xpuplan.bench", "xpuplan.jobs")
FORBIDDEN_CALLS = ("getenv", "environ", "read_text", "open")


def _planner_files() -> list[Path]:
    return sorted(f for pkg in PLANNER_PACKAGES for f in (SRC / pkg).rglob("*.py"))


def _offences(source: str, label: str) -> list[str]:
    """Imports of forbidden modules and uses of env/file access in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source, label)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [n.name for n in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        out += [f"{label}:{node.lineno} imports {name}" for name in names
                if any(name == m or name.startswith(m + ".") for m in FORBIDDEN_MODULES)]
        if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_CALLS:
            out.append(f"{label}:{node.lineno} uses .{node.attr}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            out.append(f"{label}:{node.lineno} calls {node.func.id}()")
    return out


def test_planner_modules_never_import_os_the_store_or_read_files() -> None:
    files = _planner_files()
    assert len(files) > 10
    problems = [p for f in files for p in _offences(f.read_text(encoding="utf-8"), str(f.relative_to(SRC)))]
    assert not problems, "\n".join(problems)


def test_the_purity_check_would_catch_an_offender() -> None:
    code = ("import os\nfrom xpuplan.store.calibrations import x\nimport xpuplan.calibrate.profile\n"
            "v = os.environ.get('X')\nopen('f')\n")
    assert len(_offences(code, "bad.py")) == 5


# -- documentation and fit scripts ------------------------------------------------------------------
def test_the_documented_override_file_is_valid(tmp_path: Path) -> None:
    import re

    text = (SRC.parents[1] / "docs" / "assumptions.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(schema_version: 1.*?)```", text, re.S)
    assert block, "docs/assumptions.md has no override example"
    f = tmp_path / "site.yaml"
    f.write_text(block.group(1))
    a = load_assumptions([f])
    assert a.link_type("my-fabric").bus_bw_fraction == 0.6 and a.link_type("roce").latency_s == pytest.approx(25e-6)
    assert a.efficiency(dev("H100")).gemm_peak_fraction == 0.70
    assert a.efficiency(dev("910B")).gemm_peak_fraction == 0.65
    assert a.state_recipe("bf16-adam-bf16-moments").total == 12
    assert a.comparison_set == ("nvidia-h100-sxm-80gb", "huawei-ascend-910b")


def test_the_serving_fit_script_writes_the_data_file(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("infer_fit", SRC.parents[1] / "benchmarks" / "infer_fit.py")
    assert spec and spec.loader
    infer_fit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(infer_fit)
    target = tmp_path / "engines.yaml"
    original = (DATA_DIR / "engines.yaml").read_text(encoding="utf-8")
    target.write_text(original, encoding="utf-8")
    changes = infer_fit.write_engines(target, {"trtllm": 2.5, "vllm": 1.0}, default_assumptions())
    assert changes == ["shared_overheads.cpp-runtime-step.value_ms: 2.0 -> 2.5"]  # vllm's is an assumption
    a = build_assumptions(engines=target)
    assert a.engine("trtllm").step_overhead_s == pytest.approx(2.5e-3)
    assert a.engine("lmdeploy").step_overhead_s == pytest.approx(2.5e-3)  # shares the fitted overhead
    assert a.engine("vllm").step_overhead_s == pytest.approx(2.0e-3)
    written = target.read_text(encoding="utf-8")
    assert len(written.splitlines()) == len(original.splitlines()) and "# Default block (page) sizes" in written
    assert infer_fit.write_engines(target, {"trtllm": 2.5}, a) == []


def test_an_overrides_file_changes_and_adds_training_stacks(tmp_path):
    from xpuplan.catalog.assumptions import default_assumptions

    f = tmp_path / "stacks.yaml"
    f.write_text("training_stacks:\n  nemo: {ep_overlap: 0.5}\n  Our-Fork:\n    name: fork\n"
                 "    sequence_parallel: true\n    tp_comm_overlap: true\n    p2p_overlap: true\n"
                 "    zero3_granularity: bucket\n    sources: [our scripts]\n")
    a = default_assumptions().with_overrides_file(f)
    assert a.training_stack("nemo").ep_overlap == 0.5
    assert a.training_stack("nemo").tp_comm_overlap is True  # untouched fields keep the built-in value
    fork = a.training_stack("our-fork")
    assert fork.id == "our-fork" and fork.tp_comm_overlap
    assert a.overridden["training_stacks.nemo.ep_overlap"].startswith("user override")
    assert default_assumptions().training_stack("nemo").ep_overlap != 0.5  # the built-in bundle is unchanged
    assert a.fingerprint != default_assumptions().fingerprint


def test_a_bad_training_stack_override_names_the_field(tmp_path):
    from xpuplan.catalog.assumptions import default_assumptions
    from xpuplan.errors import UserInputError

    f = tmp_path / "stacks.yaml"
    f.write_text("training_stacks:\n  nemo: {ep_overlap: 1.5}\n")
    with pytest.raises(UserInputError) as e:
        default_assumptions().with_overrides_file(f)
    assert "training_stacks.nemo.ep_overlap" in e.value.render() and "stacks.yaml:2" in e.value.render()
    with pytest.raises(UserInputError) as e:
        default_assumptions().training_stack("nope", field="--stack")
    assert e.value.field == "--stack" and "megatron-core" in e.value.message


def test_train_estimate_runs_under_a_users_stack(tmp_path, monkeypatch):
    from xpuplan.jobs.context import RunContext
    from xpuplan.jobs.train import TrainEstimateRequest, train_estimate

    f = tmp_path / "stacks.yaml"
    f.write_text("training_stacks:\n  mine:\n    name: mine\n    sequence_parallel: true\n    tp_comm_overlap: true\n"
                 "    p2p_overlap: true\n    zero3_granularity: bucket\n    sources: [ours]\n")
    monkeypatch.setenv("XPUPLAN_ASSUMPTIONS_PATH", str(f))
    req = dict(model="llama3-70b", hw="H100", devices=64, tp=8, pp=2)
    mine = train_estimate(TrainEstimateRequest(**req, stack="mine"), RunContext())
    core = train_estimate(TrainEstimateRequest(**req, stack="megatron-core"), RunContext())
    assert mine.used.assumptions["training_stack"]["id"] == "mine"
    assert mine.step["tp_comm_s"] < core.step["tp_comm_s"]  # TP overlap on in the user's stack
