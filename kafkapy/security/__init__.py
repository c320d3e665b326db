"""Who a connection is and what it may do: principals, per-connection sessions, and (as they land)
SASL mechanisms and the ACL authorizer.

Everything here is sans-I/O: no sockets, no Trio, no clock. The network edge (``net/``) runs the
TLS and SASL exchanges and records their outcome in a :class:`Session`; the broker's handlers ask
the authorizer about that session's principal.
"""

from kafkapy.security.principal import ANONYMOUS, KafkaPrincipal
from kafkapy.security.session import Session

__all__ = ["ANONYMOUS", "KafkaPrincipal", "Session"]
