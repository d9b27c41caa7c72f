"""A backfill's Spark seen as another local user sees it: a client of Spark's own RPC that
knows a secret or not, and the addresses a port listens on."""

from __future__ import annotations

import ipaddress
from typing import Any

import psutil


def rpc_connects(jvm: Any, port: int, endpoint: str, settings: dict[str, str]) -> bool:
    """Whether a client of Spark's RPC with `settings` (`spark.authenticate`, its secret, ...)
    reaches `endpoint` of the RPC server on 127.0.0.1:`port`. The client is Spark's own
    (`RpcEnv` in client mode, made in `jvm`, a py4j view of some Spark JVM: what anyone who
    runs Spark can make), with a security manager of its own."""
    conf = jvm.org.apache.spark.SparkConf(False)
    for key, value in {**settings, "spark.rpc.lookupTimeout": "30s"}.items():
        conf.set(key, value)
    none = getattr(jvm.scala, "None$").__getattr__("MODULE$")
    config = getattr(jvm.org.apache.spark.internal.config, "package$").__getattr__("MODULE$")
    security = jvm.org.apache.spark.SecurityManager(conf, none, config.AUTH_SECRET_FILE())
    client = jvm.org.apache.spark.rpc.RpcEnv.create("probe", "127.0.0.1", 0, conf, security, True)
    try:
        client.setupEndpointRef(jvm.org.apache.spark.rpc.RpcAddress("127.0.0.1", port), endpoint)
    except Exception as error:  # py4j's Py4JJavaError: refused, or no such endpoint
        if "SparkException" not in str(error):
            raise
        return False
    finally:
        client.shutdown()
    return True


def listening_addresses(port: int) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The local addresses on which a TCP socket of this machine listens on `port` (IPv4
    mapped into IPv6 shown as IPv4)."""
    found = set()
    for connection in psutil.net_connections(kind="tcp"):
        if connection.status == psutil.CONN_LISTEN and connection.laddr.port == port:
            address = ipaddress.ip_address(connection.laddr.ip)
            found.add(getattr(address, "ipv4_mapped", None) or address)
    return found
