"""How the dev ZooKeeper is secured: TLS on a ``secureClientPort``, SASL DIGEST-MD5, or both.

`ServerSecurity` is what ``zkconsumer dev-cluster --zk-tls/--zk-sasl`` and the security tests
ask for; `prepare` turns it into ``zoo.cfg`` lines, JVM options and extra jars for
`zkconsumer.devcluster.zookeeper.ZooKeeperServer`, generating certificates and the JAAS file
into the server's directory, and returns the client-side `ZkSecurity` that can talk to it.

The server is a stock Debian ZooKeeper 3.8 configured the documented way:

* TLS needs the Netty connection factory (``serverCnxnFactory=...NettyServerCnxnFactory``;
  Debian's ``zookeeper.jar`` manifest lacks netty-codec/-resolver/-unix-common, added here),
  a PEM key store (``ssl.keyStore.type=PEM``: certificate + key in one file) and a PEM trust
  store holding our dev CA.  Client certificates are required (``ssl.clientAuth=need``) and
  become the session's ``x509:CN=...`` identity.  ``plain=False`` leaves out the plain port.
* SASL: a JAAS ``Server`` section with ``DigestLoginModule`` users, the SASL auth provider,
  and ``sessionRequireClientSASLAuth=true`` so a client that does not authenticate is closed.

zoo.cfg keys ZooKeeper does not know itself (``ssl.*``, ``sessionRequireClientSASLAuth``)
become ``zookeeper.``-prefixed system properties when it parses the file, which is where the
Netty factory and the x509 provider read them.  Passwords go to the JAAS file (mode 0600),
never onto the JVM command line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from zkconsumer.devcluster.certs import CertificateAuthority
from zkconsumer.zk.security import ZkSecurity

__all__ = ["PreparedSecurity", "ServerSecurity", "prepare"]

_JAVA_DIR = Path("/usr/share/java")
# Netty jars the TLS (Netty) connection factory needs that zookeeper.jar's manifest omits.
NETTY_JARS = ("netty-codec.jar", "netty-resolver.jar", "netty-transport-native-unix-common.jar")
CLIENT_CN = "zkconsumer-client"


@dataclass(frozen=True, slots=True)
class ServerSecurity:
    """What to secure.  ``sasl_users`` maps DIGEST-MD5 user names to passwords."""

    tls: bool = False
    plain: bool = True  # keep the plain clientPort beside the secure one (TLS only: False)
    sasl_users: Mapping[str, str] = field(default_factory=dict)
    require_sasl: bool = False

    @property
    def enabled(self) -> bool:
        return self.tls or bool(self.sasl_users)


@dataclass(frozen=True, slots=True)
class PreparedSecurity:
    """The server-side pieces plus the client settings that fit them."""

    cfg_lines: tuple[str, ...]
    jvm_args: tuple[str, ...]
    classpath: tuple[str, ...]
    ca: CertificateAuthority | None
    client: ZkSecurity  # TLS files (client certificate); with SASL the first user and a
    # password file (``sasl-password``, mode 0600) so child processes get paths, not secrets


def prepare(security: ServerSecurity, directory: Path) -> PreparedSecurity:
    """Write certificates / the JAAS file into ``directory`` and return what the server needs."""
    cfg: list[str] = []
    jvm: list[str] = []
    cp: list[str] = []
    ca: CertificateAuthority | None = None
    client = ZkSecurity()
    if security.tls:
        ca = CertificateAuthority(directory / "tls")
        server = ca.issue("server", "localhost", server=True)
        mine = ca.issue("client", CLIENT_CN)
        cfg += ["serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
                f"ssl.keyStore.location={server.combined}", "ssl.keyStore.type=PEM",
                f"ssl.trustStore.location={ca.cert}", "ssl.trustStore.type=PEM",
                "ssl.clientAuth=need", "ssl.hostnameVerification=false",
                "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider"]
        cp += [str(_JAVA_DIR / j) for j in NETTY_JARS if (_JAVA_DIR / j).is_file()]
        client = ZkSecurity(tls_ca=str(ca.cert), tls_cert=str(mine.cert),
                            tls_key=str(mine.key))
    if security.sasl_users:
        jaas = directory / "jaas.conf"
        users = "".join(f'\n    user_{u}="{p}"' for u, p in security.sasl_users.items())
        jaas.write_text("Server {\n    org.apache.zookeeper.server.auth.DigestLoginModule "
                        f"required{users};\n}};\n")
        os.chmod(jaas, 0o600)
        user, password = next(iter(security.sasl_users.items()))
        password_file = directory / "sasl-password"  # what clients (and brokers) read
        password_file.write_text(password + "\n")
        os.chmod(password_file, 0o600)
        jvm.append(f"-Djava.security.auth.login.config={jaas}")
        cfg.append("authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider")
        if security.require_sasl:
            cfg.append("sessionRequireClientSASLAuth=true")
        client = ZkSecurity(tls_ca=client.tls_ca, tls_cert=client.tls_cert,
                            tls_key=client.tls_key, sasl_user=user,
                            password_file=str(password_file))
    return PreparedSecurity(tuple(cfg), tuple(jvm), tuple(cp), ca, client)
