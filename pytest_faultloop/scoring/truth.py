"""The ground truth of an experiment, whichever way it was made.

An injected fault (live, or frozen into a case) takes its truth from the fault catalogue and the
restart policy: the injected rank is the one acceptable culprit, the fault's natures are the
acceptable natures, the policy gives the decision. A fault on several ranks makes each rank a
culprit group that must be named; NODE_KILL makes every rank of the lost node a culprit (one
group per node lost), and naming the node names them. The ``NONE`` control's truth is a clean run. A
real incident's truth is what its ``case.toml`` says.
"""

from __future__ import annotations

from pytest_faultloop.models import Experiment, Truth
from pytest_faultloop.models.faults import FaultType, Nature
from pytest_faultloop.scoring.restart_policy import RestartPolicy


def truth_of(experiment: Experiment, policy: RestartPolicy | None) -> Truth:
    """What a correct attribution of ``experiment`` says (no expected decision for an injected
    fault when ``policy`` is None)."""
    if experiment.case is not None and experiment.case.truth is not None:
        return experiment.case.truth
    entry = experiment.entry
    assert entry is not None  # an experiment without a case truth has its pool entry
    expectation = policy.expected(entry.fault) if policy else None
    decision = expectation.decision if expectation else None
    rationale = expectation.rationale if expectation else ""
    spec = entry.fault.spec
    if entry.fault is FaultType.NODE_KILL:
        gpus = experiment.gpus_per_node
        groups = [list(range(n * gpus, (n + 1) * gpus)) for n in entry.nodes_hit(gpus)]
    else:
        groups = [] if entry.fault.is_control else [[rank] for rank in entry.ranks]
    culprit = sorted(rank for group in groups for rank in group)
    return Truth(
        culprit=culprit,
        natures=list(spec.natures),
        neighbours=sorted(spec.neighbours),
        decision=decision,
        rationale=rationale,
        fr_culprit=culprit,
        culprit_groups=groups if len(groups) > 1 else None,
        node_names_count=entry.fault is FaultType.NODE_KILL,
    )


def expected_nature(experiment: Experiment) -> Nature:
    """The headline nature a correct attribution names (for reports)."""
    if experiment.case is not None and experiment.case.truth is not None:
        return experiment.case.truth.natures[0]
    assert experiment.entry is not None
    return experiment.entry.fault.spec.nature
