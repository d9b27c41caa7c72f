"""The JVMs of a broker home: where each keeps its files, the properties each runs with, the
cluster id its data directory was formatted with, and how its properties file is written."""

from __future__ import annotations

import stat

from framework.broker.roles import (
    BROKER_ID,
    CONTROLLER_ID,
    broker_role,
    cluster_node,
    combined_node,
    controller_role,
    new_cluster_id,
    separate_broker,
    separate_controller,
    write_properties,
)


def test_a_broker_keeps_its_files_in_the_home_and_its_controller_in_a_folder_of_it(tmp_path):
    node, controller = broker_role(tmp_path), controller_role(tmp_path)
    assert node.pid_file == tmp_path / "broker.pid" and node.data_dir == tmp_path / "data"
    assert (node.name, controller.name) == ("the broker", "Kafka's controller")
    assert node.config_file == tmp_path / "server.properties"
    folder = tmp_path / "controller"
    assert {controller.pid_file.parent, controller.log_file.parent} == {folder}
    assert controller.config_file == folder / "controller.properties"
    assert controller.data_dir == folder / "data" != node.data_dir


def test_the_cluster_id_is_read_from_the_formatted_data_directory(tmp_path):
    role = broker_role(tmp_path)
    assert not role.formatted and role.cluster_id() is None
    role.data_dir.mkdir()
    (role.data_dir / "meta.properties").write_text("version=1\nnode.id=1\n")
    assert role.formatted and role.cluster_id() is None
    (role.data_dir / "meta.properties").write_text("version=1\ncluster.id= AbC-d_1 \nnode.id=1\n")
    assert role.cluster_id() == "AbC-d_1"


def test_cluster_ids_look_like_kafka_uuids():
    ids = {new_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(cid) == 22 and not cid.startswith("-") and "=" not in cid for cid in ids)


def test_a_combined_node_is_its_own_only_voter(tmp_path):
    node = combined_node(19092, 19093, tmp_path)
    assert node["process.roles"] == "broker,controller"
    assert node["controller.quorum.voters"] == f"{BROKER_ID}@127.0.0.1:19093"
    assert "CONTROLLER://127.0.0.1:19093" in node["listeners"]
    assert node["advertised.listeners"] == "PLAINTEXT://127.0.0.1:19092"


def test_a_separated_broker_reaches_its_controller_as_the_only_voter(tmp_path):
    broker, controller = separate_broker(1, 2, tmp_path / "b"), separate_controller(2, tmp_path)
    voters = f"{CONTROLLER_ID}@127.0.0.1:2"
    assert broker["controller.quorum.voters"] == controller["controller.quorum.voters"] == voters
    assert "CONTROLLER" not in broker["listeners"] and "advertised.listeners" not in controller
    assert (broker["node.id"], controller["node.id"]) == (str(BROKER_ID), str(CONTROLLER_ID))


def test_each_cluster_node_names_every_voter_and_replicates_over_its_own_listener(tmp_path):
    ports = {i: {"port": 10 + i, "internal": 20 + i, "controller": 30 + i} for i in (1, 2)}
    one, two = (cluster_node(i, ports, 10 + i, tmp_path) for i in (1, 2))
    assert one["controller.quorum.voters"] == two["controller.quorum.voters"]
    assert one["controller.quorum.voters"] == "1@127.0.0.1:31,2@127.0.0.1:32"
    assert "INTERNAL://127.0.0.1:22" in two["advertised.listeners"]


def test_properties_are_written_private_with_a_header_and_in_order(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("old")
    path.chmod(0o644)
    write_properties(path, {"b": "2", "a": "x=y"})
    assert path.read_text().splitlines() == ["# written by logwheel at every start", "b=2", "a=x=y"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # a secure broker's holds passwords
