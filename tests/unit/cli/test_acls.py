"""`logwheel acls` prints each part's ACLs: `{name}` in the principal gives every part its own
(computations, injectors, the queries of the pipeline's state), and the host is the machine's
address, not `*`, unless given."""

from __future__ import annotations

from framework.cli.main import main


def acls(capsys, *args: str) -> list[str]:
    assert main(["acls", "jobs.zeitgeist:pipeline", "--bootstrap", "127.0.0.1:9", *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_each_part_gets_its_own_principal(capsys):
    lines = acls(capsys, "--principal", "User:zg-{name}")
    principals = {line.split()[2] for line in lines}
    assert principals == {
        "User:zg-window-counter", "User:zg-model", "User:zg-spike-detector",
        "User:zg-dip-detector", "User:zg-query-generator", "User:zg-queries",
    }  # fmt: skip
    model = [line for line in lines if "User:zg-model " in line]
    assert any("TOPIC prefixed 'zeitgeist.model.'" in line for line in model)
    assert not any("'zeitgeist.'" in line for line in lines)
    assert all(line.endswith("from 127.0.0.1") for line in lines)
    assert not any(" DELETE " in line for line in lines)
    queries = [line for line in lines if "User:zg-queries " in line]
    assert (
        "needs   ALLOW User:zg-queries DESCRIBE on GROUP literal 'zeitgeist.model' from "
        "127.0.0.1" in queries
    )
    assert any("READ on TOPIC literal 'zeitgeist.model.serving'" in line for line in queries)
    assert not any(" WRITE " in line or "prefixed" in line for line in queries)


def test_one_part_one_host_and_reset(capsys):
    lines = acls(capsys, "--principal", "User:m", "--computation", "model", "--host", "10.0.0.7",
                 "--allow-reset")  # fmt: skip
    assert {line.split()[2] for line in lines} == {"User:m"}
    assert all(line.endswith("from 10.0.0.7") for line in lines)
    assert any("DELETE on TOPIC prefixed 'zeitgeist.model.'" in line for line in lines)
    assert not any("'zeitgeist.window-counter.changelog'" in line for line in lines)
    assert not any("prefixed 'zeitgeist.window-counter.'" in line for line in lines)
