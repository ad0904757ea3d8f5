"""Building `ZkSecurity` from command-line flags, ``.properties`` and the environment.

Every command that talks to ZooKeeper calls `add_zk_security_arguments(parser)` in its
``configure`` and `zk_security_from(args, properties)` in its ``main``, so the flags, keys and
variables are the same everywhere (docs/operations.md, "Security").

Precedence, per setting: flag, then ``.properties`` key, then environment variable.

Keys (our namespace, then what ZooKeeper's Java client reads, so a file written for it works):

====================  ===============================================  ============================
flag                  .properties                                       environment
====================  ===============================================  ============================
--zk-tls-ca FILE      zk.tls.ca / zookeeper.ssl.trustStore.location     ZKCONSUMER_ZK_TLS_CA
--zk-tls-cert FILE    zk.tls.cert / zookeeper.ssl.keyStore.location     ZKCONSUMER_ZK_TLS_CERT
--zk-tls-key FILE     zk.tls.key  (keyStore: the same PEM file)         ZKCONSUMER_ZK_TLS_KEY
(no flag)             zk.tls / zookeeper.client.secure                  ZKCONSUMER_ZK_TLS
--zk-tls-no-verify-hostname  zk.tls.verify.hostname /
                      zookeeper.ssl.hostnameVerification
--zk-sasl-user USER   zk.sasl.user, or the JAAS file's Client section    ZKCONSUMER_ZK_SASL_USER
--zk-sasl-mechanism   zk.sasl.mechanism (DIGEST-MD5, GSSAPI)
--zk-digest-user USER zk.digest.user                                    ZKCONSUMER_ZK_DIGEST_USER
--zk-password-file F  zk.password.file                                  ZKCONSUMER_ZK_PASSWORD_FILE
(never a flag)        (the JAAS file's password)                        ZKCONSUMER_ZK_PASSWORD
--zk-acl open|creator zk.acl                                            ZKCONSUMER_ZK_ACL
(JAAS)                zk.sasl.jaas.file / java.security.auth.login.config
====================  ===============================================  ============================

Java key and trust stores must be PEM (``zookeeper.ssl.*.type=PEM``): Python's ``ssl`` cannot
read JKS or PKCS#12, which is said in one line with the conversion command.  A password is
never accepted as a flag (``ps`` shows argv) nor as a plain ``.properties`` key.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from pathlib import Path

from zkconsumer.errors import ConfigurationError
from zkconsumer.zk.security import PASSWORD_ENV, Secret, ZkAcl, ZkSecurity

__all__ = [
    "add_zk_security_arguments",
    "is_security_key",
    "split_security_properties",
    "zk_security_flags",
    "zk_security_from",
    "zk_security_from_options",
    "zk_security_options",
]

_TRUE = ("true", "yes", "1", "on")


def add_zk_security_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ZooKeeper security flags (one group, the same on every command)."""
    g = parser.add_argument_group(
        "ZooKeeper security",
        "TLS, SASL or digest authentication to ZooKeeper and the ACL of created znodes "
        "(docs/operations.md, Security). Each flag also has a .properties key and an "
        f"environment variable; the password comes from --zk-password-file or {PASSWORD_ENV}, "
        "never the command line. Example: --zk-tls-ca ca.pem --zk-tls-cert me.pem "
        "--zk-tls-key me.key --zk-digest-user app --zk-password-file /run/secrets/zk")
    g.add_argument("--zk-tls-ca", metavar="FILE", help="PEM CA bundle that signed the "
                   "ZooKeeper server certificate; turns TLS on (default: plain TCP)")
    g.add_argument("--zk-tls-cert", metavar="FILE", help="PEM client certificate (with "
                   "--zk-tls-key) for servers that require one (default: none)")
    g.add_argument("--zk-tls-key", metavar="FILE", help="PEM private key of --zk-tls-cert")
    g.add_argument("--zk-tls-no-verify-hostname", action="store_true", default=None,
                   help="do not check that the server certificate names the host "
                        "(default: checked; for tests only)")
    g.add_argument("--zk-sasl-user", metavar="USER",
                   help="SASL user name (DIGEST-MD5 unless --zk-sasl-mechanism GSSAPI)")
    g.add_argument("--zk-sasl-mechanism", choices=("DIGEST-MD5", "GSSAPI"),
                   help="SASL mechanism (default: DIGEST-MD5)")
    g.add_argument("--zk-digest-user", metavar="USER",
                   help="digest (addauth) user name for znode ACLs (default: none)")
    g.add_argument("--zk-password-file", metavar="FILE",
                   help=f"file whose first line is the SASL/digest password (default: "
                        f"${PASSWORD_ENV})")
    g.add_argument("--zk-acl", choices=[a.value for a in ZkAcl],
                   help="ACL of the znodes we create: open (what Scala 0.7 needs) or creator "
                        "(all rights for our identity, read for everyone) (default: open)")


def _jaas_client(path: str, section: str = "Client") -> dict[str, str]:
    """username/password/principal of a JAAS file's ``Client`` section (ZooKeeper's name)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"JAAS file {path}: {exc.strerror}") from None
    m = re.search(rf"(?ms)^\s*{re.escape(section)}\s*\{{(.*?)\}};", text)
    if not m:
        raise ConfigurationError(f"JAAS file {path} has no {section} {{ ... }}; section")
    body = m.group(1)
    out = dict(re.findall(r'(\w+)\s*=\s*"([^"]*)"', body))
    out["module"] = "GSSAPI" if "Krb5LoginModule" in body else "DIGEST-MD5"
    return out


def _pem_store(props: Mapping[str, str], which: str) -> str | None:
    loc = props.get(f"zookeeper.ssl.{which}.location")
    if not loc:
        return None
    kind = props.get(f"zookeeper.ssl.{which}.type", "").upper()
    if kind not in ("", "PEM") or loc.lower().endswith((".jks", ".p12", ".pfx")):
        raise ConfigurationError(
            f"zookeeper.ssl.{which}.location: {loc} is a {kind or 'JKS/PKCS12'} store; Python "
            "reads PEM only: convert it (keytool -importkeystore -deststoretype PKCS12, then "
            "openssl pkcs12 -nodes) and set zookeeper.ssl." + which + ".type=PEM")
    return loc


def zk_security_from(args: argparse.Namespace | None = None,
                     properties: Mapping[str, str] | None = None,
                     env: Mapping[str, str] | None = None) -> ZkSecurity:
    """The settings from flags (``args``), then ``properties``, then ``env`` (os.environ)."""
    props = dict(properties or {})
    environ = os.environ if env is None else env

    def pick(flag: str, keys: tuple[str, ...], var: str | None) -> str | None:
        value = getattr(args, flag, None) if args is not None else None
        if value not in (None, ""):
            return str(value)
        for key in keys:
            if props.get(key):
                return props[key].strip()
        return environ.get(var) or None if var else None

    for key in props:
        if key.startswith("zk.") and "password" in key and key != "zk.password.file":
            raise ConfigurationError(f"{key}: passwords are not accepted in .properties; use "
                                     f"zk.password.file or {PASSWORD_ENV}")
    jaas_path = props.get("zk.sasl.jaas.file") or props.get("java.security.auth.login.config")
    jaas = _jaas_client(jaas_path, props.get("zookeeper.sasl.clientconfig", "Client")) \
        if jaas_path else {}
    store = _pem_store(props, "keyStore")
    ca = pick("zk_tls_ca", ("zk.tls.ca",), "ZKCONSUMER_ZK_TLS_CA") or _pem_store(props,
                                                                               "trustStore")
    cert = pick("zk_tls_cert", ("zk.tls.cert",), "ZKCONSUMER_ZK_TLS_CERT") or store
    tls_key = pick("zk_tls_key", ("zk.tls.key",), "ZKCONSUMER_ZK_TLS_KEY") or store
    tls_flag = (pick("", ("zk.tls", "zookeeper.client.secure"), "ZKCONSUMER_ZK_TLS") or "")
    no_verify = getattr(args, "zk_tls_no_verify_hostname", None) if args is not None else None
    verify = (pick("", ("zk.tls.verify.hostname", "zookeeper.ssl.hostnameVerification"),
                   None) or "true").lower() in _TRUE and not no_verify
    mechanism = pick("zk_sasl_mechanism", ("zk.sasl.mechanism",), None) or (
        jaas.get("module", "DIGEST-MD5"))
    sasl_user = pick("zk_sasl_user", ("zk.sasl.user",), "ZKCONSUMER_ZK_SASL_USER") or (
        jaas.get("username"))
    principal = jaas.get("principal") if mechanism == "GSSAPI" else None
    password_file = pick("zk_password_file", ("zk.password.file",),
                         "ZKCONSUMER_ZK_PASSWORD_FILE")
    password = None
    if not password_file and "password" in jaas:
        password = Secret(jaas["password"])
    return ZkSecurity(
        tls=tls_flag.lower() in _TRUE, tls_ca=ca, tls_cert=cert, tls_key=tls_key, verify_hostname=verify,
        sasl_user=sasl_user, sasl_mechanism=mechanism, sasl_principal=principal,
        digest_user=pick("zk_digest_user", ("zk.digest.user",), "ZKCONSUMER_ZK_DIGEST_USER"),
        password_file=password_file, password=password,
        acl=ZkAcl(pick("zk_acl", ("zk.acl",), "ZKCONSUMER_ZK_ACL") or "open"))


_KEY_PREFIXES = ("zk.tls", "zk.sasl.", "zk.digest.", "zk.password", "zk.acl", "zookeeper.ssl.",
                 "zookeeper.client.secure", "zookeeper.sasl.", "java.security.auth.login.config")


def is_security_key(key: str) -> bool:
    """Whether a ``.properties`` key belongs to the ZooKeeper security settings."""
    return key.startswith(_KEY_PREFIXES)


def split_security_properties(props: Mapping[str, str]) -> tuple[dict[str, str],
                                                                  dict[str, str]]:
    """``(security keys, the rest)`` so a config reader warns only about truly unknown keys."""
    sec = {k: v for k, v in props.items() if is_security_key(k)}
    return sec, {k: v for k, v in props.items() if k not in sec}


def zk_security_options(security: ZkSecurity) -> dict[str, str]:
    """The settings as ``.properties``-style keys WITHOUT any secret (Spark data source
    options; the executor reads the password from ``zk.password.file`` or its own
    environment).  A password given only in memory cannot travel: `ConfigurationError`."""
    if security.password is not None and (security.sasl_user or security.digest_user):
        raise ConfigurationError(
            "a ZooKeeper password given in memory cannot be sent to Spark executors: use "
            f"zk.password.file (a path readable on every executor) or {PASSWORD_ENV}")
    out: dict[str, str] = {}
    if security.tls:
        out["zk.tls"] = "true"
    if not security.verify_hostname:
        out["zk.tls.verify.hostname"] = "false"
    if security.sasl_mechanism != "DIGEST-MD5":
        out["zk.sasl.mechanism"] = security.sasl_mechanism
    if security.acl is not ZkAcl.OPEN:
        out["zk.acl"] = security.acl.value
    for key, value in (("zk.tls.ca", security.tls_ca), ("zk.tls.cert", security.tls_cert),
                       ("zk.tls.key", security.tls_key), ("zk.sasl.user", security.sasl_user),
                       ("zk.digest.user", security.digest_user),
                       ("zk.password.file", security.password_file)):
        if value:
            out[key] = value
    return out


def zk_security_flags(security: ZkSecurity) -> list[str]:
    """Command-line flags reproducing ``security`` for a child process (paths and user names
    only; a password held in memory cannot be passed: `ConfigurationError`)."""
    flags: list[str] = []
    for key, value in zk_security_options(security).items():
        if key == "zk.tls.verify.hostname":
            flags.append("--zk-tls-no-verify-hostname")
        elif key == "zk.tls":
            if not security.tls_ca:  # never silently plain in the child
                raise ConfigurationError("TLS with the system CAs has no flag: give the child "
                                         "ZKCONSUMER_ZK_TLS=true or zk.tls=true instead")
        else:
            flags += ["--" + key.replace(".", "-"), value]
    return flags


def zk_security_from_options(options: Mapping[str, str]) -> ZkSecurity:
    """The inverse of `zk_security_options` (on the executor: environment as fallback)."""
    return zk_security_from(None, options)
