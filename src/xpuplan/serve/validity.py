"""Every rule a serving plan and request must obey, in one place: one small function per rule.

Errors are ``UserInputError`` naming the field the user typed (``tp``, ``pp``, ``ep``,
``memory_fraction``, ``input_len``, ``qps`` ...). :func:`serving_plan_issues` lists every rule a
:class:`~xpuplan.serve.plan.ServingPlan` breaks for a model; ``make_replica``, the estimators, the
capacity planner and :func:`xpuplan.serve.fit.replica_fit` call these functions, so a layout one
command rejects is rejected by every other. NaN and infinities are refused wherever a number is read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xpuplan.errors import UserInputError
from xpuplan.models.arch import ModelArch
from xpuplan.workload.vocabulary import BATCHING_MODES


@dataclass(frozen=True)
class ServingIssue:
    """One broken rule: the field it concerns and a sentence saying why."""

    field: str
    message: str


def raise_first(issues: list[ServingIssue]) -> None:
    """``UserInputError`` for the first issue (naming its field)."""
    if issues:
        raise UserInputError(issues[0].message, field=issues[0].field)


# ---------------------------------------------------------------------------------------
# Values on their own
# ---------------------------------------------------------------------------------------
def positive_int(field: str, value: object) -> int:
    """``value`` as a positive integer, else ``UserInputError`` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserInputError(f"{field} must be a positive integer (got {value!r})", field=field)
    return value


#: How the command line spells request fields (messages name what the user typed).
FLAGS = {"input_len": "--in", "output_len": "--out", "batch": "--batch", "qps": "--qps", "ttft_ms": "--ttft-ms",
         "tpot_ms": "--tpot-ms"}


def positive_length(field: str, value: object) -> None:
    """A token count or batch: a finite number >= 1 (``--in``, ``--out``, ``--batch``)."""
    if (value is None or isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
            or value < 1):
        raise UserInputError(f"{FLAGS.get(field, field)} must be positive and finite (got {value!r})", field=field)


def positive_rate(field: str, value: object, *, shown: object = None) -> None:
    """A rate or time: finite and > 0 (``--qps``, SLO milliseconds); ``shown`` is the value as the
    user typed it (e.g. milliseconds) when ``value`` is converted."""
    if (value is None or isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
            or value <= 0):
        got = value if shown is None else shown
        raise UserInputError(f"{FLAGS.get(field, field)} must be positive and finite (got {got!r})", field=field)


def check_memory_fraction(value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and 0 < value <= 1):
        raise UserInputError(f"memory fraction must be in (0, 1] (got {value})", field="memory_fraction")


def check_batching(value: object) -> None:
    if value not in BATCHING_MODES:
        raise UserInputError(f"mode must be static or continuous (got {value!r})", field="mode")


def check_request(input_len: float, output_len: float, batch: float) -> None:
    """Prompt and output lengths and the batch of an estimate."""
    positive_length("input_len", input_len)
    positive_length("output_len", output_len)
    positive_length("batch", batch)


def check_step_tokens(decode_seqs: int, prefill_tokens: int) -> None:
    """An engine step needs at least one token."""
    if decode_seqs < 0 or prefill_tokens < 0 or decode_seqs + prefill_tokens == 0:
        raise UserInputError("a step needs at least one token", field="batch")


# ---------------------------------------------------------------------------------------
# Rules of a layout against the model
# ---------------------------------------------------------------------------------------
def rule_tp_divides_heads(tp: int, model: ModelArch) -> ServingIssue | None:
    if model.n_heads % tp:
        return ServingIssue("tp", f"tp ({tp}) must divide n_heads ({model.n_heads})")
    return None


def rule_tp_kv_heads(tp: int, model: ModelArch) -> ServingIssue | None:
    """KV heads split over TP, or are replicated when TP exceeds them: one must divide the other
    (MLA's latent is replicated over TP: no rule)."""
    kvh = model.kv_heads
    if model.mla is None and kvh % tp and tp % kvh:
        return ServingIssue("tp", f"tp ({tp}) and n_kv_heads ({kvh}) must divide one another")
    return None


def rule_pp_layers(pp: int, model: ModelArch) -> ServingIssue | None:
    if pp > model.n_layers:
        return ServingIssue("pp", f"pp ({pp}) exceeds the number of layers ({model.n_layers})")
    return None


def rule_encoder_pp(pp: int, model: ModelArch) -> ServingIssue | None:
    if model.type == "encoder" and pp > 1:
        return ServingIssue("pp", "encoder models are served with pp=1")
    return None


def rule_ep_experts(ep: int, model: ModelArch) -> ServingIssue | None:
    if ep <= 1:
        return None
    if model.moe is None:
        return ServingIssue("ep", f"ep ({ep}) needs a mixture-of-experts model; {model.id} is dense")
    if model.moe.n_routed_experts % ep:
        return ServingIssue("ep", f"ep ({ep}) must divide the routed experts ({model.moe.n_routed_experts})")
    return None


def rule_expert_tp(tp: int, ep: int, etp: int | None, model: ModelArch) -> ServingIssue | None:
    """The experts' tensor-parallel size ``etp`` (None: tp, every expert split over the TP group like a dense MLP):
    a divisor of tp; below tp the tp/etp groups of etp ranks hold whole sets of experts (expert parallelism inside
    the TP group, attention still over tp), so the model must be MoE, its routed experts divisible by tp/etp, and
    there are no attention-DP groups (ep = 1)."""
    if etp is None or etp == tp:
        return None
    if tp % etp:
        return ServingIssue("etp", f"etp ({etp}) must divide tp ({tp})")
    if model.moe is None:
        return ServingIssue("etp", f"etp ({etp}) below tp needs a mixture-of-experts model; {model.id} is dense")
    if ep > 1:
        return ServingIssue("etp", f"etp ({etp}) below tp is expert parallelism inside the TP group; with ep ({ep}) "
                                   "attention-DP groups the experts are split over tp within each group (leave etp out)")
    if model.moe.n_routed_experts % (tp // etp):
        return ServingIssue("etp", f"tp/etp ({tp // etp}) expert-parallel ranks must divide the routed experts "
                                   f"({model.moe.n_routed_experts})")
    return None


def layout_issues(model: ModelArch, tp: int, pp: int, ep: int, etp: int | None = None) -> list[ServingIssue]:
    """Every rule a tp × pp × ep layout (experts over ``etp``, None: tp) breaks for ``model`` (sizes must be
    positive integers)."""
    for name, v in (("tp", tp), ("pp", pp), ("ep", ep)):
        positive_int(name, v)
    if etp is not None:
        positive_int("etp", etp)
    rules = (rule_encoder_pp(pp, model), rule_tp_divides_heads(tp, model) or rule_tp_kv_heads(tp, model),
             rule_pp_layers(pp, model), rule_ep_experts(ep, model), rule_expert_tp(tp, ep, etp, model))
    return [r for r in rules if r is not None]


def check_parallelism(model: ModelArch, tp: int, pp: int, ep: int, etp: int | None = None) -> None:
    """UserInputError naming the field when the split is impossible for this model."""
    raise_first(layout_issues(model, tp, pp, ep, etp))


def check_speculation(draft_tokens: int, accepted_tokens: float, draft_cost: float) -> None:
    """Speculative decoding inputs: draft tokens >= 0; accepted tokens per step between 1 and
    draft tokens + 1 (the bonus token included); draft cost finite and >= 0."""
    if isinstance(draft_tokens, bool) or not isinstance(draft_tokens, int) or draft_tokens < 0:
        raise UserInputError(f"spec_tokens must be a whole number >= 0 (got {draft_tokens!r})", field="spec_tokens")
    if not (math.isfinite(accepted_tokens) and 1.0 <= accepted_tokens <= draft_tokens + 1):
        raise UserInputError(f"spec_accept ({accepted_tokens}) must be between 1 and spec_tokens + 1 "
                             f"({draft_tokens + 1}): tokens emitted per verification step, the bonus token included",
                             field="spec_accept")
    if not (math.isfinite(draft_cost) and draft_cost >= 0):
        raise UserInputError(f"spec_draft_cost must be finite and >= 0 (got {draft_cost})", field="spec_draft_cost")


def check_prefix_hit_rate(rate: float) -> None:
    """Prefix-cache hit rate: a fraction of the prompt in [0, 1)."""
    if not (math.isfinite(rate) and 0.0 <= rate < 1.0):
        raise UserInputError(f"prefix_hit_rate must be in [0, 1) (got {rate})", field="prefix_hit_rate")
