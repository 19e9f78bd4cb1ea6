"""A training stack runs only the model-parallel dimensions and ZeRO stages it has (``TrainingStack.parallelism``,
``zero_stages``): the search proposes no other plan, an explicit plan using one is refused naming the field, and a
validation row without a layout is predicted on a layout its stack can run."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from xpuplan.catalog.stacks import TrainingStack, training_stack
from xpuplan.cli.main import app
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.train import Cluster, estimate, make_plan
from xpuplan.train.plan import RECOMPUTE_MODES
from xpuplan.train.search import SearchSpace, search_plans, stack_space
from xpuplan.train.validity import rule_stack_parallelism
from xpuplan.validate.rows import read_rows
from xpuplan.validate.train_predictor import conventional_layout
from xpuplan.workload.training import TrainingJob


def _search(stack: str, space: SearchSpace | None = None, model: str = "llama2-70b", n: int = 64):
    return search_plans(get_model(model), Cluster.from_catalog("nvidia-h100-sxm-80gb", n),
                        TrainingJob(seq_len=4096, global_batch_tokens=4 * 1024 * 1024), space=space, top=20,
                        stack=training_stack(stack), require_feasible=False)


@pytest.mark.parametrize(("stack", "dims", "zeros"), [
    ("llm-foundry", (), (0, 2, 3)),
    ("fsdp", ("tp", "cp"), (0, 2, 3)),
    ("deepspeed", ("tp", "pp", "cp", "ep"), (0, 1, 2, 3)),
    ("megatron-lm-legacy", ("tp", "pp", "vpp"), (0, 1)),
    ("megatron-deepspeed-gaudi", ("tp", "pp", "ep"), (0, 1)),
    ("maxtext", ("tp", "pp", "vpp", "cp", "ep"), (0, 1, 3)),
])
def test_the_search_proposes_only_what_the_stack_runs(stack: str, dims: tuple[str, ...], zeros: tuple[int, ...]):
    res = _search(stack)
    assert res.top
    for e in res.top:
        p = e.plan
        for dim, size in (("tp", p.tp), ("pp", p.pp), ("vpp", p.vpp), ("cp", p.cp), ("ep", p.ep)):
            assert dim in dims or size == 1, (stack, e.key)
        assert p.zero_stage in zeros, (stack, e.key)


def test_megatron_core_keeps_every_dimension():
    space = SearchSpace()
    assert stack_space(space, training_stack("megatron-core")) is space
    full, fsdp_only = _search("megatron-core"), _search("llm-foundry")
    assert full.plans_evaluated > 10 * fsdp_only.plans_evaluated


def test_an_asked_dimension_the_stack_lacks_is_an_error_naming_it():
    with pytest.raises(UserInputError) as exc:
        _search("llm-foundry", SearchSpace(tp=(2, 4)))
    assert exc.value.field == "tp" and "llm-foundry" in exc.value.render()
    with pytest.raises(UserInputError) as exc:
        _search("deepspeed", SearchSpace(vpp=(2,)))
    assert exc.value.field == "vpp"
    with pytest.raises(UserInputError) as exc:
        _search("fsdp", SearchSpace(zero_stage=(1,)))
    assert exc.value.field == "zero_stage"
    # a restriction the stack can partly honour is narrowed, not refused
    assert stack_space(SearchSpace(tp=(1, 2), zero_stage=(1, 3)), training_stack("llm-foundry")) == SearchSpace(
        tp=(1,), pp=(1,), vpp=(1,), cp=(1,), ep=(1,), zero_stage=(3,),
        recompute=tuple(m for m in RECOMPUTE_MODES if m != "layer_offload"))  # Megatron-Core's alone


def test_an_explicit_plan_on_a_stack_without_its_dimension_is_refused():
    model, cluster = get_model("llama2-70b"), Cluster.from_catalog("nvidia-h100-sxm-80gb", 64)
    job = TrainingJob(seq_len=4096, global_batch_tokens=4 * 1024 * 1024)
    plan = make_plan(n_devices=64, global_batch_seqs=job.global_batch_seqs, tp=8, pp=4, vpp=2, zero_stage=1,
                     micro_batch=1)
    assert estimate(model, cluster, plan, job, stack=training_stack("megatron-core")).tokens_per_s > 0
    with pytest.raises(UserInputError) as exc:
        estimate(model, cluster, plan, job, stack=training_stack("deepspeed"))
    assert exc.value.field == "vpp"
    with pytest.raises(UserInputError) as exc:
        estimate(model, cluster, plan, job, stack=training_stack("fsdp"))
    assert exc.value.field == "pp"


def test_the_rule_names_the_first_missing_dimension_then_the_zero_stage():
    st = training_stack("llm-foundry")
    assert rule_stack_parallelism(st) is None
    assert rule_stack_parallelism(st, tp=2, pp=2).field == "tp"
    assert rule_stack_parallelism(st, zero_stage=1).field == "zero_stage"
    assert rule_stack_parallelism(training_stack("megatron-core"), tp=8, pp=8, vpp=4, cp=2, ep=8, zero_stage=3) is None


def test_a_stack_file_refuses_malformed_capabilities():
    base = training_stack("megatron-core").model_dump()
    for bad in ({"parallelism": ["tp", "tp"]}, {"parallelism": ["vpp"]}, {"parallelism": ["dp"]},
                {"zero_stages": [4]}, {"zero_stages": []}):
        with pytest.raises(ValidationError):
            TrainingStack.model_validate(base | bad)


def test_the_command_line_says_which_flag_the_stack_cannot_run():
    args = ["train", "search", "--model", "llama2-70b", "--hw", "H100", "--devices", "64", "--stack", "fsdp",
            "--pp", "4"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2
    assert "pp" in res.output and "fsdp" in res.output and "Traceback" not in res.output
    plan = CliRunner().invoke(app, ["train", "estimate", "--model", "llama2-70b", "--hw", "H100", "--devices", "64",
                                    "--stack", "deepspeed", "--tp", "8", "--pp", "4", "--vpp", "2"])
    assert plan.exit_code == 2 and "vpp" in plan.output and "Traceback" not in plan.output
    ok = CliRunner().invoke(app, ["train", "search", "--model", "llama2-70b", "--hw", "H100", "--devices", "64",
                                  "--stack", "deepspeed", "--top", "5", "--json"])
    assert ok.exit_code == 0
    assert all("-vpp1-" in p["key"] for p in json.loads(ok.output)["plans"])


def test_a_row_without_a_layout_on_an_fsdp_stack_is_predicted_without_model_parallelism(tmp_path):
    from xpuplan.validate.data_files import public_file

    src = public_file("training_public.csv")
    lines = src.read_text(encoding="utf-8").splitlines()
    head = lines[0].split(",")
    row = next(line for line in lines[1:] if line.startswith("MPT-05,"))
    rows = read_rows(src)
    mpt = next(r for r in rows if r.id == "MPT-05")
    assert mpt.get("tp") == 1  # the public row states FSDP only
    # the same row with its layout blanked: the conventional layout of an FSDP-only stack is tp 1, pp 1
    import csv
    import io

    cells = next(csv.reader(io.StringIO(row)))
    for col in ("tp", "pp"):
        cells[head.index(col)] = ""
    f = tmp_path / "rows.csv"
    buf = io.StringIO()
    csv.writer(buf).writerows([head, cells])
    f.write_text(buf.getvalue(), encoding="utf-8")
    assert conventional_layout(read_rows(f)[0]) == (1, 1)


def test_uneven_pipelines_only_where_the_stack_splits_layers_unevenly():
    """Llama 3.1 405B's 126 layers: pp 8 or 16 leaves uneven stages, which Megatron-Core runs and Intel's Gaudi
    scripts refuse ('HL_NUM_LAYERS must be divisible by PP')."""
    model, cluster = get_model("llama3.1-405b"), Cluster.from_catalog("intel-gaudi3", 512)
    job = TrainingJob(seq_len=8192, global_batch_tokens=4 * 1024 * 1024)
    gaudi = training_stack("megatron-deepspeed-gaudi")
    res = search_plans(model, cluster, job, space=SearchSpace(uneven_pipeline=True), top=20, stack=gaudi,
                       require_feasible=False)
    assert res.top and all(model.n_layers % (e.plan.pp * e.plan.vpp) == 0 for e in res.top)
    core = search_plans(model, cluster, job, space=SearchSpace(uneven_pipeline=True, pp=(8, 16)), top=20,
                        stack=training_stack("megatron-core"), require_feasible=False)
    assert core.top and any(model.n_layers % (e.plan.pp * e.plan.vpp) for e in core.top)
    plan = make_plan(n_devices=512, global_batch_seqs=job.global_batch_seqs, tp=8, pp=16, zero_stage=1, micro_batch=1,
                     model=model, uneven_pipeline=True)
    with pytest.raises(UserInputError) as exc:
        estimate(model, cluster, plan, job, uneven_pipeline=True, stack=gaudi)
    assert exc.value.field == "pp" and "divide evenly" in exc.value.render()
    assert estimate(model, cluster, plan, job, uneven_pipeline=True, stack=training_stack("megatron-core")).step_time_s > 0


def test_a_search_for_a_launch_command_proposes_only_what_its_framework_runs():
    """`--emit deepspeed`: the plans are DeepSpeed's (no virtual stages), whatever stack the physics runs under;
    without `--stack` on a device with no vendor stack, the physics is DeepSpeed's too. Without --emit the same
    search interleaves."""
    base = ["train", "search", "--model", "llama2-70b", "--hw", "H100", "--devices", "64", "--top", "10", "--json"]
    free = json.loads(CliRunner().invoke(app, base).output)
    assert free["used"]["assumptions"]["training_stack"]["id"] == "megatron-core"
    assert any("-vpp1-" not in p["key"] for p in free["plans"])
    ds = json.loads(CliRunner().invoke(app, [*base, "--emit", "deepspeed"]).output)
    assert ds["used"]["assumptions"]["training_stack"]["id"] == "deepspeed"
    assert ds["plans"] and all("-vpp1-" in p["key"] for p in ds["plans"])
    mc = json.loads(CliRunner().invoke(app, [*base, "--emit", "deepspeed", "--stack", "megatron-core"]).output)
    assert mc["used"]["assumptions"]["training_stack"]["id"] == "megatron-core"
    assert mc["plans"] and all("-vpp1-" in p["key"] for p in mc["plans"])
    # a device with its vendor's stack keeps it (Intel's Megatron-DeepSpeed on Gaudi)
    gaudi = json.loads(CliRunner().invoke(app, ["train", "search", "--model", "llama2-70b", "--hw", "gaudi2",
                                                "--devices", "64", "--top", "3", "--json", "--emit", "deepspeed"]).output)
    assert gaudi["used"]["assumptions"]["training_stack"]["id"] == "megatron-deepspeed-gaudi"


def test_deepspeed_pipelines_only_with_zero_0_or_1():
    """DeepSpeed's PipelineEngine asserts 'ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism'."""
    piped = _search("deepspeed", SearchSpace(tp=(8,), pp=(2,), zero_stage=(1, 3)))
    assert piped.top and all(e.plan.zero_stage == 1 for e in piped.top)
    flat = _search("deepspeed", SearchSpace(tp=(8,), pp=(1,), zero_stage=(3,)))
    assert flat.top and all(e.plan.zero_stage == 3 for e in flat.top)
    core = _search("megatron-core", SearchSpace(tp=(8,), pp=(2,), zero_stage=(3,)))
    assert core.top and all(e.plan.zero_stage == 3 for e in core.top)
    assert stack_space(SearchSpace(), training_stack("deepspeed")).pipeline_zero_stage == (0, 1)
    model, cluster = get_model("llama2-70b"), Cluster.from_catalog("nvidia-h100-sxm-80gb", 64)
    job = TrainingJob(seq_len=4096, global_batch_tokens=4 * 1024 * 1024)
    plan = make_plan(n_devices=64, global_batch_seqs=job.global_batch_seqs, tp=8, pp=2, zero_stage=3, micro_batch=1)
    with pytest.raises(UserInputError) as exc:
        estimate(model, cluster, plan, job, stack=training_stack("deepspeed"))
    assert exc.value.field == "zero_stage" and "pp 2" in exc.value.render()
    base = training_stack("deepspeed").model_dump()
    for bad in ({"pipeline_zero_stages": []}, {"pipeline_zero_stages": [1, 1]},
                {"zero_stages": [0, 1], "pipeline_zero_stages": [3]}):
        with pytest.raises(ValidationError):
            TrainingStack.model_validate(base | bad)
