"""The CLI, invoked as a user would, asserting on its output and exit status."""

import json

import pytest
from typer.testing import CliRunner

from xpuplan.cli.main import app

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def test_version():
    r = run("--version")
    assert r.exit_code == 0 and "xpuplan" in r.stdout


def test_hw_list_json_has_ids_vendor_kind():
    r = run("hw", "list", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["schema_version"] and out["used"] is None or isinstance(out["used"], dict)
    data = out["devices"]
    assert isinstance(data, list) and len(data) >= 40
    assert all({"id", "vendor", "kind"} <= set(d) for d in data)


def test_hw_list_filters():
    r = run("hw", "list", "--kind", "NPU", "--json")
    assert r.exit_code == 0
    assert {d["kind"] for d in json.loads(r.stdout)["devices"]} == {"NPU"}
    r = run("hw", "list", "--vendor", "Huawei", "--json")
    assert {d["vendor"] for d in json.loads(r.stdout)["devices"]} == {"Huawei"}
    r = run("hw", "list", "--kind", "FPGA")
    assert r.exit_code == 2 and "kind" in r.output


def test_hw_show_lists_sources_and_trust():
    r = run("hw", "show", "H100")
    assert r.exit_code == 0, r.output
    assert "nvidia-h100-sxm-80gb" in r.stdout
    assert "dense_tflops.bf16" in r.stdout
    r = run("hw", "show", "910B", "--json")
    d = json.loads(r.stdout)["device"]
    assert d["id"] == "huawei-ascend-910b"
    assert all("source" in f and "trust" in f for f in d["figures"].values())


def test_hw_unknown_id_suggests():
    r = run("hw", "show", "H10O")
    assert r.exit_code == 2
    assert "unknown hardware" in r.output and "did you mean" in r.output
    assert "Traceback" not in r.output


def test_hw_compare():
    r = run("hw", "compare", "H100", "910B", "MI300X")
    assert r.exit_code == 0, r.output
    assert "huawei-ascend-910b" in r.stdout and "amd-mi300x-192gb" in r.stdout
    assert run("hw", "compare", "H100").exit_code == 2


def test_model_list_and_show_json():
    r = run("model", "list", "--json")
    assert r.exit_code == 0, r.output
    ids = {m["id"] for m in json.loads(r.stdout)["models"]}
    assert {"llama3-70b", "deepseek-v3", "bert-base"} <= ids
    r = run("model", "show", "deepseek-v3", "--json")
    d = json.loads(r.stdout)
    assert d["id"] == "deepseek-v3"
    assert d["total_params"] == pytest.approx(671e9, rel=0.01)
    assert d["active_params"] == pytest.approx(37e9, rel=0.03)


def test_model_unknown():
    r = run("model", "show", "llama-9000")
    assert r.exit_code == 2 and "unknown model" in r.output


def test_memory_infer_guide_numbers():
    # the guide's 128K-token figure needs Llama 3.1's context: Llama 3 70B stops at 8,192 tokens
    refused = run("memory", "infer", "--model", "llama3-70b", "--context", "131072", "--json")
    assert refused.exit_code == 2 and "--context" in refused.output
    r = run("memory", "infer", "--model", "llama3.1-70b", "--context", "131072", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["bytes_per_replica"]["weights"] == pytest.approx(141e9, rel=0.01)
    assert d["bytes_per_replica"]["kv_cache_total"] / 2**30 == pytest.approx(40, rel=0.01)


def test_memory_infer_finds_tp():
    r = run("memory", "infer", "--model", "llama3-70b", "--hw", "H100", "--batch", "1", "--context", "2048", "--json")
    d = json.loads(r.stdout)
    # the serving planner's verdict: H100 has 80 GiB (85.9 GB); vLLM's 90% memory fraction leaves 77.3 GB,
    # room for 70.6 GB of weights per device at tp2 plus workspace and a short context (tp1: 141 GB, no)
    assert d["fits"] and d["tp"] == 2 and d["engine"]
    r = run("infer", "estimate", "--model", "llama3-70b", "--hw", "H100", "--tp", "2", "--in", "1024", "--out", "1024")
    assert r.exit_code == 0, r.output  # infer estimate agrees: tp2 fits
    r = run("infer", "estimate", "--model", "llama3-70b", "--hw", "H100", "--tp", "1", "--in", "1024", "--out", "1024")
    assert r.exit_code == 3  # tp1 does not


def test_memory_train_fit_verdict():
    r = run("memory", "train", "--model", "llama3-70b", "--hw", "H100", "--tp", "8", "--pp", "4", "--dp", "8", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["fits"] is True
    r = run("memory", "train", "--model", "llama3-70b", "--hw", "H100", "--json")
    assert r.exit_code == 3  # "does not fit" exits 3, as the README promises
    d = json.loads(r.stdout)
    assert d["error"] and d["result"]["fits"] is False


def test_memory_train_fp8_recipe_keeps_fp8_linear_inputs():
    # the default stack (Megatron-Core, Transformer Engine) keeps 1-byte linear inputs in FP8 training
    def acts(recipe: str) -> float:
        r = run("memory", "train", "--model", "llama3-70b", "--tp", "8", "--pp", "4", "--dp", "8", "--recipe", recipe,
                "--json")
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["bytes_per_device"]["activations"]

    assert acts("fp8-adam") < 0.95 * acts("bf16-adam")
    assert acts("bf16-adam-fp32-grads") == pytest.approx(acts("bf16-adam"))


def test_memory_train_under_dualpipe_agrees_with_the_estimate():
    """`memory train --stack deepseek-dualpipe` counts DualPipe's two stages per rank as `train estimate` does:
    DeepSeek-V3 as DeepSeek trained it (PP16 EP64, uneven: 61 layers; RMSNorm, MLA up-projections and the experts'
    SwiGLU output recomputed, arXiv 2412.19437 sec. 3.2.3 and 3.3.3)."""
    from xpuplan.catalog.stacks import training_stack
    from xpuplan.models import get_model
    from xpuplan.train import Cluster, estimate, make_plan
    from xpuplan.workload.training import TrainingJob

    modules = ("layernorm", "mla_up_proj", "moe_act")
    args = ("memory", "train", "--model", "deepseek-v3", "--hw", "H800", "--pp", "16", "--dp", "128", "--ep", "64",
            "--recipe", "fp8-adam", "--uneven-pipeline", "--recompute-modules", ",".join(modules), "--json")
    r = run(*args, "--stack", "deepseek-dualpipe")
    assert r.exit_code == 0, r.output
    dual = json.loads(r.stdout)
    assert dual["plan"]["pipeline_schedule"] == "dualpipe" and dual["fits"] is True
    r = run(*args, "--stack", "megatron-core")
    one = json.loads(r.stdout)
    assert one["plan"]["pipeline_schedule"] == "1f1b"
    assert dual["bytes_per_device"]["weights"] > 1.3 * one["bytes_per_device"]["weights"]
    m = get_model("deepseek-v3")
    plan = make_plan(n_devices=2048, global_batch_seqs=15360, pp=16, ep=64, zero_stage=1, precision="fp8",
                     recompute="selective", model=m, uneven_pipeline=True, micro_batch=1)
    e = estimate(m, Cluster.from_catalog("nvidia-h800-sxm-80gb", 2048), plan,
                 TrainingJob(seq_len=4096, global_batch_tokens=15360 * 4096, recompute_modules=modules),
                 stack=training_stack("deepseek-dualpipe"),
                 uneven_pipeline=True)
    assert dual["bytes_per_device"]["total"] == pytest.approx(e.memory.total_bytes, rel=1e-6)


@pytest.mark.parametrize(
    "args, field",
    [
        (("memory", "train", "--model", "llama3-70b", "--seq", "0"), "seq"),
        (("memory", "train", "--model", "llama3-70b", "--pp", "3"), "pp"),
        (("memory", "train", "--model", "llama3-70b", "--recompute", "some"), "recompute"),
        (("memory", "train", "--model", "llama3-70b", "--stack", "nosuch"), "--stack"),
        (("memory", "train", "--model", "llama3-70b", "--recompute", "partial", "--stack", "maxtext"), "--recompute"),
        (("memory", "train", "--model", "llama3-70b", "--recompute", "full", "--recompute-layers", "3"),
         "--recompute-layers"),
        (("train", "estimate", "--model", "llama3-70b", "--hw", "H100", "--devices", "32", "--tp", "8", "--pp", "4",
          "--recompute", "selective", "--recompute-layers", "3"), "--recompute-layers"),
        (("train", "estimate", "--model", "llama3-70b", "--hw", "H100", "--devices", "32", "--tp", "8", "--pp", "4",
          "--recompute", "partial", "--recompute-layers", "0"), "recompute-layers"),
        (("memory", "train", "--model", "llama3-70b", "--method", "lora", "--lora-targets", "q,qkv"), "--lora-targets"),
        (("train", "estimate", "--model", "llama3-70b", "--hw", "H100", "--devices", "8", "--method", "lora",
          "--lora-targets", "q,q"), "--lora-targets"),
        (("train", "search", "--model", "llama3-8b", "--hw", "H100", "--devices", "8", "--method", "lora",
          "--lora-targets", ""), "--lora-targets"),
        (("memory", "train", "--model", "llama3-70b", "--pp", "5", "--uneven-pipeline", "--stack", "deepseek-dualpipe"),
         "--pp"),
        (("memory", "infer", "--model", "llama3-70b", "--dtype", "int3"), "dtype"),
        (("memory", "infer", "--model", "llama3-70b", "--batch", "-1"), "batch"),
        (("flops", "--model", "llama3-70b", "--seq", "-5"), "seq"),
        (("roofline", "--hw", "H100", "--m", "0", "--n", "4", "--k", "4"), "m"),
    ],
)
def test_bad_input_names_field_exit_2(args, field):
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert field in r.output
    assert "Traceback" not in r.output


def test_flops_json():
    r = run("flops", "--model", "gpt3-175b", "--seq", "2048", "--tokens", "300e9", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["training_flops_6nd"] == pytest.approx(3.14e23, rel=0.01)
    assert d["training_flops_total"] > d["training_flops_6nd"]


def test_roofline_guide_examples():
    r = run("roofline", "--hw", "A100", "--m", "512", "--n", "1024", "--k", "4096", "--json")
    assert json.loads(r.stdout)["ops"][0]["bound"] == "compute"
    r = run("roofline", "--hw", "A100", "--elements", "100000000", "--json")
    assert json.loads(r.stdout)["ops"][0]["bound"] == "memory"
    r = run("roofline", "--hw", "H100", "--model", "llama3-8b", "--batch", "1")
    assert r.exit_code == 0 and "memory" in r.stdout
    r = run("roofline", "--hw", "H100", "--adam-params", "1e9", "--json")
    op = json.loads(r.stdout)["ops"][0]
    assert op["bound"] == "memory" and op["bytes"] == pytest.approx(30e9)


def test_model_from_hf_config(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 128256,
        "max_position_embeddings": 8192, "tie_word_embeddings": False, "rms_norm_eps": 1e-5,
    }))
    r = run("model", "show", str(cfg), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["total_params"] == pytest.approx(8.03e9, rel=0.01)
    bad = tmp_path / "bad.json"
    bad.write_text('{"architectures": ["LlamaForCausalLM"],\n "hidden_size": }')
    r = run("model", "show", str(bad))
    assert r.exit_code == 2 and "bad.json" in r.output


def test_memory_infer_larger_batch_needs_more_tp():
    # 70.6 GB of weights per device at tp=2 leave too little for 8 x 4k tokens of KV on an 80 GB card
    r = run("memory", "infer", "--model", "llama3-70b", "--hw", "H100", "--batch", "8", "--json")
    assert json.loads(r.stdout)["tp"] == 4


def test_range_syntax_shown_verbatim_in_errors():
    r = run("infer", "estimate", "--model", "llama3-8b", "--hw", "H100", "--tp", "x", "--in", "5", "--out", "5")
    assert r.exit_code == 2 and "'A:B:STEP'" in r.output


def test_infer_estimate_without_tp_takes_the_smallest_tp_that_fits():
    """Without --tp (or a scenario's tp) the estimate uses the smallest tensor-parallel size at which the weights and
    one sequence fit, and says so; --tp 1 is still refused with the planner's advice (above)."""
    r = run("infer", "estimate", "--model", "llama3-70b", "--hw", "H100", "--in", "1024", "--out", "256", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    rep = d["results"][0]["replica"]
    assert rep["tp"] == 2 and any("smallest tensor-parallel size" in n for n in rep["notes"])
    small = json.loads(run("infer", "estimate", "--model", "llama3-8b", "--hw", "H100", "--in", "1024", "--out", "256",
                           "--json").stdout)
    assert small["results"][0]["replica"]["tp"] == 1


def test_lora_targets_reach_estimate_and_memory():
    base = ("train", "estimate", "--model", "llama3-70b", "--hw", "H100", "--devices", "8", "--tp", "8",
            "--method", "lora", "--json")
    every = json.loads(run(*base).stdout)
    qkv = json.loads(run(*base, "--lora-targets", "q,k,v").stdout)
    assert every["lora"] == {"rank": 16, "targets": ["q", "k", "v", "o", "gate", "up", "down"]}
    assert qkv["lora"]["targets"] == ["q", "k", "v"]
    assert qkv["tokens_per_s"] > every["tokens_per_s"]
    mem = run("memory", "train", "--model", "llama3-70b", "--method", "lora", "--lora-targets", "q,v", "--json")
    assert mem.exit_code == 0, mem.output
    d = json.loads(mem.stdout)
    assert d["lora"] == {"rank": 16, "targets": ["q", "v"]}
    assert json.loads(run("memory", "train", "--model", "llama3-70b", "--json").stdout).get("lora") is None


def test_memory_train_partial_recompute_counts_layers():
    args = ("memory", "train", "--model", "llama3-70b", "--tp", "8", "--pp", "4", "--dp", "4", "--seq", "32768",
            "--recompute", "partial")
    fit = run(*args, "--hw", "H100", "--json")
    assert fit.exit_code == 0, fit.output
    d = json.loads(fit.stdout)
    assert 0 < d["bytes_per_device"]["recompute_layers"] < 20 and d["fits"] is True
    assert d["bytes_per_device"]["total"] <= d["usable_bytes"]
    text = run(*args, "--hw", "H100")
    assert "layers recomputed in full" in text.stdout
    unknown = json.loads(run(*args, "--json").stdout)  # no device: every layer
    assert unknown["bytes_per_device"]["recompute_layers"] == 20
