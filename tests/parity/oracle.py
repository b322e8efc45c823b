"""The differential oracle: kube-scheduler and metricsched asked the same questions.

``Harness`` drives ``sched-oracle`` (hack/go/oracle, built by hack/build-tools.sh), which
runs kube-scheduler's own scheduling framework of the pinned version in-process and
answers, for each pending pod of a scenario, which nodes pass its filters, why the others
do not, and the FailedScheduling message when none does; when some do, each score
plugin's score on each of them. ``metricsched_answers`` asks metricsched's pure core the
same, the way the operator does: a snapshot holding the scenario's namespace labels,
claims and volumes as the runtime cache does, ``cycle.filter_nodes`` for the nodes,
``cycle.schedule_one`` for the message and ``kube_scores.normalised_scores`` (the scorers
a policy blends) for the scores.

Scores are compared per feasible node and per plugin metricsched computes
(``kube_scores.PLUGINS``: LeastAllocated, BalancedAllocation, TaintToleration,
NodeAffinity, InterPodAffinity, PodTopologySpread), normalised: kube-scheduler reports
each multiplied by its default weight, which ``Harness`` divides by metricsched's copy of
those weights (``policy_defaults.DEFAULT_KUBE_WEIGHTS``), so a wrong weight shows too. A plugin
that one side skips for the pod (PreScore Skip) and the other scores is a disagreement.
ImageLocality (not computed: no image lists) and DynamicResources' score are left out.

Where kube-scheduler would preempt, metricsched (which does not) says so instead of
DefaultPreemption's silence: ``Harness`` turns such an answer into the words metricsched
must use, with kube-scheduler's count of nodes where preemption would help.

``compare`` lists the disagreements; ``shrink`` cuts a scenario down to a minimal one that
still shows a disagreement of the same kind, and ``reproduction`` renders it as YAML.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import random
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from metricsched.core import cycle, framework, model, node_state, parse, policy_defaults, versions
from metricsched.core.plugins import dynamic_resources, kube_scores, preemption
from tests.parity import by_design, coverage, extras, generator

ROOT = Path(__file__).resolve().parents[2]
PODS_PER_SCENARIO = 8

Body = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Answer:
    """One scheduler's answer for one pending pod."""

    feasible: frozenset[str]
    rejected: dict[str, tuple[str, ...]]  # node -> its reasons, sorted
    message: str  # FailedScheduling text; "" when some node fits
    # kube-scheduler's only, not compared: the node DefaultPreemption would nominate and
    # a PostFilter plugin's error (see Harness).
    nominated: str = ""
    post_filter_error: str = ""
    # kube-scheduler's only: rejected node -> the plugin that rejected it
    plugins: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # feasible node -> score plugin -> its normalised score (0..100); empty when none fits
    scores: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> Body:
        return {
            "feasible": sorted(self.feasible),
            "rejected": {node: list(reasons) for node, reasons in sorted(self.rejected.items())},
            "message": self.message,
            "scores": {node: dict(sorted(by.items())) for node, by in sorted(self.scores.items())},
        }


@dataclasses.dataclass(frozen=True)
class Disagreement:
    kind: str  # feasible | reasons | message | scores
    pod: str
    detail: str
    # the plugins it is about: kube-scheduler's rejecting plugin for a node it rejects,
    # "metricsched: <reason>" for one only metricsched rejects, the score plugin
    plugins: tuple[str, ...] = ()


@functools.cache
def harness_binary() -> Path:
    """Where ``make tools`` puts sched-oracle built from this tree's hack/go/oracle for
    METRICSCHED_KUBE_VERSION (it may not be built yet)."""
    out = subprocess.run(
        [str(ROOT / "hack" / "build-tools.sh"), "--print-oracle"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip().splitlines()[-1])


def harness_version(binary: Path) -> str:
    """The Kubernetes version ``binary`` runs the framework of."""
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def rules_of(version: str) -> versions.Rules:
    """The rules the operator picks for an API server of ``version`` (``v1.MINOR.PATCH``)."""
    major, minor = version.lstrip("v").split(".")[:2]
    server = versions.ServerVersion(major=int(major), minor=int(minor), git_version=version)
    return versions.rules_for(server).rules


# DynamicResources' PostFilter error when its PreFilter did not run (see Harness).
_DRA_STATE_MISSING = "DynamicResources: not found"


class Harness:
    """A running sched-oracle: one JSON scenario in, one JSON answer out, per line.

    ``postfilter``: take kube-scheduler's message with its PostFilter part (the
    ``no new claims to deallocate, preemption: ...`` suffix of the event), as metricsched
    writes it (core/plugins/preemption.py); off: the FitError text alone.

    Two answers are turned into the words metricsched must use instead:

    - when DefaultPreemption would preempt, the event has no PostFilter part; metricsched
      appends ``preemption.not_preempting`` with the number of nodes where kube-scheduler
      could preempt (the harness asks it node by node);
    - when a PreFilter that runs before DynamicResources' (VolumeBinding, VolumeZone,
      PodTopologySpread, InterPodAffinity) rules out every node, DynamicResources' PreFilter
      never runs and its PostFilter fails reading its missing state: kube-scheduler v1.35.4
      ends the event with `` not found`` and runs no DefaultPreemption. metricsched writes
      the PostFilter text kube-scheduler gives when that state is there: no claims to
      deallocate, and preemption cannot help where every node is unresolvable."""

    def __init__(self, binary: Path, *, postfilter: bool = True) -> None:
        self.postfilter = postfilter
        self.version = harness_version(binary)
        # the rules metricsched applies on a cluster of the harness's version
        self.rules = rules_of(self.version)
        self._message = "fullMessage" if postfilter else "message"
        self._process = subprocess.Popen(
            [str(binary)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def ask(self, scenario: Body) -> list[Answer]:
        process = self._process
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(scenario) + "\n")
        process.stdin.flush()
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"sched-oracle exited with {process.wait()}")
        reply = json.loads(line)
        if reply.get("error"):
            raise RuntimeError(f"sched-oracle: {reply['error']}")
        return [
            Answer(
                feasible=frozenset(result["feasible"]),
                rejected={
                    node: tuple(sorted(status["reasons"]))
                    for node, status in result["rejected"].items()
                },
                message=self._expected_message(result, pod),
                nominated=result.get("nominatedNode", ""),
                post_filter_error=result.get("postFilterError", ""),
                plugins={
                    node: status.get("plugin") or "PreFilter"
                    for node, status in result["rejected"].items()
                },
                scores=_normalised(result.get("scores") or {}),
            )
            for result, pod in zip(reply["results"], scenario["incoming"], strict=True)
        ]

    def _expected_message(self, result: Body, pod: Body) -> str:
        if self._message != "fullMessage":
            return str(result["message"])
        if result.get("nominatedNode"):
            words = preemption.not_preempting(len(result.get("preemptionNodes") or ()))
        elif result.get("postFilterError") == _DRA_STATE_MISSING:
            if pod["spec"].get("preemptionPolicy") == "Never":
                words = "not eligible due to preemptionPolicy=Never."
            else:
                nodes = len(result["rejected"])
                words = (
                    f"0/{nodes} nodes are available: {nodes} Preemption is not helpful for "
                    "scheduling."
                )
        else:
            return str(result["fullMessage"])
        claims = dynamic_resources.post_filter_words(self.rules)
        return f"{result['message']} {claims}{preemption.PREFIX}{words}"

    def close(self) -> None:
        process = self._process
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def snapshot_of(
    scenario: Body, *, rules: versions.Rules = versions.DEFAULT
) -> model.ClusterSnapshot:
    """The snapshot metricsched's core sees for ``scenario`` on a cluster whose version
    maps to ``rules``: node state from the node state builder, namespace labels, claims,
    volumes, nominated pods and DeviceClasses as the runtime cache keeps them
    (runtime/cache.py)."""
    nodes = [parse.node_from_body(body) for body in scenario["nodes"]]
    pods = [parse.pod_from_body(body, rules=rules) for body in scenario["pods"]]
    namespace_labels = {
        ns["metadata"]["name"]: ns["metadata"].get("labels", {})
        for ns in scenario.get("namespaces", ())
    }
    claims = [parse.claim_from_body(body) for body in scenario.get("claims", ())]
    nominated: dict[model.NodeName, tuple[model.PodInfo, ...]] = {}
    for body in scenario.get("nominated", ()):  # as runtime/cache.py's upsert_nominated
        pod = parse.pod_from_body(body, rules=rules)
        node = model.NodeName(pod.nominated_node)
        nominated[node] = (*nominated.get(node, ()), pod)
    classes = [parse.device_class_from_body(body) for body in scenario.get("deviceClasses", ())]
    volumes = [parse.volume_from_body(body) for body in scenario.get("volumes", ())]
    return dataclasses.replace(
        node_state.snapshot(nodes, pods),
        namespace_labels=namespace_labels,
        claims={f"{claim.namespace}/{claim.name}": claim for claim in claims},
        volumes={volume.name: volume for volume in volumes},
        rules=rules,
        nominated=nominated,
        device_class_resources=parse.device_class_resources(classes),
    )


def _normalised(weighted: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, float]]:
    """kube-scheduler's scores (RunScorePlugins: normalised times the plugin's weight) of
    the plugins metricsched computes, divided by the weights metricsched assumes."""
    weights = policy_defaults.DEFAULT_KUBE_WEIGHTS
    return {
        node: {
            plugin: score / weights[plugin]
            for plugin, score in plugins.items()
            if plugin in kube_scores.PLUGINS
        }
        for node, plugins in weighted.items()
    }


def metricsched_answers(
    scenario: Body, *, postfilter: bool = True, rules: versions.Rules = versions.DEFAULT
) -> list[Answer]:
    """What metricsched's core decides for each pending pod of ``scenario`` under
    ``rules``; without ``postfilter``, messages lose their PostFilter part."""
    snapshot = snapshot_of(scenario, rules=rules)
    answers = []
    for body in scenario["incoming"]:
        pod = parse.pod_from_body(body, rules=rules)
        refusal, reasons = cycle.filter_nodes(pod, snapshot)
        if refusal:  # a PreFilter refusal: every node, for that one reason
            reasons = {name: (refusal,) for name in snapshot.nodes}
        decision = cycle.schedule_one(
            pod=pod,
            snapshot=snapshot,
            policies=(),
            metrics={},
            default_fallback=model.FallbackStrategy.LEAST_ALLOCATED,
            now=0.0,
            scheduler_names=frozenset({pod.scheduler_name}),
            rr_counter=0,
            seed=0,
        )
        unschedulable = decision.outcome is model.Outcome.UNSCHEDULABLE
        feasible = frozenset(node for node, why in reasons.items() if not why)
        answers.append(
            Answer(
                feasible=feasible,
                rejected={node: tuple(sorted(why)) for node, why in reasons.items() if why},
                message=(
                    (decision.message if postfilter else _without_postfilter(decision.message))
                    if unschedulable
                    else ""
                ),
                scores=_scores(pod, snapshot, feasible),
            )
        )
    return answers


def _scores(
    pod: model.PodInfo, snapshot: model.ClusterSnapshot, feasible: frozenset[str]
) -> dict[str, dict[str, float]]:
    """Each plugin's normalised score on each feasible node, scored as the cycle scores
    the nodes that pass (core/cycle.py: the feasible rows, in name order)."""
    if not feasible:
        return {}
    state = framework.CycleState.start(pod, snapshot)
    names = state.table.names
    rows = np.array([row for row, name in enumerate(names) if name in feasible], dtype=np.intp)
    by_plugin = kube_scores.normalised_scores(cycle=state, rows=rows)
    return {
        names[row]: {plugin: float(found[slot]) for plugin, found in by_plugin.items()}
        for slot, row in enumerate(rows.tolist())
    }


def compare(scenario: Body, ours: Sequence[Answer], theirs: Sequence[Answer]) -> list[Disagreement]:
    """Where the answers differ: the feasible nodes, the reasons of nodes both reject, the
    FailedScheduling message (each kind reported once per pod)."""
    found = []
    for body, mine, kube in zip(scenario["incoming"], ours, theirs, strict=True):
        name = _pod_name(body)
        if mine.feasible != kube.feasible:
            detail = (
                f"feasible: kube-scheduler {sorted(kube.feasible)}, "
                f"metricsched {sorted(mine.feasible)}"
            )
            plugins = {kube.plugins.get(n, "?") for n in mine.feasible - kube.feasible}
            plugins |= {_ours(mine, n) for n in kube.feasible - mine.feasible}
            found.append(Disagreement("feasible", name, detail, tuple(sorted(plugins))))
        both = sorted(set(kube.rejected) & set(mine.rejected))
        if differ := [n for n in both if kube.rejected[n] != mine.rejected[n]]:
            detail = "; ".join(
                f"{n}: kube-scheduler {list(kube.rejected[n])}, metricsched "
                f"{list(mine.rejected[n])}"
                for n in differ
            )
            plugins = {kube.plugins.get(n, "?") for n in differ}
            found.append(Disagreement("reasons", name, detail, tuple(sorted(plugins))))
        if mine.message != kube.message:
            detail = f"kube-scheduler {kube.message!r}, metricsched {mine.message!r}"
            found.append(Disagreement("message", name, detail))
        # Normalisation is over the feasible nodes: with other nodes, other scores follow.
        if mine.feasible == kube.feasible and (differ := _score_differences(mine, kube)):
            plugins = {entry.split(":", 1)[0].split(" ", 1)[1] for entry in differ}
            found.append(Disagreement("scores", name, "; ".join(differ), tuple(sorted(plugins))))
    return found


def _ours(mine: Answer, node: str) -> str:
    reasons = mine.rejected.get(node) or ("?",)
    return f"metricsched: {reasons[0]}"


def _score_differences(mine: Answer, kube: Answer) -> list[str]:
    """``node plugin: kube-scheduler K, metricsched M`` for each feasible node and plugin
    whose normalised scores differ (``-`` where that side does not score the plugin)."""
    differ = []
    for node in sorted(set(kube.scores) | set(mine.scores)):
        theirs, ours = kube.scores.get(node, {}), mine.scores.get(node, {})
        for plugin in kube_scores.PLUGINS:
            if theirs.get(plugin) != ours.get(plugin):
                differ.append(
                    f"{node} {plugin}: kube-scheduler {_shown(theirs.get(plugin))}, "
                    f"metricsched {_shown(ours.get(plugin))}"
                )
    return differ


def _shown(score: float | None) -> str:
    return "-" if score is None else f"{score:g}"


def _without_postfilter(message: str) -> str:
    for marker in (f" {dynamic_resources.POST_FILTER_NO_CLAIMS}, ", f" {preemption.PREFIX}"):
        if marker in message:
            return message.split(marker, 1)[0]
    return message


def judge(
    scenario: Body,
    ours: Sequence[Answer],
    theirs: Sequence[Answer],
    *,
    postfilter: bool = True,
    rules: versions.Rules = versions.DEFAULT,
) -> tuple[list[Disagreement], list[Disagreement]]:
    """``compare``'s disagreements, split: those of pods metricsched refuses by design
    (``by_design.refused_by_design``: all of a pod's differences are the documented DRA
    refusal) apart from the rest, which stay disagreements."""
    found = compare(scenario, ours, theirs)
    if not found:
        return [], []
    pods = {
        _pod_name(body): (body, mine, kube)
        for body, mine, kube in zip(scenario["incoming"], ours, theirs, strict=True)
    }
    designed: set[str] = set()
    for name in {d.pod for d in found}:
        body, mine, kube = pods[name]
        where = by_design.delegated(scenario, body, rules)
        if not where:
            continue
        resources = frozenset().union(*where.values())
        alone = {**scenario, "incoming": [by_design.without_delegated(body, resources)]}
        [stripped] = metricsched_answers(alone, postfilter=postfilter, rules=rules)
        if by_design.refused_by_design(mine, kube, stripped, where):
            designed.add(name)
    return (
        [d for d in found if d.pod not in designed],
        [d for d in found if d.pod in designed],
    )


def _pod_name(body: Body) -> str:
    return f"{body['metadata'].get('namespace', 'default')}/{body['metadata']['name']}"


def check(scenario: Body, harness: Harness) -> list[Disagreement]:
    ours = metricsched_answers(scenario, postfilter=harness.postfilter, rules=harness.rules)
    theirs = harness.ask(scenario)
    return judge(scenario, ours, theirs, postfilter=harness.postfilter, rules=harness.rules)[0]


# --- many scenarios --------------------------------------------------------------------


def scenarios(
    *, pods: int, seed: int, options: extras.Options = extras.NONE
) -> Iterator[tuple[int, Body]]:
    """(index, scenario) pairs holding ``pods`` pending pods in all; scenario ``index``
    of ``seed`` is always the same, and so is its part without ``options``' extras."""
    index = 0
    left = pods
    while left > 0:
        count = min(PODS_PER_SCENARIO, left)
        scenario = generator.scenario(random.Random(f"{seed}/{index}"), pods=count)
        if options.any:
            extras.add(
                random.Random(f"{seed}/{index}/extras"),
                scenario,
                options,
                pod=generator.pending_pod,
            )
        yield index, scenario
        left -= count
        index += 1


@dataclasses.dataclass
class Report:
    pods: int = 0
    scenarios: int = 0
    disagreements: list[tuple[int, Disagreement]] = dataclasses.field(default_factory=list)
    first_of_kind: dict[str, Body] = dataclasses.field(default_factory=dict)
    coverage: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    # per score plugin: the (pod, feasible node) scores compared, and the pods whose
    # kube-scheduler scores for it differ from node to node (not all one value)
    scores_compared: collections.Counter[str] = dataclasses.field(
        default_factory=collections.Counter
    )
    scores_varied: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    # (kind, plugin) -> disagreements, and the first pod ("scenario index pod") of each
    by_class: collections.Counter[tuple[str, str]] = dataclasses.field(
        default_factory=collections.Counter
    )
    example_of_class: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    # pods metricsched refuses by design (tests/parity/by_design.py): their differences
    # from kube-scheduler's answers, not counted as disagreements
    by_design: list[tuple[int, Disagreement]] = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        designed = {(index, d.pod) for index, d in self.by_design}
        return (
            f"{self.pods} pods in {self.scenarios} scenarios: "
            f"{len(self.disagreements)} disagreements{_kinds(self.disagreements)}; "
            f"{by_design.REFUSED_BY_DESIGN}: {len(designed)} pods{_kinds(self.by_design)}"
        )

    def classes_summary(self) -> list[str]:
        """One line per (kind, plugin) class: its count and its first pod."""
        return [
            f"  {kind} {plugin}: {count} (first: scenario {self.example_of_class[kind, plugin]})"
            for (kind, plugin), count in sorted(self.by_class.items())
        ]

    def coverage_summary(self) -> str:
        shown = [*coverage.FEATURES, *(f for f in coverage.EXTRA_FEATURES if self.coverage[f])]
        return "pending pods with: " + ", ".join(
            f"{feature} {self.coverage[feature]}" for feature in shown
        )

    def scores_summary(self) -> str:
        return "node scores compared (pods where they vary): " + ", ".join(
            f"{plugin} {self.scores_compared[plugin]} ({self.scores_varied[plugin]})"
            for plugin in kube_scores.PLUGINS
        )

    def count_scores(self, theirs: Sequence[Answer], ours: Sequence[Answer]) -> None:
        for kube, mine in zip(theirs, ours, strict=True):
            if kube.feasible != mine.feasible:
                continue  # scores not compared
            for plugin in kube_scores.PLUGINS:
                found = [by[plugin] for by in kube.scores.values() if plugin in by]
                self.scores_compared[plugin] += len(found)
                self.scores_varied[plugin] += len(set(found)) > 1


def _kinds(found: Sequence[tuple[int, Disagreement]]) -> str:
    """`` (2 feasible, 1 message)``: the differences by kind ("" when none)."""
    kinds = collections.Counter(disagreement.kind for _index, disagreement in found)
    counted = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
    return f" ({counted})" if counted else ""


def run(*, pods: int, seed: int, harness: Harness, options: extras.Options | None = None) -> Report:
    """``options``: the generator's extras; unset, those of the harness's version."""
    if options is None:
        options = extras.Options.for_version(harness.version)
    report = Report()
    for index, scenario in scenarios(pods=pods, seed=seed, options=options):
        report.scenarios += 1
        report.pods += len(scenario["incoming"])
        theirs = harness.ask(scenario)
        report.coverage.update(coverage.exercised(scenario, theirs))
        ours = metricsched_answers(scenario, postfilter=harness.postfilter, rules=harness.rules)
        report.count_scores(theirs, ours)
        found, designed = judge(
            scenario, ours, theirs, postfilter=harness.postfilter, rules=harness.rules
        )
        report.by_design.extend((index, disagreement) for disagreement in designed)
        for disagreement in found:
            report.disagreements.append((index, disagreement))
            for plugin in disagreement.plugins or ("-",):
                report.by_class[disagreement.kind, plugin] += 1
                report.example_of_class.setdefault(
                    (disagreement.kind, plugin), f"{index} {disagreement.pod}"
                )
            if disagreement.kind not in report.first_of_kind:
                report.first_of_kind[disagreement.kind] = _single_pod(scenario, disagreement.pod)
    return report


def _single_pod(scenario: Body, pod: str) -> Body:
    namespace, name = pod.split("/", 1)
    incoming = [
        body
        for body in scenario["incoming"]
        if body["metadata"]["name"] == name
        and body["metadata"].get("namespace", "default") == namespace
    ]
    return {**scenario, "incoming": incoming}


# --- shrinking -------------------------------------------------------------------------

# Keys that make an object invalid when dropped; lists under them keep one item.
_REQUIRED = frozenset(
    {
        "apiVersion",
        "kind",
        "metadata",
        "name",
        "namespace",
        "nodeName",
        "image",
        "containers",
        "topologyKey",
        "maxSkew",
        "whenUnsatisfiable",
        "key",
        "operator",
        "values",
        "containerPort",
        "type",
        "status",
        "nodeSelectorTerms",
        "namespaces",
        "incoming",
        "nodes",
        "persistentVolumeClaim",
        "claimName",
        "podAffinityTerm",
        "preference",
        "weight",
    }
)


def shrink(scenario: Body, *, still_fails: Callable[[Body], bool]) -> Body:
    """A smaller scenario for which ``still_fails`` holds: greedily drop whole nodes, pods
    and namespaces first, then list items and optional fields anywhere, until nothing
    more can go."""
    current = scenario
    for coarse in (True, False):
        progress = True
        while progress:
            progress = False
            index = 0
            while index < len(candidates := list(_smaller(current, coarse=coarse))):
                if _still(still_fails, candidates[index]):
                    current = candidates[index]  # the same index is now the next candidate
                    progress = True
                else:
                    index += 1
    return current


def _still(still_fails: Callable[[Body], bool], candidate: Body) -> bool:
    try:
        return still_fails(candidate)
    except (RuntimeError, parse.ParseError, KeyError, ValueError):
        return False  # the candidate broke something else: not a reproduction


def _smaller(value: Any, key: str = "", *, coarse: bool = False) -> Iterator[Any]:
    """Every value one deletion smaller than ``value``; ``coarse``: only items of its
    top-level lists."""
    if isinstance(value, dict):
        if not coarse:
            for name in value:
                if name not in _REQUIRED:
                    yield {k: v for k, v in value.items() if k != name}
        for name, child in value.items():
            if coarse and not isinstance(child, list):
                continue
            for smaller in _smaller(child, name, coarse=coarse):
                yield {**value, name: smaller}
    elif isinstance(value, list):
        if len(value) > 1 or key not in _REQUIRED:
            for index in range(len(value)):
                yield value[:index] + value[index + 1 :]
        if coarse:
            return
        for index, child in enumerate(value):
            for smaller in _smaller(child, key):
                yield [*value[:index], smaller, *value[index + 1 :]]


def _namespaces_exist(scenario: Body) -> bool:
    """Whether every pod and claim is in a namespace of the scenario (the API server admits
    no other; metricsched then answers restrictively where kube-scheduler assumes no
    labels)."""
    known = {ns["metadata"]["name"] for ns in scenario.get("namespaces", ())}
    objects = [*scenario["pods"], *scenario["incoming"], *scenario.get("claims", ())]
    return all(body["metadata"].get("namespace", "default") in known for body in objects)


def shrunk_reproduction(scenario: Body, kind: str, harness: Harness) -> str:
    def still_fails(candidate: Body) -> bool:
        if not candidate["incoming"] or not _namespaces_exist(candidate):
            return False
        return any(d.kind == kind for d in check(candidate, harness))

    minimal = shrink(scenario, still_fails=still_fails)
    return reproduction(minimal, harness)


def reproduction(scenario: Body, harness: Harness) -> str:
    """``scenario`` and both answers, as YAML a person can read and re-run."""
    ours = metricsched_answers(scenario, postfilter=harness.postfilter, rules=harness.rules)
    theirs = harness.ask(scenario)
    found = judge(scenario, ours, theirs, postfilter=harness.postfilter, rules=harness.rules)[0]
    document = {
        "disagreements": [dataclasses.asdict(d) for d in found],
        "kube-scheduler": [answer.as_dict() for answer in theirs],
        "metricsched": [answer.as_dict() for answer in ours],
        "scenario": scenario,
    }
    return yaml.safe_dump(document, sort_keys=False, width=100)
