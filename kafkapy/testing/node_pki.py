"""A throwaway CA and one certificate every node of a test cluster presents, as PEM files, with the
``ssl.*`` settings that point a node (or a client) at them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class NodePki:
    """Where the CA's certificate and the nodes' key and certificate chain are."""

    ca_pem: Path
    node_pem: Path

    def node_settings(self) -> dict[str, str]:
        """A node's keystore (also its client certificate for mTLS) and truststore."""
        return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.node_pem),
                **self.truststore()}

    def truststore(self) -> dict[str, str]:
        """What a client needs to trust the nodes."""
        return {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca_pem)}


def write_node_pki(folder: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
                   common_name: str | None = None) -> NodePki:
    """A new CA (trustme) and a node certificate for ``hosts``, written to ``folder``."""
    import trustme

    ca = trustme.CA()
    pki = NodePki(folder / "ca.pem", folder / "node.pem")
    ca.cert_pem.write_to_path(str(pki.ca_pem))
    ca.issue_cert(*hosts, common_name=common_name).private_key_and_cert_chain_pem.write_to_path(
        str(pki.node_pem))
    return pki
