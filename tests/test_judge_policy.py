"""The restart policy file: the seed's table, validation errors, content hash."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_faultloop.models import Decision
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.scoring.restart_policy import DEFAULT_POLICY_PATH, load_policy


def test_default_policy_is_the_seed_table_plus_node_kill_and_the_control() -> None:
    policy = load_policy()
    restart = {"GPU_SLEEP", "LOCK_GIL", "SIGTERM", "SIGINT", "SIGSTOP", "SIGNAL_EXC", "NODE_KILL"}
    for fault in FaultType:
        expectation = policy.expected(fault)
        assert expectation is not None, fault
        if fault is FaultType.NONE:
            assert expectation.decision is Decision.CONTINUE
        else:
            want = Decision.RESTART if fault.value in restart else Decision.STOP
            assert expectation.decision is want, fault
    assert policy.expected(FaultType.GPU_ERROR).rationale == "hardware GPU error, may be persistent"


def test_hash_follows_content_not_layout(tmp_path: Path) -> None:
    default = load_policy()
    assert default.policy_hash.startswith("sha256:") and len(default.policy_hash) == 23
    reformatted = tmp_path / "same.toml"
    reformatted.write_text("# comment\n\n" + DEFAULT_POLICY_PATH.read_text().replace(" = ", "="))
    assert load_policy(reformatted).policy_hash == default.policy_hash
    changed = tmp_path / "changed.toml"
    changed.write_text(
        DEFAULT_POLICY_PATH.read_text().replace(
            '[SIGKILL]\ndecision = "STOP"', '[SIGKILL]\ndecision = "RESTART"'
        )
    )
    assert load_policy(changed).expected(FaultType.SIGKILL).decision is Decision.RESTART
    assert load_policy(changed).policy_hash != default.policy_hash


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[GPU_NAP]\ndecision = "STOP"\nrationale = "x"\n',
            "[GPU_NAP] is not a fault type; use one of GPU_ERROR",
        ),
        (
            '[SIGKILL]\ndecision = "MAYBE"\nrationale = "x"\n',
            "[SIGKILL]: decision = 'MAYBE'; use RESTART | STOP | CONTINUE",
        ),
        ('[SIGKILL]\ndecision = "STOP"\n', "[SIGKILL]: rationale must be a non-empty string"),
        (
            '[SIGKILL]\ndecision = "STOP"\nrationale = "x"\nwhy = 1\n',
            "[SIGKILL]: unknown key 'why'",
        ),
        ("SIGKILL = 1\n", "[SIGKILL] must be a table"),
        ("[SIGKILL\n", "not valid TOML"),
        ("", "restart policy is empty"),
    ],
)
def test_invalid_policies_name_file_key_and_fix(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_policy(path)
    assert str(error.value).startswith(f"{path}: ")
    assert message in str(error.value)


def test_missing_policy_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the restart policy"):
        load_policy(tmp_path / "absent.toml")


def test_a_policy_that_is_not_utf8_names_its_line(tmp_path: Path) -> None:
    """It was a UnicodeDecodeError from deep inside."""
    path = tmp_path / "policy.toml"
    path.write_bytes(b'[SIGKILL]\ndecision = "STOP"\nrationale = "caf\xe9"\n')
    with pytest.raises(ConfigError) as error:
        load_policy(path)
    assert str(error.value) == f"{path}:3: byte 0xe9 is not UTF-8; save the file as UTF-8"
