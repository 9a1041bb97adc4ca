"""A rendezvous store whose server cannot bind its port: PyTorch's wordings (1.x's bare
``Address already in use``, socket.cpp's 1.10-2.2 form, the libuv backend's 2.3+ form) and who
hosts the server (``rendezvous.py``: ``start_daemon = rank == 0``; torchrun's agent otherwise)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_faultloop.analyzers import analyze_log
from pytest_faultloop.models import LogAnalysis
from pytest_faultloop.models.faults import Nature

CORPUS = Path(__file__).resolve().parents[1] / "experiments" / "corpus" / "public"

WORKER_FRAMES = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 20, in <module>\n'
    '    dist.init_process_group("nccl")\n'
    '  File "/opt/py/torch/distributed/distributed_c10d.py", line 1305, in init_process_group\n'
    "    store, rank, world_size = next(rendezvous_iterator)\n"
    '  File "/opt/py/torch/distributed/rendezvous.py", line 174, in _create_c10d_store\n'
    "    return TCPStore(\n"
    "           ^^^^^^^^^\n"
)
AGENT_FRAMES = (
    "Traceback (most recent call last):\n"
    '  File "/usr/local/bin/torchrun", line 8, in <module>\n'
    "    sys.exit(main())\n"
    '  File "/opt/py/torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py", line 55,'
    " in next_rendezvous\n"
    "    self._store = TCPStore(  # type: ignore[call-arg]\n"
)
LIBUV = (
    "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
    "network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: "
    "address already in use\n"
)
SOCKET_CPP = (
    "RuntimeError: The server socket has failed to listen on any local network address. The "
    "server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).\n"
)
CLIENTS_TIMEOUT = (
    "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. "
    "1/2 clients joined.\n"
)


def analyse(text: str, tmp_path: Path) -> LogAnalysis:
    log = tmp_path / "train.log"
    log.write_text(text)
    return analyze_log(log)


@pytest.mark.parametrize("error", [LIBUV, SOCKET_CPP, "RuntimeError: Address already in use\n"])
def test_a_workers_bind_failure_is_rank_0s_who_hosts_the_store(error: str, tmp_path: Path) -> None:
    analysis = analyse(WORKER_FRAMES + error + CLIENTS_TIMEOUT, tmp_path)
    assert (analysis.primary[0].rank, analysis.primary[0].nature) == (0, Nature.EXCEPTION)
    assert "port is already in use" in analysis.primary[0].summary


def test_the_agents_bind_failure_names_no_worker_rank(tmp_path: Path) -> None:
    analysis = analyse(AGENT_FRAMES + SOCKET_CPP, tmp_path)
    assert analysis.primary[0].rank is None
    assert "port is already in use" in analysis.primary[0].summary


def test_a_rank_marker_outranks_the_store_hosts_rank(tmp_path: Path) -> None:
    """A launcher marking the line (here rank 2: a tcp:// store on a non-zero rank's host is
    still bound by the rank the line is) keeps its rank."""
    marked = "".join(f"[rank2]:{line}\n" for line in (WORKER_FRAMES + LIBUV).splitlines())
    assert analyse(marked, tmp_path).primary[0].rank == 2


def test_address_in_use_outside_torch_distributed_is_an_ordinary_exception(
    tmp_path: Path,
) -> None:
    frames = (
        "Traceback (most recent call last):\n"
        '  File "/opt/py/tensorboard/program.py", line 300, in _make_server\n'
        "    return WerkzeugServer(self.plugins, self.flags)\n"
    )
    analysis = analyse(frames + "OSError: [Errno 98] Address already in use\n", tmp_path)
    assert analysis.primary[0].rank is None
    assert "store" not in analysis.primary[0].summary


def test_a_real_port_clash_names_rank_0() -> None:
    """opennmt1298 (dev): two jobs on one node share the default port; the second one's
    init_process_group fails in rendezvous.py's _tcp_rendezvous_handler."""
    (log,) = sorted((CORPUS / "opennmt1298_tcpstore_port_in_use_rank0" / "logs").iterdir())
    analysis = analyze_log(log)
    assert (analysis.primary[0].rank, analysis.primary[0].nature) == (0, Nature.EXCEPTION)


BIND_WARNINGS = (
    "[W socket.cpp:436] [c10d] The server socket has failed to bind to [::]:29400 (errno: 98 - "
    "Address already in use).\n"
    "[W socket.cpp:436] [c10d] The server socket has failed to bind to 0.0.0.0:29400 (errno: 98 "
    "- Address already in use).\n"
    "[E socket.cpp:472] [c10d] The server socket has failed to listen on any local network "
    "address.\n"
)
"""socket.cpp's own log lines of a failed listen (recordError's warnings, C10D_ERROR), which
it prints before it throws."""
CLIENT_RETRY = (
    "[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29400 "
    "(errno: 97 - Address family not supported by protocol).\n"
)
STEPS = "[rank0]: step 100/300 | loss 1.899\n[rank1]: step 100/300 | loss 1.901\n"


def test_socket_cpps_log_of_a_failed_listen_is_no_failure_where_the_agent_joins_as_a_client(
    tmp_path: Path,
) -> None:
    """c10d_rendezvous_backend.py _create_tcp_store (``for is_server in [is_host, False]``):
    an agent that only guessed it hosts the store catches the failure and retries as a client;
    only socket.cpp's log lines stay. A snapshot of the run after them holds no failure, and a
    later failure is the run's own."""
    assert not analyse(BIND_WARNINGS + CLIENT_RETRY + STEPS, tmp_path).primary
    oom = (
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 "
        "has a total capacity of 79.15 GiB of which 1.02 GiB is free.\n"
    )
    analysis = analyse(BIND_WARNINGS + CLIENT_RETRY + STEPS + oom, tmp_path)
    assert analysis.primary[0].rank == 1
    assert "out of memory" in analysis.primary[0].summary


def test_a_log_that_ends_on_socket_cpps_failed_listen_stopped_there(tmp_path: Path) -> None:
    analysis = analyse(BIND_WARNINGS, tmp_path)
    assert analysis.primary[0].nature is Nature.EXCEPTION
    assert "port is already in use" in analysis.primary[0].summary


def test_the_clients_of_a_store_that_never_listened_are_its_victims(tmp_path: Path) -> None:
    """Two nodes' logs joined with the client node's first: socket.cpp's throwTimeoutError
    (``The client socket has timed out after %s while trying to connect to (%s, %d).``) on
    node1, the libuv backend's listen failure on node0: node0's is the failure."""
    timeout = (
        "The client socket has timed out after 900000ms while trying to connect to (node0, "
        "29500).\n"
    )
    client = (
        f"node1: [E1203 10:41:48.510119872 socket.cpp:1011] [c10d] {timeout}"
        + "".join(f"node1: {line}\n" for line in AGENT_FRAMES.splitlines())
        + f"node1: torch.distributed.DistNetworkError: {timeout}"
    )
    server = "".join(f"node0: {line}\n" for line in (AGENT_FRAMES + LIBUV).splitlines())
    analysis = analyse(client + server, tmp_path)
    assert (analysis.primary[0].node, analysis.primary[0].nature) == ("node0", Nature.EXCEPTION)
    assert "port is already in use" in analysis.primary[0].summary
    alone = analyse(client, tmp_path).primary[0]
    assert (alone.nature, alone.summary.endswith("(node0, 29500).")) == (Nature.NETWORK, True)
