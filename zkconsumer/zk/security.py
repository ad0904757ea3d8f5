"""`ZkSecurity`: how we authenticate to ZooKeeper (TLS, SASL, digest) and which ACL we set.

One frozen value carries the settings of every connection a process makes (consumer group,
producer, broker registration, offsets tools, mirror, Spark driver and executors); it turns
them into `kazoo.client.KazooClient` arguments (`kazoo_kwargs`) -- kazoo implements TLS
(``use_ssl``/``ca``/``certfile``/``keyfile``), SASL (``sasl_options``, via pure-sasl) and
digest ``addauth`` (``auth_data``) -- and explains a failed connection in one line
(`explain_connect_failure`).  Building it from flags, ``.properties`` and the environment is
`zkconsumer.zk.security_config`.

Invariants:

* **Secrets never leave this object by accident**: the password is a `Secret` (its ``repr``
  and ``str`` are ``'***'``), it is read from a file or the environment only when a
  connection is made (`password`), and `describe`/`identity`/every message name the user and
  the files, never the password.  A ``ZkSecurity`` is therefore safe to log, to put into
  a Spark plan (only file paths and user names travel) or into a ``/healthz`` answer.
* TLS hostname verification is on unless explicitly turned off (``verify_hostname=False``).
* ``acl=ZkAcl.CREATOR`` needs an identity (digest, SASL or a client certificate): without
  one ZooKeeper would answer every create with InvalidACL, so it is refused up front.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from kazoo.exceptions import AuthFailedError, NoAuthError, SessionClosedRequireSaslError
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from zkconsumer.errors import ConfigurationError, ZooKeeperAuthError, ZooKeeperError

__all__ = ["PASSWORD_ENV", "KazooLog", "Secret", "ZkAcl", "ZkSecurity", "auth_error",
           "explain_connect_failure"]

log = logging.getLogger(__name__)

PASSWORD_ENV = "ZKCONSUMER_ZK_PASSWORD"


class Secret:
    """A password that prints as ``'***'`` (in logs, reprs, tracebacks' messages)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'***'"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


class ZkAcl(str, Enum):
    """ACL of the znodes we create.  ``open``: world-all, what Scala 0.7 writes (Scala members
    must write the same znodes).  ``creator``: all rights to the creating identity, read to
    everyone (``group describe`` still works anonymously)."""

    OPEN = "open"
    CREATOR = "creator"


SASL_MECHANISMS = ("DIGEST-MD5", "GSSAPI")


@dataclass(frozen=True, slots=True)
class ZkSecurity:
    """ZooKeeper connection security.  All fields optional; the default is a plain,
    anonymous connection with open ACLs (0.7's behaviour).

    ``tls`` is implied by any ``tls_*`` file; ``tls=True`` alone uses the system CAs.  The
    password (SASL and digest share it) is ``password`` if given (Python API), else the
    content of ``password_file`` (first line), else the ``ZKCONSUMER_ZK_PASSWORD`` variable.
    """

    tls: bool = False
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    verify_hostname: bool = True
    sasl_user: str | None = None
    sasl_mechanism: str = "DIGEST-MD5"
    sasl_principal: str | None = None  # GSSAPI (Kerberos) principal
    digest_user: str | None = None
    password_file: str | None = None
    password: Secret | None = field(default=None, compare=False)
    acl: ZkAcl = ZkAcl.OPEN

    def __post_init__(self) -> None:
        if self.sasl_mechanism not in SASL_MECHANISMS:
            raise ConfigurationError(f"zk.sasl.mechanism: {self.sasl_mechanism!r} is not one "
                                     f"of {', '.join(SASL_MECHANISMS)}")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ConfigurationError("zk.tls.cert and zk.tls.key (--zk-tls-cert/--zk-tls-key) "
                                     "go together: give both or neither")
        if self.password is not None and not isinstance(self.password, Secret):
            object.__setattr__(self, "password", Secret(str(self.password)))
        if not isinstance(self.acl, ZkAcl):
            try:
                object.__setattr__(self, "acl", ZkAcl(str(self.acl).lower()))
            except ValueError:
                raise ConfigurationError(f"zk.acl: {self.acl!r} is not one of open, creator") \
                    from None
        if self.acl is ZkAcl.CREATOR and not self.has_identity:
            raise ConfigurationError(
                "zk.acl=creator needs an identity to give the znodes to: --zk-digest-user, "
                "--zk-sasl-user or a TLS client certificate (--zk-tls-cert/--zk-tls-key)")

    # ------------------------------------------------------------------ what is configured

    @property
    def use_tls(self) -> bool:
        return self.tls or bool(self.tls_ca or self.tls_cert)

    @property
    def has_identity(self) -> bool:
        return bool(self.sasl_user or self.sasl_principal or self.digest_user or self.tls_cert)

    @property
    def enabled(self) -> bool:
        return self.use_tls or self.has_identity or self.acl is not ZkAcl.OPEN

    def identity(self) -> str:
        """Who we are to ZooKeeper, for messages (never the password)."""
        ids = []
        if self.sasl_user or self.sasl_principal:
            ids.append(f"sasl:{self.sasl_user or self.sasl_principal}")
        if self.digest_user:
            ids.append(f"digest:{self.digest_user}")
        if self.tls_cert:
            ids.append(f"x509 certificate {self.tls_cert}")
        return " + ".join(ids) or "anonymous (no ZooKeeper credentials given)"

    def describe(self) -> str:
        """One safe line for logs: transport, identity, ACL."""
        tls = "plain"
        if self.use_tls:
            tls = "TLS" + ("" if self.verify_hostname else " (hostname not verified)")
        return f"{tls}, {self.identity()}, acl={self.acl.value}"

    def password_text(self) -> str:
        """The password, read now (`ConfigurationError` naming the source if missing)."""
        if self.password is not None:
            return self.password.reveal()
        if self.password_file:
            try:
                with open(self.password_file, encoding="utf-8") as f:
                    text = f.readline().rstrip("\r\n")
            except OSError as exc:
                raise ConfigurationError(f"zk.password.file: cannot read {self.password_file}: "
                                         f"{exc.strerror}") from None
            if not text:
                raise ConfigurationError(f"zk.password.file: {self.password_file} is empty")
            return text
        env = os.environ.get(PASSWORD_ENV)
        if env:
            return env
        raise ConfigurationError(
            f"ZooKeeper user {self.sasl_user or self.digest_user!r} needs a password: "
            f"--zk-password-file FILE (zk.password.file) or the {PASSWORD_ENV} variable")

    # ------------------------------------------------------------------ kazoo

    def check_files(self) -> None:
        """`ConfigurationError` for a TLS file that is missing, unreadable or not usable."""
        for key, path in (("zk.tls.ca", self.tls_ca), ("zk.tls.cert", self.tls_cert),
                          ("zk.tls.key", self.tls_key)):
            if path and not os.access(path, os.R_OK):
                raise ConfigurationError(f"{key}: cannot read {path} (missing or no permission)")
        if self.use_tls:
            try:
                self.ssl_context()
            except (ssl.SSLError, OSError) as exc:
                raise ConfigurationError(f"zk.tls: cannot load the TLS files ({self.tls_ca}, "
                                         f"{self.tls_cert}, {self.tls_key}): "
                                         f"{getattr(exc, 'reason', None) or exc}") from None
        if self.tls_cert:
            not_after = _not_after(self.tls_cert)
            if not_after is not None and not_after < time.time():
                raise ConfigurationError(
                    f"zk.tls.cert: the client certificate {self.tls_cert} expired on "
                    f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(not_after))}: "
                    "renew it")

    def ssl_context(self) -> ssl.SSLContext:
        """The client TLS context kazoo would build (for probes and the dev server check)."""
        ctx = ssl.create_default_context(cafile=self.tls_ca)
        ctx.check_hostname = self.verify_hostname
        if self.tls_cert and self.tls_key:
            ctx.load_cert_chain(self.tls_cert, self.tls_key)
        return ctx

    def kazoo_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `KazooClient` (kazoo >= 2.9 signature).  Reads the password."""
        kw: dict[str, Any] = {}
        if self.use_tls:
            self.check_files()  # a missing or expired file: one line, before kazoo sees it
            kw.update(use_ssl=True, ca=self.tls_ca, certfile=self.tls_cert,
                      keyfile=self.tls_key, verify_certs=True,
                      check_hostname=self.verify_hostname,
                      handler=TlsHandler(self.ssl_context()))
        if self.sasl_user or self.sasl_principal:
            if self.sasl_mechanism == "GSSAPI":
                _require_gssapi()
                kw["sasl_options"] = {"mechanism": "GSSAPI",
                                      "principal": self.sasl_principal or self.sasl_user}
            else:
                _require_pure_sasl()
                kw["sasl_options"] = {"mechanism": "DIGEST-MD5", "username": self.sasl_user,
                                      "password": self.password_text()}
        if self.digest_user:
            kw["auth_data"] = [("digest", f"{self.digest_user}:{self.password_text()}")]
        if self.acl is ZkAcl.CREATOR:
            # for creates that do not go through `acl_for` (pipelined bulk creates): the
            # strict ACL, never a more open one than asked for
            kw["default_acl"] = list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)
        return kw

    def acl_for(self, path: str, *, container: bool) -> list[ACL]:
        """The ACL for a znode we create at ``path`` (relative to the chroot).

        Open unless ``acl=creator``.  Then top-level containers (``/consumers``, ``/brokers``)
        and the shared second-level containers (``/consumers/<group>``, ``/brokers/ids``,
        ``/brokers/topics``) stay open so other groups and tenants can create beside us, and
        everything deeper (our member ids, owners, offsets, checkpoints, registrations and
        the containers holding them -- deleting a znode needs rights on its *parent*) gets
        creator-all + world-read.
        """
        if self.acl is ZkAcl.OPEN:
            return list(OPEN_ACL_UNSAFE)
        depth = path.count("/")
        if container and depth <= 2:
            return list(OPEN_ACL_UNSAFE)
        return list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)


class TlsHandler(SequentialThreadingHandler):  # type: ignore[misc]
    """kazoo's threading handler with OUR TLS context, built once per session.

    kazoo 2.x builds a new context for every connection attempt and always loads the system
    CA store into it (about 60 ms on a loaded 2-core machine, per reconnect), so a server
    certificate from *any* public CA would be trusted besides ``--zk-tls-ca``.  This context
    trusts only ``--zk-tls-ca`` when it is given (the system store otherwise) and is reused.
    """

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__()
        self._context = context

    def create_connection(self, address: tuple[str, int], hostname: str | None = None,
                          timeout: float | None = None, use_ssl: bool = False,
                          **kwargs: Any) -> socket.socket:
        if not use_ssl:
            return super().create_connection(address, hostname=hostname, timeout=timeout)  # type: ignore[no-any-return]
        family = socket.getaddrinfo(address[0], address[1], 0, socket.SOCK_STREAM)[0][0]
        conn = self._context.wrap_socket(socket.socket(family), server_hostname=hostname)
        try:
            conn.settimeout(timeout)
            conn.connect(address)  # the handshake, certificate checks included
        except BaseException:
            conn.close()
            raise
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn


def _not_after(cert: str) -> float | None:
    """The certificate's expiry (epoch seconds), or None if it cannot be read here."""
    try:
        decoded = ssl._ssl._test_decode_cert(cert)  # type: ignore[attr-defined]
        return float(ssl.cert_time_to_seconds(decoded["notAfter"]))
    except Exception:
        return None


def _require_pure_sasl() -> None:
    try:
        import puresasl  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        raise ConfigurationError("--zk-sasl-user needs the pure-sasl package "
                                 "(pip install pure-sasl)") from None


def _require_gssapi() -> None:
    _require_pure_sasl()
    try:
        import kerberos  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        raise ConfigurationError(
            "zk.sasl.mechanism=GSSAPI needs the 'kerberos' Python package (pure-sasl's "
            "Kerberos backend) and a ticket (kinit); install it or use DIGEST-MD5") from None


class KazooLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """kazoo's logger for one client, remembering its last warnings (why a connect failed)."""

    def __init__(self) -> None:
        super().__init__(logging.getLogger("kazoo.client"), {})
        self.problems: deque[str] = deque(maxlen=16)
        self.settled = threading.Event()  # connected, every host refused our TLS, or cancel
        self._cancelled = threading.Event()
        self._hosts = 1
        self._refusals = 0

    def attach(self, client: Any) -> None:
        """Watch ``client``: its connected state, and SASL refusals (`_watch_sasl`)."""
        self._hosts = max(1, len(client.hosts))
        client.add_listener(lambda state: self.settled.set() if state == "CONNECTED" else None)
        self._watch_sasl(client)

    def start_client(self, client: Any, timeout: float) -> None:
        """kazoo's ``start(timeout)``, but over as soon as every host refused our TLS (waiting
        cannot help), or at once after a `cancel` from another thread (`ZooKeeperError`)."""
        self.settled.clear()  # before the check: a cancel after it sets settled again
        self._refusals = 0
        if not self._cancelled.is_set():
            client.start_async()
            self.settled.wait(timeout)
        if (cancelled := self._cancelled.is_set()) or not client.connected:
            with contextlib.suppress(Exception):  # cancelled too: it may outlive a stop
                client.stop()
                client.close()
            raise (ZooKeeperError("ZooKeeper session closed while connecting") if cancelled
                   else client.handler.timeout_exception("Connection time-out"))

    def cancel(self) -> None:
        """End a `start_client` under way (or to come) at once: its session is being closed."""
        self._cancelled.set()
        self.settled.set()

    def _watch_sasl(self, client: Any) -> None:
        """Make a SASL refusal an ordinary AUTH_FAILED inside ``client``'s connection.

        ZooKeeper 3.6+ with ``sessionRequireClientSASLAuth`` answers a failed SASL login with
        SESSION_CLOSED_REQUIRE_SASL_AUTH, which kazoo 2.x does not expect in its login step:
        its connection thread dies with a multi-line traceback on stderr and every later call
        reports only "session closed".  As AuthFailedError kazoo stops cleanly, and the first
        call raises `auth_error`'s one-line explanation.
        """
        conn = client._connection
        login = conn._authenticate_with_sasl

        def authenticate(host: str, timeout: float) -> None:
            try:
                login(host, timeout)
            except SessionClosedRequireSaslError:
                self.problems.append("AUTH_FAILED: the server closed the session (SASL)")
                raise AuthFailedError("SASL login refused") from None

        conn._authenticate_with_sasl = authenticate

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        # kazoo logs every request it sends at DEBUG, the digest ``Auth`` packet (user:password
        # in clear) and the SASL exchange included: never let those reach a handler.
        args = tuple("<credentials not logged>" if type(a).__name__ in ("Auth", "SASL") else a
                     for a in args)
        if level >= logging.WARNING:
            try:
                text = str(msg) % args if args else str(msg)
            except Exception:
                text = str(msg)
            self.problems.append(text)
            if any(k in text.lower() for k in _TLS_REFUSALS):
                self._refusals += 1
                if self._refusals >= self._hosts:
                    self.settled.set()
        super().log(level, msg, *args, **kwargs)


#: TLS failures that waiting cannot cure (kazoo's "Connection dropped: ..." text, lower case)
_TLS_REFUSALS = ("certificate verify failed", "hostname mismatch", "ip address mismatch",
                 "alert certificate expired", "alert certificate required",
                 "alert bad certificate", "alert unknown ca", "alert certificate unknown",
                 "alert handshake failure")


def explain_connect_failure(hosts: Iterable[tuple[str, int]], security: ZkSecurity,
                            problems: Iterable[str], *, auth_failed: bool = False,
                            exc: BaseException | None = None) -> str | None:
    """One line saying which security problem made a connection fail, or None if none fits.

    ``problems`` are kazoo's warnings; ``auth_failed`` that the server refused our SASL login.
    Where kazoo's words are not enough (a dropped connection), a short TLS probe of the
    first host tells a TLS port from a plain one.
    """
    hosts = list(hosts)
    # kazoo's own start() reads the chroot: a refused login can surface there
    auth_failed = auth_failed or isinstance(exc, (AuthFailedError, SessionClosedRequireSaslError))
    where = ",".join(f"{h}:{p}" for h, p in hosts)
    text = " | ".join(problems)
    low = text.lower()
    if auth_failed or "auth_failed" in low:
        if security.sasl_user or security.sasl_principal:
            return (f"ZooKeeper at {where} rejected the SASL {security.sasl_mechanism} login of "
                    f"{security.sasl_user or security.sasl_principal!r} (wrong password, "
                    "unknown user or expired credential): check --zk-sasl-user and "
                    f"--zk-password-file / {PASSWORD_ENV}")
        return (f"ZooKeeper at {where} requires SASL authentication: give --zk-sasl-user and "
                f"--zk-password-file / {PASSWORD_ENV}")
    if "certificate has expired" in low:
        return (f"the certificate of ZooKeeper at {where} has expired: renew the server "
                "certificate")
    if "hostname mismatch" in low or "ip address mismatch" in low:
        return (f"the certificate of ZooKeeper at {where} does not name that host: connect by "
                "a name in its certificate (or, for tests only, zk.tls.verify.hostname=false)")
    if "certificate verify failed" in low:
        return (f"the certificate of ZooKeeper at {where} is not trusted "
                f"({_ssl_reason(text)}): give the CA that signed it with --zk-tls-ca")
    if "alert certificate expired" in low:
        return (f"ZooKeeper at {where} rejected our client certificate {security.tls_cert}: "
                "it has expired; renew it")
    if any(k in low for k in _TLS_REFUSALS[4:]):
        return (f"ZooKeeper at {where} refused our TLS client certificate "
                f"({security.tls_cert or 'none given'}): give --zk-tls-cert/--zk-tls-key "
                "signed by a CA the server trusts")
    if not hosts:
        return None
    host, port = hosts[0]
    speaks_tls = _speaks_tls(host, port)
    if security.use_tls and speaks_tls is False:
        return (f"ZooKeeper at {where} does not speak TLS (a plain clientPort?): use its "
                "secureClientPort, or drop --zk-tls-* for this port")
    if not security.use_tls and speaks_tls:
        return (f"ZooKeeper at {where} speaks TLS (a secureClientPort): give --zk-tls-ca "
                "(and --zk-tls-cert/--zk-tls-key if it wants client certificates), or use "
                "its plain clientPort")
    return None


def auth_error(what: str, exc: Exception, hosts: Iterable[tuple[str, int]],
               security: ZkSecurity, problems: Iterable[str]) -> ZooKeeperAuthError:
    """The one-line error for kazoo's NoAuth / AuthFailed / SASL-required on ``what``."""
    if isinstance(exc, NoAuthError):
        return ZooKeeperAuthError(
            f"{what}: not allowed by the znode's ACL (ZooKeeper NoAuth) for "
            f"{security.identity()}; use the identity that created it "
            "(--zk-digest-user / --zk-sasl-user / --zk-tls-cert)")
    return ZooKeeperAuthError(explain_connect_failure(hosts, security, problems,
                                                      auth_failed=True)
                              or f"{what}: ZooKeeper authentication failed")


def _ssl_reason(text: str) -> str:
    marker = "certificate verify failed:"
    i = text.find(marker)
    if i < 0:
        return "certificate verify failed"
    return text[i + len(marker):].split("(")[0].split("|")[0].strip() or "unknown reason"


def _speaks_tls(host: str, port: int, timeout: float = 1.5) -> bool | None:
    """Whether ``host:port`` completes a TLS handshake (certificates not checked); None if it
    cannot be reached at all."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        raw = socket.create_connection((host, port), timeout=timeout)
    except OSError:
        return None
    try:
        with ctx.wrap_socket(raw, server_hostname=host) as s:
            s.settimeout(timeout)
            return True
    except ssl.SSLError as exc:
        # a server that demands a client certificate still proves it speaks TLS
        return "alert" in str(exc).lower()
    except OSError:
        return False
    finally:
        raw.close()


def safe_mapping(security: ZkSecurity) -> Mapping[str, object]:
    """The settings as a dict without the password (for /healthz or a debug dump)."""
    return {"tls": security.use_tls, "tls_ca": security.tls_ca, "tls_cert": security.tls_cert,
            "verify_hostname": security.verify_hostname, "identity": security.identity(),
            "acl": security.acl.value}
