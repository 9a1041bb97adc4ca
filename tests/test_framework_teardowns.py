"""How framework jobs on several nodes end, as their launchers print it into one joined log
without node prefixes: a report numbering a process within its node, ranks a report groups
under one error, silent ranks a launcher's rank-less report tells the end of, a whole node's
ranks gone at once. Each log is made of the strings the tools' sources print (filled in), in
the order the real runs of the ``frameworks`` pool printed them."""

from __future__ import annotations

from pathlib import Path

from test_log_real_formats import analysed

from pytest_faultloop.models import Decision
from pytest_faultloop.models.faults import Nature

WORLD = 8
CLAIMS = "".join(
    f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/{WORLD}\n" for r in range(WORLD)
)
"""Lightning's banner, one per process (lightning/fabric/utilities/distributed.py)."""
GLOO_CLOSED = (
    "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
    "Connection closed by peer [127.0.0.1]:{port}. This is typically caused by a remote "
    "worker crashing. Check the logs of the remote worker before reporting an error. GLHF!"
)
"""gloo's tcp pair: the socket to a peer closed (torch 2.13's bundled gloo)."""
GLOO_RECV_TIMEOUT = (
    "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
    "unbound_buffer.cc:78] Timed out waiting 10000ms for recv operation to complete"
)


def lost_peer(rank: int) -> str:
    """A rank's traceback ending on gloo's closed connection, behind PyTorch's rank prefix."""
    return (
        f"[rank{rank}]: Traceback (most recent call last):\n"
        f'[rank{rank}]:   File "/work/train.py", line 117, in main\n'
        f"[rank{rank}]:     trainer.fit(model)\n"
        f"[rank{rank}]: {GLOO_CLOSED.format(port=20000 + rank)}\n"
    )


def test_a_childs_local_rank_is_the_silent_rank_of_another_node(tmp_path: Path) -> None:
    """Lightning's observer numbers the child within its node (``rank=i + 1``): where the
    rank numbered like it lost a peer itself, the dead child is the one rank that can be on
    another node of the same size and said nothing (6 of 2 x 4), not rank 2."""
    victims = "".join(lost_peer(r) for r in (7, 5, 3, 0, 2, 1))
    observer = (
        "[rank: 2] Child process with PID 27300 terminated with code -9. Forcefully "
        "terminating all other processes to avoid zombies 🧟\n"
    )
    analysis = analysed(tmp_path, CLAIMS + victims[:400] + observer + victims[400:])
    lead = analysis.primary[0]
    assert (lead.rank, lead.nature) == (6, Nature.CRASH), analysis.explanation


def test_a_local_rank_stays_itself_where_that_rank_said_nothing(tmp_path: Path) -> None:
    """Only a rank that was alive after the report (it lost a peer) rules itself out."""
    victims = "".join(lost_peer(r) for r in (7, 5, 3, 0, 1))
    observer = (
        "[rank: 2] Child process with PID 27300 terminated with code -9. Forcefully "
        "terminating all other processes to avoid zombies 🧟\n"
    )
    analysis = analysed(tmp_path, CLAIMS + observer + victims)
    assert analysis.primary[0].rank == 2, analysis.explanation


def test_lightnings_sigterm_notice_names_the_local_rank_of_the_silent_process(
    tmp_path: Path,
) -> None:
    """signal_connector.py prefixes the notice with the local rank: the SIGTERMed process is
    the one rank of that local number that did not lose a peer (a signal: RESTART)."""
    victims = "".join(lost_peer(r) for r in (5, 7, 0, 4, 1, 3, 2))
    analysis = analysed(tmp_path, CLAIMS + "[rank: 2] Received SIGTERM: 15\n" + victims)
    lead = analysis.primary[0]
    assert (lead.rank, lead.nature) == (6, Nature.SIGNAL), analysis.explanation
    assert analysis.decision is Decision.RESTART


def test_a_whole_nodes_ranks_gone_silent_at_once_are_a_lost_node(tmp_path: Path) -> None:
    """Ranks 4-7 (one node's block of 2 x 4) say nothing and every other rank lost its
    connection to them: the node went away, which a restart on other nodes survives."""
    victims = "".join(lost_peer(r) for r in (3, 0, 2, 1))
    analysis = analysed(tmp_path, CLAIMS + victims)
    assert sorted(i.rank for i in analysis.primary) == [4, 5, 6, 7], analysis.explanation
    assert analysis.decision is Decision.RESTART, analysis.explanation
    assert "node lost" in analysis.primary[0].summary


def test_silent_ranks_not_one_nodes_block_are_no_lost_node(tmp_path: Path) -> None:
    """Two silent ranks of different nodes died on their own: a crash, not a node."""
    victims = "".join(lost_peer(r) for r in (0, 2, 3, 4, 5, 7))
    analysis = analysed(tmp_path, CLAIMS + victims)
    assert sorted(i.rank for i in analysis.primary) == [1, 6], analysis.explanation
    assert "node lost" not in analysis.primary[0].summary
    assert analysis.decision is Decision.STOP, analysis.explanation


def test_deepspeeds_rankless_return_code_tells_how_the_silent_ranks_ended(
    tmp_path: Path,
) -> None:
    """DeepSpeed's launcher prints the failed process's return code beside the last command
    it built (launch.py sigkill_handler): -15 is a SIGTERM from outside, so a restart, where
    the silent ranks' own end is otherwise unknown."""
    launcher = (
        "[2026-12-07 17:19:31,084] [INFO] [launch.py:253:sigkill_handler] Killing subprocess "
        "29238\n"
        "[2026-12-07 17:19:31,436] [ERROR] [launch.py:259:sigkill_handler] ['/usr/bin/python3', "
        "'-u', '-m', 'train', '--local_rank=3'] exits with return code = -15\n"
    )
    victims = "".join(lost_peer(r) for r in (7, 5, 3, 2))
    analysis = analysed(tmp_path, CLAIMS + victims + launcher)
    assert analysis.decision is Decision.RESTART, analysis.explanation
    assert {i.nature for i in analysis.primary} == {Nature.SIGNAL}, analysis.explanation
    assert 6 in {i.rank for i in analysis.primary}


def test_ray_trains_snippet_for_several_ranks_gives_each_its_error(tmp_path: Path) -> None:
    """Ray Train v2 prints each distinct error once under every rank that raised it
    (``[Rank 0,1 Error Snippet]:``, poll.py); rank 1's own lines were deduplicated away. The
    one rank under no snippet is the one the others waited for."""
    members = "".join(
        f"(TrainController pid=16415) - (ip=10.0.0.3, pid={16800 + r}) world_rank={r}, "
        f"local_rank={r}, node_rank=0\n"
        for r in range(4)
    )
    own = (
        f"(RayTrainWorker pid=16800) {GLOO_RECV_TIMEOUT}\n"
        "(RayTrainWorker pid=16803) RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/"
        "transport/tcp/unbound_buffer.cc:129] Timed out waiting 10000ms for send operation to "
        "complete\n"
    )
    summary = (
        "ray.train.WorkerGroupError: Training failed due to worker errors:\n"
        "[Rank 0,1 Error Snippet]:\n"
        f"{GLOO_RECV_TIMEOUT}\n"
        "[Rank 3 Error Snippet]:\n"
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
        "unbound_buffer.cc:129] Timed out waiting 10000ms for send operation to complete\n"
    )
    analysis = analysed(tmp_path, members + own + summary)
    assert [(i.rank, i.nature) for i in analysis.primary] == [(2, Nature.HANG)], (
        analysis.explanation
    )


RAY_MEMBERS = "".join(
    f"(TrainController pid=25274) - (ip=10.0.0.3, pid={25400 + r}) world_rank={r}, "
    f"local_rank={r}, node_rank=0\n"
    for r in range(4)
)
"""worker_group.py's listing of the started workers: pid -> world rank (Ray 2.60.0)."""
RAY_DEATH = (
    "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a "
    "connection error code 2. End of file. Some common causes include: (1) the process was "
    "killed by the OOM killer due to high memory usage, (2) ray stop --force was called, or "
    "(3) the worker crashed unexpectedly due to SIGSEGV or another unexpected error."
)


def ray_worker_died(rank: int) -> str:
    """The raylet's word on a worker process that died (node_manager.cc), by its pid."""
    return (
        "(raylet) A worker died or was killed while executing a task by an unexpected system "
        "error. To troubleshoot the problem, check the logs for the dead worker. Lease ID: 0700 "
        "Worker ID: a4be Node ID: ac33 Worker IP address: 10.0.0.3 Worker port: 34953 Worker "
        f"PID: {25400 + rank} {RAY_DEATH}\n"
    )


def ray_snippet_of_a_dead_actor(rank: int) -> str:
    """The controller's snippet for a rank whose actor died: ActorDiedError's death cause."""
    return (
        f"(TrainController pid=25274) [Rank {rank} Error Snippet]:\n"
        "(TrainController pid=25274) The actor died unexpectedly before finishing this task.\n"
        f"(TrainController pid=25274) The actor is dead because its worker process has died. "
        f"{RAY_DEATH}\n"
    )


def test_two_ray_workers_killed_at_once_are_both_culprits(tmp_path: Path) -> None:
    """Ranks 2 and 3 died on their own (no word of a lost peer from either): the raylet and
    the controller report them when they look, after a survivor lost its connection; each
    death is its own, wherever the report stands in the log."""
    survivor = (
        "(RayTrainWorker pid=25400) RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/"
        "transport/tcp/pair.cc:537] Read error [127.0.0.1]:63193: Connection reset by peer.\n"
    )
    summary = "ray.train.WorkerGroupError: Training failed due to worker errors:\n"
    analysis = analysed(
        tmp_path,
        RAY_MEMBERS
        + ray_worker_died(3)
        + survivor
        + summary
        + ray_snippet_of_a_dead_actor(2)
        + ray_snippet_of_a_dead_actor(3),
    )
    assert sorted(i.rank for i in analysis.primary) == [2, 3], analysis.explanation
    assert {i.nature for i in analysis.primary} == {Nature.CRASH}


def test_a_rank_that_lost_a_peer_before_it_died_is_not_a_second_culprit(tmp_path: Path) -> None:
    """Rank 2 lost its connection first, then its process died: a death in its own teardown."""
    victim = (
        "(RayTrainWorker pid=25402) RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/"
        "transport/tcp/pair.cc:537] Read error [127.0.0.1]:63193: Connection reset by peer.\n"
    )
    analysis = analysed(
        tmp_path, RAY_MEMBERS + ray_worker_died(3) + victim + ray_snippet_of_a_dead_actor(2)
    )
    assert [i.rank for i in analysis.primary] == [3], analysis.explanation
