"""A rendezvous store whose server cannot bind its port: PyTorch's wordings (1.x's bare
``Address already in use``, socket.cpp's 1.10-2.2 form, the libuv backend's 2.3+ form) and who
hosts the server (``rendezvous.py``: ``start_daemon = rank == 0``; torchrun's agent otherwise)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_faultloop.analyzers import analyze_log
from pytest_faultloop.faults import Nature
from pytest_faultloop.models import LogAnalysis

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
