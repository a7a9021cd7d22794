"""Let aioice offer 127.0.0.1 host candidates.

aioice leaves loopback out of its host candidates, so a browser and a worker on one machine (a
single-machine install, or tests inside a network namespace with only `lo`) never connect.
"""

import aioice.ice

_original = aioice.ice.get_host_addresses


def _with_loopback(use_ipv4: bool, use_ipv6: bool) -> list[str]:
    addresses = _original(use_ipv4, use_ipv6)
    if use_ipv4 and "127.0.0.1" not in addresses:
        addresses.append("127.0.0.1")
    return addresses


def _loopback_only(use_ipv4: bool, use_ipv6: bool) -> list[str]:
    return ["127.0.0.1"] if use_ipv4 else []


def enable_loopback_candidates(*, only: bool = False) -> None:
    aioice.ice.get_host_addresses = _loopback_only if only else _with_loopback
