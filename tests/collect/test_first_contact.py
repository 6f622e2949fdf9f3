"""``collect`` at first contact: an unreachable target or a cluster that answers nothing is exit 3 with one line
naming it, after bounded retries; ``--check`` lists what would be recorded and what is missing."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lbreplay.collect.reachability import admin_target, metadata_store_target, probe, service_target
from lbreplay.errors import UsageError
from tests.collect.admin_server import admin_server, pulsar_answers


def closed_port() -> int:
    """A port nothing listens on: bound, then closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_collect(*args: str) -> tuple[int, str, str, float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "lbreplay.cli", "collect", *args], capture_output=True, text=True,
                          timeout=120, check=False)
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started


def test_targets_from_the_flags() -> None:
    assert admin_target("http://b1:8080").hosts == (("b1", 8080),)
    assert admin_target("https://b1").hosts == (("b1", 443),)
    assert metadata_store_target("zk:a:2181,b:2182/chroot").hosts == (("a", 2181), ("b", 2182))
    assert metadata_store_target("zk:a").hosts == (("a", 2181),)
    assert service_target("pulsar+ssl://h1,h2:7000").hosts == (("h1", 6651), ("h2", 7000))
    with pytest.raises(UsageError, match="--admin-url 'b1:8080'"):
        admin_target("b1:8080")
    with pytest.raises(UsageError, match="--service-url"):
        service_target("http://h:6650")


def test_a_probe_of_a_closed_port_is_bounded_and_says_what_it_tried() -> None:
    port = closed_port()
    p = probe(metadata_store_target(f"zk:127.0.0.1:{port}"), attempts=3, backoff_s=0.1)
    assert p.error == "connection refused" and p.attempts == 3 and p.seconds < 5
    assert p.line() == (f"--metadata-store zk:127.0.0.1:{port}: cannot connect to 127.0.0.1:{port} (connection "
                        f"refused; 3 TCP attempts over {p.seconds:.1f} s)")


@pytest.mark.parametrize("flag", ["--metadata-store", "--admin-url"])
def test_an_unreachable_target_exits_3_with_one_line(tmp_path: Path, flag: str) -> None:
    port = closed_port()
    value = f"zk:127.0.0.1:{port}" if flag == "--metadata-store" else f"http://127.0.0.1:{port}"
    code, out, err, seconds = run_collect("--out", str(tmp_path / "out"), flag, value, "--duration", "30s")
    assert code == 3 and seconds < 30
    assert len(err.splitlines()) == 1
    assert re.fullmatch(rf"lbreplay: collect: {flag} {re.escape(value)}: cannot connect to 127\.0\.0\.1:{port} "
                        r"\(connection refused; 3 TCP attempts over \d+\.\d s\)", err.strip()), err
    assert not (tmp_path / "out").exists()  # nothing started, nothing written


def test_every_admin_poll_refused_is_nothing_recorded(tmp_path: Path) -> None:
    with admin_server({}) as url:  # every request: 401
        code, out, err, _ = run_collect("--out", str(tmp_path / "out"), "--admin-url", url, "--interval", "1",
                                        "--duration", "3s", "--quiet")
    assert code == 3 and "collected" not in out
    last = err.strip().splitlines()[-1]
    assert re.match(rf"lbreplay: collect: nothing recorded into {re.escape(str(tmp_path / 'out'))} in [34] s: no admin "
                    r"request answered in [234] poll\(s\) \(last: ", last), last
    assert f"(last: GET {url}/admin/v2/broker-stats/topics -> HTTP 401 (unauthorized" in last
    stop = [json.loads(ln) for ln in (tmp_path / "out/collect/session.jsonl").read_text().splitlines()][-1]
    assert stop["event"] == "stop" and stop["admin_answered"] == 0 and stop["admin_polls"] >= 2


def test_an_answering_admin_api_is_recorded(tmp_path: Path) -> None:
    with admin_server(pulsar_answers("127.0.0.1:8080")) as url:
        code, out, err, _ = run_collect("--out", str(tmp_path / "out"), "--admin-url", url, "--duration", "2s",
                                        "--quiet")
    assert code == 0, err
    polls = list((tmp_path / "out/collect/admin").glob("*.jsonl"))
    lines = [json.loads(ln) for ln in polls[0].read_text().splitlines()]
    assert {ln["source"] for ln in lines} == {"load-report", "topics", "leader", "brokers", "isolation-policies",
                                              "namespace-policies"}
    assert all(ln["status"] == 200 for ln in lines)


def test_check_against_unreachable_targets_lists_each_and_exits_3(tmp_path: Path) -> None:
    port = closed_port()
    code, out, err, seconds = run_collect("--out", str(tmp_path / "out"), "--check", "--admin-url",
                                          f"http://127.0.0.1:{port}", "--metadata-store", f"zk:127.0.0.1:{port}",
                                          "--service-url", f"pulsar://127.0.0.1:{port}")
    assert code == 3 and seconds < 30
    failed = [ln for ln in out.splitlines() if ln.startswith("  ! ")]
    assert [ln.split(":")[0] for ln in failed] == ["  ! --admin-url http", "  ! --metadata-store zk",
                                                   "  ! --service-url pulsar"]
    assert all(f"cannot connect to 127.0.0.1:{port} (connection refused" in ln for ln in failed)
    assert err.strip() == f"lbreplay: collect --check: 3 problem(s); first: {failed[0][4:]}"
    assert not (tmp_path / "out").exists()


def test_check_lists_the_cluster_and_the_permission_it_lacks(tmp_path: Path) -> None:
    refused = "/admin/v2/clusters/c1/namespaceIsolationPolicies"
    with admin_server(pulsar_answers("127.0.0.1:8080", refuse=(refused,))) as url:
        code, out, err, _ = run_collect("--out", str(tmp_path / "out"), "--check", "--admin-url", url)
        ok_code, ok_out, _, _ = run_collect("--out", str(tmp_path / "out"), "--check", "--admin-url", url,
                                            "--cluster", "c1")
    assert code == 3
    assert f"--admin-url {url}: reachable (127.0.0.1:{url.rsplit(':', 1)[1]})" in out
    assert "  leader (brokers/leaderBroker): 127.0.0.1:8080" in out
    assert "  active brokers: 1 (127.0.0.1:8080)" in out
    assert "  namespaces: 1 of 1 policies readable" in out
    assert f"  ! admin: GET {url}{refused} -> HTTP 403 (forbidden: the role lacks this permission" in out
    assert err.strip().startswith(f"lbreplay: collect --check: 1 problem(s); first: admin: GET {url}{refused}")
    assert ok_code == 3  # the same refusal with --cluster given
    assert not (tmp_path / "out").exists()


def test_check_passes_when_everything_answers(tmp_path: Path) -> None:
    """``--check`` needs no ``--out``; a recording does (exit 2 before connecting to anything)."""
    with admin_server(pulsar_answers("127.0.0.1:8080")) as url:
        code, out, err, _ = run_collect("--check", "--admin-url", url)
        no_out = run_collect("--admin-url", url)
    assert code == 0, err
    assert out.strip().splitlines()[0] == "collect --check: 1 target(s), nothing is recorded"
    assert out.strip().splitlines()[-1] == "check: OK (everything collect needs is reachable and readable)"
    assert "!" not in out
    assert no_out[0] == 2
    assert no_out[2].strip() == ("lbreplay: --out is required: the directory to record into (only --check goes "
                                 "without it)")


def test_check_reads_what_the_metadata_store_holds(kazoo, zookeeper: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A real ZooKeeper: the brokers and the kind of each report, the bundle-data znodes and the leader."""
    from lbreplay.collect.auth import ClientAuth
    from lbreplay.collect.first_contact import check_command
    from tests.collect.test_metadata_store import local_broker_data

    kazoo.create("/loadbalance/brokers/127.0.0.1:8080", local_broker_data(1_000, 1.0, {}), makepath=True)
    kazoo.create("/loadbalance/brokers/127.0.0.1:8081", b'{"webServiceUrl":"http://127.0.0.1:8081"}', makepath=True)
    for rng in ("0x00000000_0x80000000", "0x80000000_0xffffffff"):
        kazoo.create(f"/loadbalance/bundle-data/lb/hot/{rng}", b"{}", makepath=True)
    kazoo.create("/loadbalance/leader", b'{"brokerId":"127.0.0.1:8080","serviceUrl":"http://127.0.0.1:8080"}')
    found = check_command([], zookeeper, None, None, ClientAuth())
    out = capsys.readouterr().out
    assert found.problems == []
    assert f"metadata store {zookeeper}: connected" in out
    assert ("  /loadbalance/brokers: 2 broker(s)\n    127.0.0.1:8080: LocalBrokerData\n"
            "    127.0.0.1:8081: BrokerLookupData (extensible: loads in topics)") in out
    assert "  /loadbalance/bundle-data: 2 bundle(s); /loadbalance/broker-time-average: 0 broker(s)" in out
    assert "  leader: /loadbalance/leader -> 127.0.0.1:8080" in out


def test_a_store_without_loadbalance_is_a_problem_and_records_nothing(zookeeper: str, tmp_path: Path) -> None:
    code, out, _, _ = run_collect("--out", str(tmp_path / "c"), "--check", "--metadata-store", zookeeper + "/nothing")
    assert code == 3
    assert "  ! --metadata-store: no /loadbalance znode (not a Pulsar metadata store, or a wrong /chroot)" in out
    code, out, err, _ = run_collect("--out", str(tmp_path / "out"), "--metadata-store", zookeeper + "/nothing",
                                    "--duration", "2s", "--quiet")
    assert code == 3, err
    assert err.strip().splitlines()[-1].startswith(f"lbreplay: collect: nothing recorded into {tmp_path / 'out'} in ")
    assert err.strip().endswith(": no znode version under /loadbalance")


def test_a_port_that_is_not_zookeeper_is_exit_3_and_the_stop_is_clean(tmp_path: Path) -> None:
    """TCP opens but no ZooKeeper session comes (an HTTP server on the port): one line naming the store and the
    bounded wait; stopping the recorder afterwards joins no unstarted thread (the old ``RuntimeError: cannot join
    thread before it is started``)."""
    from lbreplay.collect.layout import JsonLines
    from lbreplay.collect.metadata_store import MetadataStoreRecorder
    from lbreplay.errors import InvalidInputError

    with admin_server({}) as url:
        store = "zk:" + url.removeprefix("http://")
        log = JsonLines(tmp_path / "events.jsonl")
        rec = MetadataStoreRecorder(store, tmp_path, log, connect_timeout_s=2)
        started = time.monotonic()
        with pytest.raises(InvalidInputError) as err:
            rec.start()
        assert time.monotonic() - started < 10
        rec.stop()
        log.close()
    assert str(err.value) == f"--metadata-store {store}: no ZooKeeper session with {store[3:]} within 2 s"
    assert err.value.exit_code == 3


def test_check_asks_for_the_cluster_when_the_admin_api_lists_several(tmp_path: Path) -> None:
    answers = {**pulsar_answers("127.0.0.1:8080"), "/admin/v2/clusters": (200, ["c1", "c2"])}
    with admin_server(answers) as url:
        code, out, _, _ = run_collect("--check", "--admin-url", url)
        ok, _, _, _ = run_collect("--check", "--admin-url", url, "--cluster", "c1")
    assert code == 3 and ok == 0
    assert ("  ! admin: cannot tell the cluster (GET /admin/v2/clusters lists none or several): give --cluster"
            in out)
